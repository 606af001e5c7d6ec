// format: presets, derived properties and decoding of FormatSpec values.
#include "format/format.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace fp8sim {
namespace {

struct Preset {
  const char* name;
  int e, m, bias;
  Specials specials;
  bool is_signed;
  const char* aliases;  // space separated
};

// The preset table. Sources: OCP 8-bit Floating Point Specification (OFP8) rev 1.0 for
// e4m3/e5m2; OCP Microscaling Formats (MX) v1.0 for e2m3/e3m2/e2m1/ue8m0; LLVM/ml_dtypes
// for the fnuz variants (bias one larger, 0x80 = NaN) and e3m4 (IEEE, bias 3); NVIDIA's PTX
// ISA (block-scaled MMA, NVFP4) for ue4m3, E4M3 without its sign bit (0x7f = NaN);
// DeepSeek-V3 §3.3 for e5m6; IEEE 754 for fp16/bf16/fp32; NVIDIA's TF32 (e8m10).
// e8m13 is the output grid of Hopper's FP8 tensor-core accumulator (see accumulator presets).
constexpr Preset kPresets[] = {
    {"e4m3", 4, 3, 7, Specials::fn, true, "e4m3fn float8_e4m3fn"},
    {"e5m2", 5, 2, 15, Specials::ieee, true, "float8_e5m2"},
    {"e5m6", 5, 6, 15, Specials::ieee, true, ""},
    {"e4m3fnuz", 4, 3, 8, Specials::fnuz, true, "float8_e4m3fnuz"},
    {"e5m2fnuz", 5, 2, 16, Specials::fnuz, true, "float8_e5m2fnuz"},
    {"e3m4", 3, 4, 3, Specials::ieee, true, "float8_e3m4"},
    {"e2m3", 2, 3, 1, Specials::finite, true, "e2m3fn float6_e2m3fn"},
    {"e3m2", 3, 2, 3, Specials::finite, true, "e3m2fn float6_e3m2fn"},
    {"e2m1", 2, 1, 1, Specials::finite, true, "e2m1fn float4_e2m1fn"},
    {"ue8m0", 8, 0, 127, Specials::e8m0, false, "e8m0fnu float8_e8m0fnu e8m0"},
    {"ue4m3", 4, 3, 7, Specials::fn, false, ""},
    {"fp16", 5, 10, 15, Specials::ieee, true, "f16 half float16"},
    {"bf16", 8, 7, 127, Specials::ieee, true, "bfloat16"},
    {"tf32", 8, 10, 127, Specials::ieee, true, ""},
    {"fp32", 8, 23, 127, Specials::ieee, true, "f32 float float32"},
    {"e8m13", 8, 13, 127, Specials::ieee, true, ""},
};

FormatSpec from_preset(const Preset& p) {
  return FormatSpec{p.name, p.e, p.m, p.bias, p.specials, p.is_signed};
}

bool alias_matches(const char* aliases, std::string_view name) {
  std::string_view all(aliases);
  while (!all.empty()) {
    auto sp = all.find(' ');
    auto word = all.substr(0, sp);
    if (word == name) return true;
    if (sp == std::string_view::npos) break;
    all.remove_prefix(sp + 1);
  }
  return false;
}

// Parses "eXmY" with decimal X and Y; returns false when the text has another shape.
bool parse_exmy(std::string_view s, int& e, int& m) {
  if (s.size() < 4 || s[0] != 'e') return false;
  auto mpos = s.find('m');
  if (mpos == std::string_view::npos || mpos < 2 || mpos + 1 >= s.size()) return false;
  auto digits = [](std::string_view d, int& out) {
    if (d.empty() || d.size() > 3) return false;
    out = 0;
    for (char c : d) {
      if (c < '0' || c > '9') return false;
      out = out * 10 + (c - '0');
    }
    return true;
  };
  return digits(s.substr(1, mpos - 1), e) && digits(s.substr(mpos + 1), m);
}

std::uint32_t low_mask(int bits) { return bits >= 32 ? 0xffffffffu : ((1u << bits) - 1u); }

}  // namespace

const std::vector<std::string>& preset_format_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& p : kPresets) v.emplace_back(p.name);
    return v;
  }();
  return names;
}

