// gpu_main: the Catch2 main of the GPU test binaries (fp8sim_add_test ... GPU). Where the CUDA
// engine cannot run (a build without CUDA, or no GPU) it prints "waived: <why>" and exits 77,
// which ctest counts as skipped; any other error of the engine's first GEMM is a failure (a
// failed launch must not pass as a skip); otherwise it runs the binary's test cases (Catch2's
// implementation: catch_session.cpp).
#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "accumulator/accumulator.hpp"
#include "format/format.hpp"
#include "catch_session.hpp"
#include "gemm/gemm.hpp"

int main(int argc, char** argv) {
  using namespace fp8sim;
  try {  // one tiny GEMM on the CUDA engine says whether there is one and a device
    GemmSpec s;
    s.model = accumulator_by_name("hopper-wgmma");
    s.a_format = s.b_format = format_by_name("e4m3");
    s.out_type = format_by_name("fp32");
    s.device = Device::cuda;
    const std::vector<std::uint8_t> a(32, 0x38), b(32, 0x38);
    std::vector<float> d(1);
    gemm(s, 1, 1, 32, a, b, {}, {}, {}, d);
  } catch (const std::runtime_error& e) {
    const std::string why = e.what();
    if (why.find("without CUDA") == std::string::npos &&
        why.find("no CUDA device") == std::string::npos) {
      fmt::print("FAIL: the CUDA engine's first GEMM: {}\n", why);
      return 1;
    }
    const auto colon = why.find(": ");
    fmt::print("waived: {}\n", colon == std::string::npos ? why : why.substr(colon + 2));
    return 77;
  }
  return fp8sim::test::run_catch_session(argc, argv);
}
