// gemm_engine_tiled_f32: the tiled GEMM kernel for float steps (DeviceStep::f32): each thread
// computes a TM x TN register tile of outputs, one fused step of G products at a time, bit
// for bit as gemm_engine_step.cuh's fast_step<float>, in half the instructions of the generic
// tiled kernel (gemm_engine_tiled.cuh, which keeps the double steps): 5.1 against 9.5 thread
// instructions an emulated MAC for hopper-wgmma (ncu, H100, 4096x4096x2048, 2026-11-25).
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
// The operands are prepared once per GEMM (prepare_tile_operand: transposed, padded, with
// their exponents and sign bits), so that a block's slab loads are 16-byte copies; or, for
// resident codes (Params::codes), read in place: each thread decodes one row's 32 codes of
// the slab through a shared-memory table of the code's value and exponent (load_code_slab),
// so that no prepared copy exists.
// Outputs it cannot finish exactly (an Inf or NaN operand or C, grids outside float's range)
// get kRedoBits and are redone by the per-output kernel, as with the generic tiled kernel.
// K-parallel (Params::chunks set, gemm_engine_kpar.cuh): a block runs the chunks of slice
// blockIdx.z and writes each chunk's partial instead of promoting it.
#pragma once

#include <type_traits>

#include "engine/gemm_engine_kpar.cuh"

