// experiment: the shared driver of the experiment binaries (exp_*.cpp): command line, the
// sweep run with a progress bar, and the outputs every experiment writes:
//   <out>/<name>.csv          tidy: one row per configuration and trial (sweep.hpp columns)
//   <out>/<name>_summary.csv  one row per configuration and metric (mean, quantiles, CIs)
//   <out>/<name>.json         manifest: question, parameters, seed, git revision, models
//                             (describe() and evidence), runtime, machine, files
// Plots are drawn afterwards by experiments/plot_<name>.py from the CSVs.
#pragma once

#include <functional>
#include <string>

#include "analysis/sweep.hpp"

namespace fp8sim::experiments {

struct Options {
  int trials = 0;       // 0: the experiment's default (or its paper size with --paper)
  bool paper = false;
  std::uint64_t seed = 1;
  int threads = 0;
  Device device = Device::cpu;
};

struct Experiment {
  std::string name;         // e.g. "a_length": binary exp_a_length, plot_a_length.py
  std::string question;     // one sentence: what the experiment answers
  int default_trials = 0;
  int paper_trials = 0;
  // Builds the sweep; trials, seed and threads are filled in by the driver afterwards.
  std::function<SweepSpec()> build;
};

// Parses --out DIR, --seed N, --trials N, --threads N, --paper, --progress; runs the sweep;
// writes the three files; prints their paths. Returns the process exit code (bad flags or
// values: a one-line error and 2).
int run(const Experiment& e, int argc, char** argv);

}  // namespace fp8sim::experiments
