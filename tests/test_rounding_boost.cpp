// test_rounding_boost: encode() against a slow, simple reference rounding on Boost rationals.
//
// Every preset x rne rz ru rd rna x saturate/nonsat, on all 2^16 fp16 and all 2^16 bf16 bit
// patterns. The reference never calls round_to_format or decode:
//   1. It lists the target's values itself from the format's fields (OCP / IEEE rules written
//      out below), and checks them against spec constants (max 448 for e4m3, ...).
//   2. For an input x it finds the neighbours lo <= |x| <= hi in that sorted list; past the
//      largest finite value hi is the next value of an unbounded exponent range (max + its
//      quantum), which stands for overflow.
//   3. It picks lo or hi by the mode with exact Boost.Multiprecision rational arithmetic;
//      a tie under rne picks the neighbour whose significand (in units of x's quantum) is even.
//   4. Then sign, zero, overflow and the Inf/NaN rules of rounding.hpp's contract.
// Formats wider than 19 bits (fp32, e8m13) hold every fp16/bf16 value; there the reference checks
// exact representability instead of listing their values.
// A mismatch prints: <format> <mode> <policy> x=<input bits> (<input format>) => got want.
#include <catch2/catch.hpp>

#include <boost/multiprecision/cpp_int.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <vector>

#include "format/format.hpp"
#include "format/rounding.hpp"

using namespace fp8sim;
using boost::multiprecision::cpp_int;
using boost::multiprecision::cpp_rational;

namespace {

constexpr Rounding kModes[] = {Rounding::rne, Rounding::rz, Rounding::ru, Rounding::rd,
                               Rounding::rna};
constexpr Overflow kPolicies[] = {Overflow::saturate, Overflow::nonsat};

cpp_rational pow2(int e) {
  return e >= 0 ? cpp_rational(cpp_int(1) << e) : cpp_rational(cpp_int(1), cpp_int(1) << -e);
}

// One value of a format as the reference sees it.
enum class Kind { finite, inf, nan };
struct RefValue {
  Kind kind;
  bool negative;
  std::int64_t sig;  // |value| = sig * 2^exp
  int exp;
  double as_double() const {
    if (kind == Kind::nan) return std::numeric_limits<double>::quiet_NaN();
    const double m = kind == Kind::inf ? std::numeric_limits<double>::infinity()
                                       : std::ldexp(static_cast<double>(sig), exp);
    return negative ? -m : m;
  }
};

// Step 1: the value of a code, straight from the specifications.
RefValue ref_decode(const FormatSpec& f, std::uint64_t code) {
  const int E = f.exponent_bits, M = f.mantissa_bits;
  const std::uint64_t frac = code & ((std::uint64_t{1} << M) - 1);
  const std::uint64_t field = (code >> M) & ((std::uint64_t{1} << E) - 1);
  const bool neg = f.is_signed && ((code >> (E + M)) & 1);
  const std::uint64_t top = (std::uint64_t{1} << E) - 1, all_frac = (std::uint64_t{1} << M) - 1;
  switch (f.specials) {
    case Specials::ieee:  // IEEE 754: top field is Inf (frac 0) or NaN
      if (field == top) return {frac == 0 ? Kind::inf : Kind::nan, neg, 0, 0};
      break;
    case Specials::fn:  // OCP E4M3: only S.1111.111 is NaN
      if (field == top && frac == all_frac) return {Kind::nan, neg, 0, 0};
      break;
    case Specials::fnuz:  // 1.0000.000 is the NaN; no -0
      if (neg && field == 0 && frac == 0) return {Kind::nan, true, 0, 0};
      break;
    case Specials::finite: break;
    case Specials::e8m0:  // OCP MX E8M0: 2^(field-127), 0xff NaN
      if (field == top) return {Kind::nan, false, 0, 0};
      return {Kind::finite, false, 1, static_cast<int>(field) - f.bias};
  }
  if (field == 0) return {Kind::finite, neg, static_cast<std::int64_t>(frac), 1 - f.bias - M};
  return {Kind::finite, neg, static_cast<std::int64_t>((std::uint64_t{1} << M) | frac),
          static_cast<int>(field) - f.bias - M};
}

// The reference's view of one target format: sorted nonnegative finite values with codes.
struct RefFormat {
  FormatSpec f;
  bool listed = false;               // false: too wide, only exact inputs are handled
  std::vector<double> values;        // sorted, distinct, >= 0
  std::vector<std::uint32_t> codes;  // code of each value (the +0 code for zero)
  std::vector<cpp_rational> exact;   // values[i] as a rational
  std::vector<cpp_rational> quantum; // spacing of the binade values[i] starts
  std::optional<std::uint32_t> inf_pos, nan_pos, nan_neg;
};

RefFormat make_ref(const FormatSpec& f) {
  RefFormat R;
  R.f = f;
  const int bits = total_bits(f);
  if (bits > 19) return R;
  R.listed = true;
  struct Entry {
    double v;
    std::uint32_t code;
    RefValue rv;
  };
  std::vector<Entry> entries;
  for (std::uint64_t c = 0; c < (std::uint64_t{1} << bits); ++c) {
    const RefValue rv = ref_decode(f, c);
    const auto code = static_cast<std::uint32_t>(c);
    if (rv.kind == Kind::nan) {
      (rv.negative ? R.nan_neg : R.nan_pos) = code;
      continue;
    }
    if (rv.kind == Kind::inf) {
      if (!rv.negative) R.inf_pos = code;
      continue;
    }
    if (rv.negative) continue;
    entries.push_back({rv.as_double(), code, rv});
  }
  // e8m0 has no zero: the contract clamps results that round to zero to its smallest value,
  // code 0. A virtual zero with that code lets the same search serve it.
  if (f.specials == Specials::e8m0) entries.push_back({0.0, 0u, {Kind::finite, false, 0, 0}});
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.v < b.v; });
  for (const auto& e : entries) {
    if (!R.values.empty() && R.values.back() == e.v) continue;
    R.values.push_back(e.v);
    R.codes.push_back(e.code);
    R.exact.push_back(cpp_rational(e.rv.sig) * pow2(e.rv.exp));
    // Quantum of this value's binade: 2^(max(exponent of msb, emin) - M).
    const int emin = f.specials == Specials::e8m0 ? -f.bias : 1 - f.bias;
    int msb = e.rv.sig == 0 ? emin : e.rv.exp + (63 - std::countl_zero(
                                                          static_cast<std::uint64_t>(e.rv.sig)));
    R.quantum.push_back(pow2(std::max(msb, emin) - f.mantissa_bits));
  }
  return R;
}

