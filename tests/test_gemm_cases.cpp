// test_gemm_cases: hand-worked adversarial dot products under hopper-wgmma.
//
// Each expected value is derived by hand in the comment beside it from the model's rule:
// one k32 step aligns the 32 products (exponent e_a+e_b, no renormalisation) and c to the
// largest exponent E, cuts every term toward zero to the grid 2^(E-13), sums exactly and
// cuts the sum to 14 significant bits. Each case runs through the fast engine (gemm) and the
// reference step (fused_step_exponents via chained_dot), which must both give it.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <limits>

#include "accumulator/accumulator.hpp"
#include "gemm/gemm.hpp"

using namespace fp8sim;

namespace {

float engine_dot(const char* model, const char* format, const std::vector<double>& a,
                 const std::vector<double>& b, float c) {
  const FormatSpec f = format_by_name(format);
  GemmSpec s;
  s.model = accumulator_by_name(model);
  s.out_type = format_by_name("fp32");
  const int K = static_cast<int>(a.size());
  const Operand A = operand_from_values(f, 1, K, a), B = operand_from_values(f, 1, K, b);
  float d = 0;
  gemm(s, A, B, std::vector<float>{c}, {}, {}, std::span<float>(&d, 1));
  return d;
}

// Checks the engine and the reference against the hand-derived value, bit for bit.
void expect(const char* what, const char* model, const char* format, const std::vector<double>& a,
            const std::vector<double>& b, float c, float want) {
  const float got = engine_dot(model, format, a, b, c);
  const FormatSpec f = format_by_name(format);
  const double ref = chained_dot(accumulator_by_name(model), f, a.data(), f, b.data(),
                                 static_cast<int>(a.size()), c);
  INFO(fmt::format("{}: {} {} c={} => engine {} reference {} want {}", what, model, format,
                   c, got, ref, want));
  if (std::isnan(want)) {
    CHECK(std::isnan(got));
    CHECK(std::isnan(ref));
  } else {
    CHECK(std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(want));
    CHECK(std::bit_cast<std::uint32_t>(static_cast<float>(ref)) == std::bit_cast<std::uint32_t>(want));
  }
}

std::vector<double> fill(double first, double rest, int k = 32) {
  std::vector<double> v(k, rest);
  v[0] = first;
  return v;
}

}  // namespace

TEST_CASE("one large product among many small ones", "[unit]") {
  // 1*1 sets E = 0, grid 2^-13. 31 products 2^-7 * 2^-7 = 2^-14 are below the grid: each is
  // cut to 0, so the sum is 1 (exact: 1 + 31*2^-14 = 1.00189...).
  expect("small terms vanish", "hopper-wgmma", "e4m3", fill(1, 0x1p-7), fill(1, 0x1p-7), 0, 1.0f);
  // Products 2^-6 * 2^-7 = 2^-13 sit on the grid: 1 + 31*2^-13 fits 14 bits exactly.
  expect("terms on the grid survive", "hopper-wgmma", "e4m3", fill(1, 0x1p-6), fill(1, 0x1p-7), 0,
         1.0f + 31 * 0x1p-13f);
  // The exact model keeps every term: 1 + 31*2^-14 rounded once to fp32 (exact).
  expect("exact keeps them", "exact", "e4m3", fill(1, 0x1p-7), fill(1, 0x1p-7), 0,
         1.0f + 31 * 0x1p-14f);
}

TEST_CASE("total cancellation", "[unit]") {
  std::vector<double> a(32), b(32);
  for (int i = 0; i < 32; ++i) {
    a[i] = (i % 2 ? -1 : 1) * 448.0;  // 448*448 - 448*448 + ... = 0
    b[i] = 448.0;
  }
  expect("pairs cancel to +0", "hopper-wgmma", "e4m3", a, b, 0, 0.0f);
  // The sum is +0 even when c is -0: the fused sum of opposite signs is +0.
  expect("-0 c still gives +0", "hopper-wgmma", "e4m3", a, b, -0.0f, 0.0f);
  // Cancellation with a tiny remainder: 448*448 - 448*448 + 2^-9*2^-9. 448 = 1.75*2^8, so
  // E = 8+8 = 16 (the product 3.0625*2^16 is not renormalised) and the grid is 2^3: the tiny
  // product is cut away before the cancellation happens, leaving 0.
  std::vector<double> x = {448, 448, 0x1p-9}, y = {448, -448, 0x1p-9};
  x.resize(32, 0.0);
  y.resize(32, 0.0);
  expect("tiny remainder lost", "hopper-wgmma", "e4m3", x, y, 0, 0.0f);
  expect("exact keeps the remainder", "exact", "e4m3", x, y, 0, 0x1p-18f);
}

