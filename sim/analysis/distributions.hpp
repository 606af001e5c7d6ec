// distributions: seeded input generators for sweeps (Gaussian, uniform, Student-t, LLM-like
// outlier channels) and correlated pairs a, b with population correlation exactly rho.
//
// Every element is a pure function of (seed, distribution, row, column) through rng.hpp, so
// a sweep's inputs never depend on the thread count, and row t, column k is the same value
// whatever K or the number of trials: longer vectors extend shorter ones (common random
// numbers across the K axis).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fp8sim {

enum class Distribution : std::uint8_t {
  gaussian,   // N(0, 1)
  uniform,    // U(lo, hi); default lo = -sqrt(3), hi = sqrt(3) (unit variance)
  student_t,  // Student-t with nu > 2 degrees of freedom, standardised to unit variance
  llm,        // N(0, 1) with `channels` outlier columns of A multiplied by `gain`, and
              // optionally rows (tokens) of A of different magnitudes (`rowspread`)
};

// One options record; parsed and validated by distribution_by_name.
struct DistributionSpec {
  std::string name;           // canonical text, e.g. "t:nu=3" (what CSVs and plots show)
  Distribution kind = Distribution::gaussian;
  double sigma = 1.0;         // every draw is multiplied by sigma (all kinds)
  double lo = -1.7320508075688772, hi = 1.7320508075688772;  // uniform only
  double nu = 3.0;            // student_t only: degrees of freedom, > 2
  int channels = 4;           // llm only: outlier columns of A (same columns in every row)
  double gain = 32.0;         // llm only: outlier columns' magnitude relative to the rest
  double rowspread = 0.0;     // llm only: row t of A is multiplied by 2^(rowspread * g_t),
                              // g_t ~ N(0,1) (per-token magnitudes; 0: all rows alike)
};

// "gaussian", "uniform", "t" (student-t), "llm", each optionally followed by ":key=value,..."
// with keys sigma (all), lo, hi (uniform), nu (t), channels, gain, rowspread (llm). Examples:
// "gaussian:sigma=0.001", "uniform:lo=0,hi=1", "t:nu=3", "llm:channels=8,gain=50,rowspread=3".
// Throws std::invalid_argument naming the bad name, key or value.
DistributionSpec distribution_by_name(std::string_view text);

// One line, the canonical name with every parameter: "t:nu=3,sigma=1".
std::string describe(const DistributionSpec& d);

// Standardised draw (mean 0, variance 1 for gaussian / student_t; U(lo,hi) for uniform,
// unscaled by sigma) number `index` of `stream` under `seed`. Pure function.
double standard_draw(const DistributionSpec& d, std::uint64_t seed, std::uint64_t stream,
                     std::uint64_t index);

// The outlier columns of an llm distribution for vectors of length K (sorted, distinct,
// min(channels, K) of them); they depend on seed and K only. Empty for other kinds.
std::vector<int> outlier_channels(const DistributionSpec& d, std::uint64_t seed, int K);

// Fills a and b (T x K, row-major) with correlated pairs. For row t, column k:
//   1. x = standard_draw(stream 1, index t*2^32 + k), z = standard_draw(stream 2, same index).
//   2. a = x, b = rho*x + sqrt(1 - rho^2)*z: the population correlation of (a, b) is exactly
//      rho because x and z are independent with equal variance.
//   3. Both are multiplied by sigma; for llm, a's outlier columns also by gain and a's row t
//      by 2^(rowspread * g_t) (this scales a column or a row, so the correlation of a and b
//      within a row and within a column stays rho).
// Rows row0 .. row0+T-1 are generated (so a long run can be made in chunks of rows).
// Preconditions: -1 <= rho <= 1, T >= 1, K >= 1, K < 2^32, spans of T*K elements.
void generate_pairs(const DistributionSpec& d, double rho, std::uint64_t seed, int T, int K,
                    std::span<double> a, std::span<double> b, int threads = 0,
                    std::uint64_t row0 = 0);

}  // namespace fp8sim
