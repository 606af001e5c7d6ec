// quantize_device: the host half of quantise_resident; the device half is
// cuda/engine/quantize_engine.cu.
#include "scaling/quantize_device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <stdexcept>
#include <vector>

#include "format/per_format.hpp"
#include "format/rounding.hpp"

namespace fp8sim {

DeviceEncodeTable device_encode_table(const FormatSpec& f) {
  if (!f.is_signed || total_bits(f) > 8)
    throw std::invalid_argument(fmt::format(
        "quantize on CUDA: format '{}' is {}; elements are signed formats of at most 8 bits",
        f.name, f.is_signed ? fmt::format("{} bits wide", total_bits(f)) : "unsigned"));
  std::vector<double> values;
  for (std::uint32_t c : all_codes(f)) {
    const double v = decode(f, c);
    if (std::isfinite(v) && v >= 0) values.push_back(v);
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  if (values.size() < 2 || values.size() > std::size(DeviceEncodeTable{}.value))
    throw std::invalid_argument(fmt::format(
        "quantize on CUDA: format '{}' has {} nonnegative values", f.name, values.size()));
  const RoundingSpec rne_sat{Rounding::rne, Overflow::saturate, 32};
  const auto code = [&](double v) {
    return static_cast<unsigned char>(encode(decode(f, encode(v, f, rne_sat)), f));
  };
  DeviceEncodeTable t;
  t.n = static_cast<int>(values.size());
  for (int i = 0; i < t.n; ++i) {
    t.value[i] = values[i];
    t.pos[i] = code(values[i]);
    t.neg[i] = code(-values[i]);
    if (i + 1 < t.n) {
      const double mid = 0.5 * (values[i] + values[i + 1]);
      t.mid_pos[i] = code(mid);
      t.mid_neg[i] = code(-mid);
    }
  }
  // Values between 0 and the smallest one that round to zero keep their sign where it can.
  t.pos[0] = code(values[1] / 4);
  t.neg[0] = code(-values[1] / 4);
  t.zero_pos = code(0.0);
  t.zero_neg = code(-0.0);
  t.over = code(2 * values.back());
  t.over_neg = code(-2 * values.back());
  return t;
}

namespace {

// device_encode_table once per format (a pure function of it; a few thousand encodes).
const DeviceEncodeTable& encode_table_of(const FormatSpec& f) {
  return once_per_format<DeviceEncodeTable>(f, device_encode_table);
}

}  // namespace

QuantisedOperand quantise_resident(const ScalingSpec& s, OperandRole role, const FormatSpec& f,
                                   int T, int K, const void* x, bool x_double, int tensor_rows,
                                   std::uint8_t* codes, void* stream, int device,
                                   bool count_saturated) {
  const DeviceEncodeTable& table = encode_table_of(f);
  const ScaleGroups g = scale_groups(s, role, T, K, tensor_rows);
  DeviceLaunch launch;
  launch.stream = stream;
  launch.device = device;
  // Without scales, one group over the whole operand still finds the values that are not finite.
  const DeviceScaleGroups dg = g.cols == 0 ? DeviceScaleGroups{std::max(T, 1), K, 1}
                                           : DeviceScaleGroups{g.rows_per, g.width, g.cols};
  std::vector<double> amax(g.cols == 0 ? 1 : g.row_groups * g.cols);
  const long long bad = run_device_amax(x, x_double, T, K, dg, amax.data(), amax.size(), launch);
  if (bad >= 0) {
    double v = 0;
    if (x_double) {
      copy_device(&v, static_cast<const double*>(x) + bad, sizeof v, false);
    } else {
      float v32 = 0;
      copy_device(&v32, static_cast<const float*>(x) + bad, sizeof v32, false);
      v = v32;
    }
    throw std::invalid_argument(fmt::format("x: value at index {} is {}", bad, v));
  }
  if (g.cols == 0) amax.clear();
  QuantisedOperand q = scales_from_amax(s, f, T, g, amax, tensor_rows);
  q.saturated = run_device_encode(x, x_double, T, K, q.scales.data(), q.scale_cols, s.nc,
                                  q.tensor_scales.empty() ? nullptr : q.tensor_scales.data(),
                                  table, codes, launch, count_saturated);
  return q;
}

}  // namespace fp8sim