TEST_CASE("subnormal products", "[unit]") {
  // 2^-9 is E4M3's smallest subnormal. Its alignment exponent is the format's minimum normal
  // exponent -6, so 2^-9 * 2^-9 aligns at E = -12 (not -18): grid 2^-25, and 32 products of
  // 2^-18 sum exactly to 2^-13.
  expect("subnormals sum exactly", "hopper-wgmma", "e4m3", fill(0x1p-9, 0x1p-9),
         fill(0x1p-9, 0x1p-9), 0, 0x1p-13f);
  // One product 1.75*2^-6 * 2^-6 (exponent -12, value 1.75*2^-12) with 31 subnormal products
  // 2^-18: E = -12, grid 2^-25, all kept: 1.75*2^-12 + 31*2^-18 = (112 + 31)*2^-18 fits.
  expect("normal and subnormal together", "hopper-wgmma", "e4m3", fill(0x1.cp-6, 0x1p-9),
         fill(0x1p-6, 0x1p-9), 0, 143 * 0x1p-18f);
  // With 1*1 present, E = 0 and grid 2^-13: the subnormal products are all cut away.
  expect("subnormals under a unit product", "hopper-wgmma", "e4m3", fill(1, 0x1p-9),
         fill(1, 0x1p-9), 0, 1.0f);
}

TEST_CASE("c far above or below the products", "[unit]") {
  const auto ones = fill(1, 1);
  // c = 2^20 sets E = 20, grid 2^7: the 32 unit products are cut to 0 (exact: 2^20 + 32).
  expect("c far above swallows the products", "hopper-wgmma", "e4m3", ones, ones, 0x1p20f, 0x1p20f);
  // c = 2^-20 is below the grid 2^-13 of E = 0: it is cut away and the sum is 32.
  expect("c far below is cut", "hopper-wgmma", "e4m3", ones, ones, 0x1p-20f, 32.0f);
  // c = 3*2^-13 is on the grid and kept, but 32 + 3*2^-13 has 14-bit grid 2^-8 at exponent 5:
  // the output cut drops it.
  expect("c kept then cut at the output", "hopper-wgmma", "e4m3", ones, ones, 0x1.8p-12f, 32.0f);
  // c = 1 adds exactly: 33.
  expect("c adds", "hopper-wgmma", "e4m3", ones, ones, 1.0f, 33.0f);
}

TEST_CASE("output keeps 14 significant bits, cut toward zero", "[unit]") {
  // 1 + 2^-13: E = 0, both on the grid; 14 bits at exponent 0 reach 2^-13: kept.
  expect("1 + 2^-13", "hopper-wgmma", "e4m3", fill(1, 0), fill(1, 0), 0x1p-13f, 1.0f + 0x1p-13f);
  // -1 with c = -2^-14: E = 0, c is below the grid 2^-13 and cut toward zero: -1.
  expect("negative cut toward zero", "hopper-wgmma", "e4m3", fill(-1, 0), fill(1, 0), -0x1p-14f,
         -1.0f);
}

TEST_CASE("special values and overflow", "[unit]") {
  const double inf = std::numeric_limits<double>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // E5M2 has Inf: Inf*0 is NaN; Inf*1 - Inf*1 is NaN; Inf*1 + finite is Inf.
  expect("inf times zero", "hopper-wgmma", "e5m2", fill(inf, 1), fill(0, 1), 0, nan);
  std::vector<double> a = fill(inf, 0), b = fill(1, 0);
  a[1] = -inf;
  b[1] = 1;
  expect("inf minus inf", "hopper-wgmma", "e5m2", a, b, 0, nan);
  expect("inf plus finite", "hopper-wgmma", "e5m2", fill(inf, 1), fill(1, 1), 0,
         std::numeric_limits<float>::infinity());
  // An FP16 accumulator overflows: 32 * 448*448 = 6422528 > 65504 gives +Inf.
  expect("fp16 accumulator overflows", "hopper-wgmma-f16", "e4m3", fill(448, 448),
         fill(448, 448), 0, std::numeric_limits<float>::infinity());
  // NaN in c propagates.
  expect("nan c", "hopper-wgmma", "e4m3", fill(1, 1), fill(1, 1), nan, nan);
}
