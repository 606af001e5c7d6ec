// gemm_cuda_scaled_util: the grid of block-scaled GEMMs on which the reference step with block
// scales is compared, bit for bit, with the CPU engine (the CUDA engine's in
// test_gemm_cuda_scaled.cpp; the same device step compiled for the host in
// test_gemm_scaled_host.cpp): its models, operands, scales and C, and the comparison.
//
// Every block-scaled preset (kind::mxf8f6f4, mxf4, mxf4nvf4 with UE8M0 and UE4M3 scales) and
// custom block-scaled models that exercise the step's other parameters (lanes, c added after,
// cuts rne and rd, renormalised products, product overflow, no zero exponent, signed zeros,
// narrower outputs, other group sums and scale blocks), on operands the group-sum step and
// the folding do not take: fp32 and bf16 values against codes (as `fp8sim analyze`'s
// unquantised-operand stages run them), both unquantised (with group sums that cancel: the
// device's slower exact paths), and codes whose group sums do not fit (e5m2); values near 1
// and adversarial (each row one kind: windowed random values, the largest magnitudes, mostly
// zeros of both signs, the smallest magnitudes; Inf and NaN in some configurations), scales
// near 1 or over every code (zeros, NaN, the extremes), with and without C (adversarial C:
// Inf, NaN, zeros, subnormals), ragged shapes, K not a multiple of the promotion chunk, GEMMs
// and batched dot products. Where the CPU engine throws (a group sum not exact in a double, a
// term beyond 128 bits), the device step must throw the same message.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/rng.hpp"
#include "gemm/gemm.hpp"
#include "gemm_cuda_util.hpp"

