// gemm_engine_tiled_f32: the tiled GEMM kernel for float steps (DeviceStep::f32; and narrow
// double steps, WIDE below): each thread computes a TM x TN register tile of outputs, one
// fused step of G products at a time, bit for bit as gemm_engine_step.cuh's fast_step, in
// half the instructions of the generic tiled kernel (gemm_engine_tiled.cuh, which keeps the
// wider double steps): 5.1 against 9.5 thread instructions an emulated MAC for hopper-wgmma
// (ncu, H100, 4096x4096x2048, 2026-11-25).
//
// Why it is cheaper (per product, in SASS):
//   exponents  one VIADDMNMX.S16x2 for two outputs: max(ea + eb, em) on 16-bit halves (the
//              alignment exponents of two rows of A packed in one word, B's doubled);
//   terms      one FFMA.RZ (or .RN) |a| * |b| + 2^(E+23): the magnitude cut to the grid 2^E
//              in one rounding (the product is exact in float, DeviceStep::f32), whose bits T
//              are bits(2^(E+23)) + n, n = the cut magnitude in units of the grid;
//              one LOP3 T ^ sa ^ sb (sa, sb: the operands' signs as all-ones masks), so that a
//              negative term adds ~T = -T - 1;
//              one IMAD: the step's terms summed in int32, modulo 2^32.
//   Step 3 recovers the signed sum of the n from the int32 sum (below) and the number Q of
//   negative terms (a popcount of the step's sign bits), exactly as integers; the float sum
//   of fast_step and this integer sum are the same number (all terms lie on 2^E and the sum
//   fits 24 bits: DeviceStep::f32's condition), so the step's bits do not change.
//   CHAIN (terms cut toward zero whose step sums fit 22 bits, hopper-wgmma's frac 13; the
//   64 x 64 tiles): one LOP3 sign flip and one FFMA.RM a product onto a chain instead
//   (float_chain, as the WIDE step's below), no int32 sum and no popcount: H100, 2026-11-27,
//   kernels 4.77e12 to 5.18e12 at 4096^3, 4.92e12 to 5.35e12 at 8192^3.
// The operands are prepared once per GEMM (prepare_tile_operand: transposed, padded, with
// their exponents and sign bits), so that a block's slab loads are 16-byte copies; or, for
// resident codes (Params::codes), read in place: each thread decodes one row's 32 codes of
// the slab through a shared-memory table of the code's value and exponent (store_code_slab),
// so that no prepared copy exists.
// WIDE (double steps, DeviceStep::f64, of at most 25 fraction bits (26 in steps of 16):
// Blackwell's FP8 and MX steps, Hopper's and Ampere's HMMA): a cut magnitude n needs up to
// frac + 2 > 23 bits, so each product is one sign flip and one DFMA rounded toward -Inf
// (wide_chain: the operands' magnitudes held as doubles in the shared-memory tiles,
// converted once as a slab is loaded rather than at each of their uses) onto its output's
// chain 1.5 2^(E + 52) + S 2^E, whose significand is the signed sum S of the cut magnitudes;
// S is rounded once at the step's end (wide_step_output); block scales folded into resident
// codes are applied as a slab is decoded.
// Outputs it cannot finish exactly (an Inf or NaN operand or C, grids outside float's range)
// get kRedoBits and are redone by the per-output kernel, as with the generic tiled kernel.
// K-parallel (Params::chunks set, gemm_engine_kpar.cuh): a block runs the chunks of slice
// blockIdx.z and writes each chunk's partial instead of promoting it.
#pragma once

#include "engine/gemm_engine_tile_load.cuh"

