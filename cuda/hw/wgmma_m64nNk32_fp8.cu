// wgmma_m64nNk32_fp8: FP8 GEMM on wgmma.mma_async.m64nNk32.{f32,f16}.{e4m3,e5m2}.{e4m3,e5m2}
// with optional C, a promotion interval and DeepGEMM-style 1x128 / 128x128 block scales.
//
// One warpgroup (128 threads) computes one 64 x TN tile of D. Per stage of up to 128 K:
//   1. every thread copies 16-byte rows of A (64 x 32 per k32 step) and B (TN x 32) into
//      shared memory in the no-swizzle core-matrix layout (8 rows x 16 bytes contiguous;
//      core (row/8, k/16) at (row/8)*256 + (k/16)*128), then fence.proxy.async + barrier;
//   2. one wgmma per k32 step accumulates into the tensor-core accumulator registers d
//      (scale_d = 0 at a chunk's first step zeroes it; C is loaded into d before the very
//      first step and taken with scale_d = 1);
//   3. at the end of each chunk of promote_every K (and at K), wait for the wgmmas and
//      promote: acc = acc + partial, or acc = fmaf(sa*sb, partial, acc) with block scales
//      (DeepGEMM sm90_fp8_gemm_1d2d order), acc an FP32 register starting at +0.
// Correctness over speed: no TMA, no swizzle, no pipelining.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "hw/kernels.hpp"
#include "hw/ptx_wgmma.cuh"

