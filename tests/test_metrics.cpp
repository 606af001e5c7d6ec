// test_metrics: per-trial error measures against hand-computed values, quantiles and seeded
// bootstrap summaries.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <vector>

#include "analysis/metrics.hpp"
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
