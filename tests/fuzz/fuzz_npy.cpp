// fuzz_npy: libFuzzer target for the .npy reader: any bytes give an array or a one-line
// std::runtime_error, never a crash, a hang or a runaway allocation. Every header-first check
// is reached: NpyReader's expect() against a GEMM operand's and a scale array's dtype and
// shape, analyze's input reader (dtype, rank, limits) and check_gemm_problem on the shape;
// and what read_npy accepts, expect() with its own dtype and shape accepts too.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "analysis/analyze.hpp"
#include "kernel/gemm_inputs.hpp"
#include "io/npy.hpp"

namespace {

// A one-line message without control characters (limits::quoted everywhere).
void check_message(const std::exception& e) {
  for (const char c : std::string(e.what()))
    if (static_cast<unsigned char>(c) < 0x20) __builtin_trap();
}

template <class F>
void expect_ok_or_error(F&& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    check_message(e);
  } catch (const std::invalid_argument& e) {
    check_message(e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The input as a regular in-memory file, read through its /proc path.
  static const int fd = memfd_create("fuzz.npy", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  expect_ok_or_error([] {
    const fp8sim::NpyArray a = fp8sim::read_npy(path);
    if (a.data.size() != a.size() * a.item_size()) __builtin_trap();
    fp8sim::NpyReader(path).expect(a.descr, a.shape);  // must accept what read_npy read
  });
  expect_ok_or_error([] {
    fp8sim::NpyReader r(path);
    r.expect("|u1", {0, 0});
    fp8sim::check_gemm_problem(path, path, r.shape()[0], r.shape()[1], r.shape()[0],
                               r.shape()[1]);
  });
  expect_ok_or_error([] {
    fp8sim::NpyReader r(path);
    fp8sim::check_scale_header(path, r.descr(), r.shape(), fp8sim::Scaling::mx, 2, 1);
  });
  expect_ok_or_error([] { fp8sim::read_input_npy(path, fp8sim::InputDtype::automatic); });
  expect_ok_or_error([] { fp8sim::read_input_npy(path, fp8sim::InputDtype::bf16); });
  return 0;
}
