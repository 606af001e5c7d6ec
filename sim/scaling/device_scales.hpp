// device_scales: scales_from_amax (scaling.hpp) as inline functions the host and the CUDA
// quantiser (cuda/engine/quantize_engine.cu) share: each group's scale from its largest
// magnitude, and the two-level (UE4M3) tensor scales, computed on the device so that no
// maximum leaves it and no scale goes back. The same bits as scale_for_amax and
// tensor_scale_for_amax, by the host's operations in the host's order:
//   - double division, double product and double -> float conversion: IEEE round-to-nearest-
//     even on the host (SSE2) and on the device (nvcc's '/' and '*' on doubles, built with
//     --fmad=false; cvt.rn.f32.f64, no flush to zero without -ftz);
//   - std::ilogb and std::ldexp: exponents read from a double's bits (floor_log2, exact for
//     subnormals too), powers of two written as a float's bits (pow2_float);
//   - std::clamp and std::max: the same comparisons, written out;
//   - encode() into UE4M3 (RNE, saturating): table_round (device_table.hpp).
// tests/test_device_scales.cpp checks every function here against scales_from_amax.
// Plain C++17 for nvcc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

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

FP8SIM_HOST_DEVICE inline std::uint64_t double_bits(double v) {
  std::uint64_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// floor(log2 r) of a finite r > 0, as std::ilogb gives it: the exponent field less the bias,
// or for a subnormal r = m * 2^-1074 the position of m's highest set bit, less 1074.
FP8SIM_HOST_DEVICE inline int floor_log2(double r) {
  const std::uint64_t b = double_bits(r);
  const int field = static_cast<int>((b >> 52) & 0x7ff);
  if (field != 0) return field - 1023;
  std::uint64_t m = b & ((std::uint64_t{1} << 52) - 1);
  int e = -1075;
  for (; m != 0; m >>= 1) ++e;
  return e;
}

// Whether a finite r > 0 is a power of two (a normal one's fraction is 0; a subnormal one has
// one bit set).
FP8SIM_HOST_DEVICE inline bool is_pow2(double r) {
  const std::uint64_t b = double_bits(r);
  const std::uint64_t frac = b & ((std::uint64_t{1} << 52) - 1);
  return ((b >> 52) & 0x7ff) != 0 ? frac == 0 : (frac & (frac - 1)) == 0;
}

// 2^e as a float for -149 <= e <= 127 (std::ldexp(1.0, e), exact in a float), from its bits.
FP8SIM_HOST_DEVICE inline float pow2_float(int e) {
  const std::uint32_t b = e >= -126 ? static_cast<std::uint32_t>(e + 127) << 23
                                    : std::uint32_t{1} << (e + 149);
  float f = 0;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

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
    case ScaleEncoding::pow2: {
      // The host: e = ilogb(q), plus 1 where 2^e < q (q not a power of two): ceil(log2 q).
      // q = 0 (amax / fmax below the smallest double): ilogb gives FP_ILOGB0, 2^that = 0 is
      // not below 0, and the clamp gives -126; q = Inf (fmax < 1): INT_MAX, clamped to 127.
      const double q = amax / r.fmax;
      const int e = q == 0             ? -126
                    : !(q <= kDoubleMax) ? 127
                                       : floor_log2(q) + (is_pow2(q) ? 0 : 1);
      return pow2_float(clamp_int(e, -126, 127));
    }
    case ScaleEncoding::e8m0:  // 2^(floor(log2 amax) - emax), clamped to E8M0's range
      return pow2_float(clamp_int(floor_log2(amax) - r.emax, -127, 127));
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