namespace fp8sim::gpu {

// The alignment exponent of a zero operand and of an Inf or NaN one in the 16-bit tiles:
// a zero's (sim's Operand::kZeroExponent) puts every product with it below -600, where no
// product of finite nonzero floats lies (>= -300); a special's puts every product with it,
// and every sum with a zero's, above any grid a float step can use, so the output is redone.
constexpr int kTileZeroExponent = kZeroExponent;   // -1000
constexpr int kTileSpecialExponent = 4000;         // 4000 - 1000 = 3000: far above float's 127
constexpr int kTileNoExponent = -32768;            // smallest int16: "nothing aligns yet"
static_assert(2 * kTileSpecialExponent <= 32767 && 2 * kTileZeroExponent >= -32768 &&
                  kTileSpecialExponent + kTileZeroExponent > 127 + 20,
              "16-bit exponent sums stay in range and specials always fail grid_ok");

// Tile shapes (compile-time): a block of (BM/TM) x (BN/TN) threads owns a BM x BN tile of D
// and walks K in slabs of kTileBk = 32 (one warp loads one row's slab: its sign bits are one
// ballot), holding 1 or 2 steps of G products.
constexpr int kTileBk = 32;
constexpr int kTilePad = 4;  // words of padding per smem row (keeps 16-byte fragment loads)

// Dynamic shared memory of one block:
//   A: values [BK][BM+4] f32, sign masks [BK][BM+4] i32, exponents [BK][BM+8] i16;
//   B: values [BK][BN+4] f32, sign masks [BK][BN+4] i32, exponents doubled [BK][BN+4] i32;
//   sign bits of the slab: [BM] + [BN] u32; FP32 main accumulators [TM*TN][threads] f32.
constexpr int tiled_f32_smem_bytes(int BM, int BN, int TM, int TN) {
  return kTileBk * ((BM + kTilePad) * 8 + (BM + 2 * kTilePad) * 2 + (BN + kTilePad) * 12) +
         (BM + BN) * 4 + (BM / TM) * (BN / TN) * TM * TN * 4;
}
// Read as codes (TileOperand::code), the block's code tables follow: A's then B's, one entry
// per code (its value's bits, its tile_exponent in both 16-bit halves), one more for +0 each.
constexpr int kTileLutEntries = 257;
constexpr int kTileLutBytes = 2 * kTileLutEntries * 8;

// The alignment exponent of operand value v (align_exponent's, with the two sentinels above),
// without branches: the loader runs it for every element of every slab.
__device__ __forceinline__ int tile_exponent(float v, int align_min) {
  const std::uint32_t b = __float_as_uint(v);
  const int field = static_cast<int>((b >> 23) & 0xff);
  const int e = field == 0xff ? kTileSpecialExponent : max(field - 127, align_min);
  return (b << 1) == 0 ? kTileZeroExponent : e;
}

// The exponent c (a join's C register, fp32) aligns at: max(floor(log2|c|), c_min_exponent)
// with c_min_exponent = -126 (the tiled kernels run e8 outputs only), none for a zero c.
__device__ __forceinline__ int c_tile_exponent(float c) {
  const std::uint32_t b = __float_as_uint(c);
  const int e = max(static_cast<int>((b >> 23) & 0xff), 1) - 127;
  return (b << 1) == 0 ? kTileNoExponent : e;
}

// How c enters the step and how the step's output is rounded, fixed at compile time so that
// the per-step code has no branch on it: c joins and the e8mX output is cut toward zero or
// rounded to nearest even (DeviceModel::output_rounding), or c is added after the step into
// an fp32 output (c_entry add with out_fp32_model: the step's output needs no rounding).
enum TileMode : int { kJoinRz = 0, kJoinRne = 1, kAddFp32 = 2 };

// An operand prepared for the float kernel once per GEMM (prepare_tile_operand): rows padded
// with zeros to rows_p (a multiple of the tile) and K to k_p (a multiple of the slab), and
// transposed, element (r, k) at k * rows_p + r, so that a slab's row of the shared-memory tile
// is 16-byte loads of contiguous memory; beside it each element's tile_exponent at the same
// index (int16; for B doubled into both halves of a word, as the tile holds it), and each
// row's sign bits per slab (row r, slab s at r * (k_p / 32) + s; bit k % 32).
// Or (code set: Params::codes) the codes themselves: element (r, k) is table[code[r * ld + k]]
// for r < rows and k < cols, +0 beyond; vec16: every row's codes from k = 0 lie on 16 bytes.
struct TileOperand {
  const float* value = nullptr;
  const void* exponent = nullptr;
  const unsigned* sign_bits = nullptr;
  int rows_p = 0, k_p = 0;
  const unsigned char* code = nullptr;
  const float* table = nullptr;
  int rows = 0, ld = 0, cols = 0, align_min = 0;
  bool vec16 = false;
};

// The float kernel's parameters: the engine's, the two prepared operands, and a 1 that the
// compiler cannot fold (it keeps some integer sums on the FMA pipe as IMAD).
struct TileParams {
  Params p;
  TileOperand ta, tb;
  unsigned one = 1;
};

// prepare_tile_operand: one 32 x 32 block of the operand (rows r0.., columns k0..) through
// shared memory, read along K and written along rows (both coalesced); 32 x 8 threads.
template <bool DOUBLED>
__global__ void prepare_tile_operand(const float* src, int rows, int K, int align_min,
                                     float* value, void* exponent, unsigned* sign_bits,
                                     int rows_p, int k_p) {
  __shared__ float tile[32][33];
  const int r0 = blockIdx.x * 32, k0 = blockIdx.y * 32, tx = threadIdx.x, ty = threadIdx.y;
  for (int i = ty; i < 32; i += 8) {
    const int row = r0 + i, k = k0 + tx;
    const float v = row < rows && k < K ? src[std::size_t(row) * K + k] : 0.0f;
    tile[i][tx] = v;
    const unsigned bits = __ballot_sync(0xffffffffu, __float_as_uint(v) >> 31);
    if (tx == 0) sign_bits[std::size_t(row) * (k_p / 32) + k0 / 32] = bits;
  }
  __syncthreads();
  for (int i = ty; i < 32; i += 8) {
    const float v = tile[tx][i];
    const std::size_t at = std::size_t(k0 + i) * rows_p + r0 + tx;
    const int e = tile_exponent(v, align_min);  // padding is +0: kTileZeroExponent
    value[at] = v;
    if constexpr (DOUBLED)
      static_cast<unsigned*>(exponent)[at] = __byte_perm(static_cast<unsigned>(e), 0, 0x1010);
    else
      static_cast<short*>(exponent)[at] = static_cast<short>(e);
  }
}

// One slab of a prepared operand (ROWS rows from row0, kTileBk columns from k0) into shared
// memory: values, sign masks (all-ones for a negative value), exponents, sign bits. Every
// thread moves 4 rows of one column at a time (16-byte loads and stores); all loads are issued
// before any is used.
template <int ROWS, int NT, bool DOUBLED, int PAD>
__device__ __forceinline__ void load_tile_slab(const TileOperand& o, int row0, int k0,
                                               float (*vs)[ROWS + PAD], int (*ms)[ROWS + PAD],
                                               void* es, unsigned* bits) {
  // Small tiles (fewer 16-byte pieces than threads): threads past them load nothing.
  constexpr int V4 = ROWS / 4, ALL = kTileBk * V4, PER = (ALL + NT - 1) / NT, KSTEP = NT / V4;
  static_assert((ALL % NT == 0 || ALL < NT) && NT % V4 == 0 && ROWS <= NT);
  if (ALL < NT && threadIdx.x >= ALL) {
    if (threadIdx.x < ROWS)
      bits[threadIdx.x] =
          o.sign_bits[std::size_t(unsigned(row0 + threadIdx.x)) * unsigned(o.k_p / 32) + k0 / 32];
    return;
  }
  using E4 = std::conditional_t<DOUBLED, uint4, uint2>;  // 4 exponents
  const int c = threadIdx.x % V4, kk0 = threadIdx.x / V4;
  std::size_t at = std::size_t(k0 + kk0) * unsigned(o.rows_p) + unsigned(row0 + 4 * c);
  const std::size_t step = std::size_t(KSTEP) * unsigned(o.rows_p);
  float4 v[PER];
  E4 e[PER];
#pragma unroll
  for (int i = 0; i < PER; ++i, at += step) {
    v[i] = *reinterpret_cast<const float4*>(o.value + at);
    e[i] = reinterpret_cast<const E4*>(o.exponent)[at / 4];
  }
  unsigned sb = 0;
  if (threadIdx.x < ROWS)
    sb = o.sign_bits[std::size_t(unsigned(row0 + threadIdx.x)) * unsigned(o.k_p / 32) + k0 / 32];
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int kk = kk0 + i * KSTEP;
    *reinterpret_cast<float4*>(&vs[kk][4 * c]) = v[i];
    const int4 m = {static_cast<int>(__float_as_uint(v[i].x)) >> 31,
                    static_cast<int>(__float_as_uint(v[i].y)) >> 31,
                    static_cast<int>(__float_as_uint(v[i].z)) >> 31,
                    static_cast<int>(__float_as_uint(v[i].w)) >> 31};
    *reinterpret_cast<int4*>(&ms[kk][4 * c]) = m;
    if constexpr (DOUBLED)
      *reinterpret_cast<uint4*>(&static_cast<unsigned(*)[ROWS + PAD]>(es)[kk][4 * c]) = e[i];
    else
      *reinterpret_cast<uint2*>(&static_cast<short(*)[ROWS + 2 * PAD]>(es)[kk][4 * c]) = e[i];
  }
  if (threadIdx.x < ROWS) bits[threadIdx.x] = sb;
}

