// test_device_scales: the CUDA quantiser's scales (device_scales.hpp: the same inline functions
// nvcc compiles into quantize_engine.cu's kernels) against scales_from_amax, bit for bit, for
// every scaling scaling_by_name takes (each granularity with each encoding it allows, B's
// Nc-row blocks, the recipes' scalings) and every format the CUDA quantiser takes (signed, at
// most 8 bits), on seeded maxima that reach every branch: zeros of both signs, subnormal
// doubles, maxima whose quotient by the format's largest value underflows or leaves fp32's
// range, exact powers of two and their neighbours, UE4M3 values and midpoints under the tensor
// scale, the largest doubles, random bit patterns, and NaN, Inf and negative values (which
// scales_from_amax takes; the device's maxima never are). Runs on the CPU, so CI checks it
// without a GPU. FP8SIM_SEED changes the draws.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/rng.hpp"
#include "format/format.hpp"
#include "kernel/recipe.hpp"
#include "scaling/device_scales.hpp"
#include "scaling/quantize_device.hpp"
#include "scaling/scaling.hpp"
#include "rounding_probes.hpp"
#include "test_seed.hpp"

using namespace fp8sim;

namespace {

std::string hex(double v) { return fmt::format("{:#018x}", std::bit_cast<std::uint64_t>(v)); }
std::string hex(float v) { return fmt::format("{:#010x}", std::bit_cast<std::uint32_t>(v)); }

// Every format the CUDA quantiser takes: the presets and each eXmY of at most 8 bits for
// which device_encode_table (quantise_resident's first step) builds a table.
std::vector<FormatSpec> quantiser_formats() {
  std::vector<std::string> names = preset_format_names();
  for (int e = 1; e <= 7; ++e)
    for (int m = 0; 1 + e + m <= 8; ++m) names.push_back(fmt::format("e{}m{}", e, m));
  std::vector<FormatSpec> out;
  for (const std::string& name : names) {
    try {
      const FormatSpec f = format_by_name(name);
      device_encode_table(f);
      bool seen = false;
      for (const FormatSpec& g : out) seen = seen || g == f;
      if (!seen) out.push_back(f);
    } catch (const std::exception&) {  // not a format, or not one the quantiser takes
    }
  }
  return out;
}

// Every scaling scaling_by_name accepts over these granularities and encodings, and the
// named recipes' scalings.
std::vector<ScalingSpec> all_scalings() {
  std::vector<std::string> names;
  for (const char* gran : {"none", "tensor", "row", "tile4", "tile32", "block4", "block16", "mx",
                           "mx4", "mx16", "nvfp4"})
    for (const char* enc : {"", ":fp32", ":pow2", ":e8m0", ":ue4m3"})
      names.push_back(std::string(gran) + enc);
  for (const NamedRecipe& r : named_recipes()) names.push_back(r.scaling);
  std::vector<ScalingSpec> out;
  for (const std::string& name : names) {
    try {
      out.push_back(scaling_by_name(name));
    } catch (const std::invalid_argument&) {  // a combination scaling_by_name refuses
    }
  }
  return out;
}

// The maxima of a layout's groups (row_groups x cols), drawn from stream `stream`. Each
// tensor group's first maximum is drawn first; the others of that group are then often a
// UE4M3 value, midpoint or neighbour times fmax * g, g the tensor scale of the first (two-
// level: no later one above the first, so that g is the group's and the quotient the ue4m3
// encoding rounds is exactly that point).
std::vector<double> draw_amax(const ScaleGroups& g, int tensor_rows, bool two_level,
                              const FormatSpec& f, std::uint64_t stream) {
  const double fmax = max_finite(f);
  static const std::vector<double> ue4m3_points = [] {
    const FormatSpec u = format_by_name("ue4m3");
    std::vector<double> v;
    for (std::uint32_t c : all_codes(u))
      if (const double x = decode(u, c); std::isfinite(x)) v.push_back(x);
    std::sort(v.begin(), v.end());
    return test::rounding_probes(v);
  }();
  const std::vector<double> fixed = {
      0.0, -0.0, std::numeric_limits<double>::denorm_min(), 0x1p-1022, 0x1.8p-1060, 1e-300,
      std::numeric_limits<double>::max(), 1e308, 0x1p1023, 0x1p-126, 0x1p-127, 0x1p-149,
      fmax * 0x1p-126, fmax * 0x1p-127, fmax * 0x1.fffffep127, fmax * 0x1p128, fmax,
      std::nextafter(fmax, 0.0), std::nextafter(fmax, 1e9), 1.0, 448.0 * fmax,
      std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(),
      -1.0, -std::numeric_limits<double>::denorm_min()};
  std::vector<double> amax(g.row_groups * g.cols);
  std::uint64_t draw = 0;
  const auto next = [&] { return random_u64(test_seed(), stream, draw++); };
  const auto point = [&](double tensor_g) {
    return ue4m3_points[next() % ue4m3_points.size()] * (fmax * tensor_g);
  };
  const auto one = [&](double tensor_g) -> double {
    const std::uint64_t r = next();
    switch (r % 8) {
      case 0: return fixed[(r >> 8) % fixed.size()];
      case 1: {  // a power of two over the whole range of doubles, or a neighbour
        const double p = std::ldexp(1.0, int((r >> 8) % 2098) - 1074);
        return (r >> 20) % 3 == 0 ? p : (r >> 20) % 3 == 1 ? std::nextafter(p, 0.0)
                                                          : std::nextafter(p, 1e308);
      }
      case 2: {  // fmax times a power of two (pow2's and fp32's quotient exact), or a neighbour
        const double p = fmax * std::ldexp(1.0, int((r >> 8) % 300) - 150);
        return (r >> 20) % 2 ? p : std::nextafter(p, (r >> 21) % 2 ? 0.0 : 1e308);
      }
      case 3: case 4: return point(tensor_g);  // a UE4M3 point under the tensor scale
      case 5: return std::bit_cast<double>(r >> 1);  // any nonnegative double, NaN and Inf too
      default:  // a magnitude of everyday data, 2^-40 .. 2^40
        return to_unit_double(r) * std::ldexp(1.0, int((r >> 3) % 81) - 40);
    }
  };
  // Two-level scales index the maxima by row (rows_per is 1 there); elsewhere a tensor group
  // is just a run of groups.
  const std::size_t per = std::max<std::size_t>(1, std::size_t(tensor_rows) * g.cols);
  for (std::size_t i0 = 0; i0 < amax.size(); i0 += per) {
    amax[i0] = one(1.0);
    const double tensor_g = tensor_scale_for_amax(std::max(0.0, amax[i0]), f);
    for (std::size_t i = i0 + 1; i < std::min(amax.size(), i0 + per); ++i) {
      amax[i] = one(tensor_g);
      if (two_level && amax[i] > amax[i0]) amax[i] = point(tensor_g);
    }
  }
  return amax;
}

}  // namespace

