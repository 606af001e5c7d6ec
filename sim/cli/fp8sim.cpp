// fp8sim: the command-line tool; every subcommand lives in its own cmd_*.cpp file.
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>

#include "cli/options.hpp"
#include "commands.hpp"
#include "io/revision.hpp"
#include "io/std_streams.hpp"

namespace {

// The exit code, after stdout is flushed and closed: a write error there is bad output like
// any other (exit 2, one line), whatever the command returned.
int finish(int code, std::string error = "") {
  const std::string out_error = fp8sim::finish_stdout();
  if (!out_error.empty()) error = out_error;  // the cause of a failed fmt::print, too
  if (error.empty()) return code;
  fp8sim::print_stderr(fmt::format("fp8sim: error: {}\n", fp8sim::printable(error)));
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  fp8sim::guard_standard_descriptors();
  CLI::App app{"fp8sim: bit-accurate FP8 formats, tensor-core accumulators and GEMMs"};
  app.require_subcommand(1);
  // FP8SIM_VERSION: the project's VERSION in CMakeLists.txt (the one version number).
  app.set_version_flag("--version", fmt::format("fp8sim {} (git {})", FP8SIM_VERSION,
                                                fp8sim::git_revision()));
  app.failure_message(CLI::FailureMessage::simple);
  fp8sim::cli::add_convert_commands(app);
  fp8sim::cli::add_gemm_commands(app);
  fp8sim::cli::add_replay_command(app);
  fp8sim::cli::add_analyze_command(app);
  fp8sim::cli::add_invariance_command(app);
  try {
    if (argc > 1 && argv[1][0] != '-') {  // name an unknown command (CLI11 only says one is missing)
      std::string known;
      bool found = false;
      for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
        found = found || sub->get_name() == argv[1];
        known += (known.empty() ? "" : ", ") + sub->get_name();
      }
      if (!found) throw std::invalid_argument(fmt::format("unknown command '{}' (known: {})", argv[1], known));
    }
    // Flags and values (CLI11), then the command's callback, which throws on bad input.
    if (const int code = fp8sim::cli::parse_command_line(app, argc, argv, "fp8sim"); code >= 0)
      return finish(code);
  } catch (const fp8sim::cli::ExitStatus& e) {
    return finish(e.code);  // e.g. replay's 1: a real mismatch
  } catch (const std::bad_alloc&) {
    return finish(2, "out of memory: the problem does not fit in this machine");
  } catch (const std::exception& e) {
    return finish(2, e.what());
  }
  return finish(0);
}
