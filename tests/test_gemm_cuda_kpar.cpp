// test_gemm_cuda_kpar: the CUDA engine's K-parallel chunks (cuda/engine/gemm_engine_kpar.cuh)
// at decode shapes, bit for bit.
//
// Every model of the test grid that the CUDA engine runs (and the block-scaled ones: folded
// power-of-two scales, FP4 group sums), at decode shapes (M of 1..32, N up to 2048, K with
// tails after the last whole chunk, promotion every 32..256 elements, chunks that slabs of 32
// tile or not), with tensor, row and block scales in every scale order, C (adversarial: wide
// exponents, zeros, Inf, NaN), output types and adversarial operands rotating:
//   - gemm() on the CUDA engine (at these shapes the tiled kernels' grids are far below two
//     waves of any GPU, so the engine runs them K-parallel) against the CPU engine;
//   - the same GEMM with K-parallel forced on (one pass, and passes of 3 chunks: the main
//     accumulators carried in D between passes), forced off, and the per-output kernel
//     everywhere: the same bits (DeviceLaunch::k_parallel, k_group).
// FP8SIM_SEED overrides the seed; the first mismatch is printed as one line.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "gemm/block_fold.hpp"
#include "gemm/gemm.hpp"
#include "gemm/gemm_device.hpp"
#include "gemm_cuda_util.hpp"
#include "model_grid.hpp"

using namespace fp8sim;
using namespace fp8sim::gpu_test;

