// gemm_engine_tiled: the tiled GEMM kernel for double steps (DeviceStep::f64; float steps run
// gemm_engine_tiled_f32.cuh's kernel): each thread computes a TM x TN register tile of
// outputs from BM x BK / BN x BK tiles of A and B in shared memory, one fused step of G
// products at a time, bit for bit as gemm_engine_step.cuh's fast_step. Outputs it cannot
// finish exactly (special values, results below fp32's normal range, grids outside V's
// range) get kRedoBits and are redone by the per-output kernel. Operands are read as decoded
// values or (Params::codes) as codes through their tables. K-parallel (Params::chunks
// set, gemm_engine_kpar.cuh): a block runs the chunks of slice blockIdx.z and writes each
// chunk's partial instead of promoting it.
#pragma once

#include "engine/gemm_engine_kpar.cuh"

namespace fp8sim::gpu {

// Dynamic shared memory of one block: A and B tiles (values and exponents, rows padded) and
// the threads' FP32 main accumulators (touched once per promotion, so kept out of registers).
constexpr int tiled_smem_bytes(int BM, int BN, int BK, int TM, int TN) {
  return 2 * BK * ((BM + 4) + (BN + 4)) * 4 + (BM / TM) * (BN / TN) * TM * TN * 4;
}

// A thread's N consecutive 4-byte elements of a shared-memory tile row, as 16-byte loads.
template <int N, class T>
__device__ __forceinline__ void load_fragment(T (&dst)[N], const T* src) {
  static_assert(sizeof(T) == 4 && N % 4 == 0);
#pragma unroll
  for (int i = 0; i < N; i += 4)
    *reinterpret_cast<int4*>(&dst[i]) = *reinterpret_cast<const int4*>(&src[i]);
}

// Tile shapes (compile-time): a block of (BM/TM) x (BN/TN) threads owns a BM x BN tile of D
// and walks K in slabs of BK (a multiple of the step length G).
// CODES: Params::codes (an instance each, so that the values' instance keeps its registers).
template <class V, int G, bool RNE, int TM, int TN, int BM, int BN, int BK, bool CODES>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), 2)
    tiled_gemm(const Params p) {
  constexpr int TX = BN / TN, NT = (BM / TM) * TX, PAD = 4;
  static_assert(BK % G == 0 && TM % 4 == 0 && TN % 4 == 0 && TM * TN <= 32);
  extern __shared__ __align__(16) unsigned char smem[];  // tiled_smem_bytes() of them
  auto As = reinterpret_cast<float(*)[BM + PAD]>(smem);
  auto Ae = reinterpret_cast<int(*)[BM + PAD]>(smem + BK * (BM + PAD) * 4);
  auto Bs = reinterpret_cast<float(*)[BN + PAD]>(smem + 2 * BK * (BM + PAD) * 4);
  auto Be = reinterpret_cast<int(*)[BN + PAD]>(smem + 2 * BK * (BM + PAD) * 4 + BK * (BN + PAD) * 4);
  auto mainv = reinterpret_cast<float(*)[NT]>(smem + 2 * BK * ((BM + PAD) + (BN + PAD)) * 4);
  const DeviceGemm& g = p.g;
  const DeviceModel& m = g.model;
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int M = g.M, N = g.N, K = g.K;
  const int chunk = g.promote_every == 0 ? K : g.promote_every;
  const bool join = m.c_entry == 0;
  const KRange kr = slice_range(p.chunks, chunk, K);  // K-parallel: chunks a multiple of BK

  float acc[TM][TN];
  unsigned redo = load_c_slice(g, kr, m0 + ty * TM, n0 + tx * TN, acc);
#pragma unroll
  for (int i = 0; i < TM * TN; ++i) mainv[i][threadIdx.x] = main_start(g);

  for (int k0 = kr.begin; k0 < kr.end; k0 += BK) {
    for (int idx = threadIdx.x; idx < BM * BK; idx += NT) {
      const int r = idx / BK, kk = idx % BK, row = m0 + r, k = k0 + kk;
      const float v = !(row < M && k < K) ? 0.0f
                      : CODES               ? code_value<false>(p, row, k)
                                            : g.A[std::size_t(row) * K + k];
      As[kk][r] = v;
      Ae[kk][r] = align_exponent(v, row < M && k < K ? a_floor(g, row, k) : 0);
    }
    for (int idx = threadIdx.x; idx < BN * BK; idx += NT) {
      const int r = idx / BK, kk = idx % BK, col = n0 + r, k = k0 + kk;
      const float v = !(col < N && k < K) ? 0.0f
                      : CODES               ? code_value<true>(p, col, k)
                                            : g.B[std::size_t(col) * K + k];
      Bs[kk][r] = v;
      Be[kk][r] = align_exponent(v, col < N && k < K ? b_floor(g, col, k) : 0);
    }
    __syncthreads();
    for (int s = 0; s < BK; s += G) {
      const int kb = k0 + s;
      if (kb >= K) break;
      // 1. Alignment exponent of each output's step: max(e_a + e_b), then c's.
      int em[TM][TN];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) em[i][j] = kNoExponent;
#pragma unroll 1
      for (int kk = 0; kk < G; ++kk) {
        int ea[TM], eb[TN];
        load_fragment(ea, &Ae[s + kk][ty * TM]);
        load_fragment(eb, &Be[s + kk][tx * TN]);
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) em[i][j] = max(em[i][j], ea[i] + eb[j]);
      }
      V mg[TM][TN], sum[TM][TN];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          int e = em[i][j] < kZeroExponent + 400 ? kNoExponent : em[i][j];
          const float cj = join ? acc[i][j] : 0.0f;
          if (cj != 0.0f) e = max(e, max(exponent_of(cj), m.c_min_exponent));
          int E = e == kNoExponent ? 0 : e - m.frac_bits;
          if (!grid_ok<V>(E)) {
            redo |= 1u << (i * TN + j);
            E = 0;
          }
          mg[i][j] = Magic<V>::pow2(E + Magic<V>::kDigits - 1);
          sum[i][j] = 0;
        }
      // 2. Every product cut to its output's grid and summed exactly.