namespace fp8sim::gpu_test {

// The block-scaled models: every preset, then custom ones.
inline std::vector<AccumulatorSpec> scaled_models() {
  std::vector<AccumulatorSpec> v;
  for (const auto& p : accumulator_presets())
    if (p.block_scale) v.push_back(p);
  for (const char* name : {
           "custom:group=32,frac=25,out=24,zero=-133,scale=ue8m0:32,cut=rne",
           "custom:group=32,frac=20,out=24,zero=-133,scale=ue8m0:32,cut=rd,c=add,lanes=2",
           "custom:group=16,frac=30,out=24,scale=ue8m0:16,renorm=1,zero=none",
           "custom:group=32,frac=25,out=11,outround=rne,scale=ue8m0:32,overflow=1,zero=-20",
           "custom:group=64,frac=35,out=24,zero=-139,groupsum=8,scale=ue4m3:16,signedzero=1",
           "custom:group=64,frac=40,out=24,groupsum=16,scale=ue8m0:32,c=add,lanes=4,cut=rne",
           "custom:group=16,frac=12,outfmt=fp16,outround=rne,groupsum=16,scale=ue4m3:16,zero=-30",
           "custom:group=32,frac=62,out=24,outround=rne,groupsum=4,scale=ue8m0:32,lanes=2,c=add"})
    v.push_back(accumulator_by_name(name));
  return v;
}

// Operands of format f (rows x cols): values near 1 (`adversarial` false), else each row one
// kind by row % 4 (adversarial_code_values' kinds, with its random-code rows replaced by codes
// whose exponents lie in a window, so that the group sums of most GEMMs stay exact). fp32
// values are drawn as bf16 codes widened with random low bits. Inf and NaN at `special` per
// mille.
inline Operand operand(const FormatSpec& f, int rows, int cols, std::uint64_t stream,
                       bool adversarial, int special) {
  const bool fp32 = f.name == "fp32";
  const FormatSpec& base = fp32 ? format_by_name("bf16") : f;
  std::vector<std::uint32_t> codes =
      adversarial ? adversarial_code_values(base, rows, cols, stream, special)
                  : std::vector<std::uint32_t>(std::size_t(rows) * cols, 0);
  const int e_bits = base.exponent_bits, m_bits = base.mantissa_bits;
  const std::uint32_t bias = (1u << (e_bits - 1)) - 1;
  for (int r = 0; r < rows; ++r) {
    if (adversarial && r % 4 != 0) continue;
    for (int k = 0; k < cols; ++k) {
      const std::size_t i = std::size_t(r) * cols + k;
      const std::uint64_t x = random_u64(seed(), stream + 1, i);
      // Exponent fields bias - 3 .. bias + 3 (a window of 7 binades) within the normal
      // range, either sign.
      const int top = (1 << e_bits) - 2;
      const std::uint32_t e =
          std::uint32_t(std::clamp(int(bias) - 3 + int(x % 7), 1, std::max(1, top)));
      codes[i] = ((x >> 8) & 1) << (e_bits + m_bits) | e << m_bits |
                 std::uint32_t((x >> 16) % (1u << m_bits));
    }
  }
  Operand op = decode_operand(base, rows, cols, std::span<const std::uint32_t>(codes));
  if (!fp32) return op;
  std::vector<double> v(op.value.begin(), op.value.end());
  for (std::size_t i = 0; i < v.size(); ++i) {  // low bits below bf16's (finite normals only)
    const float x = op.value[i];
    if (!std::isfinite(x) || x == 0.0f || std::fabs(x) < 0x1p-126f) continue;
    const std::uint32_t low = std::uint32_t(random_u64(seed(), stream + 2, i) % (1u << 16));
    const float w = std::bit_cast<float>(std::bit_cast<std::uint32_t>(x) | low);
    v[i] = std::isfinite(w) ? w : x;
  }
  return operand_from_values(format_by_name("fp32"), rows, cols, v);
}

// Group sums whose partial sums are not exact but whose whole sum is (the device's slower
// exact paths): in every fourth row of A (fp32), each run of 4 elements k becomes
// (t, X, -X, t) with X = A[k+1] 2^s and t = A[k] 2^-s (s 30: the products span about 60 bits;
// 50 in every eighth row: about 100 bits), and every row of B gets B[k+2] = B[k+1], so the
// products X B[k+1] cancel.
inline void paired(Operand& B);
inline void cancelling(Operand& A, Operand& B) {
  const int K = A.cols;
  std::vector<double> a(A.value.begin(), A.value.end()), b(B.value.begin(), B.value.end());
  for (int r = 0; r < A.rows; r += 4)
    for (int k = 0; k + 3 < K; k += 4) {
      double* x = a.data() + std::size_t(r) * K + k;
      const int sh = r % 8 == 0 ? 30 : 50;
      if (!std::isfinite(x[0] + x[1] + x[3])) continue;
      x[1] = std::ldexp(x[1], sh);
      x[2] = -x[1];
      x[0] = std::ldexp(x[0], -sh);
      x[3] = std::ldexp(x[3], -sh);
    }
  A = operand_from_values(A.format, A.rows, K, a);
  paired(B);
}
inline void paired(Operand& B) {
  const int K = B.cols;
  std::vector<double> b(B.value.begin(), B.value.end());
  for (int r = 0; r < B.rows; ++r)
    for (int k = 0; k + 3 < K; k += 4) b[std::size_t(r) * K + k + 2] = b[std::size_t(r) * K + k + 1];
  B = operand_from_values(B.format, B.rows, K, b);
}

// n block scales of format sf: near 1, or (adversarial) every code (NaN included, rarely),
// a third of them among the lowest codes (zeros, subnormals, 2^-127).
inline std::vector<float> scales(const FormatSpec& sf, std::size_t n, std::uint64_t stream,
                                 bool adversarial) {
  if (!adversarial) return block_scales_near_one(sf, n, stream);
  std::vector<float> v(n);
  const std::uint32_t codes = code_count(sf);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t r = random_u64(seed(), stream, i);
    std::uint32_t c = std::uint32_t(r % codes);
    if ((r >> 32) % 3 == 0) c = std::uint32_t((r >> 40) % 8);
    if (std::isnan(decode(sf, c)) && (r >> 48) % 8 != 0) c = codes / 2;  // NaN: 1 in 8 draws
    v[i] = static_cast<float>(decode(sf, c));
  }
  return v;
}

struct Outcome {
  std::vector<float> d;
  std::string error;  // the engine's std::domain_error, if any
};

template <class Run>
Outcome outcome(std::size_t n, Run run) {
  Outcome o;
  o.d.assign(n, 0.0f);
  try {
    run(o.d);
  } catch (const std::domain_error& e) {
    o.error = e.what();
  }
  return o;
}

// Both engines' outcomes: the same error, or no error and the same bits.
inline void tally_outcomes(const Outcome& cpu, const Outcome& gpu, int N, Tally& t,
                    const std::string& what, std::size_t& errors) {
  if (!cpu.error.empty() || !gpu.error.empty()) {
    ++t.configs;
    ++errors;
    if (cpu.error != gpu.error && t.bad++ == 0)
      t.first = fmt::format("seed={} {}: cpu error '{}' cuda error '{}'", seed(), what,
                            cpu.error, gpu.error);
    return;
  }
  tally(cpu.d, gpu.d, N, t, what);
}

// The device step under test: scaled_reference_on_device's arguments.
using ScaledRunner =
    std::function<void(const GemmSpec&, const Operand&, const Operand&, std::span<const float>,
                       std::span<const float>, std::span<const float>, std::span<float>, bool)>;

