// fp8sim-hw: runs the cuda/ kernels on a GPU and compares them bit for bit with the models.
//
// Subcommands (one file each, hw_commands.hpp): check (suites x kernels, JSON report, non-zero
// exit on a mismatch), capture (.npy + manifest.json for replay without a GPU), probe
// (sim/analysis/probe.hpp on each kernel), bench (TFLOP/s), cvt (hardware FP8 conversions vs encode(),
// exhaustive or sampled). The kernels are rows of hw_kernel_table.cpp.
// Without a CUDA device every subcommand prints "fp8sim-hw: no CUDA device" and exits 77.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "cli/options.hpp"
#include "io/std_streams.hpp"
#include "hw/hw_commands.hpp"
#include "hw/hw_provenance.hpp"

namespace {

int run(int argc, char** argv) {
  using namespace fp8sim::hw;
  CLI::App app{"fp8sim-hw: FP8 kernels on a Hopper GPU, compared bit for bit with fp8sim's models"};
  app.require_subcommand(1);
  std::uint64_t seed = 1;
  int max_k = 16384, size = 8192, iters = 5;
  std::string json_path, out_dir;
  std::vector<std::string> kernels, suites;
  bool exhaustive = false, closest_all = false;

  auto* check = app.add_subcommand("check", "suites x kernels vs models, bit for bit; exit 1 on a mismatch");
  check->add_option("--seed", seed, "seed of every suite (printed)");
  check->add_option("--max-k", max_k, "longest K of the k-sweep suite")->check(CLI::Range(32, 65536));
  check->add_option("--json", json_path, "write the JSON report here");
  check->add_option("--kernel", kernels, "only variants whose name contains one of these");
  check->add_option("--suite", suites, "only these suites");
  check->add_flag("--closest", closest_all, "rank candidate models for every variant, not only failing ones");
  auto* cap = app.add_subcommand("capture", "write inputs and outputs as .npy + manifest.json");
  cap->add_option("--out", out_dir, "output folder")->required();
  cap->add_option("--seed", seed, "seed");
  auto* prb = app.add_subcommand("probe", "recover accumulator parameters of each kernel (sim/analysis/probe.hpp)");
  prb->add_option("--kernel", kernels, "variant names (default: one per path)");
  prb->add_option("--json", json_path, "write the JSON report here");
  auto* bench = app.add_subcommand("bench", "TFLOP/s of each kernel on a size^3 GEMM");
  bench->add_option("--size", size, "M = N = K")->check(CLI::Range(256, 16384));
  bench->add_option("--iters", iters, "timed runs")->check(CLI::Range(1, 100));
  auto* cvt = app.add_subcommand("cvt", "hardware FP8 conversions vs encode()");
  cvt->add_flag("--exhaustive", exhaustive, "also every fp32 bit pattern (2^32 per format)");
  cvt->add_option("--json", json_path, "write the JSON report here");
  cvt->add_option("--out", out_dir, "write the sample inputs/outputs (.npy) and manifest.json here");

  if (const int code = fp8sim::cli::parse_command_line(app, argc, argv, "fp8sim-hw"); code >= 0)
    return code;
  if (!have_device()) {
    std::puts("fp8sim-hw: no CUDA device");
    return 77;
  }
  try {
    if (*check) return cmd_check(seed, max_k, json_path, kernels, suites, closest_all);
    if (*cap) return cmd_capture(out_dir, seed);
    if (*prb) return cmd_probe(kernels, json_path);
    if (*bench) {
      if (size % 64) throw std::invalid_argument("--size must be a multiple of 64");
      return cmd_bench(size, iters);
    }
    if (*cvt) return cmd_cvt(exhaustive, json_path, out_dir);
  } catch (const std::exception& e) {
    fp8sim::print_stderr(fmt::format("fp8sim-hw: {}\n", fp8sim::printable(e.what())));
    return 2;
  }
  return 0;
}

}  // namespace

// The exit code of run(), after stdout is flushed and closed: a write error there (a full
// disk, `> /dev/full`) is exit 2 with one line, never 0 or 77 (ctest's "skipped").
int main(int argc, char** argv) {
  fp8sim::guard_standard_descriptors();
  const int code = run(argc, argv);
  if (const std::string error = fp8sim::finish_stdout(); !error.empty()) {
    fp8sim::print_stderr(fmt::format("fp8sim-hw: error: {}\n", error));
    return 2;
  }
  return code;
}
