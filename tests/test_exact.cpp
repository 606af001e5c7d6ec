// test_exact: exact_dot_fast against exact_dot (Boost's ExactSum) bit for bit on seeded
// random dot products, and on hand-worked sums that round at the last bit.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "accumulator/exact.hpp"
#include "format/format.hpp"
#include "base/rng.hpp"
#include "test_seed.hpp"

using namespace fp8sim;

namespace {
const double kInf = std::numeric_limits<double>::infinity();
}  // namespace

TEST_CASE("exact_dot_fast matches ExactSum bit for bit", "[exact][differential]") {
  const std::uint64_t seed = test_seed();
  const FormatSpec fp32 = format_by_name("fp32");
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(random_u64(seed, 100, trial) % 300);
    const int mode = trial % 4;
    std::vector<double> a(n), b(n);
    for (int i = 0; i < n; ++i) {
      const double u = to_unit_double(random_u64(seed, trial, 2 * i)) - 0.5;
      const double v = to_unit_double(random_u64(seed, trial, 2 * i + 1)) - 0.5;
      // Exponents spread over +-2^40 (mode 1), heavy cancellation (mode 2: pairs a, -a
      // with tiny perturbations), tiny products near 2^-140 (mode 3; ExactSum reaches 2^-320).
      const int ea = mode == 1 ? int(random_u64(seed, 7, i) % 80) - 40 : mode == 3 ? -70 : 0;
      const int eb = mode == 1 ? int(random_u64(seed, 8, i) % 80) - 40 : mode == 3 ? -70 : 0;
      a[i] = std::ldexp(u, ea);
      b[i] = std::ldexp(v, eb);
      if (mode == 2 && i % 2 == 1) {
        a[i] = -a[i - 1];
        b[i] = b[i - 1] * (1 + 0x1p-50 * (random_u64(seed, 9, i) % 5));
      }
    }
    const ExactSum e = exact_dot(a, b);
    const ExactDot f = exact_dot_fast(a, b);
    const double want_d = e.to_double();
    const auto want_f = static_cast<float>(decode(fp32, e.round_to(fp32)));
    INFO(fmt::format("exact_dot_fast seed={} trial={} n={} mode={} => got {:a} / {:a} want {:a} / {:a}",
                     seed, trial, n, mode, f.nearest_double, f.nearest_float, want_d, want_f));
    CHECK(std::bit_cast<std::uint64_t>(f.nearest_double) == std::bit_cast<std::uint64_t>(want_d));
    CHECK(std::bit_cast<std::uint32_t>(f.nearest_float) == std::bit_cast<std::uint32_t>(want_f));
  }
  // Ties: 1 + 2^-24 is exactly halfway between floats; 1 + 2^-24 + 2^-80 is not.
  const std::vector<double> one{1.0, 0x1p-24}, ones{1.0, 1.0};
  CHECK(exact_dot_fast(one, ones).nearest_float == 1.0f);
  const std::vector<double> three{1.0, 0x1p-24, 0x1p-80}, ones3{1.0, 1.0, 1.0};
  CHECK(exact_dot_fast(three, ones3).nearest_float == 1.0f + 0x1p-23f);
  CHECK(exact_dot_fast(three, ones3).nearest_double == 1.0 + 0x1p-24);
  // A tie above an odd float rounds up to the even one: 1 + 2^-23 + 2^-24 -> 1 + 2^-22.
  const std::vector<double> odd{1.0, 0x1p-23, 0x1p-24};
  CHECK(exact_dot_fast(odd, ones3).nearest_float == 1.0f + 0x1p-22f);
  CHECK(exact_dot_fast(odd, ones3).nearest_double == 1.0 + 0x1p-23 + 0x1p-24);
  // Negative ties, and a double tie: 1 + 2^-53 ties to 1, 1 + 3 * 2^-53 to 1 + 2^-51.
  const std::vector<double> neg{-1.0, -0x1p-23, -0x1p-24};
  CHECK(exact_dot_fast(neg, ones3).nearest_float == -(1.0f + 0x1p-22f));
  const std::vector<double> d1{1.0, 0x1p-53}, d3{1.0, 0x1p-52, 0x1p-53};
  CHECK(exact_dot_fast(d1, ones).nearest_double == 1.0);
  CHECK(exact_dot_fast(d3, ones3).nearest_double == 1.0 + 0x1p-51);
  // Bad input is an error, not a wrong answer.
  const std::vector<double> inf{kInf};
  const std::vector<double> onev{1.0};
  CHECK_THROWS_AS(exact_dot_fast(inf, onev), std::domain_error);
}

