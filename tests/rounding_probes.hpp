// rounding_probes: the doubles a rounding table is probed with: each of its values (ascending,
// finite), the doubles just below and above it, and each midpoint of two adjacent values with
// the doubles just below and above it (where round-to-nearest-even decides).
#pragma once

#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

namespace fp8sim::test {

inline std::vector<double> rounding_probes(std::span<const double> values) {
  std::vector<double> probes;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    probes.insert(probes.end(), {v, std::nextafter(v, 0.0), std::nextafter(v, INFINITY)});
    if (i + 1 < values.size()) {
      const double mid = 0.5 * (v + values[i + 1]);
      probes.insert(probes.end(), {mid, std::nextafter(mid, 0.0), std::nextafter(mid, INFINITY)});
    }
  }
  return probes;
}

}  // namespace fp8sim::test
