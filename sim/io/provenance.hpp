// provenance: what an output's manifest records about how it was made: the machine and the UTC
// time (the SHA-256 of input files is the CLI's: cli/sha256.hpp).
#pragma once

#include <string>

namespace fp8sim {

struct MachineInfo {
  std::string hostname;
  std::string os;                 // "<sysname> <release> <machine>" (uname)
  unsigned hardware_threads = 0;  // std::thread::hardware_concurrency()
};
MachineInfo this_machine();

// Now as "YYYY-MM-DDTHH:MM:SSZ".
std::string utc_now_iso();

}  // namespace fp8sim
