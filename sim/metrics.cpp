// metrics: per-trial errors, the fixed-point exact dot product, quantiles and bootstraps.
#include "metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "format.hpp"
#include "rng.hpp"
#include "rounding.hpp"

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

// ---- exact dot product ---------------------------------------------------------------------

namespace {

// value = sum_i digit[i] * 2^(32 i + kLowBit); digits are carry-save int64 until normalised.
// Terms need lsb >= 2^kLowBit (products >= 2^-968 and their fma remainders qualify) and
// msb below 2^(kLowBit + 32 (kDigits - 1)); the last digit carries the sign.
constexpr int kLowBit = -1184;
constexpr int kDigits = 70;  // top bit 2^(32*68 - 1184) = 2^992 before the sign digit

struct FixedAccumulator {
  std::array<std::int64_t, kDigits> d{};
  std::size_t adds = 0;

  void add(double x) {
    if (x == 0.0) return;
    int e = 0;
    const double m = std::frexp(x, &e);                       // x = m 2^e, 0.5 <= |m| < 1
    const auto mi = static_cast<std::int64_t>(std::ldexp(m, 53));  // exact 53-bit integer
    const int lsb = e - 53 - kLowBit;
    if (lsb < 0 || lsb / 32 + 2 >= kDigits - 1)
      throw std::domain_error(fmt::format("exact_dot_fast: term {} is outside the range", x));
    const int i = lsb / 32, s = lsb % 32;
    __int128 v = static_cast<__int128>(mi) << s;              // < 2^86 in magnitude
    d[i] += static_cast<std::int64_t>(v & 0xffffffff);
    v >>= 32;
    d[i + 1] += static_cast<std::int64_t>(v & 0xffffffff);
    v >>= 32;
    d[i + 2] += static_cast<std::int64_t>(v);
    if (++adds == (1u << 29)) normalise();                    // |digit| stays < 2^62
  }

  // Carries so every digit but the last is in [0, 2^32); the last holds the sign.
  void normalise() {
    for (int i = 0; i + 1 < kDigits; ++i) {
      const std::int64_t carry = d[i] >> 32;  // arithmetic shift: floor division
      d[i] -= carry * (std::int64_t(1) << 32);
      d[i + 1] += carry;
    }
    adds = 0;
  }

  // The value as Unrounded: top 64 bits plus sticky.
  Unrounded unrounded() {
    normalise();
    Unrounded u;
    const bool neg = d[kDigits - 1] < 0;
    std::array<std::uint32_t, kDigits> mag{};
    if (neg) {  // two's complement negation of the whole number
      std::uint64_t carry = 1;
      for (int i = 0; i < kDigits; ++i) {
        const std::uint64_t x = static_cast<std::uint32_t>(~static_cast<std::uint32_t>(d[i])) + carry;
        mag[i] = static_cast<std::uint32_t>(x);
        carry = x >> 32;
      }
    } else {
      for (int i = 0; i < kDigits; ++i) mag[i] = static_cast<std::uint32_t>(d[i]);
    }
    int top = kDigits - 1;
    while (top >= 0 && mag[top] == 0) --top;
    if (top < 0) return u;  // exact zero
    // Gather 96 bits from digits top, top-1, top-2 and fold everything lower into sticky.
    unsigned __int128 w = 0;
    for (int j = 0; j < 3; ++j) {
      w <<= 32;
      if (top - j >= 0) w |= mag[top - j];
    }
    bool sticky = false;
    for (int j = top - 3; j >= 0; --j) sticky |= mag[j] != 0;
    int msb = 95;  // w holds bits 0..95; find its leading one
    while (!((w >> msb) & 1)) --msb;
    const int drop = msb - 63;  // keep 64 bits
    std::uint64_t sig;
    if (drop > 0) {
      sticky |= (w & ((static_cast<unsigned __int128>(1) << drop) - 1)) != 0;
      sig = static_cast<std::uint64_t>(w >> drop);
    } else {
      sig = static_cast<std::uint64_t>(w << -drop);
    }
    u.negative = neg;
    u.significand = sig;
    // w's bit 0 has weight 2^(32 (top - 2) + kLowBit); sig's lsb is bit `drop` of w.
    u.exponent = 32 * (top - 2) + kLowBit + drop;
    u.sticky = sticky;
    return u;
  }
};

}  // namespace

ExactDot exact_dot_fast(std::span<const double> a, std::span<const double> b) {
  if (a.size() != b.size())
    throw std::invalid_argument(
        fmt::format("exact_dot_fast: a has {} elements, b has {}", a.size(), b.size()));
  FixedAccumulator acc;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], y = b[i];
    if (!std::isfinite(x) || !std::isfinite(y))
      throw std::domain_error("exact_dot_fast: non-finite input");
    const double p = x * y;
    if (p == 0.0 && x != 0.0 && y != 0.0)
      throw std::domain_error(fmt::format("exact_dot_fast: product {} * {} underflows", x, y));
    if (!std::isfinite(p))
      throw std::domain_error(fmt::format("exact_dot_fast: product {} * {} overflows", x, y));
    const double r = std::fma(x, y, -p);  // exact remainder unless the product is subnormal
    if (p != 0.0 && std::fabs(p) < 0x1p-968)
      throw std::domain_error(fmt::format("exact_dot_fast: product {} * {} is too small", x, y));
    acc.add(p);
    acc.add(r);
  }
  Unrounded u = acc.unrounded();
  ExactDot out{0.0, 0.0f};
  if (u.significand == 0) return out;
  // Nearest double: the 64-bit significand with the sticky bit folded into its lsb, which
  // lies below double's rounding point, so one conversion rounds correctly.
  const std::uint64_t s = u.significand | (u.sticky ? 1u : 0u);
  const double mag = std::ldexp(static_cast<double>(s), u.exponent);
  out.nearest_double = u.negative ? -mag : mag;
  static const FormatSpec fp32 = format_by_name("fp32");
  out.nearest_float = static_cast<float>(
      decode(fp32, round_to_format(u, fp32, {Rounding::rne, Overflow::nonsat, 32})));
  return out;
}

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