// What the reference expects: a code, "any NaN", or an exception.
struct Want {
  enum { code, nan, error } what;
  std::uint32_t value = 0;
};

// Step 2, once per input: where |x| falls in the list, with exact comparisons on rationals.
struct Neighbours {
  bool exact = false;     // |x| is values[hi_i]
  std::size_t lo_i = 0, hi_i = 0;
  bool past_max = false;  // hi is max + quantum: choosing it overflows
  int nearer = 0;         // -1: lo is nearer, +1: hi is nearer, 0: a tie
  bool tie_goes_up = false;
};

Neighbours ref_neighbours(const RefFormat& R, const RefValue& x) {
  Neighbours nb;
  const cpp_rational ax = cpp_rational(x.sig) * pow2(x.exp);
  const double ad = std::ldexp(static_cast<double>(x.sig), x.exp);
  const auto it = std::lower_bound(R.values.begin(), R.values.end(), ad);
  nb.hi_i = static_cast<std::size_t>(it - R.values.begin());
  if (nb.hi_i < R.values.size() && R.exact[nb.hi_i] == ax) {
    nb.exact = true;
    return nb;
  }
  nb.lo_i = nb.hi_i - 1;  // exists: 0 (or e8m0's virtual 0) is always listed
  nb.past_max = nb.hi_i == R.values.size();
  const cpp_rational lo = R.exact[nb.lo_i];
  const cpp_rational hi = nb.past_max ? lo + R.quantum[nb.lo_i] : R.exact[nb.hi_i];
  const cpp_rational d_lo = ax - lo, d_hi = hi - ax;
  nb.nearer = d_lo < d_hi ? -1 : (d_hi < d_lo ? 1 : 0);
  // Step 3's tie rule: the even significand in units of x's quantum (lo's binade quantum).
  const cpp_rational n = lo / R.quantum[nb.lo_i];
  nb.tie_goes_up = (numerator(n) % 2) != 0;
  return nb;
}

