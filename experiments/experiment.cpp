// experiment: CLI11 flags, progress bar, CSV and manifest writing for the exp_* binaries.
#include "experiment.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include "cli/options.hpp"
#include "io/output_file.hpp"
#include "io/std_streams.hpp"
#include "base/parallel.hpp"
#include "io/provenance.hpp"
#include "io/revision.hpp"

namespace fp8sim::experiments {

namespace {

namespace fs = std::filesystem;

// A one-line bar on stderr, redrawn at most every 0.1 s.
class ProgressBar {
 public:
  explicit ProgressBar(bool on) : on_(on), start_(clock::now()), last_(start_) {}
  void update(double done, double total) {
    if (!on_) return;
    const auto now = clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double f = total > 0 ? done / total : 1.0;
    const int width = 40, filled = static_cast<int>(f * width);
    const double s = std::chrono::duration<double>(now - start_).count();
    print_stderr(fmt::format("\r[{}{}] {:3.0f}% {:.1f}s{}", std::string(filled, '#'),
                             std::string(width - filled, ' '), 100 * f, s,
                             done >= total ? "\n" : ""));
  }

 private:
  using clock = std::chrono::steady_clock;
  bool on_;
  clock::time_point start_, last_;
};

nlohmann::json machine() {
  const MachineInfo m = this_machine();
  return {{"hostname", m.hostname}, {"os", m.os}, {"hardware_threads", m.hardware_threads}};
}

nlohmann::json manifest(const Experiment& e, const SweepResult& r, const std::string& command,
                        double runtime_s, bool paper, const std::vector<std::string>& files) {
  const SweepSpec& s = r.spec;
  nlohmann::json j;
  j["experiment"] = e.name;
  j["question"] = e.question;
  j["command"] = command;
  j["paper_size"] = paper;
  j["seed"] = s.seed;
  j["trials"] = s.trials;
  j["threads"] = resolve_threads(s.threads);
  j["device"] = to_string(s.device);
  j["tensor_rows"] = s.tensor_rows;
  j["git_revision"] = git_revision();
  j["created_utc"] = utc_now_iso();
  j["runtime_s"] = runtime_s;
  j["machine"] = machine();
  auto& p = j["parameters"];
  p["k"] = s.k;
  p["rho"] = s.rho;
  p["promote_every"] = s.promote_every;
  for (const auto& d : s.distributions) p["distributions"].push_back({{"name", d.name}, {"describe", describe(d)}});
  for (const auto& f : s.formats)
    p["formats"].push_back({{"name", f.name}, {"exponent_bits", f.exponent_bits},
                            {"mantissa_bits", f.mantissa_bits}, {"bias", f.bias},
                            {"max_finite", max_finite(f)}});
  for (const auto& sc : s.scalings) p["scalings"].push_back(sc.name);
  for (const auto& m : s.models)
    p["models"].push_back({{"name", m.name}, {"describe", describe(m)}, {"evidence", m.evidence}});
  j["configurations"] = r.configs.size();
  j["skipped"] = r.skipped;
  j["files"] = files;
  j["definitions"] =
      "snr_db = 10 log10(ref^2 / (got - ref)^2) with ref the exact dot product of the "
      "unquantised inputs; snr_accum_db, rel_err_accum, ulp_err_accum compare got with the exact "
      "dot product of the quantised (dequantised) inputs rounded to fp32, so they show "
      "accumulation error only; +inf means no error; ulp = fp32 ulp at the reference";
  return j;
}

}  // namespace

int run(const Experiment& e, int argc, char** argv) {
  guard_standard_descriptors();  // std_streams.hpp: stdout is checked like an output file
  CLI::App app{fmt::format("exp_{}: {}", e.name, e.question)};
  app.failure_message(CLI::FailureMessage::simple);
  Options o;
  std::string out = "out/" + e.name;
  bool progress = false;
  app.add_option("--out", out, "output folder (created)")->capture_default_str();
  cli::add_integer_option(&app, "--seed", o.seed, "random seed", 0, ~std::uint64_t{0});
  cli::add_integer_option(&app, "--trials", o.trials,
                          fmt::format("trials per configuration (default {}, --paper {})",
                                      e.default_trials, e.paper_trials),
                          1, 10000000)
      ->default_str("");
  cli::add_threads_option(&app, o.threads);
  std::string device = "cpu";
  cli::add_device_option(&app, device);
  app.add_flag("--paper", o.paper, "paper-size trial counts");
  app.add_flag("--progress", progress, "show a progress bar even when stderr is not a terminal");
  if (const int code = cli::parse_command_line(app, argc, argv, "exp_" + e.name); code >= 0)
    return code;
  try {
    o.device = parse_device(device);
    SweepSpec s = e.build();
    s.trials = o.trials > 0 ? o.trials : o.paper ? e.paper_trials : e.default_trials;
    s.seed = o.seed;
    s.threads = o.threads;
    s.device = o.device;
    std::string command;
    for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);

    fs::create_directories(out);  // fail before the run, not after it
    ProgressBar bar(progress || isatty(2));
    const auto t0 = std::chrono::steady_clock::now();
    const SweepResult r = run_sweep(s, [&](double d, double t) { bar.update(d, t); });
    const std::vector<std::pair<std::string, std::string>> extra{{"experiment", e.name}};
    const std::string csv = (fs::path(out) / (e.name + ".csv")).string();
    const std::string summary = (fs::path(out) / (e.name + "_summary.csv")).string();
    const std::string json = (fs::path(out) / (e.name + ".json")).string();
    // The three files are written in full first and renamed into place only when all
    // three are: a failed run (full disk) leaves none of them.
    std::ostringstream trials_text, summary_text;
    write_trials_csv(trials_text, r, extra);
    write_summary_csv(summary_text, r, extra);
    const double runtime =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string manifest_text =
        manifest(e, r, command, runtime, o.paper, {csv, summary, json}).dump(2) + "\n";
    write_files({{csv, trials_text.str()}, {summary, summary_text.str()}, {json, manifest_text}});
    fmt::print("exp_{}: {} configurations x {} trials in {:.1f} s{}\n", e.name, r.configs.size(),
               s.trials, runtime,
               r.skipped.empty() ? "" : fmt::format(" ({} invalid combinations skipped)", r.skipped.size()));
    for (const auto& f : {csv, summary, json}) fmt::print("  wrote {}\n", f);
  } catch (const std::exception& ex) {
    const std::string out_error = finish_stdout();
    print_stderr(fmt::format("exp_{}: error: {}\n", e.name,
                             printable(out_error.empty() ? ex.what() : out_error)));
    return 2;
  }
  if (const std::string out_error = finish_stdout(); !out_error.empty()) {
    print_stderr(fmt::format("exp_{}: error: {}\n", e.name, out_error));
    return 2;
  }
  return 0;
}

}  // namespace fp8sim::experiments