namespace fp8sim::gpu {

// The exponents two outputs' c (a join's C registers, fp32) align at, in the 16-bit halves of
// one word (a's low, b's high), as the exponent pass packs them: max(floor(log2|c|),
// c_min_exponent) with c_min_exponent = -126 (the tiled kernels run e8 outputs only), that is
// max(field, 1) - 127 of c's exponent field; kTileNoExponent for a zero c. About ten
// instructions for the pair, on their 16-bit halves: the high halves' fields, max(field -
// 127, -126) by one VIADDMNMX, and each half's zero test on its magnitude's bits (high half
// without the sign, or low half) by min(bits, 1) times 0xffff, a mask of the nonzero half.
__device__ __forceinline__ unsigned c_tile_exponents(float a, float b) {
  const unsigned ua = __float_as_uint(a), ub = __float_as_uint(b);
  const unsigned high = __byte_perm(ua, ub, 0x7632), low = __byte_perm(ua, ub, 0x5410);
  const unsigned e = __viaddmax_s16x2((high >> 7) & 0x00ff00ffu, 0xff81ff81u, 0xff82ff82u);
  const unsigned nonzero = __vminu2((high & 0x7fff7fffu) | low, 0x00010001u) * 0xffffu;
  static_assert(kTileNoExponent == -32768, "the halves' 0x8000");
  return (e & nonzero) | (0x80008000u & ~nonzero);
}

// The grids of two outputs' step (from the exponent pass's word w of their max(ea + eb), c's
// included) as float exponents biased for the magic constant 2^(E + 23), E + 150, in the
// 16-bit halves, by one VIADDMNMX: max(e - frac, -126) + 150. E = e - frac where e >=
// kZeroExponent + 400 (something aligns); below it (nothing does: every term and c are zero,
// and the step's output is 0 on any grid) -126 where the per-output code said 0. A real E
// outside float's grids [-126, 104] (grid_ok<float>: a huge C, Inf or NaN operands) is found
// by GridRange, not here.
__device__ __forceinline__ unsigned tile_magic_exponents(unsigned w, int frac) {
  const unsigned b = static_cast<unsigned>(150 - frac) & 0xffffu;
  return __viaddmax_s16x2(w, b | b << 16, 0x00180018u);  // 24 = -126 + 150
}

// The range of real exponents e over a thread's outputs in one step, two halves at a time:
// the least e + 600 as unsigned (e below kZeroExponent + 400 = -600 wraps high: nothing
// aligns there) and the largest e. Their grids e - frac lie in [-126, 104] (grid_ok<float>)
// where the least e + 600 >= 474 + frac and the largest e <= 104 + frac.
struct GridRange {
  unsigned least = 0xffffffffu, largest = 0x80008000u;
  __device__ __forceinline__ void add(unsigned w) {
    static_assert(kZeroExponent + 400 == -600, "the offset below");
    least = __viaddmin_u16x2(w, 0x02580258u, least);  // + 600
    largest = __vmaxs2(w, largest);
  }
  __device__ __forceinline__ bool bad(int frac) const {
    const unsigned lo = min(least & 0xffffu, least >> 16);
    const int hi = max(static_cast<int>(largest << 16) >> 16, static_cast<int>(largest) >> 16);
    return lo < static_cast<unsigned>(474 + frac) || hi > 104 + frac;
  }
};

// WX (tiled_gemm_f32): a warp's 32 threads run the thread tiles of WX columns by 32 / WX rows
// of the block's TX x (BM / TM) grid of thread tiles (WX = TX: whole rows, warp by warp). Fewer
// columns mean fewer distinct B operands and more distinct A ones a warp's loads touch; the
// bits do not depend on it. For the double step (8 x 2 outputs a thread) 16 columns instead
// of 32 made no difference (H100, 2026-11-27, 4096^3 kernels, twice each: mxf8f6f4 2.95e12 /
// 2.97e12 against 2.96e12 / 2.99e12), and 4 x 4 outputs a thread were slower with 8 or 16
// columns (2.73e12 to 2.78e12; ptxas spilled 84 bytes against 32). The float kernel's 4 x 2
// outputs a thread keep whole rows too: 16 or 8 columns were no faster at 16x4096x7168 and
// 64x7168x16384 and slower at 32x4096x7168 (3.05e12 / 3.08e12 to 2.93e12-2.98e12) and
// 4096x128x1024 (hopper-wgmma, H100, 2026-11-27); the double step's are faster with 16
// (gemm_engine.cu, launch_tiled_wide).

// How c enters the step and how the step's output is rounded, fixed at compile time so that
// the per-step code has no branch on it: c joins and the e8mX output is cut toward zero or
// rounded to nearest even (DeviceModel::output_rounding), or c is added after the step into
// an fp32 output (c_entry add with out_fp32_model: the step's output needs no rounding).
enum TileMode : int { kJoinRz = 0, kJoinRne = 1, kAddFp32 = 2 };

// The end of a wide step (tiled_gemm_f32's WIDE: double steps on the host's side,
// DeviceStep::f64): the products' signed sum S in units of the grid 2^E (|S| < 2^33; mgd =
// 2^(E + 52)) joined exactly with c's term (JOIN: |c| < 2^(E + frac + 1) cut toward zero to
// the grid by one DADD, whose low word is the cut magnitude, 0 for a zero c); S cut toward
// zero to 24 significant bits by one conversion (I2F.S64.RZ), then times 2^E (exact: the
// result is 0 or at least 2^E >= 2^-126, the kernel's grid_ok, so never below fp32's normal
// range, and at most the cut S 2^E), then cut to the e8mX output by masking its low `low`
// bits (finish_step's; the launch sends outputs rounded to nearest to the generic kernel):
// truncations compose, so this is S 2^E cut toward zero to X bits, as the CPU's double step
// and its rounding give it. c added after where it does not join. A result that is not
// finite (an overflow: the caller looks for one once for all of a thread's outputs) is redone
// by the per-output kernel.
template <bool JOIN>
__device__ __forceinline__ float wide_step_output(long long S, double mgd, unsigned low,
                                                  float c) {
  if constexpr (JOIN) {
    const unsigned nc = static_cast<unsigned>(__double2loint(__dadd_rz(double(fabsf(c)), mgd)));
    const unsigned sc = static_cast<unsigned>(__float_as_int(c) >> 31);
    S += static_cast<int>((nc ^ sc) - sc);
  }
  // 2^E as a float from mgd's high word, (E + 1075) 2^20: (E + 127) 2^23 modulo 2^32.
  const unsigned grid = static_cast<unsigned>(__double2hiint(mgd)) * 8u - (948u << 23);
  float out = __fmul_rn(__ll2float_rz(S), __uint_as_float(grid));
  out = __uint_as_float(__float_as_uint(out) & ~low);
  if constexpr (!JOIN) out = __fadd_rn(out, c);
  return out;
}

// A wide step's products on a chain (tiled_gemm_f32's WIDE), one DFMA a product: an output's
// chain holds +-C, C = 1.5 2^(E + 52) + S 2^E with S the signed sum so far of its products'
// magnitudes cut toward zero to the grid 2^E (|S| < 2^33: C stays in [2^(E + 52), 2^(E +
// 53)), whose spacing is 2^E); its sign is the last product's. A product's sign flip (the
// sign bit of its own sign against the product before: wide_flip_masks) makes the chain's
// sign the product's, then |a| |b| + chain rounded toward -Inf is C +- the cut |a| |b| again
// (a positive product: C + |a||b| rounded down; a negative one: -(C - cut) = -C + |a||b|
// rounded down): no integer sums, no count of negative terms.
__device__ __forceinline__ double wide_chain(double a, double b, unsigned flip, double chain) {
  const double signed_chain =
      __hiloint2double(__double2hiint(chain) ^ static_cast<int>(flip), __double2loint(chain));
  return __fma_rd(a, b, signed_chain);
}

// The float step's chain (tiled_gemm_f32's CHAIN): wide_chain's in float, from 1.5 2^(E + 23)
// (its spacing 2^E while |S| < 2^22): the products exact in float (DeviceStep::f32), their
// magnitudes cut by one FFMA rounded toward -Inf.
__device__ __forceinline__ float float_chain(float a, float b, unsigned flip, float chain) {
  return __fmaf_rd(fabsf(a), fabsf(b), __uint_as_float(__float_as_uint(chain) ^ flip));
}

// S of a chain (wide_chain): C's significand less 1.5's, the sign bit and exponent dropped.
__device__ __forceinline__ long long wide_chain_sum(double chain) {
  const unsigned high = (static_cast<unsigned>(__double2hiint(chain)) & 0xfffffu) - 0x80000u;
  return static_cast<long long>(static_cast<unsigned long long>(high) << 32 |
                                static_cast<unsigned>(__double2loint(chain)));
}

// A slab's sign masks (all-ones for a negative value) made, for the wide step, sign flips:
// bit 31 set where the value's sign differs from the one before it in its row (K - 1), or,
// at a step's first product, where the value is negative (chains start positive). From the
// rows' sign bits (Abits, Bbits); each thread a row's PER products.
template <int BM, int BN, int NT, int PAD, int G>
__device__ __forceinline__ void wide_flip_masks(int (*Am)[BM + PAD], const unsigned* Abits,
                                                int (*Bm)[BN + PAD], const unsigned* Bbits) {
  constexpr int ROWS = BM + BN, PARTS = NT / ROWS >= 2 ? 2 : 1, PER = kTileBk / PARTS;
  static_assert(NT >= ROWS && (G == 32 || G == 16) && kTileBk == 32);
  const int t = threadIdx.x;
  if (t >= PARTS * ROWS) return;
  const int part = t / ROWS, r = t - part * ROWS;
  const bool is_a = r < BM;
  const unsigned bits = is_a ? Abits[r] : Bbits[r - BM];
  constexpr unsigned kFirsts = G == 32 ? 1u : 0x00010001u;  // the steps' first products
  const unsigned flips = bits ^ ((bits << 1) & ~kFirsts);
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int k = part * PER + i;
    const int m = static_cast<int>((flips >> k) << 31);
    if (is_a) Am[k][r] = m;
    else Bm[k][r - BM] = m;
  }
}

