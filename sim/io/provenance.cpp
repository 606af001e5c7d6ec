// provenance: uname / gethostname, strftime in UTC, and OpenSSL's SHA-256 over a file.
#include "io/provenance.hpp"

#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <ctime>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

namespace fp8sim {

MachineInfo this_machine() {
  utsname u{};
  uname(&u);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return {host, fmt::format("{} {} {}", u.sysname, u.release, u.machine),
          std::thread::hardware_concurrency()};
}

std::string utc_now_iso() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace fp8sim
