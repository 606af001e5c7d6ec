// test_format_codes: every code of every preset decodes and re-encodes to itself; neighbours and ulp.
//
// For every preset and a few eXmY (e3m3, e6m9, e8m23, e1m2, e2m0), every code c:
//   - finite c: encode(decode(c)) == c under rne rz ru rd rna, saturate and nonsat;
//   - Inf codes: nonsat gives the same Inf back; saturate gives +-max finite (CUDA satfinite);
//   - NaN codes: encode gives a NaN code (any).
// next_up / next_down / ulp are checked against the sorted list of all finite values of the
// format: next_up(c) is the code of the next larger value (Inf past max where the format has
// one, else c itself), and ulp(c) the gap to the next value away from zero (at max: below).
// Formats of more than 20 bits (fp32, e8m23) are checked on a subset: in every binade of both
// signs the 64 lowest and 64 highest mantissas, plus 20000 seeded random codes.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <vector>

#include "format/format.hpp"
#include "base/rng.hpp"
#include "format/rounding.hpp"
#include "test_seed.hpp"

using namespace fp8sim;

namespace {

constexpr Rounding kModes[] = {Rounding::rne, Rounding::rz, Rounding::ru, Rounding::rd,
                               Rounding::rna};
constexpr Overflow kPolicies[] = {Overflow::saturate, Overflow::nonsat};

std::vector<std::string> formats_under_test() {
  std::vector<std::string> v = preset_format_names();
  for (const char* extra : {"e3m3", "e6m9", "e8m23", "e1m2", "e2m0"}) v.emplace_back(extra);
  return v;
}

std::vector<std::uint32_t> codes_under_test(const FormatSpec& f) {
  if (total_bits(f) <= 20) return all_codes(f);
  std::vector<std::uint32_t> v;
  const std::uint32_t mant = (1u << f.mantissa_bits) - 1u;
  for (std::uint32_t sign : {0u, sign_mask(f)})
    for (std::uint32_t field = 0; field < (1u << f.exponent_bits); ++field)
      for (std::uint32_t m = 0; m < 64; ++m)
        for (std::uint32_t frac : {m, mant - m})
          v.push_back(sign | (field << f.mantissa_bits) | frac);
  const std::uint64_t all = std::uint64_t{1} << total_bits(f);
  for (std::uint64_t i = 0; i < 20000; ++i)
    v.push_back(static_cast<std::uint32_t>(random_u64(test_seed(), 1, i) % all));
  return v;
}

}  // namespace

TEST_CASE("every code decodes and re-encodes to itself", "[codes]") {
  test_seed();  // printed: it picks the subset of codes for formats over 20 bits
  for (const auto& name : formats_under_test()) {
    const FormatSpec f = format_by_name(name);
    std::uint64_t failures = 0, checked = 0;
    for (std::uint32_t c : codes_under_test(f)) {
      const double v = decode(f, c);
      const ValueClass cls = classify(f, c);
      for (Rounding mode : kModes)
        for (Overflow pol : kPolicies) {
          const RoundingSpec r{mode, pol, 32};
          std::uint32_t got = 0;
          bool threw = false;
          try {
            got = encode(v, f, r);
          } catch (const std::exception&) {
            threw = true;
          }
          bool ok;
          std::uint32_t want = c;
          if (cls == ValueClass::nan) {
            ok = !threw && classify(f, got) == ValueClass::nan;
          } else if (cls == ValueClass::inf && pol == Overflow::saturate) {
            want = max_finite_magnitude_code(f) | (c & sign_mask(f));
            ok = !threw && got == want;
          } else {
            ok = !threw && got == want;
          }
          ++checked;
          if (!ok && failures++ < 10)
            std::printf("encode(decode) %s %s %s code=%s value=%s => got %s want %s\n",
                        name.c_str(), std::string(to_string(mode)).c_str(),
                        std::string(to_string(pol)).c_str(), format_code(f, c).c_str(),
                        format_value(v).c_str(),
                        threw ? "exception" : format_code(f, got).c_str(),
                        cls == ValueClass::nan ? "nan" : format_code(f, want).c_str());
        }
    }
    INFO(name << ": " << failures << " failures of " << checked);
    CHECK(failures == 0);
  }
}

TEST_CASE("next_up, next_down and ulp agree with the sorted list of values", "[neighbours]") {
  for (const auto& name : formats_under_test()) {
    const FormatSpec f = format_by_name(name);
    if (total_bits(f) > 20) continue;  // needs every value of the format
    // Sorted distinct finite values; +0 and -0 are one value.
    std::map<double, std::uint32_t> by_value;
    for (std::uint32_t c : all_codes(f)) {
      const ValueClass cls = classify(f, c);
      if (cls == ValueClass::nan || cls == ValueClass::inf) continue;
      by_value.emplace(decode(f, c), c);
    }
    std::vector<double> values;
    for (const auto& [v, c] : by_value) values.push_back(v);
    const double inf = std::numeric_limits<double>::infinity();
    std::uint64_t failures = 0;
    auto fail = [&](const char* what, std::uint32_t c, double got, double want) {
      if (failures++ < 10)
        std::printf("%s %s code=%s => got %s want %s\n", what, name.c_str(),
                    format_code(f, c).c_str(), format_value(got).c_str(),
                    format_value(want).c_str());
    };
    for (std::uint32_t c : all_codes(f)) {
      const ValueClass cls = classify(f, c);
      const double v = decode(f, c);
      if (cls == ValueClass::nan) {
        if (classify(f, next_up(f, c)) != ValueClass::nan) fail("next_up(nan)", c, decode(f, next_up(f, c)), NAN);
        if (classify(f, next_down(f, c)) != ValueClass::nan) fail("next_down(nan)", c, decode(f, next_down(f, c)), NAN);
        continue;
      }
      double want_up, want_down;
      if (cls == ValueClass::inf) {
        want_up = v > 0 ? inf : values.front();
        want_down = v > 0 ? values.back() : -inf;
      } else {
        const auto it = std::lower_bound(values.begin(), values.end(), v);
        REQUIRE(it != values.end());
        REQUIRE(*it == v);
        want_up = it + 1 != values.end() ? *(it + 1) : (has_inf(f) ? inf : v);
        want_down = it != values.begin() ? *(it - 1) : (has_inf(f) ? -inf : v);
        // ulp: gap to the next value away from zero; at the largest magnitude, the gap below.
        const double mag = std::fabs(v);
        const auto m = std::lower_bound(values.begin(), values.end(), mag);
        double want_ulp;
        if (m + 1 != values.end())
          want_ulp = *(m + 1) - mag;
        else
          want_ulp = mag - *(m - 1);
        const double got_ulp = ulp(f, c);
        if (!(got_ulp == want_ulp)) fail("ulp", c, got_ulp, want_ulp);
      }
      const double got_up = decode(f, next_up(f, c));
      const double got_down = decode(f, next_down(f, c));
      if (!(got_up == want_up)) fail("next_up", c, got_up, want_up);
      if (!(got_down == want_down)) fail("next_down", c, got_down, want_down);
      // Round trip through the neighbour (zeros of both signs collapse to one value).
      if (cls != ValueClass::inf && want_up != v) {
        const double back = decode(f, next_down(f, next_up(f, c)));
        if (!(back == v)) fail("next_down(next_up)", c, back, v);
      }
    }
    INFO(name << ": " << failures << " failures");
    CHECK(failures == 0);
  }
}
