// device_scales: scales_from_amax (scaling.hpp) as inline functions the host and the CUDA
// quantiser (cuda/engine/quantize_engine.cu) share: each group's scale from its largest
// magnitude, and the two-level (UE4M3) tensor scales, computed on the device so that no
// maximum leaves it and no scale goes back. The same bits as scale_for_amax and
// tensor_scale_for_amax, by the host's operations in the host's order:
//   - double division, double product and double -> float conversion: IEEE round-to-nearest-
//     even on the host (SSE2) and on the device (nvcc's '/' and '*' on doubles, built with
//     --fmad=false; cvt.rn.f32.f64, no flush to zero without -ftz);
//   - ilogb and ldexp: the host's libm and CUDA's math library (both exact, subnormals
//     included; ilogb(0) is INT_MIN and ilogb(Inf) INT_MAX in both);
//   - std::clamp and std::max: the same comparisons, written out;
//   - encode() into UE4M3 (RNE, saturating): table_round (device_table.hpp).
// tests/test_device_scales.cpp checks every function here against scales_from_amax.
// Plain C++17 for nvcc.
#pragma once

#include <cmath>
#include <cstddef>

#include "scaling/device_table.hpp"
#include "scaling/scale_encoding.hpp"

namespace fp8sim {

// What a scale is computed from besides its group's largest magnitude: numbers of the element
// format and UE4M3's rounding, filled on the host (device_scale_rule, quantize_device.hpp).
struct DeviceScaleRule {
  double fmax = 1;         // the element format's largest finite value (max_finite)
  double tensor_fmax = 1;  // fmax * 448 (UE4M3's largest value): two-level tensor scales
  int emax = 0;            // fmax's exponent (max_exponent): E8M0 scales
  int unused = 0;          // (no padding: the engine keys its device copy by these bytes)
  DeviceRoundTable ue4m3;  // UE4M3's values: two-level block scales
};

// Where the scales lie (scales_from_amax's layout): T rows, groups of rows_per rows by cols
// along K; group (rg, c)'s maximum at amax[rg * cols + c], its scale on each of its rows at
// scales[t * cols + c]. Two-level (encoding ue4m3): a tensor scale for each tensor_rows rows.
struct DeviceScaleLayout {
  int T = 0, rows_per = 1, cols = 0, tensor_rows = 1;
  ScaleEncoding encoding = ScaleEncoding::fp32;
};

constexpr double kDoubleMax = 0x1.fffffffffffffp+1023;

FP8SIM_HOST_DEVICE inline int clamp_int(int v, int lo, int hi) {
  return v < lo ? lo : hi < v ? hi : v;
}

// fl32(x) clamped to fp32's normal range, 2^-126 to its max (scaling.cpp's fp32_scale:
// std::clamp(float(x), FLT_MIN, FLT_MAX), a NaN left as it is).
FP8SIM_HOST_DEVICE inline float fp32_scale_of(double x) {
  const float f = static_cast<float>(x);
  const float lo = 0x1p-126f, hi = 0x1.fffffep+127f;
  return f < lo ? lo : hi < f ? hi : f;
}

// The largest of two group maxima as scales_from_amax takes it (std::max(m, a): a NaN a
// leaves m). On nonnegative doubles that are not NaN, as the device's maxima are, the order
// of a reduction by it cannot change its result.
FP8SIM_HOST_DEVICE inline double tensor_amax_step(double m, double a) { return m < a ? a : m; }

// tensor_scale_for_amax(tamax, element) as a float (scales_from_amax stores it so).
FP8SIM_HOST_DEVICE inline float tensor_scale_of(double tamax, const DeviceScaleRule& r) {
  if (!(tamax > 0) || !(tamax <= kDoubleMax)) return 1.0f;  // 0, NaN, negative, Inf
  return fp32_scale_of(tamax / r.tensor_fmax);
}

// static_cast<float>(scale_for_amax(amax, element, enc, tensor_scale)): every result is a
// float already (fp32 scales, 2^e with -127 <= e <= 127, UE4M3 values), so the cast is exact.
FP8SIM_HOST_DEVICE inline float scale_of(double amax, const DeviceScaleRule& r, ScaleEncoding enc,
                                         double tensor_scale) {
  if (enc == ScaleEncoding::ue4m3) {  // max(RNE_sat_ue4m3(amax / (fmax * g)), 2^-6)
    const double u = table_round(amax / (r.fmax * tensor_scale), r.ue4m3);
    return static_cast<float>(u < 0x1p-6 ? 0x1p-6 : u);
  }
  if (!(amax > 0) || !(amax <= kDoubleMax)) return 1.0f;  // 0, NaN, negative, Inf
  switch (enc) {
    case ScaleEncoding::fp32: return fp32_scale_of(amax / r.fmax);
    case ScaleEncoding::pow2: {  // ceil(log2 q), as the host: 2^e <= q < 2^(e+1), then up
      const double q = amax / r.fmax;  // 0 below the smallest double, Inf where fmax < 1
      int e = ::ilogb(q);              // FP_ILOGB0 (INT_MIN) for 0, INT_MAX for Inf
      if (::ldexp(1.0, e) < q) ++e;
      return static_cast<float>(::ldexp(1.0, clamp_int(e, -126, 127)));
    }
    case ScaleEncoding::e8m0:  // 2^(floor(log2 amax) - emax), clamped to E8M0's range
      return static_cast<float>(::ldexp(1.0, clamp_int(::ilogb(amax) - r.emax, -127, 127)));
    case ScaleEncoding::ue4m3: break;  // above
  }
  return 1.0f;
}

// The largest maximum of rows [r0, r1) for their tensor scale, as scales_from_amax takes it:
// amax[r0 * cols] to amax[r1 * cols - 1], one row per group (two-level scales are MX ones,
// rows_per 1), from 0. The kernel (tensor_amax_kernel) reduces the same maxima by
// tensor_amax_step in pieces and a tree: the device's maxima are nonnegative and never NaN,
// where no order of the steps changes the result.
FP8SIM_HOST_DEVICE inline double tensor_amax_of_rows(const double* amax, std::size_t r0,
                                                     std::size_t r1, int cols) {
  double m = 0;
  for (std::size_t i = r0 * cols; i < r1 * cols; ++i) m = tensor_amax_step(m, amax[i]);
  return m;
}

// scales[i] (i = t * cols + c) of the layout: its group's scale under the tensor scale of the
// group's first row (tensor_scales null: 1), as scales_from_amax writes it.
FP8SIM_HOST_DEVICE inline float scale_at(const double* amax, const float* tensor_scales,
                                         const DeviceScaleLayout& l, const DeviceScaleRule& r,
                                         std::size_t i) {
  const std::size_t t = i / l.cols, c = i % l.cols, rg = t / l.rows_per;
  const double g = tensor_scales ? double(tensor_scales[rg * l.rows_per]) : 1.0;
  return scale_of(amax[rg * l.cols + c], r, l.encoding, g);
}

}  // namespace fp8sim