namespace fp8sim::cuda {
namespace {

struct Params {
  int M, N, K;
  const std::uint8_t* A;
  const std::uint8_t* B;
  const float* C;
  const float* sa;
  const float* sb;
  float* D;
  int promote_every;
  int block_scales;
  int out_f16;
};

constexpr int kStageK = 128;     // K bytes staged per pass (4 wgmma k32 steps)
constexpr int kStepBytes = 32;   // K per wgmma (FP8: 32 elements = 32 bytes)
constexpr int kCoreRowStride = 256;  // bytes between core matrices 8 rows apart
constexpr int kCoreKStride = 128;    // bytes between core matrices 16 K apart
constexpr int kScaleBlock = 128;

// Copies rows [r0, r0+R) x K [k0, k0 + 32*steps) of a row-major (rows x K) FP8 matrix into
// `steps` buffers of R x 32 bytes in the core-matrix layout.
template <int R>
__device__ void stage_operand(std::uint8_t (*smem)[R * kStepBytes], const std::uint8_t* g, int K,
                              int r0, int k0, int steps) {
  const int chunks_per_row = steps * 2;  // 16-byte chunks
  for (int idx = threadIdx.x; idx < R * chunks_per_row; idx += blockDim.x) {
    const int r = idx / chunks_per_row, j = idx % chunks_per_row;
    const uint4 v = *reinterpret_cast<const uint4*>(g + static_cast<std::size_t>(r0 + r) * K + k0 + j * 16);
    const int s = j / 2, ki = j % 2;
    *reinterpret_cast<uint4*>(&smem[s][(r / 8) * kCoreRowStride + ki * kCoreKStride + (r % 8) * 16]) = v;
  }
}

template <int AT, int BT, int TN, bool F16>
__device__ inline void wgmma_step(float (&d32)[TN / 2], std::uint32_t (&d16)[TN / 4 > 0 ? TN / 4 : 1],
                                  std::uint64_t da, std::uint64_t db, int scale_d) {
  if constexpr (TN == 64) {
    static_assert(AT == 0 && BT == 0 && !F16, "n64 is built for f32 e4m3 x e4m3 only");
    wgmma_m64n64k32_f32_e4m3_e4m3(d32, da, db, scale_d);
  } else if constexpr (F16) {
    if constexpr (AT == 0 && BT == 0) wgmma_m64n8k32_f16_e4m3_e4m3(d16, da, db, scale_d);
    if constexpr (AT == 0 && BT == 1) wgmma_m64n8k32_f16_e4m3_e5m2(d16, da, db, scale_d);
    if constexpr (AT == 1 && BT == 0) wgmma_m64n8k32_f16_e5m2_e4m3(d16, da, db, scale_d);
    if constexpr (AT == 1 && BT == 1) wgmma_m64n8k32_f16_e5m2_e5m2(d16, da, db, scale_d);
  } else {
    if constexpr (AT == 0 && BT == 0) wgmma_m64n8k32_f32_e4m3_e4m3(d32, da, db, scale_d);
    if constexpr (AT == 0 && BT == 1) wgmma_m64n8k32_f32_e4m3_e5m2(d32, da, db, scale_d);
    if constexpr (AT == 1 && BT == 0) wgmma_m64n8k32_f32_e5m2_e4m3(d32, da, db, scale_d);
    if constexpr (AT == 1 && BT == 1) wgmma_m64n8k32_f32_e5m2_e5m2(d32, da, db, scale_d);
  }
}

template <int AT, int BT, int TN, bool F16>
__global__ void __launch_bounds__(128) wgmma_fp8_kernel(Params p) {
  // Shared tiles: [k32 step][64 rows x 32 bytes] for A, [k32 step][TN rows x 32 bytes] for B.
  __shared__ alignas(128) std::uint8_t sA[kStageK / kStepBytes][64 * kStepBytes];
  __shared__ alignas(128) std::uint8_t sB[kStageK / kStepBytes][TN * kStepBytes];

  const int m0 = blockIdx.x * 64, n0 = blockIdx.y * TN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Descriptor layout: LBO = the K-direction core stride, SBO = the 8-row core stride. The
  // H100 and H200 runs settled it: a run-time self-test of both layouts picked this one on
  // each ("wgmma_desc_layout": 0 in tests/data/hw/reports/check.json and h200/check.json).
  constexpr std::uint32_t lbo = kCoreKStride, sbo = kCoreRowStride;

  // Accumulator element i of this thread: row 16w + l/4 + 8((i/2)%2), col 8(i/4) + 2(l%4) + i%2.
  auto row_of = [&](int i) { return m0 + 16 * warp + lane / 4 + 8 * ((i / 2) % 2); };
  auto col_of = [&](int i) { return n0 + 8 * (i / 4) + 2 * (lane % 4) + (i % 2); };

  constexpr int kElems = TN / 2;  // accumulator elements per thread
  float d32[kElems];
  std::uint32_t d16[TN / 4 > 0 ? TN / 4 : 1];
  float acc[kElems];
#pragma unroll
  for (int i = 0; i < kElems; ++i) acc[i] = 0.0f, d32[i] = 0.0f;
#pragma unroll
  for (int j = 0; j < (TN / 4 > 0 ? TN / 4 : 1); ++j) d16[j] = 0u;

  bool first_chunk = true, chunk_start = true;
  if (p.C != nullptr) {
#pragma unroll
    for (int i = 0; i < kElems; ++i) d32[i] = p.C[static_cast<std::size_t>(row_of(i)) * p.N + col_of(i)];
    if constexpr (F16) {
#pragma unroll
      for (int j = 0; j < TN / 4; ++j) {
        const __half2 h = __floats2half2_rn(d32[2 * j], d32[2 * j + 1]);
        d16[j] = *reinterpret_cast<const std::uint32_t*>(&h);
      }
    }
  }
  const int ka = (p.K + kScaleBlock - 1) / kScaleBlock;

  for (int k0 = 0; k0 < p.K; k0 += kStageK) {
    const int steps = min(kStageK / kStepBytes, (p.K - k0) / kStepBytes);
    stage_operand<64>(sA, p.A, p.K, m0, k0, steps);
    stage_operand<TN>(sB, p.B, p.K, n0, k0, steps);
    fence_proxy_async_shared_cta();
    __syncthreads();
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < kStageK / kStepBytes; ++s) {
      if (s >= steps) break;
      const int scale_d = chunk_start ? (first_chunk && p.C != nullptr ? 1 : 0) : 1;
      wgmma_step<AT, BT, TN, F16>(d32, d16, make_smem_desc_noswizzle(sA[s], lbo, sbo),
                                  make_smem_desc_noswizzle(sB[s], lbo, sbo), scale_d);
      chunk_start = false;
      const int kk = k0 + kStepBytes * (s + 1);
      if ((p.promote_every > 0 && kk % p.promote_every == 0) || kk == p.K) {
        wgmma_commit_group();
        wgmma_wait_group_0();
        const int kb = (kk - kStepBytes) / kScaleBlock;
#pragma unroll
        for (int i = 0; i < kElems; ++i) {
          float part;
          if constexpr (F16) {
            const std::uint32_t w = d16[i / 2];
            const __half2 h = *reinterpret_cast<const __half2*>(&w);
            part = (i % 2 == 0) ? __low2float(h) : __high2float(h);
          } else {
            part = d32[i];
          }
          if (p.block_scales) {
            const float sa = p.sa[static_cast<std::size_t>(row_of(i)) * ka + kb];
            const float sb = p.sb[static_cast<std::size_t>(col_of(i) / kScaleBlock) * ka + kb];
            acc[i] = fmaf(sa * sb, part, acc[i]);
          } else {
            acc[i] = __fadd_rn(acc[i], part);
          }
        }
        first_chunk = false;
        chunk_start = true;
        wgmma_fence();
      }
    }
    wgmma_commit_group();
    wgmma_wait_group_0();
    __syncthreads();  // every warp done reading this stage before it is overwritten
  }
#pragma unroll
  for (int i = 0; i < kElems; ++i) {
    float v = acc[i];
    if (p.out_f16) v = __half2float(__float2half_rn(v));
    p.D[static_cast<std::size_t>(row_of(i)) * p.N + col_of(i)] = v;
  }
}

template <int AT, int BT, int TN, bool F16>
std::string launch(const Params& p, cudaStream_t st) {
  const dim3 grid(p.M / 64, p.N / TN);
  wgmma_fp8_kernel<AT, BT, TN, F16><<<grid, 128, 0, st>>>(p);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? std::string{} : std::string("wgmma launch: ") + cudaGetErrorString(e);
}

}  // namespace