// The block's code tables (kTileLutBytes at lut): entry c of A's (B's at kTileLutEntries) the
// bits of table[c] and its tile_exponent doubled into both halves; the last entry +0's.
template <int NT>
__device__ __forceinline__ void load_code_tables(const TileParams& tp, uint2* lut) {
  for (int i = threadIdx.x; i < 2 * kTileLutEntries; i += NT) {
    const bool b = i >= kTileLutEntries;
    const TileOperand& o = b ? tp.tb : tp.ta;
    const int c = b ? i - kTileLutEntries : i;
    const float v = c < 256 ? o.table[c] : 0.0f;
    const int e = tile_exponent(v, o.align_min);
    lut[i] = make_uint2(__float_as_uint(v), __byte_perm(static_cast<unsigned>(e), 0, 0x1010));
  }
}

// Code i of a thread's part of a row (W 16-byte words of codes, i < 16 W).
template <int W>
__device__ __forceinline__ unsigned code_byte(const uint4 (&w)[W], int i) {
  const uint4& q = w[i / 16];
  const int x = i / 4 % 4;
  const unsigned word = x == 0 ? q.x : x == 1 ? q.y : x == 2 ? q.z : q.w;
  return __byte_perm(word, 0, 0x4440 + i % 4);
}

// A thread's PER codes of one row (K elements kbeg.. of the slab) decoded into column r of the
// shared-memory tile (vs, ms, es point at element kbeg of it): values, sign masks, exponents
// (E: short for A, the doubled word for B), and their sign bits (bits kbeg.. of the row's
// word). MASKED: codes whose bit of `valid` is clear read as +0 (the table's last entry).
template <bool MASKED, class E, int STRIDE, int ESTRIDE, int PER>
__device__ __forceinline__ void decode_code_row(const uint4 (&w)[PER / 16], unsigned valid,
                                                const uint2* lut, float* vs, int* ms, E* es,
                                                unsigned* bits, int kbeg) {
  unsigned sb = 0;
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    unsigned c = code_byte(w, i);
    if constexpr (MASKED) c = (valid >> i) & 1u ? c : kTileLutEntries - 1;
    const uint2 t = lut[c];
    const int m = static_cast<int>(t.x) >> 31;
    vs[i * STRIDE] = __uint_as_float(t.x);
    ms[i * STRIDE] = m;
    es[i * ESTRIDE] = static_cast<E>(t.y);
    sb |= static_cast<unsigned>(m) & (1u << i);
  }
  if constexpr (PER == kTileBk)
    *bits = sb;
  else  // halves of the word (PER 16), each written by its own thread
    reinterpret_cast<unsigned short*>(bits)[kbeg / 16] = static_cast<unsigned short>(sb);
}

