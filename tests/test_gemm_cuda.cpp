// test_gemm_cuda: the CUDA engine (GemmSpec::device = cuda) against the CPU engine, bit for bit.
//
// 1. A seeded grid: >= 150 models (presets and custom) x operand formats (e4m3, e5m2, mixed,
//    e5m6) with scalings, both scale orders, promotion, C, output types and special-value
//    inputs rotating through the grid; >= 1e7 outputs in all.
// 2. Every capture under tests/data/hw replayed through the CUDA engine.
// 3. Launch configuration and stream: the tiled kernel (K-parallel or not), the per-output
//    kernel and a stream of its own give the same bits.
// 4. The tiled kernels on adversarial operands, C and shapes (tiled_test).
// 5. gemm() on host codes (copied to the device as codes, decoded there: gemm_resident's
//    route) over the model grid on 8-bit-or-narrower formats, with scalings, C, bias, split-K,
//    output types and special values rotating, and a bad code reported as the host reports it.
// 6. K-parallel chunks at decode shapes, forced on and off (test_gemm_cuda_kpar.cpp).
// Each is a Catch2 test case (tests/gpu_main.cpp: without a GPU, or without CUDA in the build,
// the binary prints "waived: ..." and exits 77).
// FP8SIM_SEED overrides the seed; the first mismatch is printed as one line.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "gemm/block_fold.hpp"
#include "gemm/gemm.hpp"
#include "gemm/gemm_device.hpp"
#include "model_grid.hpp"
#include "io/replay.hpp"
#include "base/rng.hpp"
#include "gemm_cuda_util.hpp"

using namespace fp8sim;
using namespace fp8sim::gpu_test;

