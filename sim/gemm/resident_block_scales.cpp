// resident_block_scales: block scales inside the MMA for GEMMs on codes in CUDA memory
// (resident_block_scales.hpp).
#include "gemm/resident_block_scales.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "format/per_format.hpp"
#include "format/rounding.hpp"
#include "gemm/gemm_device.hpp"
#include "gemm/gemm_path.hpp"
#include "gemm/gemm_split.hpp"

namespace fp8sim {

BlockRoute block_route(const GemmSpec& s, int K, bool bias) {
  if (bias || needs_library_gemm(s, false) || padded_k(s, K) != K) return BlockRoute::host;
  if (s.model.group_sum <= 1) return BlockRoute::folded;
  const bool finite_formats =
      s.a_format.specials == Specials::finite && s.b_format.specials == Specials::finite;
  return group_sums_fit(s.model, s.a_format, s.b_format) && finite_formats ? BlockRoute::group_sums
                                                                           : BlockRoute::host;
}

ScaleValues::ScaleValues(const FormatSpec& format)
    : f(format), table(total_bits(format) <= 16) {
  for (std::uint32_t c = 0; table && c < code_count(f); ++c) {
    const double v = decode(f, c);
    nan = nan || std::isnan(v);
    if (std::isnan(v) || double(float(v)) != v) continue;  // no float scale equals it
    values.push_back(std::bit_cast<std::uint32_t>(float(v)));
    if (v == 0.0) values.push_back(std::bit_cast<std::uint32_t>(-float(v)));
  }
  std::sort(values.begin(), values.end());
  high_half = table && std::all_of(values.begin(), values.end(),
                                   [](std::uint32_t b) { return (b & 0xffffu) == 0; });
  if (high_half) {
    high.assign(kScaleTableWords, 0);
    for (std::uint32_t b : values) high[b >> 21] |= 1u << ((b >> 16) & 31);
  }
}

const ScaleValues& scale_values(const FormatSpec& format) {
  return once_per_format<ScaleValues>(format, [](const FormatSpec& f) { return ScaleValues(f); });
}

bool ScaleValues::is_value(float x) const {
  const RoundingSpec exact{Rounding::rne, Overflow::nonsat, 32};
  if (std::isnan(x)) return table ? nan : std::isnan(decode(f, encode(x, f, exact)));
  const std::uint32_t b = std::bit_cast<std::uint32_t>(x);
  if (high_half) return (b & 0xffffu) == 0 && (high[b >> 21] >> ((b >> 16) & 31)) & 1u;
  if (table) return std::binary_search(values.begin(), values.end(), b);
  return decode(f, encode(x, f, exact)) == x;
}

void ScaleValues::bad(const GemmSpec& s, const char* what, std::size_t i, float x) const {
  throw std::invalid_argument(fmt::format(
      "{}[{}] = {} is not a {} value (model {} applies its scales inside the MMA)", what, i,
      format_value(x), f.name, s.model.name));
}

void ScaleValues::check(const GemmSpec& s, std::span<const float> sa,
                        std::span<const float> sb) const {
  for (const auto& [what, v] : {std::pair{"A scales", sa}, std::pair{"B scales", sb}})
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!is_value(v[i])) bad(s, what, i, v[i]);
}

std::optional<DeviceBlockScales> block_scales_on_device(
    const GemmSpec& s, BlockRoute route, const ScaleValues& values, std::span<const float> sa,
    std::span<const float> sb, const float* C, std::size_t outputs, DeviceBlock& copy,
    void* stream, int device) {
  // 1. One copy of A's scales, then B's, read by the kernels queued on `stream` later.
  const std::size_t n = sa.size() + sb.size();
  copy.p = device_pool_malloc(std::max<std::size_t>(n, 1) * sizeof(float), device);
  copy.stream = stream;
  float* d = static_cast<float*>(copy.p);
  copy_device(d, sa.data(), sa.size_bytes(), true, stream, device);
  copy_device(d + sa.size(), sb.data(), sb.size_bytes(), true, stream, device);
  // 2. Checked there: ScaleValues::check's test, with their log2 ranges for folding. The bad
  // scale's value for the message is one element of the caller's array.
  const DeviceScaleCheck c =
      check_scales_on_device(d, n, sa.size(), values.high.data(), values.nan, stream, device);
  if (c.first_bad < sa.size()) values.bad(s, "A scales", c.first_bad, sa[c.first_bad]);
  if (c.first_bad < n)
    values.bad(s, "B scales", c.first_bad - sa.size(), sb[c.first_bad - sa.size()]);
  // 3. The route's other conditions, C's finiteness on the device.
  const bool fits =
      route == BlockRoute::group_sums
          ? c.finite && (C == nullptr || device_all_finite(C, outputs, stream, device))
          : route == BlockRoute::folded && folded_codes_fit(s, c.a, c.b);
  if (!fits) return std::nullopt;
  DeviceBlockScales r{{d, sa.size()}, {d + sa.size(), sb.size()}, {}};
  r.launch.scales_on_device = true;
  r.launch.scale_log2[0] = c.a;
  r.launch.scale_log2[1] = c.b;
  return r;
}

}  // namespace fp8sim
