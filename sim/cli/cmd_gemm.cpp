// cmd_gemm: `fp8sim gemm` and `fp8sim models` (filled in with the accumulator models).
#include "commands.hpp"

namespace fp8sim::cli {
void add_gemm_commands(CLI::App&) {}
}  // namespace fp8sim::cli
