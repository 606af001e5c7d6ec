// rounding: round_to_format, the reference rounding and overflow of fp8sim (fast clones: rounding.hpp).
#include "format/rounding.hpp"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <stdexcept>

namespace fp8sim {

Rounding parse_rounding(std::string_view s) {
  if (s == "rne") return Rounding::rne;
  if (s == "rz") return Rounding::rz;
  if (s == "ru") return Rounding::ru;
  if (s == "rd") return Rounding::rd;
  if (s == "rna") return Rounding::rna;
  if (s == "sr") return Rounding::sr;
  throw std::invalid_argument(
      fmt::format("unknown rounding '{}' (known: rne, rz, ru, rd, rna, sr)", s));
}

Overflow parse_overflow(std::string_view s) {
  if (s == "saturate" || s == "satfinite" || s == "sat") return Overflow::saturate;
  if (s == "nonsat") return Overflow::nonsat;
  throw std::invalid_argument(
      fmt::format("unknown overflow policy '{}' (known: saturate, nonsat)", s));
}

std::string_view to_string(Rounding r) {
  constexpr std::string_view names[] = {"rne", "rz", "ru", "rd", "rna", "sr"};
  return names[static_cast<int>(r)];
}
std::string_view to_string(Overflow o) {
  return o == Overflow::saturate ? "saturate" : "nonsat";
}

void validate(const RoundingSpec& r) {
  if (r.sr_bits < 1 || r.sr_bits > 64)
    throw std::invalid_argument(
        fmt::format("stochastic rounding bits {} not in 1..64", r.sr_bits));
}

namespace {

using u128 = unsigned __int128;

// The code for a result past max finite. `exact_inf` is set for an infinite input, which
// IEEE 754 keeps infinite under every rounding direction.
std::uint32_t overflow_code(const FormatSpec& f, bool neg, const RoundingSpec& r,
                            bool exact_inf) {
  const std::uint32_t sign = neg ? sign_mask(f) : 0u;
  const bool toward_zero = r.mode == Rounding::rz || (r.mode == Rounding::rd && !neg) ||
                           (r.mode == Rounding::ru && neg);
  if (r.overflow == Overflow::saturate || (toward_zero && !exact_inf))
    return max_finite_magnitude_code(f) | sign;
  if (has_inf(f)) return inf_code(f, neg);
  if (has_nan(f)) return nan_code(f, neg);
  throw std::domain_error(fmt::format(
      "overflow into format '{}', which has no Inf or NaN: use the saturate policy", f.name));
}

std::uint32_t zero_code(const FormatSpec& f, bool neg) {
  if (f.specials == Specials::e8m0) return 0u;  // no zero: clamp to the smallest scale
  return (neg && has_negative_zero(f)) ? sign_mask(f) : 0u;
}

}  // namespace

std::uint32_t round_to_format(const Unrounded& u, const FormatSpec& f, const RoundingSpec& r,
                              std::uint64_t random) {
  const bool nonzero = u.significand != 0 || u.sticky;
  if (!f.is_signed && u.negative && nonzero) return nan_code(f);
  const bool neg = u.negative && f.is_signed;
  if (!nonzero) return zero_code(f, neg);

  const int M = f.mantissa_bits;
  const int emin = min_normal_exponent(f);

  // 1. The quantum exponent qe: 2^qe is one unit in the last place at u's magnitude.
  //    A zero significand with sticky set is a positive amount far below every quantum.
  std::uint64_t n = 0;
  bool half = false, below = false;
  std::uint64_t frac_k = 0;  // the discarded fraction's top sr_bits bits (stochastic only)
  const int k = r.sr_bits;
  int qe;
  if (u.significand == 0) {
    qe = emin - M;
    below = true;
  } else {
    const int msb = 63 - std::countl_zero(u.significand);
    const int e_u = u.exponent + msb;
    qe = (e_u > emin ? e_u : emin) - M;
    // 2. Split into whole quanta n, the half-quantum bit and everything below it.
    const int shift = qe - u.exponent;
    if (shift <= 0) {
      n = u.significand << -shift;  // exact: u has no bits below the quantum
      below = u.sticky;
    } else {
      if (shift < 64) {
        n = u.significand >> shift;
        half = (u.significand >> (shift - 1)) & 1u;
        const std::uint64_t rest_mask = (std::uint64_t{1} << (shift - 1)) - 1u;
        below = (u.significand & rest_mask) != 0 || u.sticky;
      } else {
        half = shift == 64 && (u.significand >> 63) != 0;
        below = (shift == 64 ? (u.significand << 1) != 0 : true) || u.sticky;
      }
      if (r.mode == Rounding::sr && shift < 128) {
        const u128 rem = shift >= 64 ? u128{u.significand}
                                     : u128{u.significand & ((std::uint64_t{1} << shift) - 1u)};
        frac_k = static_cast<std::uint64_t>((rem << k) >> shift);
      }
    }
  }

  // 3. Round the number of quanta.
  const bool inexact = half || below;
  bool up = false;
  switch (r.mode) {
    case Rounding::rne: up = half && (below || (n & 1u)); break;
    case Rounding::rna: up = half; break;
    case Rounding::rz: up = false; break;
    case Rounding::ru: up = inexact && !neg; break;
    case Rounding::rd: up = inexact && neg; break;
    case Rounding::sr: {
      const u128 mask_k = k >= 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << k) - 1u);
      const u128 sum = u128{frac_k} + (u128{random} & mask_k);
      up = (sum >> k) != 0;
      break;
    }
  }
  n += up ? 1u : 0u;
  if ((n >> (M + 1)) != 0) {  // carry out of the significand: 1.11..1 + ulp = 10.0
    n >>= 1;
    qe += 1;
  }

  // 4. Zero after rounding.
  if (n == 0) return zero_code(f, neg);

  // 5. Assemble the code; a field past the largest finite one is an overflow.
  const std::uint32_t sign = neg ? sign_mask(f) : 0u;
  const std::uint64_t implicit = std::uint64_t{1} << M;
  std::int64_t field;
  std::uint64_t mag;
  if (n < implicit && f.specials != Specials::e8m0) {
    field = 0;  // subnormal: qe == emin - M
    mag = n;
  } else {
    field = std::int64_t{qe} + M + f.bias;
    mag = (static_cast<std::uint64_t>(field) << M) | (n - implicit);
  }
  if (field >= (std::int64_t{1} << f.exponent_bits) || mag > max_finite_magnitude_code(f))
    return overflow_code(f, neg, r, /*exact_inf=*/false);
  return static_cast<std::uint32_t>(mag) | sign;
}

std::uint32_t encode(double x, const FormatSpec& f, const RoundingSpec& r,
                     std::uint64_t random) {
  const bool neg = std::signbit(x);
  if (std::isnan(x)) {
    if (!has_nan(f))
      throw std::domain_error(
          fmt::format("NaN cannot be encoded in format '{}', which has no NaN", f.name));
    return nan_code(f, neg);
  }
  if (!f.is_signed && neg && x != 0.0) return nan_code(f);
  if (std::isinf(x)) return overflow_code(f, neg, r, /*exact_inf=*/true);
  Unrounded u;
  u.negative = neg;
  if (x != 0.0) {
    int e = 0;
    const double m = std::frexp(std::fabs(x), &e);  // |x| = m * 2^e, m in [0.5, 1)
    u.significand = static_cast<std::uint64_t>(std::ldexp(m, 53));
    u.exponent = e - 53;
  }
  return round_to_format(u, f, r, random);
}

double quantize(double x, const FormatSpec& f, const RoundingSpec& r, std::uint64_t random) {
  return decode(f, encode(x, f, r, random));
}

}  // namespace fp8sim
