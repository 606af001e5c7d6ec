// fuzz_npy: libFuzzer target for the .npy reader (read_npy): any bytes give an array or a
// std::runtime_error, never a crash, a hang or a runaway allocation.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The input as a regular in-memory file, read through its /proc path.
  static const int fd = memfd_create("fuzz.npy", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  try {
    const fp8sim::NpyArray a = fp8sim::read_npy(path);
    if (a.data.size() != a.size() * a.item_size()) __builtin_trap();
  } catch (const std::runtime_error&) {
  }
  return 0;
}