template <int G, bool RNE, int MODE, int TM, int TN, int BM, int BN, int MIN_BLOCKS,
          bool WIDE = false, int WX = BN / TN, bool CHAIN = false>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), MIN_BLOCKS)
    tiled_gemm_f32(const TileParams tp) {
  constexpr int BK = kTileBk, PAD = kTilePad, TX = BN / TN, NT = (BM / TM) * TX;
  constexpr bool JOIN = MODE != kAddFp32, OUT_RNE = MODE == kJoinRne;
  static_assert(!WIDE || !RNE, "the double step cuts its terms (and c's) toward zero");
  // CHAIN: the float step's products on chains too (wide_chain's, in float: float_chain),
  // where the launch finds |S| < 2^22 and the terms cut toward zero.
  constexpr bool FCHAIN = CHAIN && !WIDE;
  static_assert(!FCHAIN || !RNE, "a chain cuts its terms toward zero");
  using V = std::conditional_t<WIDE, double, float>;  // the tiles' values (tile_value)
  static_assert(BK % G == 0 && NT % 32 == 0 && (TM % 8 == 0 || TM == 4 || TM == 2) &&
                (TN % 4 == 0 || TN <= 2) && BM + BN <= NT);  // BM + BN: CodeSlabPart
  extern __shared__ __align__(16) unsigned char smem[];  // tiled_f32_smem_bytes(.., sizeof(V))
  const Params& p = tp.p;
  unsigned char* at = smem;
  auto As = reinterpret_cast<V(*)[BM + PAD]>(at);            at += BK * (BM + PAD) * sizeof(V);
  auto Am = reinterpret_cast<int(*)[BM + PAD]>(at);          at += BK * (BM + PAD) * 4;
  auto Bs = reinterpret_cast<V(*)[BN + PAD]>(at);            at += BK * (BN + PAD) * sizeof(V);
  auto Bm = reinterpret_cast<int(*)[BN + PAD]>(at);          at += BK * (BN + PAD) * 4;
  auto Be = reinterpret_cast<unsigned(*)[BN + PAD]>(at);     at += BK * (BN + PAD) * 4;
  auto Ae = reinterpret_cast<short(*)[BM + 2 * PAD]>(at);    at += BK * (BM + 2 * PAD) * 2;
  auto Abits = reinterpret_cast<unsigned*>(at);              at += BM * 4;
  auto Bbits = reinterpret_cast<unsigned*>(at);              at += BN * 4;
  auto mainv = reinterpret_cast<float(*)[NT]>(at);          at += NT * TM * TN * 4;
  const uint2* lut = reinterpret_cast<const uint2*>(at);   // read as codes: the code tables
  const bool codes = tp.ta.code != nullptr;
  const DeviceGemm& g = p.g;
  static_assert(32 % WX == 0 && TX % WX == 0 && (BM / TM) % (32 / WX) == 0);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int tx = lane % WX + WX * (warp % (TX / WX)),
            ty = (warp / (TX / WX)) * (32 / WX) + lane / WX;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int M = g.M, N = g.N, K = g.K;
  const int chunk = g.promote_every == 0 ? K : g.promote_every;
  const int frac = g.model.frac_bits;
  // The output's rounding clears the low `drop` bits of the float sum (e8mX, X = 23 - drop).
  const int drop = p.out_drop - 29;  // 0 (an fp32 output) .. 23
  const unsigned low = (1u << drop) - 1u, odd_bit = drop > 0 ? 1u : 0u;

  const KRange kr = slice_range(p.chunks, chunk, K);  // K-parallel: chunks a multiple of BK
  int next_promote = kr.begin + chunk;  // the K index ending the current chunk (a multiple of G)
  // Where the scales of the thread's rows and columns start (a_scale / b_scale's layout).
  unsigned a_base[TM], b_base[TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
    a_base[i] = g.a_bcast ? 0u : unsigned(min(m0 + ty * TM + i, M - 1)) * unsigned(g.a_cols);
#pragma unroll
  for (int j = 0; j < TN; ++j)
    b_base[j] = g.b_bcast ? 0u
                          : unsigned(min(n0 + tx * TN + j, N - 1) / g.b_div) * unsigned(g.b_cols);
  float acc[TM][TN];
  // Outputs the per-output kernel redoes (non-finite C, overflow); grid_bad: all of them.
  unsigned redo = load_c_slice(g, kr, m0 + ty * TM, n0 + tx * TN, acc);
  bool grid_bad = false;
#pragma unroll
  for (int i = 0; i < TM * TN; ++i) mainv[i][threadIdx.x] = main_start(g);
  std::size_t fold_base = 0;  // read as codes, with folded scales: code_slab_fold_base
  if (codes) {
    load_code_tables<NT>(tp, const_cast<uint2*>(lut));
    fold_base = code_slab_fold_base<BM, BN, NT, WIDE>(tp, m0, n0);
    __syncthreads();
  }

  // Read as codes: the thread's part of the next slab, fetched one slab ahead.
  CodeSlabRegs<CodeSlabPart<BM, BN, NT>::PER / 16> next;
  if (codes && kr.begin < kr.end)
    fetch_code_slab<BM, BN, NT, WIDE>(tp, m0, n0, kr.begin, fold_base, next);

  for (int k0 = kr.begin; k0 < kr.end; k0 += BK) {
    // 0. The slab: values, sign masks (all-ones for a negative value), exponents, sign bits.
    if (codes) {
      store_code_slab<BM, BN, NT, PAD, WIDE>(next, m0, n0, lut, As, Am, Ae, Abits, Bs, Bm, Be,
                                               Bbits);
    } else {
      load_tile_slab<BM, NT, false, PAD>(tp.ta, m0, k0, As, Am, Ae, Abits);
      load_tile_slab<BN, NT, true, PAD>(tp.tb, n0, k0, Bs, Bm, Be, Bbits);
    }
    __syncthreads();
    if constexpr (WIDE || FCHAIN) {  // the sign masks made flips (wide_flip_masks)
      wide_flip_masks<BM, BN, NT, PAD, G>(Am, Abits, Bm, Bbits);
      __syncthreads();
    }
    if (codes && k0 + BK < kr.end)
      fetch_code_slab<BM, BN, NT, WIDE>(tp, m0, n0, k0 + BK, fold_base, next);
#pragma unroll 1
    for (int s = 0; s < BK; s += G) {
      const int kb = k0 + s;
      if (kb >= K) break;
      // 1. Each output's alignment exponent: c's (a join), then max(ea + eb) over the step,
      //    two rows of outputs per 16-bit pair.
      unsigned em[TM / 2][TN];
#pragma unroll
      for (int i = 0; i < TM; i += 2)
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          em[i / 2][j] = JOIN ? c_tile_exponents(acc[i][j], acc[i + 1][j]) : 0x80008000u;
        }
#pragma unroll 4
      for (int kk = 0; kk < G; ++kk) {
        unsigned ea[TM / 2], eb[TN];
        load_words(ea, reinterpret_cast<const unsigned*>(&Ae[s + kk][ty * TM]));
        load_words(eb, &Be[s + kk][tx * TN]);
#pragma unroll
        for (int i = 0; i < TM / 2; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) em[i][j] = __viaddmax_s16x2(ea[i], eb[j], em[i][j]);
      }
      // The grid 2^E of each output, as the bits of the magic constant 2^(E + 23) (two outputs
      // at a time: tile_magic_exponents) or, WIDE, 2^(E + 52) (E = 0 where nothing aligns:
      // every term is then zero; per output: packed two at a time, the double step spilled).
      // A grid outside float's range (rare: a huge C, Inf or NaN operands) sends all of this
      // thread's outputs to the per-output kernel (GridRange: one predicate, no per-output bit).
      unsigned magic[TM][TN];
      // WIDE and FCHAIN: each output's chain (wide_chain from 1.5 2^(E + 52), float_chain from
      // 1.5 2^(E + 23))
      V chain[TM][TN];
      GridRange range;
#pragma unroll
      for (int i = 0; i < TM; i += 2)
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          const unsigned w = em[i / 2][j];
          range.add(w);
          if constexpr (WIDE) {
#pragma unroll
            for (int k = 0; k < 2; ++k) {
              const int e = k ? static_cast<int>(w) >> 16 : static_cast<int>(w << 16) >> 16;
              const int E = e < kZeroExponent + 400 ? 0 : e - frac;
              chain[i + k][j] = __hiloint2double(
                  __double2hiint(Magic<double>::pow2(E + 52)) | 0x80000, 0);
            }
          } else {
            const unsigned g = tile_magic_exponents(w, frac);
            // Through an opaque move: the compiler would otherwise keep E and rebuild the
            // constant from it inside the products' loop (one more ALU op a product).
            asm("mov.b32 %0, %1;" : "=r"(magic[i][j]) : "r"(g << 23));
            asm("mov.b32 %0, %1;" : "=r"(magic[i + 1][j]) : "r"((g >> 16) << 23));
          }
        }
      grid_bad = grid_bad || range.bad(frac);
      // 2. Every term's magnitude cut to its output's grid; the signed terms summed in int32,
      //    from c's term (a join: c cut to the grid, in units of it, signed; after this the
      //    products' pass needs no register for c). WIDE and FCHAIN: the products onto their
      //    outputs' chains instead (wide_chain, float_chain; FCHAIN's starts from c's term).
      unsigned sum[TM][TN];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          if constexpr (JOIN && !WIDE) {  // WIDE: c's term at the step's end, in int64
            const float c = acc[i][j], mg = __uint_as_float(magic[i][j]);
            const unsigned tc = __float_as_uint(RNE ? __fadd_rn(fabsf(c), mg)
                                                    : __fadd_rz(fabsf(c), mg));
            const unsigned sc = static_cast<unsigned>(static_cast<int>(__float_as_uint(c)) >> 31);
            sum[i][j] = ((tc - magic[i][j]) ^ sc) - sc;
          } else {
            sum[i][j] = 0;
          }
        }
      // The thread's operands of product kk of the step: values and sign masks.
      auto load_operands = [&](int kk, V (&a)[TM], unsigned (&sa)[TM], V (&b)[TN],
                               unsigned (&sb)[TN]) {
        load_words(a, &As[s + kk][ty * TM]);
        load_words(sa, reinterpret_cast<const unsigned*>(&Am[s + kk][ty * TM]));
        load_words(b, &Bs[s + kk][tx * TN]);
        load_words(sb, reinterpret_cast<const unsigned*>(&Bm[s + kk][tx * TN]));
      };
      if constexpr (WIDE || FCHAIN) {  // each product's cut added to its output's chain
        if constexpr (FCHAIN) {  // from 1.5 2^(E + 23), c's term in
#pragma unroll
          for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j)
              chain[i][j] = __uint_as_float(magic[i][j] + 0x400000u + sum[i][j]);
        }
#pragma unroll 2
        for (int kk = 0; kk < G; ++kk) {
          V a[TM], b[TN];  // WIDE: the magnitudes, doubles already
          unsigned fa[TM], fb[TN];  // sign flips (wide_flip_masks)
          load_operands(kk, a, fa, b, fb);
#pragma unroll
          for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) {
              if constexpr (WIDE) chain[i][j] = wide_chain(a[i], b[j], fa[i] ^ fb[j], chain[i][j]);
              else chain[i][j] = float_chain(a[i], b[j], fa[i] ^ fb[j], chain[i][j]);
            }
        }
      } else {
#pragma unroll 2
        for (int kk = 0; kk < G; ++kk) {
          V a[TM], b[TN];
          unsigned sa[TM], sb[TN];
          load_operands(kk, a, sa, b, sb);
#pragma unroll
          for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) {
              const float mg = __uint_as_float(magic[i][j]);
              const float t = RNE ? __fmaf_rn(fabsf(a[i]), fabsf(b[j]), mg)
                                  : __fmaf_rz(fabsf(a[i]), fabsf(b[j]), mg);
              // The sum on the FMA pipe (IMAD by a 1 the compiler cannot fold): the ALU pipe
              // takes the LOP3, the exponent pass and most of the rest, and is the busiest
              // (ncu, H100: 61% of its peak against 22% for the FMA pipe).
              sum[i][j] = (__float_as_uint(t) ^ sa[i] ^ sb[j]) * tp.one + sum[i][j];
            }
        }
      }
      // 3. The signed sum S of the n (and c's): with P positive and Q negative products
      //    (P + Q = G), sum = c's + sum over positive (T) + sum over negative (-T - 1)
      //    = c's + M (P - Q) + S' - Q modulo 2^32 (T = M + n), so S = sum + M (2Q - G) + Q;
      //    |S| < (G + 1) 2^(frac + 2) <= 2^24, so float(S) and S * 2^E are exact. Then the
      //    step's output rounding on t's bits (t is 0 or at least 2^E >= 2^-126: never below
      //    fp32's normal range), c added after (add). FCHAIN: S is the chain's significand
      //    less 1.5's, no count; WIDE: wide_chain_sum, then wide_step_output.
      const unsigned step_bits = G == 32 ? 0xffffffffu : ((1u << G) - 1) << s;
      unsigned abits[TM], bbits[TN];  // the float step's: its negative terms' count
      if constexpr (!WIDE && !FCHAIN) {
        load_words(abits, &Abits[ty * TM]);
        load_words(bbits, &Bbits[tx * TN]);
      }
      const int kend = kb + G;
      const bool promote_now = kend == next_promote || kend >= K;
      // WIDE: the largest output magnitude so far (Inf: one overflowed)
      float largest = 0.0f;
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          if constexpr (WIDE) {  // the chain's sum, and 2^(E + 52) from its exponent
            const long long S = wide_chain_sum(chain[i][j]);
            const unsigned grid_bits = static_cast<unsigned>(__double2hiint(chain[i][j])) &
                                       0x7ff00000u;
            // The outputs' ends one after another: an end reads `largest` as the one before
            // left it (ANDed with a zero the compiler cannot see); side by side, their
            // temporaries spill (ptxas, 128 registers at two blocks an SM). H100, 2026-11-27,
            // kernels, 4096^3, against four such chains of ends: mxf8f6f4 3.43e12 against
            // 3.18e12, blackwell-fp8 3.45e12 against 3.41e12, hopper-mma-f16 3.04e12 against
            // 3.10e12 (ptxas: no spills against 132 bytes).
            const unsigned after = __float_as_uint(largest) & (tp.one - 1);
            const double m = __hiloint2double(static_cast<int>(grid_bits),
                                              static_cast<int>(after));
            acc[i][j] = wide_step_output<JOIN>(S, m, low, acc[i][j]);
            largest = fmaxf(largest, fabsf(acc[i][j]));
            continue;
          }
          int S;
          if constexpr (FCHAIN) {  // the chain's significand less 1.5's
            S = static_cast<int>(__float_as_uint(chain[i][j]) & 0x7fffffu) - 0x400000;
          } else {
            const unsigned q = __popc((abits[i] ^ bbits[j]) & step_bits);
            S = static_cast<int>(sum[i][j] + magic[i][j] * (2 * q - G) + q);
          }
          const float grid = __uint_as_float(magic[i][j] - (23u << 23));  // 2^E
          const float t = __fmul_rn(__int2float_rn(S), grid);
          float r;
          if constexpr (JOIN) {
            std::uint32_t bits = __float_as_uint(t);
            if constexpr (OUT_RNE) {
              const std::uint32_t sign = bits & 0x80000000u, mag = bits & 0x7fffffffu;
              bits = sign | ((mag + ((mag >> drop) & odd_bit) + (low >> 1)) & ~low);
            } else {
              bits &= ~low;  // a finite float stays finite (|t| < 2^128, see above)
            }
            r = __uint_as_float(bits);
          } else {
            r = __fadd_rn(t, acc[i][j]);  // out_fp32_model: the step's output is t itself
          }
          if constexpr (OUT_RNE || !JOIN) {  // a carry into Inf, an overflowing add
            if (!isfinite(r)) {
              redo |= 1u << (i * TN + j);
              r = 0.0f;
            }
          }
          acc[i][j] = r;
        }
      // A wide step's output that overflowed (rare) is redone by the per-output kernel.
      if constexpr (WIDE) {
        if (!(largest <= 0x1.fffffep127f)) {  // Inf: the largest float fails
#pragma unroll
          for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j)
              if (!isfinite(acc[i][j])) {
                redo |= 1u << (i * TN + j);
                acc[i][j] = 0.0f;
              }
        }
      }
      // 4. Promotion (promote() of gemm_engine_step.cuh): each row's and column's scale read
      //    once for the thread's outputs.
      if (promote_now && p.chunks.out != nullptr) {  // K-parallel: the chunk's partials
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) {
            store_part(p.chunks, g, m0 + ty * TM + i, n0 + tx * TN + j, next_promote - chunk,
                       chunk, acc[i][j], grid_bad || (redo >> (i * TN + j)) & 1u);
            acc[i][j] = 0.0f;
          }
        next_promote += chunk;
      } else if (promote_now) {
        float xa[TM], xb[TN];
        if (g.scaled) {
          const int kb = g.scale_block == 0 ? 0 : (next_promote - chunk) / g.scale_block;
#pragma unroll
          for (int i = 0; i < TM; ++i) xa[i] = g.sa[a_base[i] + kb];
#pragma unroll
          for (int j = 0; j < TN; ++j) xb[j] = g.sb[b_base[j] + kb];
        }
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) {
            float& mv = mainv[i * TN + j][threadIdx.x];
            const float part = acc[i][j];
            if (!g.scaled) mv = __fadd_rn(mv, part);
            else if (g.scale_a_first) mv = __fmaf_rn(__fmul_rn(part, xa[i]), xb[j], mv);
            else mv = __fmaf_rn(__fmul_rn(xa[i], xb[j]), part, mv);
            acc[i][j] = 0.0f;
          }
        next_promote += chunk;
      }
    }
    __syncthreads();
  }
  if (p.chunks.out != nullptr) return;
  store_d_tile<TM, TN>(p, m0 + ty * TM, n0 + tx * TN, grid_bad ? ~0u : redo,
                       [&](int i, int j) { return mainv[i * TN + j][threadIdx.x]; });
}

}  // namespace fp8sim::gpu
