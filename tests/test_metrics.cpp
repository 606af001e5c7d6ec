// test_metrics: per-trial error measures against hand-computed values, exact_dot_fast against
// Boost's ExactSum, quantiles and seeded bootstrap summaries.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "exact.hpp"
#include "format.hpp"
#include "metrics.hpp"
#include "rng.hpp"
#include "test_seed.hpp"

using namespace fp8sim;

namespace {
const double kInf = std::numeric_limits<double>::infinity();
}  // namespace

TEST_CASE("snr_db, rel_err, ulp_err on hand-computable cases", "[metrics]") {
  // ref 1, error 2^-10: 20 log10(2^10) = 200 log10(2) dB.
  CHECK(snr_db(1.0, 1.0 + 0x1p-10) == Approx(200.0 * std::log10(2.0)).epsilon(1e-14));
  CHECK(snr_db(-4.0, -3.6) == Approx(20.0).epsilon(1e-12));   // |ref/err| = 10
  CHECK(snr_db(3.0, 3.0) == kInf);
  CHECK(snr_db(0.0, 1e-30) == -kInf);
  CHECK(rel_err(8.0, 6.0) == 0.25);
  CHECK(rel_err(0.0, 0.0) == 0.0);
  CHECK(rel_err(0.0, 1.0) == kInf);
  CHECK(ulp32(1.0) == 0x1p-23);
  CHECK(ulp32(1.9999) == 0x1p-23);
  CHECK(ulp32(-0.75) == 0x1p-24);
  CHECK(ulp32(0x1p-130) == 0x1p-149);  // fp32 subnormal range: fixed spacing 2^-149
  CHECK(ulp32(0x1p-126) == 0x1p-149);
  CHECK(ulp32(0.0) == 0x1p-149);
  CHECK(ulp_err(1.0, 1.0 + 0x1p-22) == 2.0);
  CHECK(ulp_err(-2.0, -2.0 - 3 * 0x1p-22) == 3.0);
}

TEST_CASE("exact_dot_fast matches ExactSum bit for bit", "[metrics][differential]") {
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

TEST_CASE("quantile_sorted is numpy's linear (type 7) quantile", "[metrics]") {
  const std::vector<double> v{1, 2, 3, 4};
  CHECK(quantile_sorted(v, 0.5) == 2.5);
  CHECK(quantile_sorted(v, 0.0) == 1.0);
  CHECK(quantile_sorted(v, 1.0) == 4.0);
  CHECK(quantile_sorted(v, 0.05) == Approx(1.15).epsilon(1e-15));  // numpy: 1.15
  const std::vector<double> w{1, 2, kInf};
  CHECK(quantile_sorted(w, 0.5) == 2.0);
  CHECK(quantile_sorted(w, 1.0) == kInf);
}

TEST_CASE("summarize: moments, infinities and a seeded bootstrap", "[metrics]") {
  const std::uint64_t seed = test_seed();
  std::vector<double> v(400);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = double(i % 20);  // mean 9.5, median 9.5
  const Summary s = summarize(v, seed);
  CHECK(s.n == 400);
  CHECK(s.mean == 9.5);
  CHECK(s.median == 9.5);
  CHECK(s.min == 0.0);
  CHECK(s.max == 19.0);
  CHECK(s.std == Approx(std::sqrt(33.25 * 400.0 / 399.0)).epsilon(1e-12));
  CHECK(s.mean_lo < 9.5);
  CHECK(s.mean_hi > 9.5);
  // The CI of the mean is about +-1.96 sigma/sqrt(n) = +-0.56: loosely that wide.
  CHECK(s.mean_hi - s.mean_lo == Approx(2 * 1.96 * s.std / 20.0).epsilon(0.25));
  // Same seed, same CI; another seed, another resampling.
  const Summary s2 = summarize(v, seed);
  CHECK(s2.mean_lo == s.mean_lo);
  CHECK(s2.median_hi == s.median_hi);
  // Constant data: every statistic is the constant.
  const std::vector<double> c(50, 3.25);
  const Summary sc = summarize(c, seed);
  CHECK(sc.mean_lo == 3.25);
  CHECK(sc.median_hi == 3.25);
  CHECK(sc.std == 0.0);
  // An exact trial (+inf dB) makes the mean +inf and is counted; the median stays finite.
  std::vector<double> x{10, 20, 30, kInf};
  const Summary si = summarize(x, seed, 100);
  CHECK(si.n_inf == 1);
  CHECK(si.mean == kInf);
  CHECK(si.median == 25.0);
  const std::vector<double> bad{1.0, std::nan("")};
  CHECK_THROWS_AS(summarize(bad, seed), std::invalid_argument);
}
