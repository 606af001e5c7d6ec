// cmd_replay: `fp8sim replay`, captured kernel outputs against a model, bit for bit.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "commands.hpp"
#include "cli/options.hpp"
#include "io/output_file.hpp"
#include "io/replay.hpp"
#include "io/std_streams.hpp"

namespace fp8sim::cli {
namespace {

struct ReplayArgs {
  std::string captures, kernel, model, case_name, json;
  int promote_every = -1;
  int threads = 0;
  std::string device = "cpu";
};

// Prints one line per case and a summary; exits 1 on any mismatch (bad input throws: 2).
void run_replay(const ReplayArgs& g) {
  ReplayOptions o;
  o.kernel = g.kernel;
  o.model = g.model;
  o.promote_every = g.promote_every;
  o.case_name = g.case_name;
  o.threads = g.threads;
  o.device = parse_device(g.device);
  const ReplayReport r = replay(g.captures, o);
  std::string provenance;
  for (const auto& [key, value] : {std::pair<const char*, const std::string&>{"device", r.device},
                                   {"driver", r.driver}, {"cuda", r.cuda}, {"date", r.date},
                                   {"generator", r.generator}, {"git", r.git_revision}})
    if (!value.empty())
      provenance += fmt::format("{}{}={}", provenance.empty() ? "" : " ", key, printable(value));
  fmt::print("captures {}{}{}\n", printable(r.dir), provenance.empty() ? "" : ": ", provenance);
  std::size_t bad = 0;
  for (const ReplayCase& c : r.cases) {
    fmt::print("{}\n", format_case(c));
    bad += c.ok() ? 0 : 1;
  }
  fmt::print("replay: {} of {} cases match (got = capture, want = model{}{}{})\n",
             r.cases.size() - bad, r.cases.size(),
             g.kernel.empty() ? "" : fmt::format(" kernel {}", g.kernel),
             g.model.empty() ? "" : fmt::format(" {}", g.model),
             g.promote_every < 0 ? "" : fmt::format(", promote every {}", g.promote_every));
  if (!g.json.empty()) write_file(g.json, replay_json(r));
  if (bad != 0) throw ExitStatus{1};
}

}  // namespace

void add_replay_command(CLI::App& app) {
  auto g = std::make_shared<ReplayArgs>();
  auto* cmd = app.add_subcommand(
      "replay", "Recompute captured kernel outputs (DIR/manifest.json + .npy) with a model and "
                "compare bit for bit; exit 0 all match, 1 mismatch, 2 bad input");
  cmd->add_option("--captures", g->captures, "Capture folder holding manifest.json")->required();
  cmd->add_option("--kernel", g->kernel,
                  "A kernel preset for every case (see `fp8sim kernels`; default: each case's "
                  "own \"kernel_preset\", else its model and promotion)");
  cmd->add_option("--model", g->model,
                  "Accumulator model for every case (default: each case's own \"model\")");
  add_integer_option(cmd, "--promote-every", g->promote_every,
                     "K elements per chunk promoted to FP32 for every case (default: the case's)",
                     0, limits::kMaxDim)
      ->default_str("");
  cmd->add_option("--case", g->case_name, "Replay only the case with this name");
  cmd->add_option("--json", g->json, "Write a JSON report here");
  add_threads_option(cmd, g->threads);
  add_device_option(cmd, g->device);
  cmd->callback([g] { run_replay(*g); });
}

}  // namespace fp8sim::cli
