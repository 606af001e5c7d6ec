// hw_harness: fp8sim-hw's suites of test vectors and the model side of a comparison.
#include "hw/hw_harness.hpp"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include "base/rng.hpp"
#include "format/rounding.hpp"

namespace fp8sim::hw {
namespace {

// Counter-based draws: stream s of a case, draw i.
struct Draw {
  std::uint64_t seed;
  std::uint64_t u64(std::uint64_t s, std::uint64_t i) const { return random_u64(seed, s, i); }
  double unit(std::uint64_t s, std::uint64_t i) const { return to_unit_double(u64(s, i)); }
  int range(std::uint64_t s, std::uint64_t i, int lo, int hi) const {  // [lo, hi]
    return lo + static_cast<int>(u64(s, i) % static_cast<std::uint64_t>(hi - lo + 1));
  }
  double normal(std::uint64_t s, std::uint64_t i) const {  // Box-Muller
    const double u1 = (static_cast<double>(u64(s, 2 * i) >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = unit(s, 2 * i + 1);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }
};

std::uint8_t enc(double x, const FormatSpec& f) {
  return static_cast<std::uint8_t>(encode(x, f, {Rounding::rne, Overflow::saturate, 32}));
}

std::uint8_t finite_code(const FormatSpec& f, const Draw& d, std::uint64_t s, std::uint64_t i) {
  for (std::uint64_t j = 0;; ++j) {
    const auto code = static_cast<std::uint32_t>(d.u64(s, i * 64 + j) & 0xFF);
    const auto cls = classify(f, code);
    if (cls != ValueClass::nan && cls != ValueClass::inf) return static_cast<std::uint8_t>(code);
  }
}

enum Stream : std::uint64_t { kA = 1, kB = 2, kC = 3, kSa = 4, kSb = 5, kAux = 6 };

void fill_normal(std::vector<std::uint8_t>& v, const FormatSpec& f, const Draw& d,
                 std::uint64_t s, double scale = 1.0) {
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = enc(scale * d.normal(s, i), f);
}

}  // namespace

const std::vector<std::string>& suite_names() {
  static const std::vector<std::string> names = {
      "random-normal", "uniform-codes", "wide-exponent", "one-large", "cancellation",
      "correlated",    "subnormals",    "specials",      "nonzero-c", "k-sweep"};
  return names;
}

std::vector<Case> make_suite(const std::string& suite, const FormatSpec& fa, const FormatSpec& fb,
                             std::uint64_t seed, bool block_scales, int max_k) {
  std::vector<int> ks;
  if (suite == "random-normal") ks = {256, 4096};
  else if (suite == "one-large") ks = {512, 2048};
  else if (suite == "correlated") ks = {1024};
  else if (suite == "specials" || suite == "nonzero-c") ks = {256};
  else if (suite == "k-sweep")
    for (int k = 32; k <= max_k; k *= 2) ks.push_back(k);
  else if (suite == "uniform-codes" || suite == "wide-exponent" || suite == "cancellation" ||
           suite == "subnormals")
    ks = {512};
  else
    throw std::invalid_argument(fmt::format("unknown suite '{}'", suite));

  std::vector<Case> out;
  for (std::size_t ci = 0; ci < ks.size(); ++ci) {
    Case c;
    c.suite = suite;
    c.a_format = fa;
    c.b_format = fb;
    c.K = ks[ci];
    c.seed = mix64(seed ^ mix64(stream_of(suite)) ^ (ci + 1));
    const Draw d{c.seed};
    const int M = c.M, N = c.N, K = c.K;
    c.A.assign(static_cast<std::size_t>(M) * K, 0);
    c.B.assign(static_cast<std::size_t>(N) * K, 0);
    auto at = [K](std::vector<std::uint8_t>& v, int r, int k) -> std::uint8_t& {
      return v[static_cast<std::size_t>(r) * K + k];
    };
    bool with_c = false;

    if (suite == "random-normal" || suite == "k-sweep" || suite == "nonzero-c") {
      fill_normal(c.A, fa, d, kA);
      fill_normal(c.B, fb, d, kB);
      with_c = suite != "random-normal";
    } else if (suite == "uniform-codes") {
      for (std::size_t i = 0; i < c.A.size(); ++i) c.A[i] = finite_code(fa, d, kA, i);
      for (std::size_t i = 0; i < c.B.size(); ++i) c.B[i] = finite_code(fb, d, kB, i);
    } else if (suite == "wide-exponent") {
      // Every binade equally likely: value = +-2^e (1 + u), e over the whole normal range.
      auto wide = [&](std::vector<std::uint8_t>& v, const FormatSpec& f, std::uint64_t s) {
        for (std::size_t i = 0; i < v.size(); ++i) {
          const int e = d.range(s, 3 * i, min_normal_exponent(f), max_exponent(f));
          const double x = std::ldexp(1.0 + d.unit(s, 3 * i + 1), e);
          v[i] = enc((d.u64(s, 3 * i + 2) & 1) ? -x : x, f);
        }
      };
      wide(c.A, fa, kA);
      wide(c.B, fb, kB);
    } else if (suite == "one-large") {
      // Small terms (~2^-8) with one large product per row: the small ones fall off the grid.
      fill_normal(c.A, fa, d, kA, 1.0 / 256);
      fill_normal(c.B, fb, d, kB);
      for (int m = 0; m < M; ++m) at(c.A, m, (m * 37 + 5) % K) = enc(max_finite(fa) / 2, fa);
    } else if (suite == "cancellation") {
      // Pairs a_k b_k + a_k (-b_k) cancel exactly; one element in 16 is redrawn.
      fill_normal(c.A, fa, d, kA);
      fill_normal(c.B, fb, d, kB);
      for (int m = 0; m < M; ++m)
        for (int k = 0; k + 1 < K; k += 2) at(c.A, m, k + 1) = at(c.A, m, k);
      for (int n = 0; n < N; ++n)
        for (int k = 0; k + 1 < K; k += 2)
          at(c.B, n, k + 1) = static_cast<std::uint8_t>(at(c.B, n, k) ^ sign_mask(fb));
      for (std::size_t i = 0; i < c.A.size(); ++i)
        if (d.u64(kAux, i) % 16 == 0) c.A[i] = enc(d.normal(kAux, i + (1ull << 40)), fa);
    } else if (suite == "correlated") {
      // B row n = rho * x + sqrt(1 - rho^2) * y with x = A row n's values; rho 0.9 / 0.99 / 0.999.
      static const double kRho[] = {0.9, 0.99, 0.999};
      std::vector<double> x(static_cast<std::size_t>(M) * K);
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = d.normal(kA, i), c.A[i] = enc(x[i], fa);
      for (int n = 0; n < N; ++n) {
        const double rho = kRho[n % 3];
        for (int k = 0; k < K; ++k) {
          const std::size_t i = static_cast<std::size_t>(n) * K + k;
          at(c.B, n, k) = enc(rho * x[i] + std::sqrt(1 - rho * rho) * d.normal(kB, i), fb);
        }
      }
    } else if (suite == "subnormals") {
      // A: subnormal or smallest-binade codes; B: half the rows the same, half normal values.
      auto tiny = [&](const FormatSpec& f, std::uint64_t s, std::uint64_t i) {
        const std::uint32_t field = static_cast<std::uint32_t>(d.u64(s, i) % 2);
        const std::uint32_t man = static_cast<std::uint32_t>(d.u64(s, i) >> 8) & ((1u << f.mantissa_bits) - 1);
        const std::uint32_t sign = (d.u64(s, i) >> 40) & 1 ? sign_mask(f) : 0;
        return static_cast<std::uint8_t>(sign | (field << f.mantissa_bits) | man);
      };
      for (std::size_t i = 0; i < c.A.size(); ++i) c.A[i] = tiny(fa, kA, i);
      fill_normal(c.B, fb, d, kB);
      for (int n = 0; n < N; n += 2)
        for (int k = 0; k < K; ++k) at(c.B, n, k) = tiny(fb, kB, static_cast<std::uint64_t>(n) * K + k + (1ull << 40));
    } else if (suite == "specials") {
      // Row m % 4: 0 one NaN in A; 1 one Inf (or max finite where no Inf); 2 max-magnitude
      // row (overflows fp16); 3 plain. B row 5 carries one NaN. C: +3e38 / -Inf on some rows.
      fill_normal(c.A, fa, d, kA);
      fill_normal(c.B, fb, d, kB);
      for (int m = 0; m < M; ++m) {
        const int k = d.range(kAux, m, 0, K - 1);
        const bool neg = m % 8 >= 4;
        if (m % 4 == 0) at(c.A, m, k) = static_cast<std::uint8_t>(nan_code(fa, neg));
        if (m % 4 == 1)
          at(c.A, m, k) = static_cast<std::uint8_t>(has_inf(fa) ? inf_code(fa, neg)
                                                                 : enc(neg ? -max_finite(fa) : max_finite(fa), fa));
        if (m % 4 == 2)
          for (int kk = 0; kk < K; ++kk)
            at(c.A, m, kk) = static_cast<std::uint8_t>(max_finite_magnitude_code(fa) |
                                                       (at(c.B, m % N, kk) & sign_mask(fb) ? sign_mask(fa) : 0));
      }
      at(c.B, 5, d.range(kAux, 999, 0, K - 1)) = static_cast<std::uint8_t>(nan_code(fb));
      for (int n = 0; n < N; ++n)
        for (int k = 0; k < K; ++k)
          if (n % 4 == 2) at(c.B, n, k) = static_cast<std::uint8_t>(max_finite_magnitude_code(fb));
      with_c = true;
    }

    if (with_c) {
      c.C.resize(static_cast<std::size_t>(M) * N);
      for (std::size_t i = 0; i < c.C.size(); ++i) {
        const int e = d.range(kC, 2 * i, -10, 10);
        c.C[i] = static_cast<float>(std::ldexp(d.normal(kC, 2 * i + 1), e));
      }
      if (suite == "specials")
        for (int m = 0; m < M; ++m)
          for (int n = 0; n < N; ++n) {
            float& v = c.C[static_cast<std::size_t>(m) * N + n];
            if (m % 8 == 3) v = 3.0e38f;
            if (m % 8 == 7 && n % 2 == 0) v = -INFINITY;
          }
    }
    if (block_scales) {
      const int ka = (K + 127) / 128, nb = (N + 127) / 128;
      c.sa.resize(static_cast<std::size_t>(M) * ka);
      c.sb.resize(static_cast<std::size_t>(nb) * ka);
      for (std::size_t i = 0; i < c.sa.size(); ++i)
        c.sa[i] = static_cast<float>(std::ldexp(1.0 + d.unit(kSa, 2 * i), d.range(kSa, 2 * i + 1, -6, 6)));
      for (std::size_t i = 0; i < c.sb.size(); ++i)
        c.sb[i] = static_cast<float>(std::ldexp(1.0 + d.unit(kSb, 2 * i), d.range(kSb, 2 * i + 1, -6, 6)));
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<float> run_model(const GemmSpec& s, const Case& c) {
  validate(s, c.M, c.N, c.K);
  std::vector<float> D(static_cast<std::size_t>(c.M) * c.N);
  gemm(s, c.M, c.N, c.K, c.A, c.B, c.C, c.sa, c.sb, D);
  return D;
}

}  // namespace fp8sim::hw
