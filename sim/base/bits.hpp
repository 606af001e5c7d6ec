// bits: bit-for-bit equality of results, the one comparison replay, the hardware harness and
// the tests use (any NaN equals any NaN: kernels and models need not agree on NaN payloads).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace fp8sim {

inline bool same_bits(float x, float y) {
  if (std::isnan(x) && std::isnan(y)) return true;
  return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
}

// "0x3f800000".
inline std::string hex_bits(float v) {
  return fmt::format("{:#010x}", std::bit_cast<std::uint32_t>(v));
}

}  // namespace fp8sim