namespace {

int grid_test() {
  const auto models = test::model_grid();
  const char* pairs[][2] = {{"e4m3", "e4m3"}, {"e5m2", "e5m2"}, {"e4m3", "e5m2"}, {"e5m6", "e5m6"}};
  const Scaling scalings[] = {Scaling::none, Scaling::tensor, Scaling::row, Scaling::block, Scaling::mx};
  const char* outs[] = {"fp32", "bf16", "fp16"};
  Tally t;
  std::uint64_t stream = 1;
  std::size_t config = 0;
  for (const auto& name : models) {
    if (needs_reference_step(accumulator_by_name(name))) continue;  // CPU-only models
    for (const auto& pair : pairs) {
      GemmSpec s;
      s.model = accumulator_by_name(name);
      const int g = s.model.group ? step_products(s.model) : 1;
      // Shapes: mostly whole tiles, every fifth one ragged (edges of the tiled kernel).
      const bool ragged = config % 5 == 4;
      const int M = ragged ? 100 : 136, N = ragged ? 70 : 136;
      const int K = 256;
      const int special = config % 3 == 2 ? 20 : 0;
      const Operand A = random_operand(format_by_name(pair[0]), M, K, stream++, special);
      const Operand B = random_operand(format_by_name(pair[1]), N, K, stream++, special);
      s.scaling = scalings[config % 5];
      s.order = (config / 5) % 2 ? ScaleOrder::cublaslt : ScaleOrder::deepgemm;
      s.out_type = format_by_name(outs[(config / 10) % 3]);
      // Promotion every 32 (so MX's 32-blocks hold whole chunks), 64, 128 or never.
      const int promotes[] = {32, 64, 128, 0};
      s.promote_every = promotes[config % 4];
      if (s.promote_every % g) s.promote_every = 0;
      if (s.scaling == Scaling::mx && (s.promote_every == 0 || 32 % s.promote_every)) s.scaling = Scaling::row;
      s.block = s.promote_every == 0 ? 256 : 128;
      if (s.scaling == Scaling::block && s.promote_every != 0 && 128 % s.promote_every) s.scaling = Scaling::tensor;
      const ScaleShapes sh = scale_shapes(s, M, N, K);
      const auto sa = random_floats(sh.a_rows * sh.a_cols, stream++, -8, 8);
      const auto sb = random_floats(sh.b_rows * sh.b_cols, stream++, -8, 8);
      std::vector<float> C;
      if (config % 2) C = random_floats(std::size_t(M) * N, stream++, -20, 12);
      compare(s, A, B, C, sa, sb, t,
              fmt::format("model={} a={} b={} M={} N={} K={} promote={} scaling={} order={} "
                          "out={} C={} special={}",
                          name, pair[0], pair[1], M, N, K, s.promote_every, to_string(s.scaling),
                          to_string(s.order), s.out_type.name, C.empty() ? 0 : 1, special));
      ++config;
    }
  }
  // Block-scaled models with power-of-two scales on single products (mxf8f6f4): the scales
  // fold into the operands (block_fold.hpp) and the CUDA engine runs the plain model's fast
  // paths with each element's alignment floor moved by its scale. The folded GEMM and the
  // folded batched dot products run on the device directly (gemm() would also run them there),
  // with and without subnormal elements, against the CPU engine's reference step.
  for (const auto& p : accumulator_presets()) {
    if (!p.block_scale || p.group_sum != 1) continue;
    for (const auto& pair : {std::pair{"e4m3", "e5m2"}, std::pair{"e3m2", "e2m1"}})
    for (const bool subnormals : {false, true}) {
      GemmSpec s;
      s.model = p;
      use_model_block_scales(s);
      s.out_type = format_by_name("fp32");
      s.device = Device::cpu;
      const int M = 100, N = 136, K = 256;
      const Operand A = random_operand(format_by_name(pair.first), M, K, stream++, 0, subnormals);
      const Operand B = random_operand(format_by_name(pair.second), N, K, stream++, 0, subnormals);
      auto pow2 = [&](std::size_t n) { return pow2_scales(n, stream++); };
      const std::string what = fmt::format("model={} a={} b={} M={} N={} K={} scaling=mx "
                                           "subnormals={}", p.name, pair.first, pair.second, M,
                                           N, K, subnormals);
      // gemm(): A's rows against B's.
      const ScaleShapes sh = scale_shapes(s, M, N, K);
      const auto sa = pow2(sh.a_rows * sh.a_cols), sb = pow2(sh.b_rows * sh.b_cols);
      const auto C = random_floats(std::size_t(M) * N, stream++, -20, 12);
      std::vector<float> cpu(C.size()), gpu(C.size());
      gemm(s, A, B, C, sa, sb, cpu);
      const auto folded = fold_block_scales(s, A, B, sa, sb, sh.a_cols, sh.b_cols);
      if (!folded) throw std::runtime_error(what + ": the scales did not fold");
      folded_on_device(s, *folded, C, sa, sb, gpu, false);
      tally(cpu, gpu, N, t, what);
      // batched_dot(): row t of A against row t of B's first M rows.
      const Operand Bt = random_operand(format_by_name(pair.second), M, K, stream++, 0, subnormals);
      const std::size_t per_row = std::size_t(K) / s.mx_block;
      const auto ta = pow2(M * per_row), tb = pow2(M * per_row);
      const auto Ct = random_floats(M, stream++, -20, 12);
      std::vector<float> tcpu(M), tgpu(M);
      batched_dot(s, A, Bt, Ct, ta, tb, tcpu);
      const auto tfold = fold_block_scales(s, A, Bt, ta, tb, per_row, per_row);
      if (!tfold) throw std::runtime_error(what + ": the batched scales did not fold");
      folded_on_device(s, *tfold, Ct, ta, tb, tgpu, true);
      tally(tcpu, tgpu, 1, t, what + " batched");
    }
  }
  // Block-scaled models with group sums (FP4 kind::mxf4, kind::mxf4nvf4: group_sums_fit):
  // the CUDA engine's group-sum steps (the tiled kernel, gemm_engine_tiled_gs.cuh, and the
  // per-output step for batched dot products and outputs it hands back), directly (gemm()
  // routes them there where operands, scales and C are finite), against the CPU engine.
  // Scales: random codes of the model's scale format near 1, over every code (outputs
  // overflow to Inf), or among the lowest (zero terms and c set the alignment), the last also
  // with half the groups of 16 all zero (zero terms); a quarter of C zero. In every other mode
  // K = 320 and promotion every 128 (chunks of two steps and one).
  for (const auto& p : accumulator_presets()) {
    if (!p.block_scale || p.group_sum < 2) continue;
    for (int mode = 0; mode < 4; ++mode) {
      GemmSpec s;
      s.model = p;
      use_model_block_scales(s);
      s.out_type = format_by_name("fp32");
      s.device = Device::cpu;
      s.promote_every = mode % 2 ? 128 : 0;
      const FormatSpec e2m1 = format_by_name("e2m1"), sf = p.block_scale->format;
      const int M = 100, N = 136, K = mode % 2 ? 320 : 256;
      Operand A = random_operand(e2m1, M, K, stream++, 0);
      Operand B = random_operand(e2m1, N, K, stream++, 0);
      if (mode == 3) {  // half the groups of 16 all zero
        for (Operand* op : {&A, &B})
          for (std::size_t i = 0; i < op->value.size(); ++i)
            if (random_u64(seed(), stream, i / K * 64 + i % K / 16) & 1) {
              op->value[i] = 0.0f;
              op->exponent[i] = Operand::kZeroExponent;
            }
        ++stream;
      }
      const bool e8 = sf.exponent_bits == 8;
      auto scales = [&](std::size_t n) {
        std::vector<float> v(n);
        for (std::size_t i = 0; i < n; ++i) {
          const std::uint64_t r = random_u64(seed(), stream, i);
          std::uint32_t c = mode == 0 ? (e8 ? 119 + r % 17 : 48 + r % 16)   // 2^-8..2^8 / 2^-2..
                          : mode == 1 ? std::uint32_t(r % (code_count(sf) - 1))  // not NaN
                                      : (e8 ? 32 + r % 30 : r % 16);            // the lowest
          v[i] = static_cast<float>(decode(sf, c));
        }
        ++stream;
        return v;
      };
      const char* modes[] = {"near 1", "every code", "lowest", "lowest, zero groups"};
      const std::string what = fmt::format("model={} a=e2m1 b=e2m1 M={} N={} K={} promote={} "
                                           "scales={}", p.name, M, N, K, s.promote_every,
                                           modes[mode]);
      const ScaleShapes sh = scale_shapes(s, M, N, K);
      const auto sa = scales(sh.a_rows * sh.a_cols), sb = scales(sh.b_rows * sh.b_cols);
      auto C = random_floats(std::size_t(M) * N, stream++, -20, 12);
      for (std::size_t i = 0; i < C.size(); i += 4) C[i] = 0.0f;
      if (!group_sums_on_device_fit(s, A, B, C, sa, sb))
        throw std::runtime_error(what + ": not taken by the group-sum step");
      std::vector<float> cpu(C.size()), gpu(C.size());
      gemm(s, A, B, C, sa, sb, cpu);
      group_sums_on_device(s, A, B, C, sa, sb, gpu, false);
      tally(cpu, gpu, N, t, what);
      const Operand Bt = random_operand(e2m1, M, K, stream++, 0);
      const std::size_t per_row = (std::size_t(K) + s.mx_block - 1) / s.mx_block;
      const auto ta = scales(M * per_row), tb = scales(M * per_row);
      const auto Ct = random_floats(M, stream++, -20, 12);
      std::vector<float> tcpu(M), tgpu(M);
      batched_dot(s, A, Bt, Ct, ta, tb, tcpu);
      group_sums_on_device(s, A, Bt, Ct, ta, tb, tgpu, true);
      tally(tcpu, tgpu, 1, t, what + " batched");
    }
  }
  // Signed zeros: models whose nonzero sums that round to zero keep their sign (exact and
  // signed_zero presets) on bf16 operands of exponents -80..-70, whose products lie around
  // fp32's smallest subnormal, so that many outputs round to +-0 or to subnormals.
  for (const auto& p : accumulator_presets()) {
    if (!p.signed_zero) continue;
    GemmSpec s;
    s.model = p;
    s.out_type = format_by_name("fp32");
    const FormatSpec bf16 = format_by_name("bf16");
    const int M = 64, N = 64, K = p.group > 0 ? 4 * p.group : 128;
    auto tiny = [&](int rows) {
      std::vector<std::uint32_t> codes(std::size_t(rows) * K);
      for (std::size_t i = 0; i < codes.size(); ++i) {
        const std::uint64_t r = random_u64(seed(), stream, i);
        codes[i] = std::uint32_t((r & 1) << 15 | (127 - 70 - (r >> 1) % 11) << 7 | (r >> 8) % 128);
      }
      ++stream;
      return decode_operand(bf16, rows, K, std::span<const std::uint32_t>(codes));
    };
    const Operand A = tiny(M), B = tiny(N);
    try {
      compare(s, A, B, {}, {}, {}, t, fmt::format("model={} a=bf16 b=bf16 M={} N={} K={} "
                                                   "(products near 2^-149)", p.name, M, N, K));
    } catch (const std::invalid_argument& e) {  // a model only the CPU engine runs
      if (std::string(e.what()).find("CPU engine only") == std::string::npos) throw;
    }
  }
  // Batched dot products (the sweep engine's entry), each model with every scaling.
  for (const char* name : {"hopper-wgmma", "blackwell-fp8", "hopper-mma-sync", "triton-mma-f16", "exact"}) {
    for (const Scaling sc : scalings) {
      GemmSpec s;
      s.model = accumulator_by_name(name);
      s.promote_every = 32;
      s.scaling = sc;
      s.block = 64;
      s.out_type = format_by_name("fp32");
      const int T = 4000, K = 256;
      const int per_row = sc == Scaling::block ? K / 64 : sc == Scaling::mx ? K / 32 : 1;
      const Operand A = random_operand(format_by_name("e4m3"), T, K, stream++, 5);
      const Operand B = random_operand(format_by_name("e4m3"), T, K, stream++, 5);
      const auto C = random_floats(T, stream++, -10, 10);
      std::vector<float> sa, sb;
      if (sc != Scaling::none) {
        sa = random_floats(std::size_t(T) * per_row, stream++, -8, 8);
        sb = random_floats(std::size_t(T) * per_row, stream++, -8, 8);
      }
      std::vector<float> cpu(T), gpu(T);
      s.device = Device::cpu;
      batched_dot(s, A, B, C, sa, sb, cpu);
      s.device = Device::cuda;
      batched_dot(s, A, B, C, sa, sb, gpu);
      t.outputs += T;
      for (int i = 0; i < T; ++i)
        if (!same(cpu[i], gpu[i]) && t.bad++ == 0)
          t.first = fmt::format(
              "seed={} batched_dot model={} scaling={} T={} K={} row {}: cpu {:08x} cuda {:08x}",
              seed(), name, to_string(sc), T, K, i, std::bit_cast<std::uint32_t>(cpu[i]),
              std::bit_cast<std::uint32_t>(gpu[i]));
    }
  }
  fmt::print("grid: seed={} {} models, {} configurations, {} outputs, {} differ\n", seed(),
             models.size(), t.configs, t.outputs, t.bad);
  if (t.bad) fmt::print("FAIL first mismatch: {}\n", t.first);
  return t.bad == 0 && models.size() >= 150 && t.outputs >= 10'000'000 ? 0 : 1;
}

// The tiled kernels (float steps: gemm_engine_tiled_f32.cuh; double steps) against the CPU
// engine and against the per-output kernel, on adversarial operands and C, ragged shapes
// (partial tiles, a K whose last slab is half full), skinny shapes, promotion every 32 / 128 /
// never, scales, and models at the edges of the float step (sums of exactly 24 bits, rne cuts,
// group 16, c added after the step).
int tiled_test() {
  Tally t;
  std::uint64_t stream = 700000;
  const char* models[] = {"hopper-wgmma", "ada-fp8", "blackwell-fp8",
                          "custom:group=32,frac=13,out=24,cut=rne,outround=rne",
                          "custom:group=16,frac=17,out=24,cut=rz",
                          "custom:group=32,frac=16,out=14,cut=rz",
                          "custom:group=32,frac=13,out=24,cut=rz,c=add",
                          // the double step: an e8m13 output (its cut reaches the double's
                          // high word), and an output rounded to nearest (the generic kernel)
                          "custom:group=32,frac=24,out=14,cut=rz",
                          "custom:group=16,frac=25,out=24,cut=rz,outround=rne"};
  struct Shape { int M, N, K; };
  const Shape shapes[] = {{200, 130, 1184}, {16, 300, 1024}, {65, 64, 1200}, {1, 257, 512}};
  int config = 0;
  for (const char* name : models)
    for (const Shape sh : shapes) {
      GemmSpec s;
      s.model = accumulator_by_name(name);
      const int g = step_products(s.model);
      if (sh.K % g) continue;
      const int promotes[] = {128, 0, 32};
      s.promote_every = promotes[config % 3];
      if (sh.K % 32 == 0 && s.promote_every == 128 && config % 2) {
        s.scaling = Scaling::block;
        s.block = 128;
      } else if (config % 5 == 3) {
        s.scaling = Scaling::row;
      }
      s.out_type = format_by_name(config % 4 == 1 ? "bf16" : "fp32");
      const FormatSpec fa = format_by_name(config % 3 == 2 ? "e5m2" : "e4m3");
      const FormatSpec fb = format_by_name("e4m3");
      const Operand A = adversarial_operand(fa, sh.M, sh.K, stream++, 3);
      const Operand B = adversarial_operand(fb, sh.N, sh.K, stream++, 3);
      const ScaleShapes ss = scale_shapes(s, sh.M, sh.N, sh.K);
      const auto sa = random_floats(ss.a_rows * ss.a_cols, stream++, -8, 8);
      const auto sb = random_floats(ss.b_rows * ss.b_cols, stream++, -8, 8);
      const auto C = adversarial_c(std::size_t(sh.M) * sh.N, stream++);
      const std::string what = fmt::format(
          "tiled model={} a={} b=e4m3 M={} N={} K={} promote={} scaling={} out={}", name, fa.name,
          sh.M, sh.N, sh.K, s.promote_every, to_string(s.scaling), s.out_type.name);
      compare(s, A, B, C, sa, sb, t, what);
      // The per-output kernel everywhere gives the same bits as the tiled kernels, run over
      // all of K (at these shapes gemm() runs them K-parallel: gemm_engine_kpar.cuh).
      if (s.scaling == Scaling::none) {
        std::vector<float> tiled(std::size_t(sh.M) * sh.N), dot(tiled.size()), whole(tiled.size());
        DeviceLaunch whole_k;
        whole_k.k_parallel = -1;
        gemm_on_device(s, A, B, C, sa, sb, tiled, launch_of(0, false));
        gemm_on_device(s, A, B, C, sa, sb, dot, launch_of(1, false));
        gemm_on_device(s, A, B, C, sa, sb, whole, whole_k);
        tally(dot, tiled, sh.N, t, what + " (per-output kernel vs tiled)");
        tally(dot, whole, sh.N, t, what + " (per-output kernel vs tiled, whole K)");
      }
      ++config;
    }
  fmt::print("tiled: seed={} {} configurations, {} outputs, {} differ\n", seed(), t.configs,
             t.outputs, t.bad);
  if (t.bad) fmt::print("FAIL first mismatch: {}\n", t.first);
  return t.bad == 0 && t.configs >= 20 ? 0 : 1;
}

int capture_test() {
  const char* dir = std::getenv("FP8SIM_TEST_DATA");
  const std::filesystem::path hw = std::filesystem::path(dir ? dir : "tests/data") / "hw";
  int sets = 0, failed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(hw)) {
    if (!std::filesystem::exists(entry.path() / "manifest.json")) continue;
    ReplayOptions o;
    o.device = Device::cuda;
    ReplayReport r;
    try {
      r = replay(entry.path().string(), o);
    } catch (const std::exception& e) {
      // A capture without a model for the GEMM (e.g. conversions) is not a GEMM capture.
      fmt::print("captures: {} skipped: {}\n", entry.path().filename().string(), e.what());
      continue;
    }
    ++sets;
    for (const auto& c : r.cases)
      if (!c.ok()) {
        ++failed;
        fmt::print("FAIL capture {}: {}\n", entry.path().filename().string(), format_case(c));
      }
  }
  fmt::print("captures: {} sets replayed on cuda, {} cases differ\n", sets, failed);
  return failed == 0 && sets > 0 ? 0 : 1;
}

