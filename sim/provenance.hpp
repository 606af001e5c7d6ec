// provenance: what an output's manifest records about how it was made: the machine, the UTC
// time, and the SHA-256 of input files.
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

// The SHA-256 of a file's bytes as 64 lowercase hex digits (OpenSSL EVP). Throws
// std::runtime_error("<path>: ...") when the file cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace fp8sim