// Steps 3-4 for an input x = (-1)^neg * sig * 2^exp (or Inf/NaN) and its neighbours.
Want ref_round(const RefFormat& R, const RefValue& x, const Neighbours& nb, Rounding mode,
               Overflow pol) {
  const FormatSpec& f = R.f;
  const std::uint32_t sign = x.negative ? sign_mask(f) : 0u;
  auto nan_want = [&]() -> Want {
    if (!R.nan_pos && !R.nan_neg) return {Want::error};
    return {Want::nan};
  };
  if (x.kind == Kind::nan) return nan_want();
  const bool nonzero = x.kind == Kind::inf || x.sig != 0;
  if (!f.is_signed && x.negative && nonzero) return nan_want();
  auto overflow_want = [&](bool infinite_input) -> Want {
    const bool toward_zero = mode == Rounding::rz || (mode == Rounding::rd && !x.negative) ||
                             (mode == Rounding::ru && x.negative);
    if (pol == Overflow::saturate || (toward_zero && !infinite_input))
      return {Want::code, R.codes.back() | sign};
    if (R.inf_pos) return {Want::code, *R.inf_pos | sign};
    if (R.nan_pos || R.nan_neg) return {Want::nan};
    return {Want::error};
  };
  if (x.kind == Kind::inf) return overflow_want(true);
  auto zero_or_code = [&](std::size_t i) -> Want {
    if (R.values[i] == 0.0)  // signed zero where the format has -0
      return {Want::code, (x.negative && has_negative_zero(f)) ? sign_mask(f) : R.codes[i]};
    return {Want::code, R.codes[i] | sign};
  };
  if (nb.exact) return zero_or_code(nb.hi_i);
  bool up;  // directions mirrored for negative x
  switch (mode) {
    case Rounding::rz: up = false; break;
    case Rounding::ru: up = !x.negative; break;
    case Rounding::rd: up = x.negative; break;
    case Rounding::rna: up = nb.nearer >= 0; break;
    default: up = nb.nearer > 0 || (nb.nearer == 0 && nb.tie_goes_up); break;  // rne
  }
  if (!up) return zero_or_code(nb.lo_i);
  if (nb.past_max) return overflow_want(false);
  return zero_or_code(nb.hi_i);
}

void check_inputs_from(const char* input_name) {
  const FormatSpec in = format_by_name(input_name);
  std::uint64_t total_fail = 0;
  for (const auto& name : preset_format_names()) {
    const FormatSpec f = format_by_name(name);
    const RefFormat R = make_ref(f);
    std::uint64_t failures = 0, checked = 0;
    for (std::uint32_t bits = 0; bits < 65536; ++bits) {
      const RefValue x = ref_decode(in, bits);
      const double xd = x.as_double();
      Neighbours nb;
      if (R.listed && x.kind == Kind::finite) nb = ref_neighbours(R, x);
      for (Rounding mode : kModes)
        for (Overflow pol : kPolicies) {
          Want want;
          if (R.listed) {
            want = ref_round(R, x, nb, mode, pol);
          } else if (x.kind == Kind::finite) {
            // fp32 and wider: fp16/bf16 values are fp32 values; encode must return them.
            want = {Want::code, 0};
          } else if (x.kind == Kind::nan) {
            want = {Want::nan};
          } else {  // +-Inf into a wide IEEE format: Inf, or max finite under saturate
            const std::uint32_t top = (1u << f.exponent_bits) - 1u;
            const std::uint32_t s = x.negative ? (1u << (f.exponent_bits + f.mantissa_bits)) : 0u;
            want = {Want::code, pol == Overflow::saturate
                                    ? (((top - 1u) << f.mantissa_bits) | ((1u << f.mantissa_bits) - 1u) | s)
                                    : ((top << f.mantissa_bits) | s)};
          }
          std::uint32_t got = 0;
          bool threw = false;
          try {
            got = encode(xd, f, RoundingSpec{mode, pol, 32});
          } catch (const std::domain_error&) {
            threw = true;
          }
          bool ok;
          if (!R.listed && x.kind == Kind::finite) {
            const RefValue g = ref_decode(f, got);
            ok = !threw && g.kind == Kind::finite && g.as_double() == xd &&
                 std::signbit(g.as_double()) == std::signbit(xd);
          } else {
            switch (want.what) {
              case Want::error: ok = threw; break;
              case Want::nan: ok = !threw && ref_decode(f, got).kind == Kind::nan; break;
              default: ok = !threw && got == want.value;
            }
          }
          ++checked;
          if (!ok && failures++ < 8)
            std::printf("%s %s %s x=0x%04x (%s %.17g) => got %s want %s\n", name.c_str(),
                        std::string(to_string(mode)).c_str(), std::string(to_string(pol)).c_str(),
                        bits, input_name, xd, threw ? "exception" : format_code(f, got).c_str(),
                        want.what == Want::error ? "exception"
                        : want.what == Want::nan ? "nan"
                                                 : format_code(f, want.value).c_str());
        }
    }
    if (failures) std::printf("%s from %s: %llu failures of %llu\n", name.c_str(), input_name,
                              static_cast<unsigned long long>(failures),
                              static_cast<unsigned long long>(checked));
    total_fail += failures;
  }
  CHECK(total_fail == 0);
}

}  // namespace