namespace {

// The launches compared with K-parallel forced off: forced on, on in passes of 3 chunks, and
// one thread per output everywhere.
std::vector<std::pair<DeviceLaunch, const char*>> launches() {
  DeviceLaunch on, passes, off, dot;
  on.k_parallel = 1;
  passes.k_parallel = 1;
  passes.k_group = 3;
  off.k_parallel = -1;
  dot.kernel = 1;
  return {{off, "off"}, {on, "forced"}, {passes, "forced, passes of 3"}, {dot, "per-output"}};
}

// Runs `run(launch, D)` under every launch and tallies each against the first (off).
template <class Run>
void compare_launches(std::size_t outputs, int N, Run run, Tally& t, const std::string& what) {
  const auto ls = launches();
  std::vector<float> base(outputs), other(outputs);
  run(ls[0].first, base);
  for (std::size_t i = 1; i < ls.size(); ++i) {
    run(ls[i].first, other);
    tally(base, other, N, t, what + " (K-parallel " + ls[i].second + " vs off)");
  }
}

struct Shape {
  int M, N, K;
};
// Decode shapes; every K a multiple of 64 (the longest step) with a tail of 64 after its last
// whole chunk of 128.
constexpr Shape kShapes[] = {{1, 257, 1216}, {16, 130, 4160}, {32, 64, 576}, {5, 2048, 1088},
                             {16, 512, 2112}, {3, 96, 4160}, {32, 300, 1344}};

int kpar_test() {
  Tally t;
  std::uint64_t stream = 1300000;
  const Scaling scalings[] = {Scaling::none, Scaling::tensor, Scaling::row, Scaling::block};
  const ScaleOrder orders[] = {ScaleOrder::deepgemm, ScaleOrder::cublaslt, ScaleOrder::triton};
  const char* outs[] = {"fp32", "bf16", "fp16"};
  const int promotes[] = {128, 32, 64, 96, 256};
  std::size_t config = 0;
  for (const auto& name : test::model_grid()) {
    const AccumulatorSpec model = accumulator_by_name(name);
    if (needs_reference_step(model) || model.block_scale) continue;  // CPU only; below
    GemmSpec s;
    s.model = model;
    const int g = s.model.group ? step_products(s.model) : 1;
    const Shape sh = kShapes[config % std::size(kShapes)];
    s.promote_every = promotes[config % 5];
    if (s.promote_every % g) s.promote_every = (128 + g - 1) / g * g;
    s.scaling = scalings[config % 4];
    if (s.scaling == Scaling::block && 128 % s.promote_every) s.scaling = Scaling::row;
    s.block = 128;
    s.order = orders[(config / 4) % 3];
    s.out_type = format_by_name(outs[(config / 3) % 3]);
    const FormatSpec fa = format_by_name(config % 3 == 2 ? "e5m2" : "e4m3");
    const FormatSpec fb = format_by_name("e4m3");
    const int special = config % 4 == 1 ? 3 : 0;
    const Operand A = adversarial_operand(fa, sh.M, sh.K, stream++, special);
    const Operand B = adversarial_operand(fb, sh.N, sh.K, stream++, special);
    const ScaleShapes ss = scale_shapes(s, sh.M, sh.N, sh.K);
    const auto sa = random_floats(ss.a_rows * ss.a_cols, stream++, -8, 8);
    const auto sb = random_floats(ss.b_rows * ss.b_cols, stream++, -8, 8);
    std::vector<float> C;
    if (config % 2) C = adversarial_c(std::size_t(sh.M) * sh.N, stream++);
    const std::string what = fmt::format(
        "kpar model={} a={} b=e4m3 M={} N={} K={} promote={} scaling={} order={} out={} C={} "
        "special={}", name, fa.name, sh.M, sh.N, sh.K, s.promote_every, to_string(s.scaling),
        to_string(s.order), s.out_type.name, C.empty() ? 0 : 1, special);
    compare(s, A, B, C, sa, sb, t, what);
    const auto run = [&](const DeviceLaunch& l, std::vector<float>& D) {
      gemm_on_device(s, A, B, C, sa, sb, D, l);
    };
    compare_launches(std::size_t(sh.M) * sh.N, sh.N, run, t, what);
    ++config;
  }
  // Block-scaled models on single products (mxf8f6f4): power-of-two scales folded into the
  // operands (the double-step or per-output kernels).
  for (const auto& p : accumulator_presets()) {
    if (!p.block_scale || p.group_sum != 1) continue;
    for (const Shape sh : {kShapes[1], kShapes[4]}) {
      GemmSpec s;
      s.model = p;
      use_model_block_scales(s);
      s.out_type = format_by_name("fp32");
      s.device = Device::cpu;
      s.promote_every = 128;
      const Operand A = random_operand(format_by_name("e4m3"), sh.M, sh.K, stream++, 0);
      const Operand B = random_operand(format_by_name("e5m2"), sh.N, sh.K, stream++, 0);
      const ScaleShapes ss = scale_shapes(s, sh.M, sh.N, sh.K);
      auto pow2 = [&](std::size_t n) { return pow2_scales(n, stream++); };
      const auto sa = pow2(ss.a_rows * ss.a_cols), sb = pow2(ss.b_rows * ss.b_cols);
      const auto C = random_floats(std::size_t(sh.M) * sh.N, stream++, -20, 12);
      const std::string what = fmt::format("kpar model={} a=e4m3 b=e5m2 M={} N={} K={} "
                                           "promote=128 scaling=mx", p.name, sh.M, sh.N, sh.K);
      const auto folded = fold_block_scales(s, A, B, sa, sb, ss.a_cols, ss.b_cols);
      if (!folded) throw std::runtime_error(what + ": the scales did not fold");
      std::vector<float> cpu(C.size()), gpu(C.size());
      gemm(s, A, B, C, sa, sb, cpu);
      folded_on_device(s, *folded, C, sa, sb, gpu, false);
      tally(cpu, gpu, sh.N, t, what);
      compare_launches(C.size(), sh.N, [&](const DeviceLaunch& l, std::vector<float>& D) {
        folded_on_device(s, *folded, C, sa, sb, D, false, l);
      }, t, what);
    }
  }
  // FP4 group sums (kind::mxf4, kind::mxf4nvf4; the group-sum kernel, chunks of whole steps
  // of 64): scales near 1, a quarter of C zero.
  for (const auto& p : accumulator_presets()) {
    if (!p.block_scale || p.group_sum < 2) continue;
    for (const Shape sh : {Shape{1, 257, 1088}, Shape{16, 130, 4160}, Shape{32, 64, 576}})
      for (const int promote : {64, 128}) {
        GemmSpec s;
        s.model = p;
        use_model_block_scales(s);
        s.out_type = format_by_name("fp32");
        s.device = Device::cpu;
        s.promote_every = promote;
        const FormatSpec e2m1 = format_by_name("e2m1"), sf = p.block_scale->format;
        const Operand A = random_operand(e2m1, sh.M, sh.K, stream++, 0);
        const Operand B = random_operand(e2m1, sh.N, sh.K, stream++, 0);
        auto scales = [&](std::size_t n) { return block_scales_near_one(sf, n, stream++); };
        const ScaleShapes ss = scale_shapes(s, sh.M, sh.N, sh.K);
        const auto sa = scales(ss.a_rows * ss.a_cols), sb = scales(ss.b_rows * ss.b_cols);
        auto C = random_floats(std::size_t(sh.M) * sh.N, stream++, -20, 12);
        for (std::size_t i = 0; i < C.size(); i += 4) C[i] = 0.0f;
        const std::string what = fmt::format("kpar model={} a=e2m1 b=e2m1 M={} N={} K={} "
                                             "promote={}", p.name, sh.M, sh.N, sh.K, promote);
        if (!group_sums_on_device_fit(s, A, B, C, sa, sb))
          throw std::runtime_error(what + ": not taken by the group-sum step");
        std::vector<float> cpu(C.size()), gpu(C.size());
        gemm(s, A, B, C, sa, sb, cpu);
        group_sums_on_device(s, A, B, C, sa, sb, gpu, false);
        tally(cpu, gpu, sh.N, t, what);
        compare_launches(C.size(), sh.N, [&](const DeviceLaunch& l, std::vector<float>& D) {
          group_sums_on_device(s, A, B, C, sa, sb, D, false, l);
        }, t, what);
      }
  }
  fmt::print("kpar: seed={} {} configurations, {} outputs, {} differ\n", seed(), t.configs,
             t.outputs, t.bad);
  if (t.bad) fmt::print("FAIL first mismatch: {}\n", t.first);
  return t.bad == 0 && t.configs >= 400 ? 0 : 1;
}

}  // namespace

TEST_CASE("K-parallel chunks at decode shapes equal the CPU engine and every launch", "[gpu]") {
  CHECK(kpar_test() == 0);
}