std::string wgmma_gemm(const WgmmaGemm& g, int M, int N, int K, const std::uint8_t* A,
                       const std::uint8_t* B, const float* C, const float* sa, const float* sb,
                       float* D, void* stream) {
  if (g.tile_n != 8 && g.tile_n != 64) return "wgmma: tile_n must be 8 or 64";
  if (M <= 0 || N <= 0 || K <= 0 || M % 64 || N % g.tile_n || K % 32)
    return "wgmma: need M % 64 == 0, N % tile_n == 0, K % 32 == 0";
  if (g.promote_every < 0 || g.promote_every % 32) return "wgmma: promote_every must be a multiple of 32";
  if (g.block_scales && (sa == nullptr || sb == nullptr)) return "wgmma: block scales need sa and sb";
  const Params p{M, N, K, A, B, C, sa, sb, D, g.promote_every, g.block_scales ? 1 : 0,
                 g.out_f16 ? 1 : 0};
  auto st = static_cast<cudaStream_t>(stream);
  const int a = g.a == Fp8::e4m3 ? 0 : 1, b = g.b == Fp8::e4m3 ? 0 : 1;
  if (g.tile_n == 64) {
    if (a != 0 || b != 0 || g.accum != Accum::f32) return "wgmma: n64 is built for f32 e4m3 x e4m3 only";
    return launch<0, 0, 64, false>(p, st);
  }
  const bool f16 = g.accum == Accum::f16;
  if (a == 0 && b == 0) return f16 ? launch<0, 0, 8, true>(p, st) : launch<0, 0, 8, false>(p, st);
  if (a == 0 && b == 1) return f16 ? launch<0, 1, 8, true>(p, st) : launch<0, 1, 8, false>(p, st);
  if (a == 1 && b == 0) return f16 ? launch<1, 0, 8, true>(p, st) : launch<1, 0, 8, false>(p, st);
  return f16 ? launch<1, 1, 8, true>(p, st) : launch<1, 1, 8, false>(p, st);
}

}  // namespace fp8sim::cuda
