// gemm_engine_tile_load: the float kernels' operands (gemm_engine_tiled_f32.cuh) and their way
// into shared memory: prepared once per GEMM (prepare_tile_operand: transposed, padded, with
// each element's alignment exponent and the rows' sign bits, so that a block's slab loads are
// 16-byte copies), or resident codes read in place (fetch_code_slab, one slab ahead, and
// store_code_slab: each thread decodes one row's part of the slab through a shared-memory
// table of the code's value and exponent).
// Where power-of-two block scales are folded into the operands (DeviceGemm::fold), the
// prepared values already hold them and each element's alignment floor moves with its scale;
// codes are scaled as they are decoded (TileOperand::fold).
#pragma once

#include <type_traits>

#include "engine/gemm_engine_kpar.cuh"

namespace fp8sim::gpu {

// The alignment exponent of a zero operand and of an Inf or NaN one in the 16-bit tiles:
// a zero's (sim's Operand::kZeroExponent) puts every product with it below -600, where no
// product of finite nonzero floats lies (>= -300); a special's puts every product with it,
// and every sum with a zero's, above any grid a float step can use (fraction bits up to 44),
// so the output is redone. A folded scale moves both by at most 127.
constexpr int kTileZeroExponent = kZeroExponent;   // -1000
constexpr int kTileSpecialExponent = 4000;         // 4000 - 1000 = 3000: far above float's 127
constexpr int kTileNoExponent = -32768;            // smallest int16: "nothing aligns yet"
static_assert(2 * kTileSpecialExponent <= 32767 && 2 * kTileZeroExponent >= -32768 &&
                  kTileSpecialExponent + kTileZeroExponent > 127 + 44,
              "16-bit exponent sums stay in range and specials always fail grid_ok");

// Tile shapes (compile-time): a block of (BM/TM) x (BN/TN) threads owns a BM x BN tile of D
// and walks K in slabs of kTileBk = 32 (one warp loads one row's slab: its sign bits are one
// ballot), holding 1 or 2 steps of G products.
constexpr int kTileBk = 32;
constexpr int kTilePad = 4;  // words of padding per smem row (keeps 16-byte fragment loads)

// Dynamic shared memory of one block (values: f32, or f64 magnitudes for the double step,
// value_bytes 8):
//   A: values [BK][BM+4], sign masks [BK][BM+4] i32, exponents [BK][BM+8] i16;
//   B: values [BK][BN+4], sign masks [BK][BN+4] i32, exponents doubled [BK][BN+4] i32;
//   sign bits of the slab: [BM] + [BN] u32; FP32 main accumulators [TM*TN][threads] f32.
constexpr int tiled_f32_smem_bytes(int BM, int BN, int TM, int TN, int value_bytes = 4) {
  return kTileBk * ((BM + kTilePad) * (value_bytes + 4) + (BM + 2 * kTilePad) * 2 +
                    (BN + kTilePad) * (value_bytes + 8)) +
         (BM + BN) * 4 + (BM / TM) * (BN / TN) * TM * TN * 4;
}

// An operand value as the tile holds it: the float itself, or (the double step) its magnitude
// as a double, converted once as the slab is loaded instead of at every use.
template <class V>
__device__ __forceinline__ V tile_value(float v) {
  if constexpr (sizeof(V) == 8) return fabs(double(v));
  else return v;
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

// An operand prepared for the float kernel once per GEMM (prepare_tile_operand): rows padded
// with zeros to rows_p (a multiple of the tile) and K to k_p (a multiple of the slab), and
// transposed, element (r, k) at k * rows_p + r, so that a slab's row of the shared-memory tile
// is 16-byte loads of contiguous memory; beside it each element's tile_exponent at the same
// index (int16; for B doubled into both halves of a word, as the tile holds it), and each
// row's sign bits per slab (row r, slab s at r * (k_p / 32) + s; bit k % 32).
// Or (code set: Params::codes) the codes themselves: element (r, k) is table[code[r * ld + k]]
// for r < rows and k < cols, +0 beyond; vec16: every row's codes from k = 0 lie on 16 bytes.
// Power-of-two block scales folded into an operand (DeviceGemm::fold; scales unset: none):
// element (row, k)'s scale in a_scale's (b_scale's) layout, and the log2 its value and
// alignment exponent move by. gemm_resident folds only finite nonzero scales into codes.
struct TileFold {
  const float* scales = nullptr;
  int cols = 1, div = 1, block = 0;  // block 0: one scale for all of K
  bool bcast = false;
  // Where row's scales start, and the one of element k from there.
  __device__ __forceinline__ std::size_t row_base(int row) const {
    return bcast ? 0 : std::size_t(unsigned(row / div)) * unsigned(cols);
  }
  __device__ __forceinline__ float at(std::size_t base, int k) const {
    return scales[base + (block == 0 ? 0 : k / block)];
  }
  __device__ __forceinline__ float scale(int row, int k) const { return at(row_base(row), k); }
  __device__ __forceinline__ int shift(int row, int k) const {
    return scales == nullptr ? 0 : fold_shift(scale(row, k));
  }
};

struct TileOperand {
  const float* value = nullptr;
  const void* exponent = nullptr;
  const unsigned* sign_bits = nullptr;
  int rows_p = 0, k_p = 0;
  const unsigned char* code = nullptr;
  const float* table = nullptr;
  int rows = 0, ld = 0, cols = 0, align_min = 0;
  bool vec16 = false;
  TileFold fold;  // codes only (prepared values hold their scales already)
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
                                     TileFold fold, float* value, void* exponent,
                                     unsigned* sign_bits, int rows_p, int k_p) {
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
    const int row = r0 + tx, k = k0 + i;  // padding is +0: kTileZeroExponent
    const int floor = align_min + (row < rows && k < K ? fold.shift(row, k) : 0);
    const int e = tile_exponent(v, floor);
    value[at] = v;
    if constexpr (DOUBLED)
      static_cast<unsigned*>(exponent)[at] = __byte_perm(static_cast<unsigned>(e), 0, 0x1010);
    else
      static_cast<short*>(exponent)[at] = static_cast<short>(e);
  }
}

// One slab of a prepared operand (ROWS rows from row0, kTileBk columns from k0) into shared
// memory: values (tile_value), sign masks (all-ones for a negative value), exponents, sign
// bits. Every thread moves 4 rows of one column at a time (16-byte loads and stores); all
// loads are issued before any is used.
template <int ROWS, int NT, bool DOUBLED, int PAD, class V>
__device__ __forceinline__ void load_tile_slab(const TileOperand& o, int row0, int k0,
                                               V (*vs)[ROWS + PAD], int (*ms)[ROWS + PAD],
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
    if constexpr (sizeof(V) == 8) {
      *reinterpret_cast<double2*>(&vs[kk][4 * c]) =
          make_double2(tile_value<V>(v[i].x), tile_value<V>(v[i].y));
      *reinterpret_cast<double2*>(&vs[kk][4 * c + 2]) =
          make_double2(tile_value<V>(v[i].z), tile_value<V>(v[i].w));
    } else {
      *reinterpret_cast<float4*>(&vs[kk][4 * c]) = v[i];
    }
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
// shared-memory tile (vs, ms, es point at element kbeg of it): values (tile_value), sign
// masks, exponents (E: short for A, the doubled word for B), and their sign bits (bits kbeg..
// of the row's word). MASKED: codes whose bit of `valid` is clear read as +0 (the table's last
// entry).
// Folded block scales (TileOperand::fold): every value times the part's scale s (exact:
// gemm_resident checks), every exponent moved by its log2, `shift` in both 16-bit halves
// (FOLD false: neither, the codes' values and exponents as they are).
template <bool MASKED, bool FOLD, class E, int STRIDE, int ESTRIDE, int PER, class V>
__device__ __forceinline__ void decode_code_row(const uint4 (&w)[PER / 16], unsigned valid,
                                                const uint2* lut, float s, unsigned shift,
                                                V* vs, int* ms, E* es, unsigned* bits,
                                                int kbeg) {
  unsigned sb = 0;
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    unsigned c = code_byte(w, i);
    if constexpr (MASKED) c = (valid >> i) & 1u ? c : kTileLutEntries - 1;
    const uint2 t = lut[c];
    const int m = static_cast<int>(t.x) >> 31;
    vs[i * STRIDE] = tile_value<V>(FOLD ? __uint_as_float(t.x) * s : __uint_as_float(t.x));
    ms[i * STRIDE] = m;
    es[i * ESTRIDE] = static_cast<E>(FOLD ? __vadd2(t.y, shift) : t.y);
    sb |= static_cast<unsigned>(m) & (1u << i);
  }
  if constexpr (PER == kTileBk)
    *bits = sb;
  else  // halves of the word (PER 16), each written by its own thread
    reinterpret_cast<unsigned short*>(bits)[kbeg / 16] = static_cast<unsigned short>(sb);
}

// The part of a slab of codes thread t decodes (fetch_code_slab, store_code_slab): part
// t / (BM + BN) (of S: halves of the slab's 32 K elements where the block has twice as many
// threads as rows, else all of them) of row t % (BM + BN) of the tiles, A's rows then B's,
// so that a warp's lanes are consecutive rows (its shared-memory stores hit 32 banks). none:
// threads past them.
template <int BM, int BN, int NT>
struct CodeSlabPart {
  static constexpr int ROWS = BM + BN, S = NT >= 2 * ROWS ? 2 : 1, PER = kTileBk / S;
  bool none, is_a;
  int r, row, kbeg;  // the tile's row r, the operand's row, the part's first K of the slab
  __device__ __forceinline__ CodeSlabPart(int m0, int n0) {
    const int t = threadIdx.x;
    none = t >= S * ROWS;
    const int part = S == 1 ? 0 : t / ROWS, rr = t - part * ROWS;
    kbeg = part * PER;
    is_a = rr < BM;
    r = is_a ? rr : rr - BM;
    row = (is_a ? m0 : n0) + r;
  }
  __device__ __forceinline__ const TileOperand& operand(const TileParams& tp) const {
    return is_a ? tp.ta : tp.tb;
  }
};

// Where the thread's row of folded scales starts (FOLD: the kernels that fold; 0 elsewhere),
// once per tile: its division is not redone for every slab.
template <int BM, int BN, int NT, bool FOLD>
__device__ __forceinline__ std::size_t code_slab_fold_base(const TileParams& tp, int m0,
                                                           int n0) {
  const CodeSlabPart<BM, BN, NT> pt(m0, n0);
  const TileOperand& o = pt.operand(tp);
  return FOLD && !pt.none && o.fold.scales != nullptr ? o.fold.row_base(pt.row) : 0;
}

// A thread's part of one slab of codes (its CodeSlabPart) in registers: fetched from global
// memory (fetch_code_slab) one slab ahead of its decoding into the tiles (store_code_slab), so
// that the loads are in flight while the block computes on the slab before.
template <int W>
struct CodeSlabRegs {
  uint4 w[W];
  unsigned valid;  // bit i: code i lies in the operand (else +0)
  float sc;        // the part's folded scale (1 where none)
};

// Fetch: a part's codes are one 16-byte load each 16 where the row and the part are whole and
// the rows lie on 16 bytes (vec16), else byte loads, +0 beyond the operand's rows and cols.
// Folded scales: the launch folds codes only where a scale block holds whole slabs (a multiple
// of 32 elements), so one scale, the one of k0, covers the part (fold_base:
// code_slab_fold_base).
template <int BM, int BN, int NT, bool FOLD>
__device__ __forceinline__ void fetch_code_slab(
    const TileParams& tp, int m0, int n0, int k0, std::size_t fold_base,
    CodeSlabRegs<CodeSlabPart<BM, BN, NT>::PER / 16>& f) {
  using Part = CodeSlabPart<BM, BN, NT>;
  constexpr int PER = Part::PER, W = PER / 16;
  const Part pt(m0, n0);
  if (pt.none) return;
  const int row = pt.row, kbeg = pt.kbeg;
  const TileOperand& o = pt.operand(tp);
  const bool folds = FOLD && o.fold.scales != nullptr && row < o.rows;
  f.sc = folds ? o.fold.at(fold_base, k0) : 1.0f;
  const unsigned char* src =
      o.code + std::size_t(unsigned(row)) * unsigned(o.ld) + unsigned(k0 + kbeg);
  f.valid = ~0u;
  if (row < o.rows && k0 + kbeg + PER <= o.cols && o.vec16) {
#pragma unroll
    for (int j = 0; j < W; ++j) f.w[j] = reinterpret_cast<const uint4*>(src)[j];
    return;
  }
  unsigned x[4 * W];
  unsigned valid = 0;
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
    f.w[j] = make_uint4(x[4 * j], x[4 * j + 1], x[4 * j + 2], x[4 * j + 3]);
  if (PER < 32 && valid == (1u << (PER % 32)) - 1u) valid = ~0u;  // whole after all
  f.valid = valid;
}

// Store: the fetched part decoded into the block's tiles (decode_code_row).
template <int BM, int BN, int NT, int PAD, bool FOLD, class V>
__device__ __forceinline__ void store_code_slab(
    const CodeSlabRegs<CodeSlabPart<BM, BN, NT>::PER / 16>& f, int m0, int n0,
    const uint2* lut, V (*As)[BM + PAD], int (*Am)[BM + PAD], short (*Ae)[BM + 2 * PAD],
    unsigned* Abits, V (*Bs)[BN + PAD], int (*Bm)[BN + PAD], unsigned (*Be)[BN + PAD],
    unsigned* Bbits) {
  using Part = CodeSlabPart<BM, BN, NT>;
  constexpr int PER = Part::PER;
  const Part pt(m0, n0);
  if (pt.none) return;
  const int r = pt.r, kbeg = pt.kbeg;
  const uint2* tab = lut + (pt.is_a ? 0 : kTileLutEntries);
  // sc is 1 where the part folds no scale: its shift is 0.
  const unsigned shift =
      FOLD ? __byte_perm(static_cast<unsigned>(fold_shift(f.sc)), 0, 0x1010) : 0u;
  if (pt.is_a) {
    constexpr int ST = BM + PAD, EST = BM + 2 * PAD;
    if (f.valid == ~0u)
      decode_code_row<false, FOLD, short, ST, EST, PER>(
          f.w, f.valid, tab, f.sc, shift, &As[kbeg][r], &Am[kbeg][r], &Ae[kbeg][r], &Abits[r],
          kbeg);
    else
      decode_code_row<true, FOLD, short, ST, EST, PER>(
          f.w, f.valid, tab, f.sc, shift, &As[kbeg][r], &Am[kbeg][r], &Ae[kbeg][r], &Abits[r],
          kbeg);
  } else {
    constexpr int ST = BN + PAD;
    if (f.valid == ~0u)
      decode_code_row<false, FOLD, unsigned, ST, ST, PER>(
          f.w, f.valid, tab, f.sc, shift, &Bs[kbeg][r], &Bm[kbeg][r], &Be[kbeg][r], &Bbits[r],
          kbeg);
    else
      decode_code_row<true, FOLD, unsigned, ST, ST, PER>(
          f.w, f.valid, tab, f.sc, shift, &Bs[kbeg][r], &Bm[kbeg][r], &Be[kbeg][r], &Bbits[r],
          kbeg);
  }
}

// A thread's N consecutive 4- or 8-byte words of a shared-memory tile row, as 16-byte loads
// (8-byte for 8 bytes in all, one word for N = 1; the row offsets keep them aligned).
template <int N, class T>
__device__ __forceinline__ void load_words(T (&dst)[N], const T* src) {
  constexpr int BYTES = N * int(sizeof(T));
  static_assert((sizeof(T) == 4 || sizeof(T) == 8) && (BYTES % 16 == 0 || BYTES <= 8));
  if constexpr (N == 1) {
    dst[0] = src[0];
  } else if constexpr (BYTES == 8) {
    *reinterpret_cast<int2*>(dst) = *reinterpret_cast<const int2*>(src);
  } else {
#pragma unroll
    for (int i = 0; i < BYTES / 16; ++i)
      reinterpret_cast<int4*>(dst)[i] = reinterpret_cast<const int4*>(src)[i];
  }
}

}  // namespace fp8sim::gpu