// The grid, each configuration's GEMM and batched dot products through `run` and the CPU
// engine (on one thread: where steps raise several errors, the first output's is thrown),
// tallied in t (errors: configurations where both threw the same error).
inline void scaled_grid(const ScaledRunner& run, Tally& t, std::size_t& errors) {
  std::uint64_t stream = 9000;
  std::size_t config = 0;
  // Operand formats (A, B): unquantised against codes both ways, both unquantised, and codes
  // whose group sums do not fit.
  const char* pairs[][2] = {{"fp32", "code"}, {"code", "fp32"}, {"bf16", "code"},
                            {"code", "bf16"}, {"fp32", "fp32"}, {"e5m2", "e5m2"}};
  for (const AccumulatorSpec& model : scaled_models()) {
    const bool fp4 = model.group_sum > 1;
    const FormatSpec code = format_by_name(fp4 ? "e2m1" : "e4m3");
    for (const auto& pair : pairs) {
      for (const bool adversarial : {false, true}) {
        GemmSpec s;
        s.model = model;
        use_model_block_scales(s);
        s.out_type = format_by_name(config % 3 == 1 ? "bf16" : "fp32");
        const int g = step_products(model);
        // Promotion never, every step, or every two steps with K = 5 steps (a last chunk of
        // one step: K not a multiple of the chunk).
        const int promote[] = {0, g, 2 * g};
        s.promote_every = promote[config % 3];
        const int steps = config % 3 == 2 ? 5 : 1 + int(config % 4);
        const int K = steps * g;
        const int M = config % 2 ? 37 : 24, N = config % 2 ? 29 : 40;
        const int special = adversarial && config % 4 == 3 ? 20 : 0;
        const auto fmt_of = [&](const char* name) {
          return std::string(name) == "code" ? code : format_by_name(name);
        };
        const FormatSpec fa = fmt_of(pair[0]), fb = fmt_of(pair[1]);
        Operand A = operand(fa, M, K, stream, adversarial, special);
        Operand B = operand(fb, N, K, stream + 3, adversarial, special);
        Operand Bt = operand(fb, M, K, stream + 6, adversarial, special);
        if (fa.name == "fp32" && fb.name == "fp32" && !adversarial) {
          cancelling(A, B);
          paired(Bt);
        }
        stream += 10;
        const FormatSpec& sf = model.block_scale->format;
        const ScaleShapes sh = scale_shapes(s, M, N, K);
        const auto sa = scales(sf, sh.a_rows * sh.a_cols, stream++, adversarial);
        const auto sb = scales(sf, sh.b_rows * sh.b_cols, stream++, adversarial);
        std::vector<float> C;
        if (config % 3 != 0)
          C = adversarial ? adversarial_c(std::size_t(M) * N, stream++)
                          : random_floats(std::size_t(M) * N, stream++, -20, 12);
        const std::string what = fmt::format(
            "model={} a={} b={} M={} N={} K={} promote={} out={} C={} adversarial={} "
            "special={}", model.name, fa.name, fb.name, M, N, K, s.promote_every,
            s.out_type.name, C.empty() ? 0 : 1, adversarial, special);
        // gemm(): the CPU engine against the CUDA engine's reference step with block scales.
        // On one thread the CPU engine's error (where steps raise several) is the first
        // output's, which the CUDA engine reports.
        GemmSpec cpu_spec = s;
        cpu_spec.device = Device::cpu;
        cpu_spec.threads = 1;
        const std::size_t outputs = std::size_t(M) * N;
        const Outcome cpu = outcome(outputs, [&](std::span<float> d) {
          gemm(cpu_spec, A, B, C, sa, sb, d);
        });
        const Outcome gpu = outcome(outputs, [&](std::span<float> d) {
          run(s, A, B, C, sa, sb, d, false);
        });
        tally_outcomes(cpu, gpu, N, t, what, errors);
        // batched_dot(): row t of A against row t of Bt.
        const std::size_t per_row = std::size_t(K) / s.mx_block;
        const auto ta = scales(sf, M * per_row, stream++, adversarial);
        const auto tb = scales(sf, M * per_row, stream++, adversarial);
        std::vector<float> Ct;
        if (!C.empty()) Ct.assign(C.begin(), C.begin() + M);
        const Outcome tcpu = outcome(M, [&](std::span<float> d) {
          batched_dot(cpu_spec, A, Bt, Ct, ta, tb, d);
        });
        const Outcome tgpu = outcome(M, [&](std::span<float> d) {
          run(s, A, Bt, Ct, ta, tb, d, true);
        });
        tally_outcomes(tcpu, tgpu, 1, t, what + " batched", errors);
        ++config;
      }
    }
  }
}

}  // namespace fp8sim::gpu_test
