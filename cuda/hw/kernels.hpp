// kernels: host entry points of the cuda/ kernels, callable from plain C++ (no CUDA headers).
//
// Every pointer here is a DEVICE pointer (cudaMalloc). Operands follow sim/gemm/gemm.hpp: A is
// M x K FP8 codes row-major, B is N x K FP8 codes row-major (cuBLASLt's "TN"), C and D are
// M x N fp32 row-major. Launchers return "" on success or a one-line error.
#pragma once

#include <cstdint>
#include <string>

namespace fp8sim::cuda {

enum class Fp8 : std::uint8_t { e4m3, e5m2 };
enum class Accum : std::uint8_t { f32, f16 };

// wgmma m64nNk32 FP8 GEMM, one warpgroup per 64 x N tile, operands staged through shared
// memory without swizzle.
struct WgmmaGemm {
  Fp8 a = Fp8::e4m3, b = Fp8::e4m3;
  Accum accum = Accum::f32;
  int tile_n = 8;          // 8 (every type pair, f32 and f16) or 64 (e4m3 x e4m3, f32 only)
  int promote_every = 0;   // K elements per chunk (multiple of 32); 0 = never
  bool block_scales = false;  // sa [M][ceil(K/128)], sb [ceil(N/128)][ceil(K/128)]
  bool out_f16 = false;    // round the FP32 result to fp16 (nearest even); value stored as fp32
};
// M % 64 == 0, N % tile_n == 0, K % 32 == 0, K > 0. C may be null (zeros).
std::string wgmma_gemm(const WgmmaGemm& g, int M, int N, int K, const std::uint8_t* A,
                       const std::uint8_t* B, const float* C, const float* sa, const float* sb,
                       float* D, void* stream = nullptr);

// mma.sync.aligned.m16n8k32.row.col.f32.<a>.<b>.f32, one warp per 16 x 8 tile, C in the
// accumulator fragment, the whole K chained in it (no promotion).
// M % 16 == 0, N % 8 == 0, K % 32 == 0. C may be null.
std::string mma_sync_gemm(Fp8 a, Fp8 b, int M, int N, int K, const std::uint8_t* A,
                          const std::uint8_t* B, const float* C, float* D, void* stream = nullptr);

// cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 on n floats: out[i] = code of in[i].
// Also reports whether the two bytes of the x2 result ever disagreed (must not happen).
std::string cvt_f32_to_f8(Fp8 to, const float* in, std::uint8_t* out, std::size_t n,
                          unsigned* bytes_disagree);
// The same on the bit patterns first .. first+n-1 generated on the device (exhaustive sweep).
std::string cvt_f32_range_to_f8(Fp8 to, std::uint32_t first, std::uint8_t* out, std::size_t n);
// cvt.rn.f16x2.{e4m3x2,e5m2x2}: the fp16 bits of each of the 256 codes (out: 256 uint16).
std::string cvt_f8_to_f16_all(Fp8 from, std::uint16_t* out);

}  // namespace fp8sim::cuda