TEST_CASE("exact_dot_nearest_double matches exact_dot_fast bit for bit", "[exact][differential]") {
  // Values of fp32 precision (as fp8sim analyze feeds it), lengths up to 4096, in modes that
  // take the verified compensated path (0, 1), that must fall back (2: cancellation down to
  // the last bits; 3: a sum that is exactly a tie between two doubles), and tiny products (4).
  const std::uint64_t seed = test_seed();
  int fallbacks_needed = 0;
  for (int trial = 0; trial < 500; ++trial) {
    const int n = 1 + static_cast<int>(random_u64(seed, 200, trial) % 4096);
    const int mode = trial % 5;
    std::vector<double> a(n), b(n);
    for (int i = 0; i < n; ++i) {
      const double u = float(to_unit_double(random_u64(seed, 1000 + trial, 2 * i)) - 0.5);
      const double v = float(to_unit_double(random_u64(seed, 1000 + trial, 2 * i + 1)) - 0.3);
      const int ea = mode == 1 ? int(random_u64(seed, 17, i) % 60) - 30 : mode == 4 ? -440 : 0;
      a[i] = std::ldexp(u, ea);
      b[i] = std::ldexp(v, mode == 4 ? -440 : 0);
      if (mode == 2 && i % 2 == 1) {
        a[i] = -a[i - 1];
        b[i] = b[i - 1] + std::ldexp(b[i - 1], -23) * double(random_u64(seed, 19, i) % 3);
      }
    }
    if (mode == 0 && trial % 10 == 5) {
      // Ill-conditioned (after Ogita, Rump & Oishi's GenDot): a first half with exponents
      // spread over 2^+-50, a second half whose products cancel the running sum down to its
      // last bits, so the compensated sum's error bound cannot decide and the fallback must.
      double run = 0;
      for (int i = 0; i < n; ++i) {
        const double u = float(to_unit_double(random_u64(seed, 3000 + trial, i)) + 0.5);
        const int e = i < n / 2 ? int(random_u64(seed, 21, i) % 100) - 50 : 50 - 100 * i / n;
        a[i] = std::ldexp(u, e);
        b[i] = i < n / 2 ? std::ldexp(float(to_unit_double(random_u64(seed, 23, i)) - 0.5), e)
                         : double(float(-run / a[i]));
        run = exact_dot_fast(std::span<const double>(a.data(), i + 1),
                             std::span<const double>(b.data(), i + 1)).nearest_double;
      }
      ++fallbacks_needed;
    }
    if (mode == 3 && n >= 2) {  // 1 + 2^-53 exactly: a tie, rounds to even (1)
      std::fill(a.begin(), a.end(), 0.0);
      a[0] = 1.0;
      b[0] = 1.0;
      a[1] = 0x1p-27;
      b[1] = 0x1p-26;
      ++fallbacks_needed;
    }
    const double want = exact_dot_fast(a, b).nearest_double;
    const double got = exact_dot_nearest_double(a, b);
    const double portable = exact_dot_nearest_double(a, b, /*simd=*/false);
    INFO(fmt::format("trial={} mode={} n={}", trial, mode, n));
    REQUIRE(std::bit_cast<std::uint64_t>(got) == std::bit_cast<std::uint64_t>(want));
    REQUIRE(std::bit_cast<std::uint64_t>(portable) == std::bit_cast<std::uint64_t>(want));
  }
  CHECK(fallbacks_needed > 0);
  CHECK(exact_dot_nearest_double(std::vector<double>{1.0, 0x1p-27}, std::vector<double>{1.0, 0x1p-26}) == 1.0);
  CHECK(exact_dot_nearest_double(std::vector<double>{1.0, 0x1p-27, 0x1p-80},
                                 std::vector<double>{1.0, 0x1p-26, 1.0}) == 1.0 + 0x1p-52);
  CHECK_THROWS_AS(exact_dot_nearest_double(std::vector<double>{kInf}, std::vector<double>{1.0}),
                  std::domain_error);
}
