// gemm_engine_tiled_gs: the tiled GEMM kernel for the FP4 block-scaled step on group sums
// (kind::mxf4, kind::mxf4nvf4: MMA-Sim's GST_FDPA), bit for bit as gemm_engine_step.cuh's
// group_sum_step, which the per-output kernel runs.
//
// The step (DeviceGemm::group_sum): G = 64 products in groups of GS = 16, each group's sum
// exact, times its block's two scales, aligned on the largest of the scales' exponents (c's,
// the zero exponent's), cut toward zero to frac bits below it and summed exactly. Here:
//   group sums  FP4 elements are small integers times 2^unit (e2m1: halves, at most 12), so a
//               group's sum is four DP4A instructions on int8 codes (exact in int32);
//   exponents   the group's term aligns at the scales' exponents alone: max(ea + eb) over the
//               groups whose products are not all zero (a 16-bit nonzero mask per row and
//               group, ANDed), from prepared words (mask, scale significand, scale exponent);
//   terms       sum * ma * mb (the scales' integer significands) shifted onto the grid in
//               int64, cut toward zero, as the reference's cut of sum * sa * sb in doubles.
// The operands are prepared once per GEMM (prepare_group_operand: int8 codes transposed in
// words of 4 along K, and the words above). Outputs it cannot finish (a non-finite C, a step
// that overflows) get kRedoBits and are redone by the per-output kernel. K-parallel
// (KPAR, Params::chunks set, gemm_engine_kpar.cuh): a block runs the chunks of slice
// blockIdx.z and writes each chunk's partial instead of promoting it. KPAR is an instance of
// its own so that the other carries none of that code: with one instance for both, the
// partials' stores in every output's promotion cost the whole kernel 6% (H100, 2026-11-27,
// 4096^3 nvfp4 and mxf4: 4.70e12 to 4.71e12 MAC/s with one instance, 4.99e12 with two; the
// float kernels, tried the same way, went 0.5% to 1% slower and keep one instance).
#pragma once

#include "engine/gemm_engine_tiled_f32.cuh"  // load_words

namespace fp8sim::gpu {

constexpr int kGsStep = 64;   // products per step (the model's group)
constexpr int kGsGroup = 16;  // products per group sum (the model's group_sum)
constexpr int kGsGroups = kGsStep / kGsGroup;
constexpr int kGsWords = kGsStep / 4;  // int8 codes, 4 a word
constexpr int kGsNone = -(1 << 20);    // "nothing aligns" (far below any grid, no overflow)

// An operand prepared for the kernel: rows padded to rows_p and K to k_p (a multiple of the
// step); word w (K elements 4w..4w+3 as int8, element 4w+i in byte i) of row r at
// code[w * rows_p + r]; group j (K elements 16j..16j+15) of row r at info[j * rows_p + r]:
// bits 0-15 the elements that are not zero (none where the scale is zero), bits 16-23 the
// scale's integer significand m, bits 24-31 its alignment exponent t + 128 (the scale is
// m * 2^(t - scale_mantissa_bits), t = max(floor(log2 s), scale_min_exponent)).
struct GroupOperand {
  const unsigned* code = nullptr;
  const unsigned* info = nullptr;
  int rows_p = 0;
};

struct GroupParams {
  Params p;
  GroupOperand a, b;
  int shift = 0;  // a_unit + b_unit - 2 * scale_mantissa_bits: a group's term S * ma * mb is
                  // S * ma * mb * 2^(ta + tb + shift), so te + shift - grid places it on the grid
};

// prepare_group_operand: one thread per (row, group), consecutive threads on consecutive rows;
// from decoded values (src) or (Params::codes) from the codes in place.
template <bool IS_B>
__global__ void prepare_group_operand(const Params p, const float* src, int rows, int unit,
                                      unsigned* code, unsigned* info, int rows_p, int k_p) {
  const DeviceGemm& g = p.g;
  const int K = g.K, groups = k_p / kGsGroup;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
       i < std::size_t(rows_p) * groups; i += std::size_t(gridDim.x) * blockDim.x) {
    const int r = int(i % unsigned(rows_p)), j = int(i / unsigned(rows_p));
    unsigned w[4] = {0, 0, 0, 0}, word = 0;
    if (r < rows && j * kGsGroup < K) {
      unsigned mask = 0;
      for (int e = 0; e < kGsGroup; ++e) {
        const int k = j * kGsGroup + e;
        if (k >= K) break;
        const float v = p.codes ? code_value<IS_B>(p, r, k) : src[std::size_t(r) * K + k];
        const int q = __float2int_rn(ldexpf(v, -unit));  // exact
        w[e / 4] |= (unsigned(q) & 0xffu) << (8 * (e % 4));
        mask |= unsigned(q != 0) << e;
      }
      const float s = IS_B ? b_scale(g, r, j * kGsGroup) : a_scale(g, r, j * kGsGroup);
      if (mask != 0 && s != 0.0f) {
        const int t = max(ilogbf(s), g.scale_min_exponent);
        const int m = __float2int_rn(ldexpf(s, g.scale_mantissa_bits - t));  // exact
        word = mask | unsigned(m) << 16 | unsigned(t + 128) << 24;
      }
    }
    for (int e = 0; e < 4; ++e) code[std::size_t(j * 4 + e) * rows_p + r] = w[e];
    info[std::size_t(j) * rows_p + r] = word;
  }
}