// One slab of both operands read as codes (TileOperand::code): thread t decodes part
// t / (BM + BN) (of S: halves of the slab's 32 K elements where the block has twice as many
// threads as rows, else all of them) of row t % (BM + BN) of the tiles, A's rows then B's, so
// that a warp's lanes are consecutive rows (its shared-memory stores hit 32 banks). A part's
// codes are one 16-byte load each 16 where the row and the part are whole and the rows lie on
// 16 bytes (vec16), else byte loads, +0 beyond the operand's rows and cols.
template <int BM, int BN, int NT, int PAD>
__device__ __forceinline__ void load_code_slab(const TileParams& tp, int m0, int n0, int k0,
                                               const uint2* lut, float (*As)[BM + PAD],
                                               int (*Am)[BM + PAD], short (*Ae)[BM + 2 * PAD],
                                               unsigned* Abits, float (*Bs)[BN + PAD],
                                               int (*Bm)[BN + PAD], unsigned (*Be)[BN + PAD],
                                               unsigned* Bbits) {
  constexpr int ROWS = BM + BN, S = NT >= 2 * ROWS ? 2 : 1, PER = kTileBk / S, W = PER / 16;
  const int t = threadIdx.x;
  if (t >= S * ROWS) return;
  const int part = S == 1 ? 0 : t / ROWS, rr = t - part * ROWS, kbeg = part * PER;
  const bool is_a = rr < BM;
  const TileOperand& o = is_a ? tp.ta : tp.tb;
  const int r = is_a ? rr : rr - BM, row = (is_a ? m0 : n0) + r;
  const unsigned char* src =
      o.code + std::size_t(unsigned(row)) * unsigned(o.ld) + unsigned(k0 + kbeg);
  uint4 w[W];
  unsigned valid = ~0u;
  if (row < o.rows && k0 + kbeg + PER <= o.cols && o.vec16) {
#pragma unroll
    for (int j = 0; j < W; ++j) w[j] = reinterpret_cast<const uint4*>(src)[j];
  } else {
    unsigned x[4 * W];
    valid = 0;
#pragma unroll
    for (int j = 0; j < 4 * W; ++j) x[j] = 0;
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      const bool in = row < o.rows && k0 + kbeg + i < o.cols;
      x[i / 4] |= (in ? unsigned(src[i]) : 0u) << (8 * (i % 4));
      valid |= unsigned(in) << i;
    }
#pragma unroll
    for (int j = 0; j < W; ++j)
      w[j] = make_uint4(x[4 * j], x[4 * j + 1], x[4 * j + 2], x[4 * j + 3]);
    if (PER < 32 && valid == (1u << (PER % 32)) - 1u) valid = ~0u;  // whole after all
  }
  const uint2* tab = lut + (is_a ? 0 : kTileLutEntries);
  if (is_a) {
    constexpr int ST = BM + PAD, EST = BM + 2 * PAD;
    if (valid == ~0u)
      decode_code_row<false, short, ST, EST, PER>(w, valid, tab, &As[kbeg][r], &Am[kbeg][r],
                                                  &Ae[kbeg][r], &Abits[r], kbeg);
    else
      decode_code_row<true, short, ST, EST, PER>(w, valid, tab, &As[kbeg][r], &Am[kbeg][r],
                                                 &Ae[kbeg][r], &Abits[r], kbeg);
  } else {
    constexpr int ST = BN + PAD;
    if (valid == ~0u)
      decode_code_row<false, unsigned, ST, ST, PER>(w, valid, tab, &Bs[kbeg][r], &Bm[kbeg][r],
                                                    &Be[kbeg][r], &Bbits[r], kbeg);
    else
      decode_code_row<true, unsigned, ST, ST, PER>(w, valid, tab, &Bs[kbeg][r], &Bm[kbeg][r],
                                                   &Be[kbeg][r], &Bbits[r], kbeg);
  }
}

