// test_gemm_scaled_host: the CUDA engine's reference step with block scales
// (cuda/engine/gemm_engine_scaled.cuh, reached through gemm_engine_step.cuh's dot_output as the
// engine's dot_kernel reaches it) compiled for the host (cuda_host_shim.hpp: CUDA's intrinsics
// as plain C++ with the same roundings) and run on every output of gemm_cuda_scaled_util.hpp's
// grid, with the DeviceGemm the host hands the engine (scaled_reference_device_gemm), against
// the CPU engine, bit for bit: the device code's arithmetic checked where there is no GPU
// (test_gemm_cuda_scaled runs the same grid on the GPU itself). Compiled without FMA
// contraction, as the engine is.
// FP8SIM_SEED overrides the seed; the first mismatch is printed as one line.
#include "cuda_host_shim.hpp"  // first: the device qualifiers and intrinsics
#include "engine/gemm_engine_step.cuh"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "gemm/gemm_device.hpp"
#include "gemm_cuda_scaled_util.hpp"

using namespace fp8sim;
using namespace fp8sim::gpu_test;

namespace {

// run_device_gemm's dot_kernel on the host: every output through gpu::dot_output, the first
// output's step error reported as the engine reports it.
void run_on_host(const GemmSpec& s, const Operand& A, const Operand& B, std::span<const float> C,
                 std::span<const float> sa, std::span<const float> sb, std::span<float> D,
                 bool batched) {
  gpu::Params p;
  p.g = scaled_reference_device_gemm(s, A, B, C, sa, sb, D, batched);
  p.fast = static_cast<gpu::FastPath>(p.g.fast_step);
  const DeviceModel& m = p.g.model;
  const bool e8 = m.output.min_exponent == -126 && m.output.max_exponent == 127;
  p.out_e8 = e8 && (m.output_rounding == kRz || m.output_rounding == kRne);
  p.out_drop = 52 - m.output.mantissa_bits;
  p.out_fp32_model = e8 && m.output.mantissa_bits == 23;
  unsigned long long first = ~0ull;
  p.step_errors = &first;
  const std::size_t outputs = std::size_t(p.g.M) * p.g.N;
  for (std::size_t i = 0; i < outputs; ++i) {
    const int a_row = p.g.batched ? int(i) : int(i / p.g.N);
    const int b_row = p.g.batched ? int(i) : int(i % p.g.N);
    D[i] = gpu::dot_output<false>(p, a_row, b_row, p.g.C ? p.g.C[i] : 0.0f);
  }
  throw_step_error(s.model, first == ~0ull ? 0u : unsigned(first % 8));
}

}  // namespace

TEST_CASE("the device's reference step with block scales, run on the host, equals the CPU engine",
          "[differential]") {
  Tally t;
  std::size_t errors = 0;
  scaled_grid(run_on_host, t, errors);
  fmt::print("block-scaled reference step (device code on the host): {} configurations ({} "
             "with an error on both), {} outputs, {} mismatches\n", t.configs, errors, t.outputs,
             t.bad);
  INFO(t.first);
  CHECK(t.bad == 0);
  CHECK(errors * 2 < t.configs);  // mostly bits compared, not only errors
  CHECK(t.outputs > 50000);
}
