// scale_encoding: how a scale is encoded (scaling.hpp's table): an fp32 value, a power of two,
// an E8M0 code (OCP MX) or a UE4M3 value under an fp32 tensor scale (NVFP4). Its own header,
// plain C++17, so that the CUDA quantiser (device_scales.hpp) names the same values.
#pragma once

#include <cstdint>

namespace fp8sim {

enum class ScaleEncoding : std::uint8_t { fp32, pow2, e8m0, ue4m3 };

}  // namespace fp8sim
