// metrics: per-trial errors, quantiles and bootstraps.
#include "analysis/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "format/format.hpp"
#include "base/rng.hpp"
#include "format/rounding.hpp"

namespace fp8sim {

double snr_db(double ref, double got) {
  const double err = got - ref;
  if (err == 0.0) return std::numeric_limits<double>::infinity();
  if (ref == 0.0) return -std::numeric_limits<double>::infinity();
  // ref^2 / err^2 as a ratio first: squares of tiny values would underflow.
  const double r = std::fabs(ref / err);
  return 20.0 * std::log10(r);
}

double rel_err(double ref, double got) {
  const double err = std::fabs(got - ref);
  if (err == 0.0) return 0.0;
  if (ref == 0.0) return std::numeric_limits<double>::infinity();
  return err / std::fabs(ref);
}

double ulp32(double x) {
  if (x == 0.0 || !std::isfinite(x)) return std::ldexp(1.0, -149);
  const int e = std::ilogb(x);
  return std::ldexp(1.0, std::max(e, -126) - 23);
}

double ulp_err(double ref, double got) { return std::fabs(got - ref) / ulp32(ref); }

// ---- summaries -----------------------------------------------------------------------------

double quantile_sorted(std::span<const double> v, double p) {
  if (v.empty()) throw std::invalid_argument("quantile of no values");
  const double h = (static_cast<double>(v.size()) - 1.0) * p;
  const std::size_t lo = static_cast<std::size_t>(std::floor(h));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  const double f = h - static_cast<double>(lo);
  if (f == 0.0 || v[lo] == v[hi]) return v[lo];
  return v[lo] + f * (v[hi] - v[lo]);
}

Summary summarize(std::span<const double> values, std::uint64_t seed, int resamples,
                  double level) {
  Summary s;
  s.n = values.size();
  if (s.n == 0) throw std::invalid_argument("summary of no values");
  for (double x : values)
    if (std::isnan(x)) throw std::invalid_argument("summary of a NaN value");
  std::vector<double> v(values.begin(), values.end());
  std::sort(v.begin(), v.end());
  double sum = 0, sum2 = 0;
  std::size_t finite = 0;
  for (double x : v) {
    if (std::isinf(x)) {
      if (x > 0) ++s.n_inf;
      continue;
    }
    sum += x;
    ++finite;
  }
  const double fmean = finite ? sum / finite : 0.0;
  for (double x : v)
    if (std::isfinite(x)) sum2 += (x - fmean) * (x - fmean);
  s.std = finite > 1 ? std::sqrt(sum2 / (finite - 1)) : 0.0;
  const auto mean_of = [](const std::vector<double>& x) {
    double t = 0;
    for (double y : x) t += y;  // an inf value makes the mean inf, as it should
    return t / static_cast<double>(x.size());
  };
  s.mean = mean_of(v);
  s.min = v.front();
  s.max = v.back();
  s.q05 = quantile_sorted(v, 0.05);
  s.q25 = quantile_sorted(v, 0.25);
  s.median = quantile_sorted(v, 0.5);
  s.q75 = quantile_sorted(v, 0.75);
  s.q95 = quantile_sorted(v, 0.95);
  // Percentile bootstrap: resample n values with replacement `resamples` times.
  std::vector<double> means(resamples), medians(resamples), r(s.n);
  for (int j = 0; j < resamples; ++j) {
    for (std::size_t i = 0; i < s.n; ++i)
      r[i] = v[random_u64(seed, static_cast<std::uint64_t>(j), i) % s.n];
    means[j] = mean_of(r);
    // Median without a full sort: the order statistics around (n-1)/2 (type 7, as above).
    const std::size_t lo = (s.n - 1) / 2;
    std::nth_element(r.begin(), r.begin() + lo, r.end());
    const double a = r[lo];
    const double b = s.n % 2 == 1 ? a : *std::min_element(r.begin() + lo + 1, r.end());
    medians[j] = a == b ? a : a + 0.5 * (b - a);
  }
  std::sort(means.begin(), means.end());
  std::sort(medians.begin(), medians.end());
  const double tail = (1.0 - level) / 2.0;
  if (resamples > 0) {
    s.mean_lo = quantile_sorted(means, tail);
    s.mean_hi = quantile_sorted(means, 1.0 - tail);
    s.median_lo = quantile_sorted(medians, tail);
    s.median_hi = quantile_sorted(medians, 1.0 - tail);
  }
  return s;
}

}  // namespace fp8sim