#pragma unroll 1
      for (int kk = 0; kk < G; ++kk) {
        float a[TM], b[TN];
        load_fragment(a, &As[s + kk][ty * TM]);
        load_fragment(b, &Bs[s + kk][tx * TN]);
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j)
            sum[i][j] += cut_term<V>(V(a[i]) * V(b[j]), mg[i][j], RNE);
      }
      // 3. c's term, the step's output rounding, c added after (c=add), promotion.
      const int kend = kb + G;
      const bool promote_now = kend % chunk == 0 || kend >= K;
      const int chunk_start = (kb / chunk) * chunk;
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          V t = sum[i][j];
          if (join && acc[i][j] != 0.0f) t += cut_term<V>(V(acc[i][j]), mg[i][j], RNE);
          if (!isfinite(t)) redo |= 1u << (i * TN + j);
          bool tiny = false;
          float r = Magic<V>::kDigits == 24 ? finish_step_e8(p, float(t), tiny)
                                            : float(finish_step(p, double(t)));
          if (tiny) redo |= 1u << (i * TN + j);
          if (!join) r = __fadd_rn(r, acc[i][j]);
          if (!isfinite(r)) {
            redo |= 1u << (i * TN + j);
            r = 0.0f;
          }
          acc[i][j] = r;
          if (promote_now && p.chunks.out != nullptr) {  // K-parallel: the chunk's partial
            store_part(p.chunks, g, m0 + ty * TM + i, n0 + tx * TN + j, chunk_start, chunk, r,
                       (redo >> (i * TN + j)) & 1u);
            acc[i][j] = 0.0f;
          } else if (promote_now) {
            const int row = min(m0 + ty * TM + i, M - 1), col = min(n0 + tx * TN + j, N - 1);
            float& mv = mainv[i * TN + j][threadIdx.x];
            mv = promote(p, mv, r, row, col, chunk_start);
            acc[i][j] = 0.0f;
          }
        }
    }
    __syncthreads();
  }
  if (p.chunks.out != nullptr) return;
  store_d_tile<TM, TN>(p, m0 + ty * TM, n0 + tx * TN, redo,
                       [&](int i, int j) { return mainv[i * TN + j][threadIdx.x]; });
}

}  // namespace fp8sim::gpu
