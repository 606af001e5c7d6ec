// ptx_cvt: named wrappers for the FP8 conversion instructions (cvt ... e4m3x2 / e5m2x2).
//
// PTX ISA "cvt": `cvt.rn.satfinite.e4m3x2.f32 d, a, b` packs cvt(a) into the upper byte of
// the 16-bit d and cvt(b) into the lower byte. The wrappers below convert one value by
// passing it as both a and b, so the byte order cannot be misread (both bytes must agree).
#pragma once

#include <cstdint>

namespace fp8sim::cuda {

__device__ inline std::uint16_t cvt_rn_satfinite_e4m3x2_f32(float hi, float lo) {
  std::uint16_t d;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(d) : "f"(hi), "f"(lo));
  return d;
}
__device__ inline std::uint16_t cvt_rn_satfinite_e5m2x2_f32(float hi, float lo) {
  std::uint16_t d;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;\n" : "=h"(d) : "f"(hi), "f"(lo));
  return d;
}
// FP8 -> f16x2 (exact: every e4m3 / e5m2 value is an fp16 value). Lower byte -> lower half.
__device__ inline std::uint32_t cvt_rn_f16x2_e4m3x2(std::uint16_t x) {
  std::uint32_t d;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(d) : "h"(x));
  return d;
}
__device__ inline std::uint32_t cvt_rn_f16x2_e5m2x2(std::uint16_t x) {
  std::uint32_t d;
  asm("cvt.rn.f16x2.e5m2x2 %0, %1;\n" : "=r"(d) : "h"(x));
  return d;
}

}  // namespace fp8sim::cuda
