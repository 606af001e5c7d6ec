// scale_probes: the floats a block-scale check is probed with: every value of the scale
// format, its negation and both float neighbours, zeros of both signs, infinities, NaN, and
// two floats no such format holds (3, 1e-30).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "format/format.hpp"

namespace fp8sim::test {

inline std::vector<float> scale_probes(const FormatSpec& sf) {
  std::vector<float> probes = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 3.0f, 1e-30f};
  for (std::uint32_t c = 0; c < code_count(sf); ++c) {
    const float v = static_cast<float>(decode(sf, c));
    for (float x : {v, -v, std::nextafter(v, INFINITY), std::nextafter(v, -INFINITY)})
      probes.push_back(x);
  }
  return probes;
}

}  // namespace fp8sim::test
