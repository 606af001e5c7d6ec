// fuzz_values: libFuzzer target for the number parsers (parse_number.hpp): decimal and 0x hex
// integers and real values (decimal, hex float, inf, nan). Any text gives a number or
// std::invalid_argument; an integer that parses prints back to the same text (decimal) or
// the same value (hex).
#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "base/parse_number.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const std::uint64_t v = fp8sim::parse_unsigned(text, "value", ~std::uint64_t{0});
    const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
    if (!hex && fmt::format("{}", v) != text) __builtin_trap();
  } catch (const std::invalid_argument&) {
  }
  try {
    (void)fp8sim::parse_value(text);
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
