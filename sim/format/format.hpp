// format: a number format described as data (FormatSpec), its presets, and decoding.
//
// Every format fp8sim knows is one FormatSpec value: sign, exponent and mantissa widths,
// bias, and the convention for special values. There is no class per format and no switch
// on a format's name outside `format_by_name`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fp8sim {

// How the all-ones exponent (and a few other codes) are spent.
enum class Specials : std::uint8_t {
  ieee,    // IEEE 754: exponent all ones is Inf (mantissa 0) or NaN. E5M2, fp16, bf16, fp32.
  fn,      // "finite, NaN": no Inf; only all-ones exponent AND mantissa is NaN. OCP E4M3.
  fnuz,    // "finite, NaN, unsigned zero": 0x80 (sign only) is the one NaN; no -0, no Inf.
  finite,  // every code is a finite number: MX FP6 (e2m3, e3m2) and FP4 (e2m1).
  e8m0,    // unsigned powers of two 2^(e-bias): no zero, no sign, 0xFF is NaN. MX scales.
};

struct FormatSpec {
  std::string name;        // canonical name, as OCP/LLVM spell it ("e4m3fn" is shown as "e4m3")
  int exponent_bits = 0;   // 1..8
  int mantissa_bits = 0;   // 0..23 (explicit fraction bits)
  int bias = 0;            // value = 2^(field - bias) * 1.mantissa for normal codes
  Specials specials = Specials::ieee;
  bool is_signed = true;   // false only for scale formats (ue8m0, ue4m3)

  friend bool operator==(const FormatSpec&, const FormatSpec&) = default;
};

// ---- construction -------------------------------------------------------------------------

// A preset by name, or any "eXmY" (IEEE convention, bias 2^(X-1)-1), e.g. "e6m9".
// Names: e4m3 (alias e4m3fn), e5m2, e5m6, e4m3fnuz, e5m2fnuz, e3m4, e2m3 (alias e2m3fn),
// e3m2 (alias e3m2fn), e2m1 (alias e2m1fn), ue8m0 (alias e8m0fnu), ue4m3, fp16 (f16, half),
// bf16, tf32, fp32 (f32, float), e8m13 (Hopper's accumulator output).
// Throws std::invalid_argument("unknown format 'x' (known: ...)") otherwise.
FormatSpec format_by_name(std::string_view name);

// The names format_by_name accepts as presets (aliases excluded), in a stable order.
const std::vector<std::string>& preset_format_names();

// Checks widths and bias; throws std::invalid_argument naming the problem.
void validate(const FormatSpec& f);

// ---- derived properties --------------------------------------------------------------------

int total_bits(const FormatSpec& f);                  // sign + exponent + mantissa
std::uint32_t code_count(const FormatSpec& f);        // 2^total_bits (fp32: 0 meaning 2^32)
std::uint32_t sign_mask(const FormatSpec& f);         // 0 for unsigned formats
bool has_inf(const FormatSpec& f);
bool has_nan(const FormatSpec& f);
bool has_negative_zero(const FormatSpec& f);
bool has_subnormals(const FormatSpec& f);
int min_normal_exponent(const FormatSpec& f);         // e8m0: exponent of code 0
int max_exponent(const FormatSpec& f);                // exponent of the largest finite value
std::uint32_t max_finite_magnitude_code(const FormatSpec& f);
std::uint32_t nan_code(const FormatSpec& f, bool negative = false);  // canonical NaN
std::uint32_t inf_code(const FormatSpec& f, bool negative = false);  // precondition has_inf
double max_finite(const FormatSpec& f);
double min_subnormal(const FormatSpec& f);            // smallest positive value

// ---- decoding ------------------------------------------------------------------------------

enum class ValueClass : std::uint8_t { zero, subnormal, normal, inf, nan };

ValueClass classify(const FormatSpec& f, std::uint32_t code);
bool is_valid_code(const FormatSpec& f, std::uint64_t code);  // code < 2^total_bits

// Exact value of a code (every format here fits a double exactly). NaN codes give a quiet
// NaN carrying the code's sign; Inf codes give +-inf.
double decode(const FormatSpec& f, std::uint32_t code);

// Integer significand and exponent of a finite code: |value| = significand * 2^exponent,
// with significand < 2^(mantissa_bits+1) and exponent = (field or 1) - bias - mantissa_bits.
struct Decoded {
  bool negative;
  std::uint32_t significand;
  int exponent;
};
Decoded decode_parts(const FormatSpec& f, std::uint32_t code);

// ---- enumeration and neighbours ------------------------------------------------------------

// Every code 0 .. 2^bits-1 in order (throws for formats wider than 24 bits).
std::vector<std::uint32_t> all_codes(const FormatSpec& f);
// The next larger / smaller representable value's code (toward +inf / -inf). NaN stays NaN;
// +max steps to +inf where it exists, else stays. Zeros of both signs step to +-min subnormal.
std::uint32_t next_up(const FormatSpec& f, std::uint32_t code);
std::uint32_t next_down(const FormatSpec& f, std::uint32_t code);
// Unit in the last place at a finite code: the gap to the next value away from zero
// (at the largest finite value, the gap below it).
double ulp(const FormatSpec& f, std::uint32_t code);

// "0x3f" style, with two hex digits per byte of the format.
std::string format_code(const FormatSpec& f, std::uint32_t code);
// Shortest exact decimal for a value (%.17g is enough for fp32 values; we print exactly),
// "nan", "inf", "-inf".
std::string format_value(double v);

}  // namespace fp8sim