// A thread's N consecutive 4-byte words of a shared-memory tile row, as 16-byte loads (8-byte
// for N = 2, one word for N = 1; the row offsets keep them aligned).
template <int N, class T>
__device__ __forceinline__ void load_words(T (&dst)[N], const T* src) {
  static_assert(sizeof(T) == 4 && (N % 4 == 0 || N <= 2));
  if constexpr (N == 1) {
    dst[0] = src[0];
  } else if constexpr (N == 2) {
    *reinterpret_cast<int2*>(dst) = *reinterpret_cast<const int2*>(src);
  } else {
#pragma unroll
    for (int i = 0; i < N; i += 4)
      *reinterpret_cast<int4*>(&dst[i]) = *reinterpret_cast<const int4*>(&src[i]);
  }
}

template <int G, bool RNE, int MODE, int TM, int TN, int BM, int BN, int MIN_BLOCKS>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), MIN_BLOCKS)
    tiled_gemm_f32(const TileParams tp) {
  constexpr int BK = kTileBk, PAD = kTilePad, TX = BN / TN, NT = (BM / TM) * TX;
  constexpr bool JOIN = MODE != kAddFp32, OUT_RNE = MODE == kJoinRne;
  static_assert(BK % G == 0 && NT % 32 == 0 && (TM % 8 == 0 || TM == 4 || TM == 2) &&
                (TN % 4 == 0 || TN <= 2) && BM + BN <= NT);  // BM + BN: load_code_slab
  extern __shared__ __align__(16) unsigned char smem[];  // tiled_f32_smem_bytes() of them
  const Params& p = tp.p;
  unsigned char* at = smem;
  auto As = reinterpret_cast<float(*)[BM + PAD]>(at);        at += BK * (BM + PAD) * 4;
  auto Am = reinterpret_cast<int(*)[BM + PAD]>(at);          at += BK * (BM + PAD) * 4;
  auto Bs = reinterpret_cast<float(*)[BN + PAD]>(at);        at += BK * (BN + PAD) * 4;
  auto Bm = reinterpret_cast<int(*)[BN + PAD]>(at);          at += BK * (BN + PAD) * 4;
  auto Be = reinterpret_cast<unsigned(*)[BN + PAD]>(at);     at += BK * (BN + PAD) * 4;
  auto Ae = reinterpret_cast<short(*)[BM + 2 * PAD]>(at);    at += BK * (BM + 2 * PAD) * 2;
  auto Abits = reinterpret_cast<unsigned*>(at);              at += BM * 4;
  auto Bbits = reinterpret_cast<unsigned*>(at);              at += BN * 4;
  auto mainv = reinterpret_cast<float(*)[NT]>(at);          at += NT * TM * TN * 4;
  const uint2* lut = reinterpret_cast<const uint2*>(at);   // read as codes: the code tables
  const bool codes = tp.ta.code != nullptr;
  const DeviceGemm& g = p.g;
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
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
  if (codes) {
    load_code_tables<NT>(tp, const_cast<uint2*>(lut));
    __syncthreads();
  }

  for (int k0 = kr.begin; k0 < kr.end; k0 += BK) {
    // 0. The slab: values, sign masks (all-ones for a negative value), exponents, sign bits.
    if (codes) {
      load_code_slab<BM, BN, NT, PAD>(tp, m0, n0, k0, lut, As, Am, Ae, Abits, Bs, Bm, Be, Bbits);
    } else {
      load_tile_slab<BM, NT, false, PAD>(tp.ta, m0, k0, As, Am, Ae, Abits);
      load_tile_slab<BN, NT, true, PAD>(tp.tb, n0, k0, Bs, Bm, Be, Bbits);
    }
    __syncthreads();
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
          const int lo = JOIN ? c_tile_exponent(acc[i][j]) : kTileNoExponent;
          const int hi = JOIN ? c_tile_exponent(acc[i + 1][j]) : kTileNoExponent;
          em[i / 2][j] = (static_cast<unsigned>(lo) & 0xffffu) | static_cast<unsigned>(hi) << 16;
        }
#pragma unroll 2
      for (int kk = 0; kk < G; ++kk) {
        unsigned ea[TM / 2], eb[TN];
        load_words(ea, reinterpret_cast<const unsigned*>(&Ae[s + kk][ty * TM]));
        load_words(eb, &Be[s + kk][tx * TN]);
#pragma unroll
        for (int i = 0; i < TM / 2; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) em[i][j] = __viaddmax_s16x2(ea[i], eb[j], em[i][j]);
      }
      // The grid 2^E of each output (E = 0 where nothing aligns: every term is then zero),
      // as the bits of the magic constant 2^(E + 23).
      unsigned magic[TM][TN];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          const unsigned w = em[i / 2][j];
          const int e = i % 2 ? static_cast<int>(w) >> 16 : static_cast<int>(w << 16) >> 16;
          const int E = e < kZeroExponent + 400 ? 0 : e - frac;
          // A grid outside float's range (rare: a huge C, Inf or NaN operands) sends all of
          // this thread's outputs to the per-output kernel (one predicate, no per-output bit).
          grid_bad = grid_bad || !grid_ok<float>(E);
          // Through an opaque move: the compiler would otherwise keep E and rebuild the
          // constant from it inside the products' loop (one more ALU op a product).
          const unsigned mg = static_cast<unsigned>(E + 23 + 127) << 23;
          asm("mov.b32 %0, %1;" : "=r"(magic[i][j]) : "r"(mg));
        }
      // 2. Every term's magnitude cut to its output's grid; the signed terms summed in int32,
      //    from c's term (a join: c cut to the grid, in units of it, signed; after this the
      //    products' pass needs no register for c).
      unsigned sum[TM][TN];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          if constexpr (JOIN) {
            const float c = acc[i][j], mg = __uint_as_float(magic[i][j]);
            const unsigned tc = __float_as_uint(RNE ? __fadd_rn(fabsf(c), mg)
                                                    : __fadd_rz(fabsf(c), mg));
            const unsigned sc = static_cast<unsigned>(static_cast<int>(__float_as_uint(c)) >> 31);
            sum[i][j] = ((tc - magic[i][j]) ^ sc) - sc;
          } else {
            sum[i][j] = 0;
          }
        }
