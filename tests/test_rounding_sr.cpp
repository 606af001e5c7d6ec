// test_rounding_sr: stochastic rounding is unbiased, reproducible and seeded.
//
// Contract (rounding.hpp): x between neighbours lo and hi (|lo| < |hi|) rounds to hi with
// probability p = floor(f * 2^k) / 2^k, f = (|x| - |lo|) / (|hi| - |lo|), k = sr_bits. So the
// mean of many roundings is x up to a bias of at most 2^-k of the gap, and exactly x when f
// has at most k bits.
// Check: N = 20000 roundings of each x; the count of "hi" results must be within 5 sigma of
// N * p (sigma = sqrt(N p (1-p))), and p within 2^-k of f. The seed is printed; set
// FP8SIM_SEED to rerun with another (test_seed.hpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

#include "format/format.hpp"
#include "base/rng.hpp"
#include "format/rounding.hpp"
#include "test_seed.hpp"

using namespace fp8sim;

TEST_CASE("stochastic rounding is unbiased within 5 sigma", "[sr]") {
  const std::uint64_t seed = test_seed();
  constexpr int kN = 20000;
  const char* formats[] = {"e4m3", "e5m2", "e2m1", "e3m4", "fp16", "bf16"};
  const int bit_counts[] = {2, 5, 8, 32};
  // Fractions of the gap: exact at few bits, and ones that need many bits.
  const double fractions[] = {0.5, 0.25, 0.125, 0.75, 0.1, 1.0 / 3.0, 0.9, 0.01};
  int failures = 0, cases = 0;
  for (const char* name : formats) {
    const FormatSpec f = format_by_name(name);
    // A few neighbour pairs: subnormal, around 1, near max; both signs.
    const std::uint32_t one = static_cast<std::uint32_t>(f.bias) << f.mantissa_bits;
    const std::uint32_t lo_codes[] = {1u, one, one + 1u, max_finite_magnitude_code(f) - 1u};
    for (std::uint32_t lo_mag : lo_codes)
      for (bool negative : {false, true}) {
        const std::uint32_t lo = lo_mag | (negative ? sign_mask(f) : 0u);
        const std::uint32_t hi = (lo_mag + 1u) | (negative ? sign_mask(f) : 0u);
        const double vlo = decode(f, lo), vhi = decode(f, hi);
        for (int k : bit_counts)
          for (double frac : fractions) {
            const double x = vlo + frac * (vhi - vlo);  // exact enough: only p below is used
            const double f_exact = (x - vlo) / (vhi - vlo);
            const double p = std::floor(std::ldexp(f_exact, k)) / std::ldexp(1.0, k);
            const RoundingSpec r{Rounding::sr, Overflow::saturate, k};
            const std::uint64_t stream = static_cast<std::uint64_t>(cases);
            int ups = 0, others = 0;
            for (int i = 0; i < kN; ++i) {
              const std::uint32_t c = encode(x, f, r, random_u64(seed, stream, i));
              ups += c == hi;
              others += c != hi && c != lo;
            }
            const double sigma = std::sqrt(kN * p * (1 - p));
            const double dev = std::fabs(ups - kN * p);
            const bool ok = others == 0 && dev <= 5 * sigma + 1e-9 &&
                            std::fabs(p - f_exact) <= std::ldexp(1.0, -k);
            ++cases;
            if (!ok && failures++ < 10)
              std::printf("sr %s sr_bits=%d x=%a lo=%s hi=%s seed=0x%llx => got %d of %d up "
                          "(%d neither) want %.1f +- %.1f\n",
                          name, k, x, format_code(f, lo).c_str(), format_code(f, hi).c_str(),
                          static_cast<unsigned long long>(seed), ups, kN, others, kN * p,
                          5 * sigma);
          }
      }
  }
  INFO(failures << " of " << cases << " cases outside 5 sigma");
  CHECK(failures == 0);
}

TEST_CASE("stochastic rounding of a representable value is exact", "[sr]") {
  for (const char* name : {"e4m3", "e5m2", "e2m1", "ue8m0"}) {
    const FormatSpec f = format_by_name(name);
    for (std::uint32_t c = 0; c < code_count(f); ++c) {
      const ValueClass cls = classify(f, c);
      if (cls == ValueClass::nan || cls == ValueClass::inf) continue;
      for (int i = 0; i < 64; ++i) {
        const std::uint32_t got =
            encode(decode(f, c), f, {Rounding::sr, Overflow::saturate, 32}, random_u64(1, c, i));
        if (got != c) FAIL(name << " sr code=" << format_code(f, c) << " => got " << format_code(f, got));
      }
    }
  }
}

TEST_CASE("stochastic rounding is reproducible for a seed and differs between seeds", "[sr]") {
  const FormatSpec f = format_by_name("e4m3");
  const RoundingSpec r{Rounding::sr, Overflow::saturate, 32};
  auto run = [&](std::uint64_t seed) {
    std::vector<std::uint32_t> v;
    for (int i = 0; i < 4096; ++i) {
      const double x = 1.0 + (i % 97) / 97.0 * 0.125;  // inside [1, 1.125): two codes
      v.push_back(encode(x, f, r, random_u64(seed, 0, i)));
    }
    return v;
  };
  CHECK(run(7) == run(7));
  CHECK(run(7) != run(8));
  CHECK_THROWS_AS(validate(RoundingSpec{Rounding::sr, Overflow::saturate, 0}),
                  std::invalid_argument);
  CHECK_THROWS_AS(validate(RoundingSpec{Rounding::sr, Overflow::saturate, 65}),
                  std::invalid_argument);
}