// Group j of a row of A (info word a) against the same group of a column of B (word b):
// whether some product is not zero (both scales then are not), the alignment exponent of the
// group's term (the scales' exponents), and the product of the scales' integer significands.
struct GroupPair {
  bool nonzero;
  int exponent, significands;
};
__device__ __forceinline__ GroupPair group_pair(unsigned a, unsigned b) {
  return {(a & b & 0xffffu) != 0, static_cast<int>(a >> 24) + static_cast<int>(b >> 24) - 256,
          static_cast<int>((a >> 16) & 0xffu) * static_cast<int>((b >> 16) & 0xffu)};
}

// x * 2^sh cut toward zero to an integer (x: a term in units of 2^-sh of the grid).
__device__ __forceinline__ long long cut_shift_rz(int x, int sh) {
  if (sh >= 0) return static_cast<long long>(x) << min(sh, 62);
  const long long mag = static_cast<long long>(static_cast<unsigned>(abs(x)) >> min(-sh, 31));
  return x < 0 ? -mag : mag;
}

// One slab (one step: kGsWords code words and kGsGroups info words of ROWS rows) into shared
// memory as 16-byte copies.
template <int ROWS, int NT, int PAD>
__device__ __forceinline__ void load_group_slab(const GroupOperand& o, int row0, int kb,
                                                unsigned (*cs)[ROWS + PAD],
                                                unsigned (*is)[ROWS + PAD]) {
  constexpr int V4 = ROWS / 4;
  for (int idx = threadIdx.x; idx < (kGsWords + kGsGroups) * V4; idx += NT) {
    const int w = idx / V4, c = idx % V4;
    if (w < kGsWords) {
      *reinterpret_cast<uint4*>(&cs[w][4 * c]) = *reinterpret_cast<const uint4*>(
          o.code + std::size_t(kb / 4 + w) * unsigned(o.rows_p) + unsigned(row0 + 4 * c));
    } else {
      const int j = w - kGsWords;
      *reinterpret_cast<uint4*>(&is[j][4 * c]) = *reinterpret_cast<const uint4*>(
          o.info + std::size_t(kb / kGsGroup + j) * unsigned(o.rows_p) + unsigned(row0 + 4 * c));
    }
  }
}

template <int TM, int TN, int BM, int BN, int MIN_BLOCKS, bool KPAR>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), MIN_BLOCKS)
    tiled_group_sums(const GroupParams gp) {
  constexpr int PAD = 4, TX = BN / TN, NT = (BM / TM) * TX;
  static_assert(TM % 4 == 0 && TN % 4 == 0 && BM % 4 == 0 && BN % 4 == 0);
  __shared__ __align__(16) unsigned As[kGsWords][BM + PAD], Ai[kGsGroups][BM + PAD];
  __shared__ __align__(16) unsigned Bs[kGsWords][BN + PAD], Bi[kGsGroups][BN + PAD];
  const Params& p = gp.p;
  const DeviceGemm& g = p.g;
  const DeviceModel& m = g.model;
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int K = g.K;
  const int chunk = g.promote_every == 0 ? K : g.promote_every;  // a multiple of the step
  const KRange kr = KPAR ? slice_range(p.chunks, chunk, K) : KRange{0, K};

  float acc[TM][TN], mainv[TM][TN];
  // Outputs the per-output kernel redoes (non-finite C, a step that overflows).
  unsigned redo = load_c_slice(g, kr, m0 + ty * TM, n0 + tx * TN, acc);
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) mainv[i][j] = main_start(g);

  int next_promote = kr.begin + chunk;
  for (int kb = kr.begin; kb < kr.end; kb += kGsStep) {
    load_group_slab<BM, NT, PAD>(gp.a, m0, kb, As, Ai);
    load_group_slab<BN, NT, PAD>(gp.b, n0, kb, Bs, Bi);
    __syncthreads();
    const int present = min(kGsGroups, (K - kb + kGsGroup - 1) / kGsGroup);
    // 1. Each output's alignment exponent: c's (a zero c joins as a zero term), then the
    //    scales' exponents of every group that is not all zero; a zero term's exponent.
    int grid[TM][TN];
    unsigned zero = 0;
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const std::uint32_t cb = __float_as_uint(acc[i][j]);
        const int ec = max(static_cast<int>((cb >> 23) & 0xff), 1) - 127;  // c_min -126
        grid[i][j] = (cb << 1) == 0 ? kGsNone : ec;
        zero |= unsigned((cb << 1) == 0) << (i * TN + j);
      }
