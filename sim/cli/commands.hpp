// commands: how each subcommand of the fp8sim tool registers itself with CLI11.
//
// Each add_* function adds one group of subcommands and binds a callback that runs it;
// a callback reports bad input by throwing (std::invalid_argument, std::domain_error,
// std::runtime_error) with a one-line message, which main prints and exits 2 on.
#pragma once

#include <CLI/CLI.hpp>

namespace fp8sim::cli {

void add_convert_commands(CLI::App& app);  // encode, decode, table
void add_gemm_commands(CLI::App& app);     // gemm, models, kernels, explain
void add_replay_command(CLI::App& app);    // replay
void add_analyze_command(CLI::App& app);   // analyze
void add_invariance_command(CLI::App& app); // invariance

// Thrown by a command that ends with a code other than 0 or 2 (replay: 1 on a mismatch);
// main flushes stdout and exits with it.
struct ExitStatus {
  int code;
};

}  // namespace fp8sim::cli
