// operand: codes decoded once into the values and alignment exponents the engines read
// (operand.hpp).
#include "gemm/operand.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>

#include "format/rounding.hpp"

namespace fp8sim {

std::string bad_code_message(const FormatSpec& f, std::uint64_t code, std::size_t row,
                             std::size_t col) {
  return fmt::format("code {:#x} at ({}, {}) is not a code of {}", code, row, col, f.name);
}

namespace {

struct DecodedCode {
  float value;
  std::int16_t exponent;
  bool special;
};

DecodedCode decode_code(const FormatSpec& f, std::uint32_t code) {
  const ValueClass cls = classify(f, code);
  const double v = decode(f, code);
  switch (cls) {
    case ValueClass::nan:
    case ValueClass::inf: return {static_cast<float>(v), 0, true};
    case ValueClass::zero: return {static_cast<float>(v), Operand::kZeroExponent, false};
    case ValueClass::subnormal:
      return {static_cast<float>(v), static_cast<std::int16_t>(min_normal_exponent(f)), false};
    case ValueClass::normal: break;
  }
  const Decoded d = decode_parts(f, code);
  const int e = d.exponent + static_cast<int>(std::bit_width(d.significand)) - 1;
  return {static_cast<float>(v), static_cast<std::int16_t>(e), false};
}

template <class Code>
Operand decode_codes(const FormatSpec& f, int rows, int cols, std::span<const Code> codes) {
  validate(f);
  if (rows < 0 || cols < 0 || codes.size() != static_cast<std::size_t>(rows) * cols)
    throw std::invalid_argument(fmt::format("operand of {} codes is not {} x {}", codes.size(),
                                            rows, cols));
  Operand op;
  op.rows = rows;
  op.cols = cols;
  op.format = f;
  op.value.resize(codes.size());
  op.exponent.resize(codes.size());
  const bool tabled = total_bits(f) <= 16;
  std::vector<DecodedCode> table;
  if (tabled) {
    table.reserve(code_count(f));
    for (std::uint32_t c = 0; c < code_count(f); ++c) table.push_back(decode_code(f, c));
  }
  for (std::size_t i = 0; i < codes.size(); ++i) {
    if (!is_valid_code(f, codes[i]))
      throw std::invalid_argument(
          bad_code_message(f, codes[i], i / std::size_t(cols), i % std::size_t(cols)));
    const DecodedCode d = tabled ? table[codes[i]] : decode_code(f, codes[i]);
    op.value[i] = d.value;
    op.exponent[i] = d.exponent;
    op.has_special = op.has_special || d.special;
  }
  return op;
}

}  // namespace

Operand decode_operand(const FormatSpec& f, int rows, int cols,
                       std::span<const std::uint8_t> codes) {
  if (total_bits(f) > 8)
    throw std::invalid_argument(fmt::format("format {} has {} bits: 8-bit codes cannot hold it",
                                            f.name, total_bits(f)));
  return decode_codes(f, rows, cols, codes);
}

Operand decode_operand(const FormatSpec& f, int rows, int cols,
                       std::span<const std::uint32_t> codes) {
  return decode_codes(f, rows, cols, codes);
}

Operand operand_from_values(const FormatSpec& f, int rows, int cols,
                            std::span<const double> values) {
  std::vector<std::uint32_t> codes(values.size());
  const RoundingSpec exact{Rounding::rne, Overflow::nonsat, 32};
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    const std::uint32_t c = encode(v, f, exact);
    const double back = decode(f, c);
    if (!(back == v || (std::isnan(back) && std::isnan(v))) ||
        (v == 0.0 && std::signbit(v) != std::signbit(back) && has_negative_zero(f)))
      throw std::invalid_argument(fmt::format("value {} at ({}, {}) is not representable in {}",
                                              format_value(v), i / (cols ? cols : 1),
                                              i % (cols ? cols : 1), f.name));
    codes[i] = c;
  }
  return decode_codes(f, rows, cols, std::span<const std::uint32_t>(codes));
}

Operand zero_padded(const Operand& op, int cols) {
  Operand o;
  o.rows = op.rows;
  o.cols = cols;
  o.format = op.format;
  o.has_special = op.has_special;
  o.value.assign(std::size_t(op.rows) * cols, 0.0f);
  o.exponent.assign(o.value.size(), Operand::kZeroExponent);
  for (int r = 0; r < op.rows; ++r) {
    const std::size_t from = std::size_t(r) * op.cols, to = std::size_t(r) * cols;
    std::copy_n(op.value.begin() + from, op.cols, o.value.begin() + to);
    std::copy_n(op.exponent.begin() + from, op.cols, o.exponent.begin() + to);
  }
  return o;
}

std::optional<Operand> unpacked(const AccumulatorSpec& m, const Operand& op) {
  if (!m.unpack) return std::nullopt;
  Operand u = op;
  for (std::size_t i = 0; i < u.value.size(); ++i)
    if (u.value[i] != 0.0f && std::isfinite(u.value[i]))
      u.exponent[i] = static_cast<std::int16_t>(operand_exponent(m, op.format, u.value[i]));
  return u;
}

}  // namespace fp8sim
