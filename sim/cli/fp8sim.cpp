// fp8sim: the command-line tool; every subcommand lives in its own cmd_*.cpp file.
#include <fmt/format.h>

#include <exception>

#include "commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"fp8sim: bit-accurate FP8 formats, tensor-core accumulators and GEMMs"};
  app.require_subcommand(1);
  app.failure_message(CLI::FailureMessage::simple);
  fp8sim::cli::add_convert_commands(app);
  fp8sim::cli::add_gemm_commands(app);
  fp8sim::cli::add_replay_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "fp8sim: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "fp8sim: error: {}\n", e.what());
    return 2;
  }
  return 0;
}
