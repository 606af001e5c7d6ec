// metrics: error measures of one computed dot product against exact references (exact.hpp)
// and seeded summaries (quantiles, bootstrap CIs).
//
// Definitions (used by every sweep, CSV and plot):
//   snr_db  = 10 log10(ref^2 / (got - ref)^2)   +inf when got == ref exactly; -inf when
//             ref == 0 != got. ref is a reference value, got the computed result.
//   rel_err = |got - ref| / |ref|                0 when both are 0; +inf when ref == 0 != got.
//   ulp_err = |got - ref| / ulp32(ref)           in units in the last place of fp32 at ref.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace fp8sim {

double snr_db(double ref, double got);
double rel_err(double ref, double got);
// The fp32 ulp at x: 2^(max(floor(log2|x|), -126) - 23); 2^-149 at x = 0.
double ulp32(double x);
double ulp_err(double ref, double got);

// ---- summaries -----------------------------------------------------------------------------

// Quantile p in [0, 1] of sorted values by linear interpolation between order statistics
// (Hyndman & Fan type 7, numpy's default). Infinite values sort to the ends and propagate
// only into quantiles that touch them. Precondition: sorted non-empty, no NaN.
double quantile_sorted(std::span<const double> sorted, double p);

struct Summary {
  std::size_t n = 0;
  std::size_t n_inf = 0;       // +inf values (e.g. snr of exact results)
  double mean = 0;             // +inf if any value is +inf
  double std = 0;              // sample standard deviation of the finite values
  double min = 0, q05 = 0, q25 = 0, median = 0, q75 = 0, q95 = 0, max = 0;
  double mean_lo = 0, mean_hi = 0;      // percentile bootstrap CI of the mean
  double median_lo = 0, median_hi = 0;  // percentile bootstrap CI of the median
};

// Summary of `values` (NaN values are an error: std::invalid_argument). The bootstrap draws
// `resamples` resamples with rng.hpp stream `seed`, so a CI is a pure function of the values
// and seed; level is the two-sided coverage (0.95 gives the 2.5% and 97.5% percentiles).
Summary summarize(std::span<const double> values, std::uint64_t seed, int resamples = 1000,
                  double level = 0.95);

}  // namespace fp8sim
