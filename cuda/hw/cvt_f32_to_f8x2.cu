// cvt_f32_to_f8x2: the hardware FP8 conversions cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 and
// cvt.rn.f16x2.{e4m3x2,e5m2x2}, one value per thread.
//
// PTX facts checked with ptxas 13.0 for sm_90a (see the report): `.satfinite` is required
// for the f32 -> e4m3x2/e5m2x2 forms ("'.satfinite' modifier required"), and
// cvt.{rz,rp}.satfinite.ue8m0x2.f32 is rejected ("not supported on .target 'sm_90a'").
#include <cuda_runtime.h>

#include <string>

#include "hw/kernels.hpp"
#include "hw/ptx_cvt.cuh"

namespace fp8sim::cuda {
namespace {

template <int TO>
__device__ inline std::uint16_t cvt_pair(float x) {
  if constexpr (TO == 0) return cvt_rn_satfinite_e4m3x2_f32(x, x);
  else return cvt_rn_satfinite_e5m2x2_f32(x, x);
}

template <int TO>
__global__ void cvt_kernel(const float* in, std::uint8_t* out, std::size_t n, unsigned* disagree) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::uint16_t d = cvt_pair<TO>(in[i]);
    if ((d & 0xFF) != (d >> 8)) atomicAdd(disagree, 1u);
    out[i] = static_cast<std::uint8_t>(d & 0xFF);
  }
}

template <int TO>
__global__ void cvt_range_kernel(std::uint32_t first, std::uint8_t* out, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float x = __uint_as_float(first + static_cast<std::uint32_t>(i));
    out[i] = static_cast<std::uint8_t>(cvt_pair<TO>(x) & 0xFF);
  }
}

template <int FROM>
__global__ void decode_kernel(std::uint16_t* out) {
  const std::uint16_t code = static_cast<std::uint16_t>(threadIdx.x);
  const std::uint32_t h = FROM == 0 ? cvt_rn_f16x2_e4m3x2(code) : cvt_rn_f16x2_e5m2x2(code);
  out[threadIdx.x] = static_cast<std::uint16_t>(h & 0xFFFF);  // code in the low byte -> low half
}

std::string status(const char* what) {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? std::string{} : std::string(what) + ": " + cudaGetErrorString(e);
}

}  // namespace

std::string cvt_f32_to_f8(Fp8 to, const float* in, std::uint8_t* out, std::size_t n,
                          unsigned* bytes_disagree) {
  const unsigned blocks = 1024;
  if (to == Fp8::e4m3) cvt_kernel<0><<<blocks, 256>>>(in, out, n, bytes_disagree);
  else cvt_kernel<1><<<blocks, 256>>>(in, out, n, bytes_disagree);
  return status("cvt launch");
}

std::string cvt_f32_range_to_f8(Fp8 to, std::uint32_t first, std::uint8_t* out, std::size_t n) {
  const unsigned blocks = 4096;
  if (to == Fp8::e4m3) cvt_range_kernel<0><<<blocks, 256>>>(first, out, n);
  else cvt_range_kernel<1><<<blocks, 256>>>(first, out, n);
  return status("cvt range launch");
}

std::string cvt_f8_to_f16_all(Fp8 from, std::uint16_t* out) {
  if (from == Fp8::e4m3) decode_kernel<0><<<1, 256>>>(out);
  else decode_kernel<1><<<1, 256>>>(out);
  return status("decode launch");
}

}  // namespace fp8sim::cuda
