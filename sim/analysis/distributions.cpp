// distributions: counter-based draws (Box-Muller, Marsaglia-Tsang gamma) and correlated pairs.
#include "analysis/distributions.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include "base/parallel.hpp"
#include "base/rng.hpp"

namespace fp8sim {

namespace {

double parse_number(std::string_view text, std::string_view key, std::string_view value) {
  double v = 0;
  const auto* end = value.data() + value.size();
  const auto r = std::from_chars(value.data(), end, v);
  if (r.ec != std::errc() || r.ptr != end || !std::isfinite(v))
    throw std::invalid_argument(
        fmt::format("distribution '{}': {}='{}' is not a finite number", text, key, value));
  return v;
}

// Uniform in (0, 1]: never 0, so log() is finite.
double open_unit(std::uint64_t r) { return (static_cast<double>(r >> 11) + 1.0) * 0x1.0p-53; }

// N(0,1) by Box-Muller from the two draws 2*index and 2*index+1 of `stream`.
double gaussian_draw(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  const double u1 = open_unit(random_u64(seed, stream, 2 * index));
  const double u2 = to_unit_double(random_u64(seed, stream, 2 * index + 1));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// Gamma(alpha, 1), alpha >= 1, by Marsaglia & Tsang (ACM TOMS 26(3), 2000). The rejection
// loop draws from a private stream of this element, so the result is still a pure function.
double gamma_draw(double alpha, std::uint64_t seed, std::uint64_t stream) {
  const double d = alpha - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (std::uint64_t j = 0;; j += 2) {
    const double x = gaussian_draw(seed, stream, j);
    const double v0 = 1.0 + c * x;
    if (v0 <= 0) continue;
    const double v = v0 * v0 * v0;
    const double u = open_unit(random_u64(seed, stream ^ 0xa5a5a5a5a5a5a5a5ull, j));
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

}  // namespace

DistributionSpec distribution_by_name(std::string_view text) {
  DistributionSpec d;
  const auto colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  if (kind == "gaussian" || kind == "normal") {
    d.kind = Distribution::gaussian;
  } else if (kind == "uniform") {
    d.kind = Distribution::uniform;
  } else if (kind == "t" || kind == "student-t" || kind == "student_t") {
    d.kind = Distribution::student_t;
  } else if (kind == "llm") {
    d.kind = Distribution::llm;
  } else {
    throw std::invalid_argument(
        fmt::format("unknown distribution '{}' (known: gaussian, uniform, t, llm)", text));
  }
  std::string_view rest = colon == std::string_view::npos ? "" : text.substr(colon + 1);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? "" : rest.substr(comma + 1);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos)
      throw std::invalid_argument(fmt::format("distribution '{}': '{}' is not key=value", text, item));
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    const double v = parse_number(text, key, value);
    const bool uni = d.kind == Distribution::uniform, t = d.kind == Distribution::student_t,
               llm = d.kind == Distribution::llm;
    if (key == "sigma") {
      d.sigma = v;
    } else if (key == "lo" && uni) {
      d.lo = v;
    } else if (key == "hi" && uni) {
      d.hi = v;
    } else if (key == "nu" && t) {
      d.nu = v;
    } else if (key == "channels" && llm) {
      d.channels = static_cast<int>(v);
      if (d.channels != v || d.channels < 0)
        throw std::invalid_argument(
            fmt::format("distribution '{}': channels must be a whole number >= 0", text));
    } else if (key == "gain" && llm) {
      d.gain = v;
    } else if (key == "rowspread" && llm) {
      d.rowspread = v;
      if (v < 0 || v > 20)
        throw std::invalid_argument(fmt::format("distribution '{}': rowspread must be in [0, 20]", text));
    } else {
      throw std::invalid_argument(
          fmt::format("distribution '{}': unknown key '{}' for {}", text, key, kind));
    }
  }
  if (!(d.sigma > 0)) throw std::invalid_argument(fmt::format("distribution '{}': sigma must be > 0", text));
  if (d.kind == Distribution::uniform && !(d.lo < d.hi))
    throw std::invalid_argument(fmt::format("distribution '{}': needs lo < hi", text));
  if (d.kind == Distribution::student_t && !(d.nu > 2))
    throw std::invalid_argument(
        fmt::format("distribution '{}': nu must be > 2 (finite variance)", text));
  if (d.kind == Distribution::llm && !(d.gain > 0))
    throw std::invalid_argument(fmt::format("distribution '{}': gain must be > 0", text));
  d.name = std::string(text);
  return d;
}

std::string describe(const DistributionSpec& d) {
  switch (d.kind) {
    case Distribution::gaussian: return fmt::format("gaussian:sigma={}", d.sigma);
    case Distribution::uniform: return fmt::format("uniform:lo={},hi={},sigma={}", d.lo, d.hi, d.sigma);
    case Distribution::student_t: return fmt::format("t:nu={},sigma={}", d.nu, d.sigma);
    case Distribution::llm:
      return fmt::format("llm:channels={},gain={},rowspread={},sigma={}", d.channels, d.gain,
                         d.rowspread, d.sigma);
  }
  return d.name;
}

double standard_draw(const DistributionSpec& d, std::uint64_t seed, std::uint64_t stream,
                     std::uint64_t index) {
  switch (d.kind) {
    case Distribution::gaussian:
    case Distribution::llm: return gaussian_draw(seed, stream, index);
    case Distribution::uniform:
      return d.lo + (d.hi - d.lo) * to_unit_double(random_u64(seed, stream, index));
    case Distribution::student_t: {
      // t = g / sqrt(V / nu), V ~ chi^2(nu) = 2 Gamma(nu/2); Var t = nu / (nu - 2).
      const double g = gaussian_draw(seed, stream, index);
      const double v = 2.0 * gamma_draw(0.5 * d.nu, seed, mix64(stream ^ 0x7f4a7c15ull) + index);
      return g / std::sqrt(v / d.nu) * std::sqrt((d.nu - 2.0) / d.nu);
    }
  }
  return 0.0;
}

std::vector<int> outlier_channels(const DistributionSpec& d, std::uint64_t seed, int K) {
  std::vector<int> ch;
  if (d.kind != Distribution::llm) return ch;
  const int n = std::min(d.channels, K);
  for (std::uint64_t j = 0; static_cast<int>(ch.size()) < n; ++j) {
    const int c = static_cast<int>(random_u64(seed, 3, j) % static_cast<std::uint64_t>(K));
    if (std::find(ch.begin(), ch.end(), c) == ch.end()) ch.push_back(c);
  }
  std::sort(ch.begin(), ch.end());
  return ch;
}

void generate_pairs(const DistributionSpec& d, double rho, std::uint64_t seed, int T, int K,
                    std::span<double> a, std::span<double> b, int threads,
                    std::uint64_t row0) {
  if (!(rho >= -1.0 && rho <= 1.0))
    throw std::invalid_argument(fmt::format("correlation rho = {} is outside [-1, 1]", rho));
  if (T < 1 || K < 1)
    throw std::invalid_argument(fmt::format("generate_pairs: T = {}, K = {} must be >= 1", T, K));
  const std::size_t n = static_cast<std::size_t>(T) * K;
  if (a.size() != n || b.size() != n)
    throw std::invalid_argument(fmt::format("generate_pairs: spans hold {} and {}, need {}",
                                            a.size(), b.size(), n));
  std::vector<double> gain(static_cast<std::size_t>(K), d.sigma);
  for (int c : outlier_channels(d, seed, K)) gain[c] *= d.gain;
  const double r2 = std::sqrt(std::max(0.0, 1.0 - rho * rho));
  parallel_for(static_cast<std::size_t>(T), threads, [&](std::size_t begin, std::size_t end) {
    for (std::size_t t = begin; t < end; ++t) {
      const double row = d.kind == Distribution::llm && d.rowspread > 0
                             ? std::exp2(d.rowspread * gaussian_draw(seed, 4, row0 + t))
                             : 1.0;
      for (int k = 0; k < K; ++k) {
        const std::uint64_t index = ((row0 + t) << 32) | static_cast<std::uint32_t>(k);
        const double x = standard_draw(d, seed, 1, index);
        const double z = r2 == 0.0 ? 0.0 : standard_draw(d, seed, 2, index);
        const std::size_t i = t * K + k;
        a[i] = x * gain[k] * row;
        b[i] = (rho * x + r2 * z) * d.sigma;
      }
    }
  });
}

}  // namespace fp8sim