FormatSpec format_by_name(std::string_view name) {
  for (const auto& p : kPresets)
    if (name == p.name || alias_matches(p.aliases, name)) return from_preset(p);
  int e = 0, m = 0;
  if (parse_exmy(name, e, m)) {
    // Range first: the bias below shifts by e - 1.
    if (e < 1 || e > 8 || m > 23)
      throw std::invalid_argument(fmt::format(
          "format '{}' out of range: exponent bits must be 1..8 and mantissa bits 0..23", name));
    FormatSpec f{std::string(name), e, m, (1 << (e - 1 > 0 ? e - 1 : 0)) - 1, Specials::ieee,
                 true};
    validate(f);
    return f;
  }
  std::string known;
  for (const auto& n : preset_format_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument(
      fmt::format("unknown format '{}' (known: {}, or any eXmY)", name, known));
}

void validate(const FormatSpec& f) {
  if (f.exponent_bits < 1 || f.exponent_bits > 8)
    throw std::invalid_argument(
        fmt::format("format '{}': exponent bits {} not in 1..8", f.name, f.exponent_bits));
  if (f.mantissa_bits < 0 || f.mantissa_bits > 23)
    throw std::invalid_argument(
        fmt::format("format '{}': mantissa bits {} not in 0..23", f.name, f.mantissa_bits));
  if (f.bias < -126 || f.bias > 254)
    throw std::invalid_argument(fmt::format("format '{}': bias {} out of range", f.name, f.bias));
  if (f.specials == Specials::e8m0 && (f.is_signed || f.mantissa_bits != 0))
    throw std::invalid_argument(
        fmt::format("format '{}': the e8m0 convention needs an unsigned format with no mantissa",
                    f.name));
  if (!f.is_signed && f.specials != Specials::e8m0 && f.specials != Specials::fn)
    throw std::invalid_argument(
        fmt::format("format '{}': only the e8m0 and fn conventions are unsigned", f.name));
  if (f.specials == Specials::fn && f.exponent_bits + f.mantissa_bits < 2)
    throw std::invalid_argument(fmt::format("format '{}': too narrow for FN specials", f.name));
}

int total_bits(const FormatSpec& f) {
  return (f.is_signed ? 1 : 0) + f.exponent_bits + f.mantissa_bits;
}
std::uint32_t code_count(const FormatSpec& f) {
  int b = total_bits(f);
  return b >= 32 ? 0u : (1u << b);
}
std::uint32_t sign_mask(const FormatSpec& f) {
  return f.is_signed ? (1u << (f.exponent_bits + f.mantissa_bits)) : 0u;
}
bool has_inf(const FormatSpec& f) { return f.specials == Specials::ieee; }
bool has_nan(const FormatSpec& f) {
  switch (f.specials) {
    case Specials::ieee: return f.mantissa_bits > 0;  // with no mantissa, all-ones is only Inf
    case Specials::fn:
    case Specials::fnuz:
    case Specials::e8m0: return true;
    case Specials::finite: return false;
  }
  return false;
}
bool has_negative_zero(const FormatSpec& f) {
  return f.is_signed && f.specials != Specials::fnuz;
}
bool has_subnormals(const FormatSpec& f) { return f.specials != Specials::e8m0; }

int min_normal_exponent(const FormatSpec& f) {
  // e8m0 has no subnormal range: code 0 is 2^-bias.
  return f.specials == Specials::e8m0 ? -f.bias : 1 - f.bias;
}

std::uint32_t max_finite_magnitude_code(const FormatSpec& f) {
  const std::uint32_t all = low_mask(f.exponent_bits + f.mantissa_bits);
  switch (f.specials) {
    case Specials::ieee: return all - (1u << f.mantissa_bits);  // top field minus one, all ones
    case Specials::fn: return all - 1u;                          // 0x7e for e4m3
    case Specials::fnuz:
    case Specials::finite: return all;
    case Specials::e8m0: return all - 1u;                        // 0xfe
  }
  return all;
}

int max_exponent(const FormatSpec& f) {
  return static_cast<int>(max_finite_magnitude_code(f) >> f.mantissa_bits) - f.bias;
}

std::uint32_t nan_code(const FormatSpec& f, bool negative) {
  if (!has_nan(f)) throw std::domain_error(fmt::format("format '{}' has no NaN", f.name));
  const std::uint32_t all = low_mask(f.exponent_bits + f.mantissa_bits);
  switch (f.specials) {
    case Specials::fnuz: return sign_mask(f);  // the single NaN, 0x80
    case Specials::e8m0: return all;           // 0xff
    default: return all | (negative ? sign_mask(f) : 0u);
  }
}

std::uint32_t inf_code(const FormatSpec& f, bool negative) {
  if (!has_inf(f)) throw std::domain_error(fmt::format("format '{}' has no Inf", f.name));
  return (low_mask(f.exponent_bits) << f.mantissa_bits) | (negative ? sign_mask(f) : 0u);
}

bool is_valid_code(const FormatSpec& f, std::uint64_t code) {
  return code < (std::uint64_t{1} << total_bits(f));
}

ValueClass classify(const FormatSpec& f, std::uint32_t code) {
  const std::uint32_t mag = code & low_mask(f.exponent_bits + f.mantissa_bits);
  const std::uint32_t field = mag >> f.mantissa_bits;
  const std::uint32_t frac = mag & low_mask(f.mantissa_bits);
  const std::uint32_t top = low_mask(f.exponent_bits);
  switch (f.specials) {
    case Specials::ieee:
      if (field == top) return frac == 0 ? ValueClass::inf : ValueClass::nan;
      break;
    case Specials::fn:
      if (mag == low_mask(f.exponent_bits + f.mantissa_bits)) return ValueClass::nan;
      break;
    case Specials::fnuz:
      if (code == sign_mask(f)) return ValueClass::nan;
      break;
    case Specials::finite: break;
    case Specials::e8m0: return mag == 0xffu ? ValueClass::nan : ValueClass::normal;
  }
  if (field == 0) return frac == 0 ? ValueClass::zero : ValueClass::subnormal;
  return ValueClass::normal;
}

Decoded decode_parts(const FormatSpec& f, std::uint32_t code) {
  const std::uint32_t mag = code & low_mask(f.exponent_bits + f.mantissa_bits);
  const int field = static_cast<int>(mag >> f.mantissa_bits);
  const std::uint32_t frac = mag & low_mask(f.mantissa_bits);
  Decoded d{(code & sign_mask(f)) != 0, 0, 0};
  if (f.specials == Specials::e8m0) {
    d.significand = 1;
    d.exponent = field - f.bias;
  } else if (field == 0) {
    d.significand = frac;  // subnormal (or zero): 0.frac * 2^(1-bias)
    d.exponent = 1 - f.bias - f.mantissa_bits;
  } else {
    d.significand = (1u << f.mantissa_bits) | frac;
    d.exponent = field - f.bias - f.mantissa_bits;
  }
  return d;
}

double decode(const FormatSpec& f, std::uint32_t code) {
  const bool neg = (code & sign_mask(f)) != 0;
  switch (classify(f, code)) {
    case ValueClass::nan: {
      double q = std::numeric_limits<double>::quiet_NaN();
      return neg ? -q : q;
    }
    case ValueClass::inf:
      return neg ? -std::numeric_limits<double>::infinity()
                 : std::numeric_limits<double>::infinity();
    default: break;
  }
  const Decoded d = decode_parts(f, code);
  const double v = std::ldexp(static_cast<double>(d.significand), d.exponent);
  return d.negative ? -v : v;
}

double max_finite(const FormatSpec& f) { return decode(f, max_finite_magnitude_code(f)); }
double min_subnormal(const FormatSpec& f) {
  return decode(f, f.specials == Specials::e8m0 ? 0u : 1u);
}

std::vector<std::uint32_t> all_codes(const FormatSpec& f) {
  if (total_bits(f) > 24)
    throw std::invalid_argument(fmt::format("format '{}' has too many codes to list", f.name));
  std::vector<std::uint32_t> v(code_count(f));
  for (std::uint32_t i = 0; i < v.size(); ++i) v[i] = i;
  return v;
}

namespace {
// Step the magnitude of a finite code one code away from (+1) or toward (-1) zero.
std::uint32_t step_up_from(const FormatSpec& f, std::uint32_t code) {
  // Next value toward +inf.
  const std::uint32_t s = sign_mask(f);
  const std::uint32_t mag = code & ~s;
  const ValueClass c = classify(f, code);
  if (c == ValueClass::nan) return code;
  if (c == ValueClass::inf) return (code & s) ? (max_finite_magnitude_code(f) | s) : code;
  if (c == ValueClass::zero) return f.specials == Specials::e8m0 ? code : 1u;
  if (code & s) {  // negative: magnitude shrinks
    std::uint32_t m = mag - 1;
    if (m == 0) return has_negative_zero(f) ? s : 0u;
    return m | s;
  }
  if (mag == max_finite_magnitude_code(f)) return has_inf(f) ? inf_code(f) : code;
  return mag + 1;
}
}  // namespace

std::uint32_t next_up(const FormatSpec& f, std::uint32_t code) { return step_up_from(f, code); }

std::uint32_t next_down(const FormatSpec& f, std::uint32_t code) {
  // NaN first: fnuz's NaN 0x80 would otherwise negate to +0 below.
  if (classify(f, code) == ValueClass::nan) return code;
  if (!f.is_signed) {
    if (code == 0) return code;
    return code - 1;
  }
  // next_down(x) = -next_up(-x); fnuz has no -0, so its zero maps to itself under negation.
  const std::uint32_t s = sign_mask(f);
  auto negate = [&](std::uint32_t c) {
    if (f.specials == Specials::fnuz && (c & ~s) == 0) return 0u;
    return c ^ s;
  };
  return negate(step_up_from(f, negate(code)));
}

double ulp(const FormatSpec& f, std::uint32_t code) {
  const ValueClass c = classify(f, code);
  if (c == ValueClass::nan || c == ValueClass::inf)
    return std::numeric_limits<double>::quiet_NaN();
  const std::uint32_t mag = code & ~sign_mask(f);
  if (mag == max_finite_magnitude_code(f)) return decode(f, mag) - decode(f, mag - 1);
  return decode(f, mag + 1) - decode(f, mag);
}

std::string format_code(const FormatSpec& f, std::uint32_t code) {
  const int digits = (total_bits(f) + 7) / 8 * 2;
  return fmt::format("0x{:0{}x}", code, digits);
}

std::string format_value(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // 767 significant digits print any double exactly; %g drops the trailing zeros.
  return fmt::format("{:.767g}", v);
}

}  // namespace fp8sim
