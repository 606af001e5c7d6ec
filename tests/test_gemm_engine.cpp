// test_gemm_engine: the fast GEMM engine against plain references.
//
// 1. Differential: gemm() equals a plain loop over fused_block (the reference step),
//    FP32 promotion and scales written out in the test, for a grid of models, formats,
//    promotion intervals, scalings, C and special values. Seeds printed; FP8SIM_SEED overrides.
// 2. The exact model equals exact_gemm (Boost.Multiprecision) on random and adversarial input;
//    a model with very many fraction bits converges to it.
// 3. Order of products inside one group does not matter; thread count does not matter.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "accumulator/accumulator.hpp"
#include "base/bits.hpp"
#include "accumulator/exact.hpp"
#include "gemm/gemm.hpp"
#include "model_grid.hpp"
#include "base/rng.hpp"
#include "test_seed.hpp"

using namespace fp8sim;

namespace {

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }

// Random codes of f: mostly finite values of every magnitude; `special_rate` per mille NaN/Inf.
std::vector<std::uint32_t> random_codes(const FormatSpec& f, std::size_t n, std::uint64_t stream,
                                        int special_rate = 0) {
  std::vector<std::uint32_t> out(n);
  const std::uint32_t count = code_count(f);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t r = random_u64(test_seed(), stream, i);
    std::uint32_t c = static_cast<std::uint32_t>(r % count);
    const auto cls = classify(f, c);
    const bool special = cls == ValueClass::nan || cls == ValueClass::inf;
    if (special && int((r >> 40) % 1000) >= special_rate) c = 0;  // keep specials rare
    out[i] = c;
  }
  return out;
}

// Plain GEMM reference: fused_block along K, chunks promoted into an FP32 sum; scales at each
// chunk (DeepGEMM's fmaf) or, for cuBLASLt's tensor and row scales, once after K; then the
// bias and the output rounding.
std::vector<float> reference_gemm(const GemmSpec& s, const Operand& A, const Operand& B,
                                  const std::vector<float>& C, const std::vector<float>& sa,
                                  const std::vector<float>& sb,
                                  const std::vector<float>& bias = {}) {
  const int M = A.rows, N = B.rows, K = A.cols;
  const int chunk = s.promote_every ? s.promote_every : K;
  const int g = s.model.group ? step_products(s.model) : chunk;
  const ScaleShapes sh = scale_shapes(s, M, N, K);
  const int bs = s.scaling == Scaling::block ? s.block : s.scaling == Scaling::mx ? s.mx_block : 0;
  const bool after_k = s.order == ScaleOrder::cublaslt &&
                       (s.scaling == Scaling::tensor || s.scaling == Scaling::row);
  std::vector<float> D(std::size_t(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float main = 0.0f;
      for (int k0 = 0; k0 < K; k0 += chunk) {
        double acc = 0.0;
        if (k0 == 0 && !C.empty()) {
          acc = C[m * N + n];
          if (s.model.output.exponent_bits != 8)  // an fp16 accumulator holds C in fp16
            acc = quantize(acc, s.model.output, {Rounding::rne, Overflow::nonsat, 32});
        }
        for (int k = k0; k < std::min(K, k0 + chunk); k += g) {
          const int len = std::min(g, std::min(K, k0 + chunk) - k);
          std::vector<double> a(len), b(len);
          std::vector<int> ea(len), eb(len);
          for (int i = 0; i < len; ++i) {
            a[i] = A.value[m * K + k + i];
            b[i] = B.value[n * K + k + i];
            ea[i] = A.exponent[m * K + k + i];
            eb[i] = B.exponent[n * K + k + i];
          }
          acc = fused_block(s.model, a.data(), ea.data(), b.data(), eb.data(), len, acc);
        }
        const float part = static_cast<float>(acc);
        if (s.scaling == Scaling::none || after_k) {
          main += part;
        } else {
          const int blk = bs ? k0 / bs : 0;
          const std::size_t arow = sh.a_rows == 1 ? 0 : m;
          const std::size_t brow = sh.b_rows == 1 ? 0 : (s.scaling == Scaling::block ? n / s.block : n);
          const float x = sa[arow * sh.a_cols + blk], y = sb[brow * sh.b_cols + blk];
          main = std::fmaf(x * y, part, main);
        }
      }
      if (after_k) {
        const float x = sa[sh.a_rows == 1 ? 0 : m], y = sb[sh.b_rows == 1 ? 0 : n];
        if (s.scaling == Scaling::tensor) {
          const float xy = x * y;
          main = main * xy;
        } else {
          main = main * y;
          main = main * x;
        }
      }
      if (!bias.empty()) main = main + bias[n];
      D[m * N + n] = static_cast<float>(quantize(main, s.out_type, {Rounding::rne, Overflow::nonsat, 32}));
    }
  return D;
}

std::vector<float> random_scales(std::size_t n, std::uint64_t stream) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t r = random_u64(test_seed(), stream, i);
    v[i] = std::ldexp(1.0f + float(r % 1024) / 1024.0f, int((r >> 20) % 16) - 8);
  }
  return v;
}