#pragma unroll 1
    for (int q = 0; q < present; ++q) {
      unsigned ia[TM], ib[TN];
      load_words(ia, &Ai[q][ty * TM]);
      load_words(ib, &Bi[q][tx * TN]);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          const GroupPair g2 = group_pair(ia[i], ib[j]);
          grid[i][j] = g2.nonzero ? max(grid[i][j], g2.exponent) : grid[i][j];
          zero |= unsigned(!g2.nonzero) << (i * TN + j);
        }
    }
    // 2. The grid (emax - frac) and c's term on it.
    long long total[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        int e = grid[i][j];
        if (m.zero_on && (zero >> (i * TN + j)) & 1u) e = max(e, m.zero_exponent);
        grid[i][j] = e - m.frac_bits;
        const std::uint32_t cb = __float_as_uint(acc[i][j]);
        const int field = static_cast<int>((cb >> 23) & 0xff);
        const int mc = static_cast<int>((cb & 0x7fffffu) | (field ? 0x800000u : 0u));
        total[i][j] = cut_shift_rz(cb >> 31 ? -mc : mc, max(field, 1) - 127 - 23 - grid[i][j]);
      }
    // 3. Each group's sum (DP4A on the codes), times the scales' significands, onto the grid.
#pragma unroll 1
    for (int q = 0; q < present; ++q) {
      int S[TM][TN];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) S[i][j] = 0;
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        int a[TM], b[TN];
        load_words(a, reinterpret_cast<const int*>(&As[4 * q + w][ty * TM]));
        load_words(b, reinterpret_cast<const int*>(&Bs[4 * q + w][tx * TN]));
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) S[i][j] = __dp4a(a[i], b[j], S[i][j]);
      }
      unsigned ia[TM], ib[TN];
      load_words(ia, &Ai[q][ty * TM]);
      load_words(ib, &Bi[q][tx * TN]);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          const GroupPair g2 = group_pair(ia[i], ib[j]);
          const long long t =
              cut_shift_rz(S[i][j] * g2.significands, g2.exponent + gp.shift - grid[i][j]);
          total[i][j] += g2.nonzero ? t : 0;
        }
    }
    // 4. The step's output rounding (an overflow: the per-output kernel), then promotion.
    const int kend = kb + kGsStep;
    const bool promote_now = kend == next_promote || kend >= K;
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        float r = static_cast<float>(finish_int(p, total[i][j], grid[i][j]));
        if (!isfinite(r)) {
          redo |= 1u << (i * TN + j);
          r = 0.0f;
        }
        acc[i][j] = r;
        if (KPAR && promote_now) {  // K-parallel: the chunk's partial
          store_part(p.chunks, g, m0 + ty * TM + i, n0 + tx * TN + j, next_promote - chunk,
                     chunk, r, (redo >> (i * TN + j)) & 1u);
          acc[i][j] = 0.0f;
        } else if (promote_now) {
          mainv[i][j] = __fadd_rn(mainv[i][j], r);
          acc[i][j] = 0.0f;
        }
      }
    if (promote_now) next_promote += chunk;
    __syncthreads();
  }
  if (KPAR) return;
  store_d_tile<TM, TN>(p, m0 + ty * TM, n0 + tx * TN, redo,
                       [&](int i, int j) { return mainv[i][j]; });
}

}  // namespace fp8sim::gpu
