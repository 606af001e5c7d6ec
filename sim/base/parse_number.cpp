// parse_number: strict integer and real-value parsing.
#include "base/parse_number.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cfenv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "base/limits.hpp"

namespace fp8sim {

std::uint64_t parse_unsigned(std::string_view text, std::string_view what, std::uint64_t max) {
  const std::string shown = limits::quoted(std::string(text));
  auto bad = [&](std::string_view why) {
    return std::invalid_argument(fmt::format("bad {} '{}': {}", what, shown, why));
  };
  if (text.empty()) throw bad("empty (write a decimal or 0x hex integer)");
  if (text == "0x" || text == "0X") throw bad("no digits after 0x");
  const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  const std::string_view digits = hex ? text.substr(2) : text;
  if (!hex && text.size() > 1 && text[0] == '0')
    throw bad("leading 0 (no octal: write a decimal or 0x hex integer)");
  std::uint64_t v = 0;
  const unsigned base = hex ? 16 : 10;
  for (const char ch : digits) {
    unsigned d = 0;
    if (ch >= '0' && ch <= '9') d = unsigned(ch - '0');
    else if (hex && ch >= 'a' && ch <= 'f') d = unsigned(ch - 'a' + 10);
    else if (hex && ch >= 'A' && ch <= 'F') d = unsigned(ch - 'A' + 10);
    else throw bad(ch == '-' ? "negative (must be >= 0)" : "not a non-negative decimal or 0x hex integer");
    if (__builtin_mul_overflow(v, std::uint64_t{base}, &v) || __builtin_add_overflow(v, std::uint64_t{d}, &v))
      throw bad(fmt::format("out of range (at most {})", max));
  }
  if (v > max) throw bad(fmt::format("out of range (at most {})", max));
  return v;
}

ParsedValue parse_value(std::string_view text) {
  if (text.empty()) throw std::invalid_argument("empty value");
  const std::string s(text);
  auto parse = [&](int mode) {
    std::fesetround(mode);
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    std::fesetround(FE_TONEAREST);
    if (end == s.c_str() || *end != '\0' || std::isspace(static_cast<unsigned char>(s[0])))
      throw std::invalid_argument(
          fmt::format("bad value '{}': not a number", limits::quoted(s)));
    return v;
  };
  const double down = parse(FE_DOWNWARD), up = parse(FE_UPWARD);
  if (std::isnan(down) || (down == up && std::signbit(down) == std::signbit(up)))
    return {down, true};
  return {std::signbit(down) ? up : down, false};  // the bracket's end nearer zero
}

}  // namespace fp8sim
