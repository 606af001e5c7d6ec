// test_gemm_prefixes: gemm_prefixes() (every prefix of K read off one pass) against gemm() run
// on each prefix cut with slice_k(), bit for bit, over every preset model, formats, promotion
// intervals, scalings, output types, C and special values. Seed: FP8SIM_SEED (default 1).
// Under the sanitizers (sanitized.hpp) gemm_prefixes still reads every prefix off its one pass
// and every result is compared with gemm() on the whole K, but gemm() runs on every 8th prefix
// and on those at and beside each multiple of 32 only (48 of 256): build/ compares them all.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdlib>

#include "base/bits.hpp"
#include "io/capture.hpp"
#include "gemm/gemm.hpp"
#include "base/rng.hpp"
#include "sanitized.hpp"

using namespace fp8sim;

namespace {

std::uint64_t seed() {
  const char* env = std::getenv("FP8SIM_SEED");
  return env ? std::strtoull(env, nullptr, 0) : 1;
}

}  // namespace

TEST_CASE("gemm_prefixes equals gemm on every prefix of K", "[unit][differential]") {
  constexpr int M = 3, N = 2, K = 256;
  fmt::print("test_gemm_prefixes: seed {} (set FP8SIM_SEED to change)\n", seed());
  std::uint64_t stream = 0;
  long prefixes = 0;
  for (const AccumulatorSpec& model : accumulator_presets())
    for (const char* fmt_name : {"e4m3", "e5m2"})
      for (const int promote : {0, 32, 128})
        for (const Scaling scaling : {Scaling::none, Scaling::row, Scaling::block, Scaling::mx})
          for (const char* out : {"fp32", "fp16"}) {
            GemmSpec s;
            s.a_format = s.b_format = format_by_name(fmt_name);
            s.model = model;
            s.promote_every = promote;
            s.scaling = scaling;
            s.out_type = format_by_name(out);
            s.threads = 1;  // 3 x 2 outputs: one thread (results never depend on it)
            try {
              validate(s, M, N, K);
            } catch (const std::invalid_argument&) {
              continue;  // e.g. MX scales with chunks longer than 32
            }
            ++stream;
            std::vector<std::uint8_t> a(M * K), b(N * K);
            for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::uint8_t(random_u64(seed(), stream, i));
            for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::uint8_t(random_u64(seed(), stream, 1000 + i));
            if (stream % 3 == 0) a[5] = 0x7f;  // a NaN in row 0 (e4m3 NaN, e5m2 NaN)
            std::vector<float> c(M * N);
            for (std::size_t i = 0; i < c.size(); ++i)
              c[i] = float(to_unit_double(random_u64(seed(), stream, 2000 + i)) - 0.5) * 64;
            const ScaleShapes sh = scale_shapes(s, M, N, K);
            std::vector<float> sa(sh.a_rows * sh.a_cols), sb(sh.b_rows * sh.b_cols);
            for (std::size_t i = 0; i < sa.size(); ++i) sa[i] = std::ldexp(1.0f, int(random_u64(seed(), stream, 3000 + i) % 9) - 4);
            for (std::size_t i = 0; i < sb.size(); ++i) sb[i] = std::ldexp(1.0f, int(random_u64(seed(), stream, 4000 + i) % 9) - 4);
            std::vector<int> ks;
            for (int k = 1; k <= K; ++k) {
              try {
                validate(s, M, N, k);
                ks.push_back(k);
              } catch (const std::invalid_argument&) {
              }
            }
            const Operand A = decode_operand(s.a_format, M, K, a), B = decode_operand(s.b_format, N, K, b);
            std::vector<float> d(M * N), dp(ks.size() * M * N);
            gemm_prefixes(s, A, B, c, sa, sb, ks, d, dp);
            std::vector<float> want(M * N);
            gemm(s, M, N, K, a, b, c, sa, sb, want);
            for (int i = 0; i < M * N; ++i) REQUIRE(same_bits(d[i], want[i]));
            for (std::size_t p = 0; p < ks.size(); ++p) {
              if (test::kSanitized && ks[p] % 8 != 0 && (ks[p] + 1) % 32 > 2) continue;
              const KSlice cut = slice_k(s, M, N, K, a, b, sa, sb, ks[p]);
              gemm(s, M, N, ks[p], cut.a, cut.b, c, cut.sa, cut.sb, want);
              for (int i = 0; i < M * N; ++i)
                if (!same_bits(dp[p * M * N + i], want[i]))  // the message only on failure
                  FAIL(fmt::format("{} {} promote={} {} out={} k={} i={} => got {} want {}",
                                   model.name, fmt_name, promote, to_string(scaling), out, ks[p],
                                   i, hex_bits(dp[p * M * N + i]), hex_bits(want[i])));
              ++prefixes;
            }
          }
  INFO(prefixes << " prefixes compared");
  CHECK(prefixes > (test::kSanitized ? 1500 : 10000));
}

TEST_CASE("gemm_prefixes rejects prefixes that do not increase or exceed K", "[unit]") {
  GemmSpec s;
  s.a_format = s.b_format = format_by_name("e4m3");
  s.model = accumulator_by_name("hopper-wgmma");
  s.out_type = format_by_name("fp32");
  const std::vector<std::uint8_t> a(64, 0x38);
  const Operand A = decode_operand(s.a_format, 1, 64, a);
  std::vector<float> d(1), dp(2);
  for (const std::vector<int>& bad : {std::vector<int>{64, 32}, std::vector<int>{32, 96}, std::vector<int>{16, 32}})
    CHECK_THROWS_AS(gemm_prefixes(s, A, A, {}, {}, {}, bad, d, dp), std::invalid_argument);
}
