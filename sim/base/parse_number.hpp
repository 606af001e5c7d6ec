// parse_number: numbers read from text (command lines, code lists), strictly.
//
// The whole text must be the number: no spaces, no empty text, no sign where none is allowed,
// no octal (a leading 0 followed by digits is an error, not 8), no silent clamping or
// wrapping (20 digits are out of range, not 2^64 - 1). Errors are std::invalid_argument with
// one line naming `what` and the text (cut to limits.hpp's kMaxQuotedValue).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fp8sim {

// A non-negative integer, decimal ("42") or hex ("0x2a"), at most `max`.
std::uint64_t parse_unsigned(std::string_view text, std::string_view what, std::uint64_t max);

// A real value from text: decimal, hex float (0x1.8p3), inf, -inf, nan. Exactly `lo` when the
// text is a double, else strictly between `lo` (its neighbour toward zero among doubles,
// possibly 0 or +-DBL_MAX) and the next double away from zero: a decimal is bracketed by
// parsing it twice, rounded down and up, so it is rounded into a target format once, not
// first to a double (1.0625000000000000000001 is above e4m3's tie at 1.0625; 1e-400 is a
// positive number; 1e400 is finite, not Inf).
struct ParsedValue {
  double lo;
  bool exact;
};
ParsedValue parse_value(std::string_view text);

}  // namespace fp8sim