void check_engine(const GemmSpec& s, const Operand& A, const Operand& B, const std::vector<float>& C,
                  const std::vector<float>& sa, const std::vector<float>& sb) {
  std::vector<float> D(std::size_t(A.rows) * B.rows);
  gemm(s, A, B, C, sa, sb, D);
  const auto want = reference_gemm(s, A, B, C, sa, sb);
  int bad = 0;
  for (std::size_t i = 0; i < D.size(); ++i) {
    if (same_bits(D[i], want[i])) continue;
    if (bad++ < 3)
      UNSCOPED_INFO(fmt::format("seed={} model={} a={} b={} K={} promote={} scaling={} ({}, {}) => "
                                "got {:08x} want {:08x}",
                                test_seed(), s.model.name, A.format.name, B.format.name, A.cols,
                                s.promote_every, to_string(s.scaling), i / B.rows, i % B.rows,
                                bits(D[i]), bits(want[i])));
  }
  CHECK(bad == 0);
}

Operand random_operand(const FormatSpec& f, int rows, int cols, std::uint64_t stream, int special = 0) {
  const auto codes = random_codes(f, std::size_t(rows) * cols, stream, special);
  return decode_operand(f, rows, cols, std::span<const std::uint32_t>(codes));
}

}  // namespace

TEST_CASE("engine equals the reference step over a grid of models", "[unit][differential]") {
  const std::vector<std::string> models = test::model_grid();

  const int M = 3, N = 4, K = 128;
  std::uint64_t stream = 100;
  for (const auto& name : models) {
    GemmSpec s;
    s.model = accumulator_by_name(name);
    if (s.model.block_scale) continue;  // the next test case
    s.out_type = format_by_name("fp32");
    const int g = s.model.group ? step_products(s.model) : 1;
    for (const char* fa : {"e4m3", "e5m2"}) {
      const Operand A = random_operand(format_by_name(fa), M, K, stream++);
      const Operand B = random_operand(format_by_name("e5m2"), N, K, stream++);
      std::vector<float> C(M * N);
      for (std::size_t i = 0; i < C.size(); ++i)
        C[i] = i % 4 == 0 ? 0.0f
                          : std::ldexp(float(random_u64(test_seed(), stream, i) % 2001) - 1000.0f, -6);
      ++stream;
      for (int promote : {0, 64}) {
        if (promote % g) continue;
        s.promote_every = promote;
        check_engine(s, A, B, {}, {}, {});
        check_engine(s, A, B, C, {}, {});
      }
    }
  }
}

