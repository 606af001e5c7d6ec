// operand: an operand of the GEMM engines, decoded once from codes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "accumulator/accumulator.hpp"
#include "format/format.hpp"

namespace fp8sim {

// An operand decoded once for the engine: each element's exact value and the exponent the
// accumulator aligns on (floor(log2|v|) for normal values, the format's minimum normal
// exponent for subnormals, kZeroExponent for zeros). Row-major rows x cols (K along cols).
struct Operand {
  static constexpr int kZeroExponent = -1000;
  int rows = 0, cols = 0;
  FormatSpec format;
  std::vector<float> value;
  std::vector<std::int16_t> exponent;
  bool has_special = false;  // some element is NaN or Inf
};
// From codes of `f` (any format up to 16 bits; codes are validated: bad_code_message's line).
Operand decode_operand(const FormatSpec& f, int rows, int cols, std::span<const std::uint8_t> codes);
Operand decode_operand(const FormatSpec& f, int rows, int cols, std::span<const std::uint32_t> codes);
// The one-line error for `code`, not a code of `f`, at (row, col) of an operand.
std::string bad_code_message(const FormatSpec& f, std::uint64_t code, std::size_t row,
                             std::size_t col);
// From values already representable in `f` (e.g. quantize() results); throws
// std::invalid_argument if one is not.
Operand operand_from_values(const FormatSpec& f, int rows, int cols, std::span<const double> values);

// op with zero columns appended up to `cols` (+0 codes: value 0, the zero exponent): a
// kernel's masked K tail.
Operand zero_padded(const Operand& op, int cols);

// With a model that unpacks its operands (AccumulatorSpec::unpack), a copy of op with the
// alignment exponents of the unpacked values; otherwise nothing (op is used as it is).
std::optional<Operand> unpacked(const AccumulatorSpec& m, const Operand& op);

}  // namespace fp8sim