#pragma unroll 2
      for (int kk = 0; kk < G; ++kk) {
        float a[TM], b[TN];
        unsigned sa[TM], sb[TN];
        load_words(a, &As[s + kk][ty * TM]);
        load_words(sa, reinterpret_cast<const unsigned*>(&Am[s + kk][ty * TM]));
        load_words(b, &Bs[s + kk][tx * TN]);
        load_words(sb, reinterpret_cast<const unsigned*>(&Bm[s + kk][tx * TN]));
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
      // 3. The signed sum S of the n (and c's): with P positive and Q negative products
      //    (P + Q = G), sum = c's + sum over positive (T) + sum over negative (-T - 1)
      //    = c's + M (P - Q) + S' - Q modulo 2^32 (T = M + n), so S = sum + M (2Q - G) + Q;
      //    |S| < (G + 1) 2^(frac + 2) <= 2^24, so float(S) and S * 2^E are exact. Then the
      //    step's output rounding on t's bits (t is 0 or at least 2^E >= 2^-126: never below
      //    fp32's normal range), c added after (add).
      const unsigned step_bits = G == 32 ? 0xffffffffu : ((1u << G) - 1) << s;
      unsigned abits[TM], bbits[TN];
      load_words(abits, &Abits[ty * TM]);
      load_words(bbits, &Bbits[tx * TN]);
      const int kend = kb + G;
      const bool promote_now = kend == next_promote || kend >= K;
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          const unsigned q = __popc((abits[i] ^ bbits[j]) & step_bits);
          const int S = static_cast<int>(sum[i][j] + magic[i][j] * (2 * q - G) + q);
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