TEST_CASE("the reference's value lists match the specifications", "[reference]") {
  // Spec constants, written from the OCP OFP8 / MX specs and IEEE 754, not from fp8sim.
  struct Spec {
    const char* name;
    double max, min_subnormal;
  };
  const Spec specs[] = {
      {"e4m3", 448.0, 0x1p-9},        {"e5m2", 57344.0, 0x1p-16},
      {"e5m6", 65024.0, 0x1p-20},     {"e4m3fnuz", 240.0, 0x1p-10},
      {"e5m2fnuz", 57344.0, 0x1p-17}, {"e3m4", 15.5, 0x1p-6},
      {"e2m3", 7.5, 0.125},           {"e3m2", 28.0, 0.0625},
      {"e2m1", 6.0, 0.5},             {"ue8m0", 0x1p127, 0x1p-127},
      {"fp16", 65504.0, 0x1p-24},     {"bf16", 0x1.fep127, 0x1p-133},
      {"tf32", 0x1.ffcp127, 0x1p-136},
  };
  for (const auto& s : specs) {
    const RefFormat R = make_ref(format_by_name(s.name));
    INFO(s.name);
    CHECK(R.values.back() == s.max);
    CHECK(R.values[s.name == std::string("ue8m0") ? 0 : 1] == (s.name == std::string("ue8m0") ? 0.0 : s.min_subnormal));
    if (s.name == std::string("ue8m0")) CHECK(R.values[1] == s.min_subnormal);
  }
}

TEST_CASE("decode agrees with the reference's decoding on every code", "[decode]") {
  for (const auto& name : preset_format_names()) {
    const FormatSpec f = format_by_name(name);
    if (total_bits(f) > 19) continue;
    std::uint64_t failures = 0;
    for (std::uint32_t c = 0; c < code_count(f); ++c) {
      const RefValue rv = ref_decode(f, c);
      const double got = decode(f, c), want = rv.as_double();
      const bool ok = rv.kind == Kind::nan
                          ? std::isnan(got)
                          : (got == want && std::signbit(got) == std::signbit(want));
      if (!ok && failures++ < 8)
        std::printf("decode %s code=%s => got %s want %s\n", name.c_str(),
                    format_code(f, c).c_str(), format_value(got).c_str(),
                    format_value(want).c_str());
    }
    INFO(name);
    CHECK(failures == 0);
  }
}

TEST_CASE("every fp16 input rounds as the Boost reference does", "[fp16]") {
  check_inputs_from("fp16");
}

TEST_CASE("every bf16 input rounds as the Boost reference does", "[bf16]") {
  check_inputs_from("bf16");
}