// Block-scaled models (scales inside the MMA): gemm() equals chained_dot with each element's
// scales, for every preset that has them, on FP8/FP6/FP4 operands and every scale code.
// Scales near 1 only: power-of-two scales fold into the operands (the fast paths); every
// code (2^-127, 2^127, NaN): scaled elements leave fp32, so the reference step runs; low
// scales (UE4M3's lowest codes: zero, subnormals; UE8M0 2^-95..2^-66, whose products bring
// the terms near the zero exponent and fp32's subnormals): zero terms and clamped scale
// exponents, which group sums align on. A quarter of C is zero (a zero term).
TEST_CASE("block-scaled models: engine equals chained_dot with the scales",
          "[unit][differential]") {
  const int M = 8, N = 8, K = 256;
  std::uint64_t stream = 9000;
  for (const auto& p : accumulator_presets()) {
    if (!p.block_scale) continue;
    GemmSpec s;
    s.model = p;
    use_model_block_scales(s);
    s.out_type = format_by_name("fp32");
    const FormatSpec& sf = p.block_scale->format;
    const bool fp4 = p.group_sum > 1;  // group sums: e2m1 operands (mxf4, mxf4nvf4)
    for (const int every_code : {0, 1, 2})
    for (const char* fa : {"e4m3", "e5m2", "e3m2", "e2m3", "e2m1"}) {
      if (fp4 && std::string(fa) != "e2m1") continue;
      const Operand A = random_operand(format_by_name(fa), M, K, stream++);
      const Operand B = random_operand(format_by_name(fp4 ? "e2m1" : "e5m2"), N, K, stream++);
      const ScaleShapes sh = scale_shapes(s, M, N, K);
      auto scale_codes = [&](std::size_t n) {
        std::vector<float> v(n);
        for (std::size_t i = 0; i < n; ++i) {
          // Scales near 1 mostly (so products stay in range), every code sometimes.
          const std::uint64_t r = random_u64(test_seed(), stream, i);
          const std::uint32_t c =
              every_code == 2 && r % 2 == 0
                  ? (sf.mantissa_bits == 0 ? encode(std::ldexp(1.0, -66 - int(r >> 8) % 30), sf)
                                           : std::uint32_t(r >> 8) % 16)  // lowest codes
              : every_code == 1 && r % 8 == 0 ? std::uint32_t(r >> 8) % code_count(sf)
                                              : encode(std::ldexp(1.0, int(r >> 8) % 9 - 4), sf);
          v[i] = float(decode(sf, c));
        }
        ++stream;
        return v;
      };
      const auto sa = scale_codes(sh.a_rows * sh.a_cols), sb = scale_codes(sh.b_rows * sh.b_cols);
      std::vector<float> C(M * N);
      for (std::size_t i = 0; i < C.size(); ++i)
        C[i] = i % 4 == 0 ? 0.0f
                          : std::ldexp(float(random_u64(test_seed(), stream, i) % 2001) - 1000.0f, -6);
      ++stream;
      std::vector<float> D(M * N);
      gemm(s, A, B, C, sa, sb, D);
      int bad = 0;
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
          std::vector<double> a(K), b(K), xa(K), xb(K);
          for (int k = 0; k < K; ++k) {
            a[k] = A.value[m * K + k];
            b[k] = B.value[n * K + k];
            xa[k] = sa[m * sh.a_cols + k / s.mx_block];
            xb[k] = sb[n * sh.b_cols + k / s.mx_block];
          }
          const float want = static_cast<float>(chained_dot(p, A.format, a.data(), B.format,
                                                            b.data(), K, C[m * N + n],
                                                            xa.data(), xb.data()));
          if (same_bits(D[m * N + n], want)) continue;
          if (bad++ < 3)
            UNSCOPED_INFO(fmt::format("seed={} model={} a={} every_code={} ({}, {}): engine {:#x}, chained_dot {:#x}",
                                      test_seed(), p.name, fa, every_code, m, n, bits(D[m * N + n]), bits(want)));
        }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("engine handles specials, wide formats and every scaling", "[unit][differential]") {
  const int M = 4, N = 5, K = 256;
  std::uint64_t stream = 5000;
  for (const char* model : {"hopper-wgmma", "hopper-wgmma-f16", "ada-fp8", "blackwell-fp8",
                            "hopper-mma-sync", "hopper-mma-sync-f16", "triton-mma-f16", "fp32", "exact"}) {
    GemmSpec s;
    s.model = accumulator_by_name(model);
    s.out_type = format_by_name("fp32");
    // NaN, Inf and overflow: E5M2 has Inf; large values overflow an fp16 accumulator.
    const Operand A = random_operand(format_by_name("e5m2"), M, K, stream++, 30);
    const Operand B = random_operand(format_by_name("e5m2"), N, K, stream++, 30);
    check_engine(s, A, B, {}, {}, {});
    // Formats wider than 8 bits and narrower than FP8 (engine's double and table paths).
    for (const char* f : {"e5m6", "fp16", "bf16", "e2m1", "e3m2", "e2m3"}) {
      const Operand X = random_operand(format_by_name(f), M, K, stream++);
      const Operand Y = random_operand(format_by_name(f), N, K, stream++);
      check_engine(s, X, Y, {}, {}, {});
    }
    // Scalings, both scale orders, all output types.
    const Operand X = random_operand(format_by_name("e4m3"), M, K, stream++);
    const Operand Y = random_operand(format_by_name("e4m3"), N, K, stream++);
    for (Scaling sc : {Scaling::tensor, Scaling::row, Scaling::block, Scaling::mx}) {
      for (ScaleOrder order : {ScaleOrder::deepgemm, ScaleOrder::cublaslt}) {
        for (const char* out : {"fp32", "bf16", "fp16"}) {
          s.scaling = sc;
          s.order = order;
          s.block = 64;
          s.out_type = format_by_name(out);
          s.promote_every = sc == Scaling::mx ? 32 : 64;
          if (step_products(s.model) > 32 && sc == Scaling::mx) continue;
          if (s.model.group == 0) s.promote_every = sc == Scaling::mx ? 32 : 64;
          const ScaleShapes sh = scale_shapes(s, M, N, K);
          const auto sa = random_scales(sh.a_rows * sh.a_cols, stream++);
          const auto sb = random_scales(sh.b_rows * sh.b_cols, stream++);
          check_engine(s, X, Y, {}, sa, sb);
        }
      }
    }
  }
}

// Split-K written out: cuBLASLt's slices (ceil(K/S) rounded up to 128) as GEMMs of their own
// on copies of the operands' columns, summed in fp32 in slice order, then the epilogue.
TEST_CASE("split-K slices reduce in fp32 before the epilogue; bias before the rounding",
          "[unit][differential]") {
  const int M = 3, N = 4, K = 640;
  std::uint64_t stream = 7000;
  const Operand X = random_operand(format_by_name("e4m3"), M, K, stream++);
  const Operand Y = random_operand(format_by_name("e4m3"), N, K, stream++);
  auto cols = [](const Operand& op, int k0, int len) {
    std::vector<std::uint32_t> codes;
    for (int r = 0; r < op.rows; ++r)
      for (int k = k0; k < k0 + len; ++k)
        codes.push_back(encode(op.value[std::size_t(r) * op.cols + k], op.format,
                               {Rounding::rne, Overflow::nonsat, 32}));
    return decode_operand(op.format, op.rows, len, std::span<const std::uint32_t>(codes));
  };
  std::vector<float> bias(N);
  for (int n = 0; n < N; ++n) bias[n] = std::ldexp(float(n) - 1.5f, n);
  for (int S : {1, 2, 3, 5, 7})
    for (Scaling sc : {Scaling::none, Scaling::tensor, Scaling::row, Scaling::block})
      for (const char* out : {"fp32", "bf16"})
        for (bool with_bias : {false, true}) {
          GemmSpec s;
          s.model = accumulator_by_name("hopper-wgmma");
          s.promote_every = 128;
          s.scaling = sc;
          s.block = 128;
          s.order = ScaleOrder::cublaslt;
          s.out_type = format_by_name(out);
          s.split_k = S;
          const ScaleShapes sh = scale_shapes(s, M, N, K);
          const auto sa = random_scales(sh.a_rows * sh.a_cols, stream++);
          const auto sb = random_scales(sh.b_rows * sh.b_cols, stream++);
          const std::vector<float> b = with_bias ? bias : std::vector<float>{};
          std::vector<float> D(std::size_t(M) * N);
          gemm(s, X, Y, {}, sa, sb, D, b);
          // The reference: slices of 128-aligned ceil(K/S), fp32 partial GEMMs, then scales
          // after K (tensor, row), bias and rounding by reference_gemm's own epilogue on K=0.
          const int per = (K + S - 1) / S, slice = std::min(K, (per + 127) / 128 * 128);
          GemmSpec t = s;
          t.split_k = 1;
          t.out_type = format_by_name("fp32");
          const bool after = sc == Scaling::tensor || sc == Scaling::row;
          if (after) t.scaling = Scaling::none;
          std::vector<float> acc(D.size());
          for (int k0 = 0; k0 < K; k0 += slice) {
            const int len = std::min(slice, K - k0);
            std::vector<float> xa, xb;
            if (t.scaling == Scaling::block)
              for (std::size_t r = 0; r < sh.a_rows + sh.b_rows; ++r)
                for (int kb = k0 / 128; kb < (k0 + len) / 128; ++kb)
                  (r < sh.a_rows ? xa : xb).push_back(
                      r < sh.a_rows ? sa[r * sh.a_cols + kb] : sb[(r - sh.a_rows) * sh.b_cols + kb]);
            const auto part = reference_gemm(t, cols(X, k0, len), cols(Y, k0, len), {}, xa, xb);
            for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = k0 == 0 ? part[i] : acc[i] + part[i];
          }
          for (int m = 0; m < M; ++m)
            for (int n = 0; n < N; ++n) {
              float v = acc[std::size_t(m) * N + n];
              if (after) {
                const float x = sa[sh.a_rows == 1 ? 0 : m], y = sb[sh.b_rows == 1 ? 0 : n];
                if (sc == Scaling::tensor) {
                  const float xy = x * y;
                  v = v * xy;
                } else {
                  v = v * y;
                  v = v * x;
                }
              }
              if (with_bias) v = v + bias[n];
              const float want = static_cast<float>(
                  quantize(v, s.out_type, {Rounding::rne, Overflow::nonsat, 32}));
              INFO(fmt::format("S={} scaling={} out={} bias={} ({}, {})", S, to_string(sc), out,
                               with_bias, m, n));
              CHECK(same_bits(D[std::size_t(m) * N + n], want));
            }
        }
  GemmSpec s;
  s.model = accumulator_by_name("hopper-wgmma");
  s.split_k = 0;
  std::vector<float> D(std::size_t(M) * N);
  CHECK_THROWS_WITH(gemm(s, X, Y, {}, {}, {}, D), Catch::Contains("split_k = 0"));
  s.split_k = 2;
  CHECK_THROWS_WITH(gemm(s, X, Y, {}, {}, {}, D, std::vector<float>(3)),
                    Catch::Contains("bias has 3 values, expected N = 4"));
  std::vector<float> short_d(3);
  CHECK_THROWS_WITH(gemm(s, X, Y, {}, {}, {}, short_d), Catch::Contains("D has 3 elements"));
  s.scaling = Scaling::row;
  s.order = ScaleOrder::cublaslt;
  CHECK_THROWS_WITH(gemm(s, X, Y, {}, std::vector<float>(M), std::vector<float>(1), D),
                    Catch::Contains("B scales has 1 elements, expected 4"));
}

TEST_CASE("exact model equals the Boost exact reference", "[unit][differential]") {
  GemmSpec s;
  s.model = accumulator_by_name("exact");
  s.out_type = format_by_name("fp32");
  const int M = 3, N = 3;
  std::uint64_t stream = 9000;
  for (int K : {1, 32, 1000, 4096}) {
    for (const char* f : {"e4m3", "e5m2"}) {
      const FormatSpec fs = format_by_name(f);
      const Operand A = random_operand(fs, M, K, stream++), B = random_operand(fs, N, K, stream++);
      std::vector<double> a(A.value.begin(), A.value.end()), b(B.value.begin(), B.value.end());
      std::vector<float> C(M * N);
      for (std::size_t i = 0; i < C.size(); ++i)
        C[i] = std::ldexp(1.0f + float(i), int(random_u64(test_seed(), stream, i) % 40) - 20);
      ++stream;
      const std::vector<double> Cd(C.begin(), C.end());
      const auto want = exact_gemm(M, N, K, a, b, Cd, format_by_name("fp32"));
      std::vector<float> D(M * N);
      gemm(s, A, B, C, {}, {}, D);
      for (int i = 0; i < M * N; ++i) {
        INFO(fmt::format("seed={} {} K={} ({}) => got {:08x} want {:08x}", test_seed(), f, K, i,
                         bits(D[i]), bits(float(want[i]))));
        CHECK(bits(D[i]) == bits(float(want[i])));
      }
    }
  }
  // Adversarial: total cancellation leaves exactly C; a tiny C survives a huge sum's
  // cancellation (exact: 448*448 - 448*448 + 2^-20 = 2^-20).
  const FormatSpec e4m3 = format_by_name("e4m3");
  const std::vector<double> a = {448, 448, 0.001953125}, b = {448, -448, 0.001953125};
  const Operand A = operand_from_values(e4m3, 1, 3, a), B = operand_from_values(e4m3, 1, 3, b);
  s.model = accumulator_by_name("custom:group=3,frac=exact,out=24,outround=rne");
  std::vector<float> D(1);
  gemm(s, A, B, std::vector<float>{0x1p-30f}, {}, {}, D);
  CHECK(D[0] == 0x1p-18f + 0x1p-30f);
}

TEST_CASE("very many fraction bits converge to the exact result", "[unit]") {
  GemmSpec s;
  s.out_type = format_by_name("fp32");
  GemmSpec exact = s;
  exact.model = accumulator_by_name("exact");
  std::uint64_t stream = 12000;
  const FormatSpec e4m3 = format_by_name("e4m3");
  // E4M3 products span 2^-18 .. 2^18, so 32 terms fit 62 fraction bits: frac=62 is exact
  // within a group and differs from exact only by the per-group output rounding.
  const Operand A = random_operand(e4m3, 8, 32, stream++), B = random_operand(e4m3, 8, 32, stream++);
  std::vector<float> want(64), got(64);
  gemm(exact, A, B, {}, {}, {}, want);
  s.model = accumulator_by_name("custom:group=32,frac=62,out=24,outround=rne");
  gemm(s, A, B, {}, {}, {}, got);
  for (int i = 0; i < 64; ++i) CHECK(bits(got[i]) == bits(want[i]));
  // The error against exact shrinks as fraction bits grow (over many dot products).
  const Operand X = random_operand(e4m3, 64, 1024, stream++), Y = random_operand(e4m3, 64, 1024, stream++);
  std::vector<float> ref(64 * 64);
  gemm(exact, X, Y, {}, {}, {}, ref);
  double previous = INFINITY;
  for (int frac : {8, 13, 20, 30}) {
    s.model = accumulator_by_name(fmt::format("custom:group=32,frac={},out=24,outround=rne", frac));
    std::vector<float> d(64 * 64);
    gemm(s, X, Y, {}, {}, {}, d);
    double err = 0;
    for (int i = 0; i < 64 * 64; ++i) err += std::fabs(double(d[i]) - ref[i]);
    INFO("frac=" << frac << " total abs error " << err);
    CHECK(err < previous);
    previous = err;
  }
}

TEST_CASE("product order inside a group and the thread count do not matter", "[unit]") {
  GemmSpec s;
  s.model = accumulator_by_name("hopper-wgmma");
  s.out_type = format_by_name("fp32");
  const FormatSpec e4m3 = format_by_name("e4m3");
  const int T = 200, K = 32;
  const auto a = random_codes(e4m3, T * K, 13000), b = random_codes(e4m3, T * K, 13001);
  std::vector<std::uint32_t> pa(a), pb(b);
  for (int t = 0; t < T; ++t)  // the same permutation applied to a and b of each row
    for (int i = K - 1; i > 0; --i) {
      const int j = int(random_u64(test_seed(), 13002, std::size_t(t) * K + i) % (i + 1));
      std::swap(pa[t * K + i], pa[t * K + j]);
      std::swap(pb[t * K + i], pb[t * K + j]);
    }
  const auto op = [&](const std::vector<std::uint32_t>& c) {
    return decode_operand(e4m3, T, K, std::span<const std::uint32_t>(c));
  };
  std::vector<float> d1(T), d2(T), d3(T);
  batched_dot(s, op(a), op(b), {}, {}, {}, d1);
  batched_dot(s, op(pa), op(pb), {}, {}, {}, d2);
  for (int t = 0; t < T; ++t) CHECK(bits(d1[t]) == bits(d2[t]));

  const Operand A = random_operand(e4m3, 37, 512, 13003), B = random_operand(e4m3, 29, 512, 13004);
  s.promote_every = 128;
  std::vector<float> one(37 * 29), many(37 * 29);
  s.threads = 1;
  gemm(s, A, B, {}, {}, {}, one);
  s.threads = 7;
  gemm(s, A, B, {}, {}, {}, many);
  for (std::size_t i = 0; i < one.size(); ++i) CHECK(bits(one[i]) == bits(many[i]));
}

TEST_CASE("bad GEMM specs are rejected with a message", "[unit]") {
  GemmSpec s;
  s.model = accumulator_by_name("hopper-wgmma");
  s.a_format = s.b_format = format_by_name("e4m3");
  s.out_type = format_by_name("fp32");
  CHECK_THROWS_WITH(validate(s, 4, 4, 40), Catch::Contains("not a multiple"));
  s.promote_every = 48;
  CHECK_THROWS_WITH(validate(s, 4, 4, 64), Catch::Contains("promote_every = 48"));
  s.promote_every = 0;
  s.scaling = Scaling::block;
  CHECK_THROWS_WITH(validate(s, 4, 4, 256), Catch::Contains("needs promote_every"));
  s.scaling = Scaling::none;
  s.out_type = format_by_name("e4m3");
  CHECK_THROWS_WITH(validate(s, 4, 4, 64), Catch::Contains("not f32, bf16 or f16"));
  const std::vector<std::uint8_t> codes(10);
  CHECK_THROWS_WITH(decode_operand(format_by_name("e4m3"), 3, 4, codes), Catch::Contains("is not 3 x 4"));
  CHECK_THROWS_WITH(operand_from_values(format_by_name("e4m3"), 1, 1, std::vector<double>{0.3}),
                    Catch::Contains("not representable"));
  // Combinations whose fields would be ignored (accumulator.hpp) are rejected.
  CHECK_THROWS_WITH(accumulator_by_name("custom:group=8,block=16,c=exact"), Catch::Contains("needs c=add"));
  CHECK_THROWS_WITH(accumulator_by_name("custom:group=8,interleave=1"), Catch::Contains("interleave needs"));
}
