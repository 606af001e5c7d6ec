// cmd_replay: `fp8sim replay` (filled in with the hardware harness).
#include "commands.hpp"

namespace fp8sim::cli {
void add_replay_command(CLI::App&) {}
}  // namespace fp8sim::cli