int host_codes_test() {
  const char* pairs[][2] = {{"e4m3", "e4m3"}, {"e5m2", "e5m2"}, {"e4m3", "e5m2"}, {"e3m2", "e2m3"}};
  const Scaling scalings[] = {Scaling::none, Scaling::tensor, Scaling::row, Scaling::block};
  const char* outs[] = {"fp32", "bf16", "fp16"};
  Tally t;
  std::uint64_t stream = 700000;
  std::size_t config = 0;
  for (const auto& name : test::model_grid()) {
    const AccumulatorSpec model = accumulator_by_name(name);
    if (needs_reference_step(model) || model.block_scale) continue;
    const auto& pair = pairs[config % 4];
    GemmSpec s;
    s.model = model;
    s.a_format = format_by_name(pair[0]);
    s.b_format = format_by_name(pair[1]);
    const int g = s.model.group ? step_products(s.model) : 1;
    const bool ragged = config % 3 == 2;
    const int M = ragged ? 70 : 128, N = ragged ? 45 : 96, K = config % 4 == 3 ? 512 : 256;
    const int special = config % 3 == 1 ? 20 : 0;
    const auto A = random_codes(s.a_format, std::size_t(M) * K, stream++, special);
    const auto B = random_codes(s.b_format, std::size_t(N) * K, stream++, special);
    s.scaling = scalings[config % 4];
    s.order = (config / 4) % 2 ? ScaleOrder::cublaslt : ScaleOrder::deepgemm;
    s.out_type = format_by_name(outs[(config / 3) % 3]);
    const int promotes[] = {128, 64, 0, 32};
    s.promote_every = promotes[config % 4];
    if (s.promote_every % g) s.promote_every = 0;
    s.block = s.promote_every == 0 ? 256 : 128;
    if (s.scaling == Scaling::block && s.promote_every != 0 && 128 % s.promote_every)
      s.scaling = Scaling::tensor;
    s.split_k = config % 5 == 4 && s.promote_every != 0 ? 2 : 1;
    const ScaleShapes sh = scale_shapes(s, M, N, K);
    const auto sa = random_floats(sh.a_rows * sh.a_cols, stream++, -8, 8);
    const auto sb = random_floats(sh.b_rows * sh.b_cols, stream++, -8, 8);
    std::vector<float> C, bias;
    if (config % 2) C = random_floats(std::size_t(M) * N, stream++, -20, 12);
    if (config % 7 == 3) bias = random_floats(N, stream++, -4, 4);
    const std::string what = fmt::format(
        "host codes: model={} a={} b={} M={} N={} K={} promote={} scaling={} order={} out={} "
        "C={} bias={} split_k={} special={}", name, pair[0], pair[1], M, N, K, s.promote_every,
        to_string(s.scaling), to_string(s.order), s.out_type.name, C.empty() ? 0 : 1,
        bias.empty() ? 0 : 1, s.split_k, special);
    std::vector<float> cpu(std::size_t(M) * N), gpu(cpu.size());
    std::string cpu_error, gpu_error;
    s.device = Device::cpu;
    try {
      gemm(s, M, N, K, A, B, C, sa, sb, cpu, bias);
    } catch (const std::invalid_argument& e) {
      cpu_error = e.what();
    }
    s.device = Device::cuda;
    try {
      gemm(s, M, N, K, A, B, C, sa, sb, gpu, bias);
    } catch (const std::invalid_argument& e) {
      gpu_error = e.what();
    }
    if (cpu_error != gpu_error) {
      if (t.bad++ == 0)
        t.first = fmt::format("seed={} {}: cpu error '{}', cuda error '{}'", seed(), what,
                              cpu_error, gpu_error);
    } else if (cpu_error.empty()) {
      tally(cpu, gpu, N, t, what);
    }
    ++config;
  }
  // A code that is not one of the format's: the device reports it as the host decoder does.
  GemmSpec s;
  s.model = accumulator_by_name("hopper-wgmma");
  s.a_format = s.b_format = format_by_name("e3m2");
  s.out_type = format_by_name("fp32");
  s.device = Device::cuda;
  const int M = 64, N = 64, K = 128;
  auto A = random_codes(s.a_format, std::size_t(M) * K, stream++, 0);
  const auto B = random_codes(s.b_format, std::size_t(N) * K, stream++, 0);
  A[std::size_t(5) * K + 7] = 0x40;  // e3m2 has 64 codes
  std::vector<float> D(std::size_t(M) * N);
  std::string message;
  try {
    gemm(s, M, N, K, A, B, {}, {}, {}, D);
  } catch (const std::invalid_argument& e) {
    message = e.what();
  }
  const std::string want = "code 0x40 at (5, 7) is not a code of e3m2";
  if (message != want && t.bad++ == 0)
    t.first = fmt::format("bad code: '{}', expected '{}'", message, want);
  fmt::print("host codes: {} configurations, {} outputs, {} differ{}\n", t.configs, t.outputs,
             t.bad, t.bad ? "; first: " + t.first : "");
  return t.bad == 0 && t.configs > 50 ? 0 : 1;
}

