// mma_m16n8k32_row_col_f32_fp8: FP8 GEMM on mma.sync.aligned.m16n8k32.row.col.f32.<a>.<b>.f32.
//
// One warp per 16 x 8 tile of D; fragments are loaded straight from global memory (A rows
// and B rows are both K-contiguous, so each fragment register is 4 consecutive FP8 codes).
// C is loaded into the accumulator fragment and the whole K is chained through it: this
// measures the instruction itself, with no promotion. On sm_90a ptxas lowers this PTX to
// FP8->FP16 conversions plus HMMA.16816.F32 (tests/data/hw/reports/sass_mma_sync_e4m3_excerpt.txt).
#include <cuda_runtime.h>

#include <string>

#include "hw/kernels.hpp"
#include "hw/ptx_mma_sync.cuh"

namespace fp8sim::cuda {
namespace {

template <int AT, int BT>
__global__ void mma_sync_fp8_kernel(int M, int N, int K, const std::uint8_t* A,
                                    const std::uint8_t* B, const float* C, float* D) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  const int tiles_n = N / 8;
  if (warp >= (M / 16) * tiles_n) return;
  const int m0 = (warp / tiles_n) * 16, n0 = (warp % tiles_n) * 8;
  const int g = lane / 4, t = lane % 4;
  float d[4];
  for (int i = 0; i < 4; ++i) {
    const int r = m0 + g + 8 * (i / 2), c = n0 + 2 * t + (i % 2);
    d[i] = C != nullptr ? C[static_cast<std::size_t>(r) * N + c] : 0.0f;
  }
  const auto ld = [&](const std::uint8_t* base, int row, int k) {
    return *reinterpret_cast<const std::uint32_t*>(base + static_cast<std::size_t>(row) * K + k);
  };
  for (int k0 = 0; k0 < K; k0 += 32) {
    const std::uint32_t a[4] = {ld(A, m0 + g, k0 + 4 * t), ld(A, m0 + g + 8, k0 + 4 * t),
                                ld(A, m0 + g, k0 + 16 + 4 * t), ld(A, m0 + g + 8, k0 + 16 + 4 * t)};
    const std::uint32_t b[2] = {ld(B, n0 + g, k0 + 4 * t), ld(B, n0 + g, k0 + 16 + 4 * t)};
    if constexpr (AT == 0 && BT == 0) mma_m16n8k32_row_col_f32_e4m3_e4m3_f32(d, a, b);
    if constexpr (AT == 0 && BT == 1) mma_m16n8k32_row_col_f32_e4m3_e5m2_f32(d, a, b);
    if constexpr (AT == 1 && BT == 0) mma_m16n8k32_row_col_f32_e5m2_e4m3_f32(d, a, b);
    if constexpr (AT == 1 && BT == 1) mma_m16n8k32_row_col_f32_e5m2_e5m2_f32(d, a, b);
  }
  for (int i = 0; i < 4; ++i) {
    const int r = m0 + g + 8 * (i / 2), c = n0 + 2 * t + (i % 2);
    D[static_cast<std::size_t>(r) * N + c] = d[i];
  }
}

}  // namespace

std::string mma_sync_gemm(Fp8 a, Fp8 b, int M, int N, int K, const std::uint8_t* A,
                          const std::uint8_t* B, const float* C, float* D, void* stream) {
  if (M <= 0 || N <= 0 || K <= 0 || M % 16 || N % 8 || K % 32)
    return "mma.sync: need M % 16 == 0, N % 8 == 0, K % 32 == 0";
  const long warps = static_cast<long>(M / 16) * (N / 8);
  const int threads = 256;
  const dim3 grid(static_cast<unsigned>((warps * 32 + threads - 1) / threads));
  auto st = static_cast<cudaStream_t>(stream);
  const int ai = a == Fp8::e4m3 ? 0 : 1, bi = b == Fp8::e4m3 ? 0 : 1;
  if (ai == 0 && bi == 0) mma_sync_fp8_kernel<0, 0><<<grid, threads, 0, st>>>(M, N, K, A, B, C, D);
  if (ai == 0 && bi == 1) mma_sync_fp8_kernel<0, 1><<<grid, threads, 0, st>>>(M, N, K, A, B, C, D);
  if (ai == 1 && bi == 0) mma_sync_fp8_kernel<1, 0><<<grid, threads, 0, st>>>(M, N, K, A, B, C, D);
  if (ai == 1 && bi == 1) mma_sync_fp8_kernel<1, 1><<<grid, threads, 0, st>>>(M, N, K, A, B, C, D);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? std::string{} : std::string("mma.sync launch: ") + cudaGetErrorString(e);
}

}  // namespace fp8sim::cuda