TEST_CASE("the device's scales are scales_from_amax's bits", "[quantize][differential]") {
  const std::vector<FormatSpec> formats = quantiser_formats();
  const std::vector<ScalingSpec> scalings = all_scalings();
  // The lists themselves: each kind the quantiser takes is there.
  CHECK(formats.size() >= 20);
  for (const char* name : {"e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e2m1", "e3m2", "e2m3"}) {
    bool found = false;
    for (const FormatSpec& f : formats) found = found || f == format_by_name(name);
    CHECK(found);
  }
  for (const ScaleEncoding enc : {ScaleEncoding::fp32, ScaleEncoding::pow2, ScaleEncoding::e8m0,
                                  ScaleEncoding::ue4m3}) {
    bool found = false;
    for (const ScalingSpec& s : scalings) found = found || s.encoding == enc;
    CHECK(found);
  }
  std::size_t compared = 0;
  int mismatches = 0;
  std::uint64_t stream = 0;
  for (const FormatSpec& f : formats) {
    const DeviceScaleRule rule = device_scale_rule(f);
    for (const ScalingSpec& s : scalings)
      for (const OperandRole role : {OperandRole::a, OperandRole::b})
        for (const auto& [T, tensor_rows] : {std::pair{37, 37}, std::pair{37, 5}, std::pair{13, 1},
                                            std::pair{1, 1}, std::pair{40, 64}}) {
          const int K = s.nc > 0 ? 3 * s.nc : 24;
          const ScaleGroups g = scale_groups(s, role, T, K, tensor_rows);
          const std::vector<double> amax =
              draw_amax(g, tensor_rows, s.encoding == ScaleEncoding::ue4m3, f, ++stream);
          const QuantisedOperand want = scales_from_amax(s, f, T, g, amax, tensor_rows, 1);
          // What the kernels compute: the tensor scales of each tensor_rows rows, then each
          // scale from its group's maximum under its rows' tensor scale.
          const DeviceScaleLayout l{T, g.rows_per, g.cols, tensor_rows, s.encoding};
          std::vector<float> tensor;
          if (s.encoding == ScaleEncoding::ue4m3) {
            tensor.resize(T);
            for (int r0 = 0; r0 < T; r0 += tensor_rows) {
              const int r1 = std::min(T, r0 + tensor_rows);
              const float ts = tensor_scale_of(tensor_amax_of_rows(amax.data(), r0, r1, g.cols),
                                               rule);
              for (int r = r0; r < r1; ++r) tensor[r] = ts;
            }
          }
          std::vector<float> got(std::size_t(T) * g.cols);
          for (std::size_t i = 0; i < got.size(); ++i)
            got[i] = scale_at(amax.data(), tensor.empty() ? nullptr : tensor.data(), l, rule, i);
          const std::string where =
              fmt::format("{} {} role {} T={} tensor_rows={}", f.name, s.name,
                          role == OperandRole::a ? "a" : "b", T, tensor_rows);
          REQUIRE(want.scales.size() == got.size());
          REQUIRE(want.tensor_scales.size() == tensor.size());
          for (std::size_t t = 0; t < tensor.size(); ++t)
            if (std::bit_cast<std::uint32_t>(tensor[t]) !=
                    std::bit_cast<std::uint32_t>(want.tensor_scales[t]) && ++mismatches <= 10)
              FAIL_CHECK(where << " tensor scale row " << t << " => got " << hex(tensor[t])
                               << " want " << hex(want.tensor_scales[t]));
          for (std::size_t i = 0; i < got.size(); ++i) {
            ++compared;
            if (std::bit_cast<std::uint32_t>(got[i]) !=
                    std::bit_cast<std::uint32_t>(want.scales[i]) && ++mismatches <= 10) {
              const std::size_t t = i / g.cols, c = i % g.cols;
              FAIL_CHECK(where << " scale t=" << t << " c=" << c << " amax="
                               << hex(amax[(t / g.rows_per) * g.cols + c]) << " g="
                               << (tensor.empty() ? std::string("1") : hex(tensor[t]))
                               << " => got " << hex(got[i]) << " want " << hex(want.scales[i]));
            }
          }
        }
  }
  INFO(compared << " scales compared over " << formats.size() << " formats and "
                << scalings.size() << " scalings");
  CHECK(compared > 100000);
  CHECK(mismatches == 0);
}