int launch_test() {
  int bad = 0;
  std::uint64_t stream = 900000;
  for (const char* name : {"hopper-wgmma", "ada-fp8", "blackwell-fp8", "hopper-wgmma-f16",
                           "custom:group=32,frac=30", "hopper-mma-sync"}) {
    GemmSpec s;
    s.model = accumulator_by_name(name);
    s.promote_every = 128;
    s.out_type = format_by_name("fp32");
    s.device = Device::cuda;
    const int M = 300, N = 200, K = 512;
    const Operand A = random_operand(format_by_name("e4m3"), M, K, stream++, 2);
    const Operand B = random_operand(format_by_name("e4m3"), N, K, stream++, 2);
    std::vector<float> base(std::size_t(M) * N), other(base.size());
    gemm_on_device(s, A, B, {}, {}, {}, base, launch_of(0, false));
    DeviceLaunch whole_k;  // the tiled kernels over all of K (not K-parallel)
    whole_k.k_parallel = -1;
    for (const DeviceLaunch& l :
         {launch_of(1, false), launch_of(0, true), launch_of(1, true), whole_k}) {
      gemm_on_device(s, A, B, {}, {}, {}, other, l);
      for (std::size_t i = 0; i < base.size(); ++i)
        if (!same(base[i], other[i])) {
          if (bad++ == 0)
            fmt::print("FAIL launch: seed={} model={} kernel={} own_stream={} k_parallel={} "
                       "output {}: {:08x} vs {:08x}\n", seed(), name, l.kernel, l.own_stream,
                       l.k_parallel, i, std::bit_cast<std::uint32_t>(base[i]),
                       std::bit_cast<std::uint32_t>(other[i]));
          break;
        }
    }
  }
  fmt::print("launch: kernels and streams {}\n", bad ? "DIFFER" : "agree");
  return bad == 0 ? 0 : 1;
}

}  // namespace

TEST_CASE("the CUDA engine equals the CPU engine over the model grid", "[gpu]") {
  CHECK(grid_test() == 0);
}

TEST_CASE("every capture replays through the CUDA engine", "[gpu]") { CHECK(capture_test() == 0); }

TEST_CASE("launch configurations and streams give the same bits", "[gpu]") {
  CHECK(launch_test() == 0);
}

TEST_CASE("the tiled kernels on adversarial operands, C and shapes", "[gpu]") {
  CHECK(tiled_test() == 0);
}

TEST_CASE("gemm() on host codes, decoded on the device, equals the CPU engine", "[gpu]") {
  CHECK(host_codes_test() == 0);
}
