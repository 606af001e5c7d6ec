// gemm_engine_step: one fused step and one output's dot product on the GPU, the same bits
// as sim/gemm/engine_cpu.cpp's Engine: a fast step (products aligned, cut and summed exactly in float
// or double through a magic-constant add) where it is exact, else the reference step
// (sim/accumulator/step.cpp's fused_step_exponents / fused_block, with WideSum).
#pragma once

#include <cstdint>

#include "engine/gemm_engine_arith.cuh"

namespace fp8sim::gpu {

// Numbered as sim/gemm/gemm_path.hpp's DeviceStep: the host decides it (DeviceGemm::fast_step).
enum class FastPath : int { none = 0, f32 = 1, f64 = 2 };

constexpr int kZeroExponent = -1000;  // sim's Operand::kZeroExponent
constexpr int kNoExponent = -(1 << 30);
// Written by the tiled kernel where an output needs the per-output kernel (a signalling
// NaN payload no arithmetic produces).
constexpr std::uint32_t kRedoBits = 0x7fa5a5a5u;

// Where a K-parallel launch writes its chunks' partial results (gemm_engine_kpar.cuh): the
// partial of chunk first + j of output i at out[j * M * N + i]; blockIdx.z's slice holds
// chunks first + z * per_slice.. (at most per_slice, within first + count). out null: the
// kernel runs all of K and promotes itself.
struct ChunkParts {
  float* out = nullptr;
  int first = 0, count = 0, per_slice = 0;
};

// Everything a kernel needs, in device memory.
struct Params {
  DeviceGemm g;               // A, B, C, sa, sb, D point to device memory
  FastPath fast = FastPath::none;
  bool out_e8 = false;        // output e8mX rounded rz/rne: rounding by bit masking
  int out_drop = 0;           // 52 - output mantissa bits
  bool redo_only = false;     // per-output kernel: only outputs holding kRedoBits
  // Set to 1 (device word, 0 before the tiled kernels) by every kernel that writes kRedoBits
  // into D: the per-output kernel's pass over D runs only where it was set.
  unsigned* redo_any = nullptr;
  bool out_fp32_model = false;  // the model's output is fp32 itself (c=add: one fp32 add)
  ChunkParts chunks;          // a K-parallel slice's workspace (tiled kernels)
  int k_parallel = 0;         // host only: DeviceLaunch::k_parallel
  int k_group = 0;            // host only: DeviceLaunch::k_group
  // Resident operands read as codes in place (DeviceLaunch::codes): g.A and g.B unset, each
  // element the code table's value of its code (g.A_codes, code_ld, code_k0, code_cols), the
  // tables in device memory (256 values each, 0 for codes beyond the format's).
  bool codes = false;
  const float* a_table = nullptr;
  const float* b_table = nullptr;
  // g.scaled_reference: the first output (in D's order) whose steps raised an error, as
  // output * 8 + its first DeviceStepError (device; all ones: none).
  unsigned long long* step_errors = nullptr;
};

// One row of an operand read as codes (Params::codes): element k is table[code[k]] for
// k < cols, +0 beyond (DeviceGemm::code_cols), times its block scale where the scales are
// folded in (DeviceGemm::fold: scales[(k_off + k) / block], this row's, set); indexed and
// offset as a float pointer is, so that the steps below take either.
struct CodeRow {
  const unsigned char* code;
  const float* table;
  int cols;
  const float* scales = nullptr;
  int block = 1, k_off = 0;
  __device__ __forceinline__ float operator[](int k) const {
    if (k >= cols) return 0.0f;
    const float v = table[code[k]];
    return scales ? v * scales[(k_off + k) / block] : v;  // exact: gemm_resident checks
  }
  __device__ __forceinline__ CodeRow operator+(int k) const {
    return {code + k, table, cols - k, scales, block, k_off + k};
  }
};

// The alignment exponent of an operand value (sim's decode_operand / operand_exponent).
__device__ __forceinline__ int align_exponent(float v, int align_min) {
  const std::uint32_t b = __float_as_uint(v);
  if ((b & 0x7fffffffu) == 0) return kZeroExponent;
  const int e = static_cast<int>((b >> 23) & 0xff) - 127;
  return e > align_min ? e : align_min;
}

// The alignment floors of A's element (row, k) and B's (row, k): the operand formats' minimum,
// moved by the log2 of the element's scale where power-of-two block scales are folded into
// the operands (DeviceGemm::fold; its exponent moved with its value). Rows and k in range.
__device__ __forceinline__ int fold_shift(float s) {
  return isfinite(s) && s != 0.0f ? ilogbf(s) : 0;  // a NaN scale made the element NaN
}
// The scales of A's element (row, k) and B's (row, k) in DeviceGemm's layout.
__device__ __forceinline__ float a_scale(const DeviceGemm& g, int row, int k) {
  const int kb = g.scale_block == 0 ? 0 : k / g.scale_block;
  return g.sa[g.a_bcast ? kb : std::size_t(row) * g.a_cols + kb];
}
__device__ __forceinline__ float b_scale(const DeviceGemm& g, int row, int k) {
  const int kb = g.scale_block == 0 ? 0 : k / g.scale_block;
  return g.sb[g.b_bcast ? kb : std::size_t(row / g.b_div) * g.b_cols + kb];
}
__device__ __forceinline__ int a_floor(const DeviceGemm& g, int row, int k) {
  return g.fold ? g.a_align_min + fold_shift(a_scale(g, row, k)) : g.a_align_min;
}
__device__ __forceinline__ int b_floor(const DeviceGemm& g, int row, int k) {
  return g.fold ? g.b_align_min + fold_shift(b_scale(g, row, k)) : g.b_align_min;
}

// Row `row` of A (B where IS_B) read as codes (Params::codes), in range: its codes, its
// format's table and, where the block scales fold in (DeviceGemm::fold), its row of scales in
// a_scale's (b_scale's) layout.
template <bool IS_B>
__device__ __forceinline__ CodeRow code_row(const Params& p, int row) {
  const DeviceGemm& g = p.g;
  const int ld = g.code_ld > 0 ? g.code_ld : g.K, cols = g.code_ld > 0 ? g.code_cols : g.K;
  CodeRow r{(IS_B ? g.B_codes : g.A_codes) + std::size_t(row) * unsigned(ld) + g.code_k0,
            IS_B ? p.b_table : p.a_table, cols};
  if (g.fold) {
    r.scales = IS_B ? g.sb + (g.b_bcast ? 0 : std::size_t(row / g.b_div) * g.b_cols)
                    : g.sa + (g.a_bcast ? 0 : std::size_t(row) * g.a_cols);
    r.block = g.scale_block == 0 ? g.K : g.scale_block;
  }
  return r;
}

// Element (row, k) of A (B where IS_B) read as a code, row and k in range: code_row's k.
template <bool IS_B>
__device__ __forceinline__ float code_value(const Params& p, int row, int k) {
  return code_row<IS_B>(p, row)[k];
}

// Where a run of elements lies: the rows of A and B and the K index of its first element.
struct At {
  int a_row, b_row, k;
};

// floor(log2|x|) of a nonzero finite double.
__device__ __forceinline__ int exponent_of(double x) { return ilogb(x); }

// ---- the reference step --------------------------------------------------------------------

// Element i of a block of n in the model's order (interleave: k mod 4 in {0,1}, then {2,3}).
__device__ inline int element(bool interleave, int i, int n) {
  if (!interleave) return i;
  const int h = n / 2;
  const int j = i < h ? i : i - h;
  return (j / 2) * 4 + (i < h ? 0 : 2) + j % 2;
}

__device__ inline double cut_to_grid(double x, int grid, int cut) {
  const double y = ldexp(x, -grid);
  return ldexp(cut == kRz ? trunc(y) : rint(y), grid);
}

// sim's add_c_after: r + c in one IEEE add into the output, nearest even.
__device__ inline double add_c_after(const DeviceModel& m, double r, double c) {
  if (!isfinite(r) || !isfinite(c)) return r + c;
  WideSum s;
  s.add(r);
  s.add(c);
  return round_output(m, s.unrounded(), kRne);
}

// sim's fused_step_exponents on elements k = element(interleave, off + i, nblock), i < n, of
// a and b, with c entering as c_entry says (fused_block runs its sub-steps through it).
template <class R>
__device__ inline double reference_step(const DeviceModel& m, const Params& p, const R a,
                                        const R b, At at, int off, int n, int nblock,
                                        bool interleave, int c_entry, double c) {
  bool nan = isnan(c), pos_inf = c == INFINITY, neg_inf = c == -INFINITY;
  for (int i = 0; i < n; ++i) {
    const int k = element(interleave, off + i, nblock);
    const double x = a[k], y = b[k];
    if (isnan(x) || isnan(y)) nan = true;
    if (isinf(x) || isinf(y)) {
      if (x == 0.0 || y == 0.0) nan = true;
      else if ((x < 0) != (y < 0)) neg_inf = true;
      else pos_inf = true;
    }
  }
  if (nan || (pos_inf && neg_inf)) return __longlong_as_double(0x7ff8000000000000LL);
  if (pos_inf) return INFINITY;
  if (neg_inf) return -INFINITY;
  if (c_entry == 2)
    return add_c_after(m, reference_step(m, p, a, b, at, off, n, nblock, interleave, 0, 0.0), c);
  WideSum s;
  if (m.exact) {
    s.add(c);
    for (int i = 0; i < n; ++i) {
      const int k = element(interleave, off + i, nblock);
      s.add(double(a[k]) * double(b[k]));
    }
    return round_output(m, s.unrounded(), m.output_rounding);
  }
  int emax = kNoExponent;
  bool zero = c_entry == 0 && c == 0.0;  // a zero term, for the model's zero exponent
  for (int i = 0; i < n; ++i) {
    const int k = element(interleave, off + i, nblock);
    const double prod = double(a[k]) * double(b[k]);
    zero = zero || prod == 0.0;
    if (prod == 0.0) continue;
    const int e = m.renormalise ? exponent_of(prod)
                                : align_exponent(a[k], a_floor(p.g, at.a_row, at.k + k)) +
                                      align_exponent(b[k], b_floor(p.g, at.b_row, at.k + k));
    emax = e > emax ? e : emax;
  }
  if (c_entry == 0 && c != 0.0) {
    const int e = max(exponent_of(c), m.c_min_exponent);
    emax = e > emax ? e : emax;
  }
  if (m.zero_on && zero && emax < m.zero_exponent) emax = m.zero_exponent;
  if (emax == kNoExponent) {
    s.add(c);
    return round_output(m, s.unrounded(), m.output_rounding);
  }
  const int grid = emax - m.frac_bits;
  for (int i = 0; i < n; ++i) {
    const int k = element(interleave, off + i, nblock);
    s.add(cut_to_grid(double(a[k]) * double(b[k]), grid, m.term_cut));
  }
  s.add(c_entry == 0 ? cut_to_grid(c, grid, m.term_cut) : c);
  return round_output(m, s.unrounded(), m.output_rounding);
}

// sim's fused_block: a model with a block runs chained sub-steps from zero (c joining each)
// in the block's element order, then adds the block's result into c.
template <class R>
__device__ inline double reference_block(const DeviceModel& m, const Params& p, const R a,
                                         const R b, At at, int n, double c) {
  if (m.block == 0) return reference_step(m, p, a, b, at, 0, n, n, false, m.c_entry, c);
  const bool joins = m.c_entry == 0;  // c=join: c is the chain's start, no add after
  double s = joins ? c : 0.0;
  for (int j = 0; j < n; j += m.group)
    s = reference_step(m, p, a, b, at, j, min(m.group, n - j), n, m.interleave, 0, s);
  return joins ? s : add_c_after(m, s, c);
}

// ---- the fast step -------------------------------------------------------------------------

template <class V> struct Magic;
template <> struct Magic<float> {
  static constexpr int kDigits = 24;
  __device__ static float pow2(int e) { return __uint_as_float(static_cast<std::uint32_t>(e + 127) << 23); }
  __device__ static float cut(float ap, float mg, bool rne) { return rne ? __fadd_rn(ap, mg) : __fadd_rz(ap, mg); }
  __device__ static float signed_term(float t, float prod) {
    return __uint_as_float(__float_as_uint(t) | (__float_as_uint(prod) & 0x80000000u));
  }
};
template <> struct Magic<double> {
  static constexpr int kDigits = 53;
  __device__ static double pow2(int e) {
    return __longlong_as_double(static_cast<long long>(e + 1023) << 52);
  }
  __device__ static double cut(double ap, double mg, bool rne) { return rne ? __dadd_rn(ap, mg) : __dadd_rz(ap, mg); }
  __device__ static double signed_term(double t, double prod) {
    return __longlong_as_double(__double_as_longlong(t) |
                                (__double_as_longlong(prod) & (long long)0x8000000000000000ULL));
  }
};

// The grid exponent E fits the magic constant 2^(E + digits - 1) and the result scale.
template <class V>
__device__ __forceinline__ bool grid_ok(int E) {
  constexpr int hi = Magic<V>::kDigits == 24 ? 127 : 1023;
  return E + Magic<V>::kDigits - 1 <= hi && E >= -hi + 1;
}

// |x| cut to the grid of magic constant mg = 2^(E + digits - 1) (the grid is 2^E), sign
// restored: the cut value itself, exact for |x| < mg / 2.
template <class V>
__device__ __forceinline__ V cut_term(V x, V mg, bool rne) {
  const V t = Magic<V>::cut(fabs(x), mg, rne);
  return Magic<V>::signed_term(t - mg, x);
}

// The step's output rounding of the exact cut sum v (a multiple of the grid 2^E with at most
// 53 significant bits): sim's Engine::round_output.
__device__ __forceinline__ double finish_step(const Params& p, double v) {
  if (v == 0.0) return 0.0;
  const double mag = fabs(v);
  if (p.out_e8 && mag >= 0x1p-126) {
    if (mag >= 0x1p128) return copysign(INFINITY, v);
    std::uint64_t bits = static_cast<std::uint64_t>(__double_as_longlong(v));
    const std::uint64_t low = (std::uint64_t{1} << p.out_drop) - 1;
    if (p.g.model.output_rounding == kRne) {
      const std::uint64_t sign = bits & (std::uint64_t{1} << 63);
      std::uint64_t mm = bits & ~(std::uint64_t{1} << 63);
      mm += ((mm >> p.out_drop) & 1) + (low >> 1);
      bits = sign | (mm & ~low);
    } else {
      bits &= ~low;
    }
    const double r = __longlong_as_double(static_cast<long long>(bits));
    return fabs(r) >= 0x1p128 ? copysign(INFINITY, r) : r;
  }
  return round_output(p.g.model, unrounded_from_double(v), p.g.model.output_rounding);
}

// finish_step for an e8mX output (p.out_e8) and a cut sum v that is a float: the same bit
// masking on v's float bits (an fp32-normal v keeps its value; a carry out of the largest
// binade lands exactly on Inf's bits). Sets redo where finish_step's generic rounding is
// needed (|v| below fp32's normal range).
__device__ __forceinline__ float finish_step_e8(const Params& p, float v, bool& redo) {
  if (v == 0.0f) return 0.0f;
  if (fabsf(v) < 0x1p-126f) {
    redo = true;
    return 0.0f;
  }
  const int drop = p.out_drop - 29;  // 52 - 29 = 23: double's fraction bits to float's
  if (drop == 0) return v;           // an fp32 output: v is already on its grid
  const std::uint32_t low = (1u << drop) - 1;
  std::uint32_t bits = __float_as_uint(v);
  if (p.g.model.output_rounding == kRne) {
    const std::uint32_t sign = bits & 0x80000000u;
    std::uint32_t mm = bits & 0x7fffffffu;
    mm += ((mm >> drop) & 1) + (low >> 1);
    bits = sign | (mm & ~low);
  } else {
    bits &= ~low;
  }
  return __uint_as_float(bits);
}

// One fused step of the fast path on a[0..n) and b[0..n) with c (finite), c joining or
// (c_entry add) added after. ok = false where the step needs the reference path.
template <class V, class R>
__device__ inline double fast_step(const Params& p, const R a, const R b, At at, int n,
                                   double c, bool& ok) {
  const DeviceModel& m = p.g.model;
  const bool join = m.c_entry == 0;
  const double cj = join ? c : 0.0;
  int emax = kNoExponent, emin = -kNoExponent;
  for (int i = 0; i < n; ++i) {
    const int e = align_exponent(a[i], a_floor(p.g, at.a_row, at.k + i)) +
                  align_exponent(b[i], b_floor(p.g, at.b_row, at.k + i));
    emax = e > emax ? e : emax;
    emin = e < emin ? e : emin;
  }
  if (emax < kZeroExponent + 400) emax = kNoExponent;
  if (cj != 0.0) emax = max(emax, max(exponent_of(cj), m.c_min_exponent));
  // A zero term (a zero product, or a zero c that joins) counts at the zero exponent.
  if (m.zero_on && emax < m.zero_exponent && (emin < kZeroExponent + 400 || (join && c == 0.0)))
    emax = m.zero_exponent;
  // With every product zero the sum is still formed: 0 * Inf must surface as NaN.
  const int E = emax == kNoExponent ? 0 : emax - m.frac_bits;
  if (!grid_ok<V>(E)) {
    ok = false;
    return 0.0;
  }
  const V mg = Magic<V>::pow2(E + Magic<V>::kDigits - 1);
  const bool rne = m.term_cut == kRne;
  V sum = 0;
  for (int i = 0; i < n; ++i) sum += cut_term<V>(V(a[i]) * V(b[i]), mg, rne);
  if (cj != 0.0) sum += cut_term<V>(V(cj), mg, rne);
  if (!isfinite(sum)) {
    ok = false;
    return 0.0;
  }
  const double r = finish_step(p, double(sum));
  if (join) return r;
  return p.out_fp32_model ? double(__fadd_rn(float(r), float(c))) : add_c_after(m, r, c);
}

// ---- the group-sum step --------------------------------------------------------------------

// The step's output rounding of the exact cut sum total * 2^grid (|total| < 2^62).
__device__ __forceinline__ double finish_int(const Params& p, long long total, int grid) {
  if (total == 0) return 0.0;
  const unsigned long long mag = total < 0 ? 0ull - static_cast<unsigned long long>(total)
                                           : static_cast<unsigned long long>(total);
  if (mag < (1ull << 53)) return finish_step(p, ldexp(static_cast<double>(total), grid));
  Unrounded u;
  u.neg = total < 0;
  u.sig = mag;
  u.exp = grid;
  return round_output(p.g.model, u, p.g.model.output_rounding);
}

// sim's Engine::group_sum_step (DeviceGemm::group_sum): each group's products summed exactly,
// times its two scales, aligned on the scales' exponents; a group whose products are all zero,
// or with a zero scale, is a zero term. Operands and scales are finite; an Inf or NaN c (an
// earlier step's overflow) stays, as the reference step keeps it.
template <class R>
__device__ inline double group_sum_step(const Params& p, const R a, const R b, At at,
                                        int n, double c) {
  if (isnan(c)) return __longlong_as_double(0x7ff8000000000000LL);
  if (isinf(c)) return c;
  const DeviceGemm& g = p.g;
  const DeviceModel& m = g.model;
  const int gs = g.group_sum;
  int emax = kNoExponent;
  bool zero_term = c == 0.0;  // a zero c joins as a zero term
  // 1. The exponents: each nonzero group's scales' (at least the scale format's minimum).
  for (int i = 0; i < n; i += gs) {
    const double xa = a_scale(g, at.a_row, at.k + i), xb = b_scale(g, at.b_row, at.k + i);
    bool all_zero = true;
    for (int j = i; j < min(n, i + gs); ++j)
      all_zero = all_zero && double(a[j]) * double(b[j]) == 0.0;
    if (all_zero || xa == 0.0 || xb == 0.0) {
      zero_term = true;
      continue;
    }
    const int te = max(ilogb(xa), g.scale_min_exponent) + max(ilogb(xb), g.scale_min_exponent);
    emax = max(emax, te);
  }
  if (zero_term && m.zero_on) emax = max(emax, m.zero_exponent);
  if (c != 0.0) emax = max(emax, max(exponent_of(c), m.c_min_exponent));
  if (emax == kNoExponent) return 0.0;  // no term aligns and c is zero
  // 2. The terms cut to the grid and summed in int64 (exact: group_sums_fit).
  const int grid = emax - m.frac_bits;
  const bool rz = m.term_cut == kRz;
  const auto cut = [&](double x) {
    const double y = ldexp(x, -grid);
    return static_cast<long long>(rz ? trunc(y) : rint(y));
  };
  long long total = 0;
  for (int i = 0; i < n; i += gs) {
    const double xa = a_scale(g, at.a_row, at.k + i), xb = b_scale(g, at.b_row, at.k + i);
    double sum = 0.0;
    bool all_zero = true;
    for (int j = i; j < min(n, i + gs); ++j) {
      const double prod = double(a[j]) * double(b[j]);
      sum += prod;  // exact: group_sums_fit
      all_zero = all_zero && prod == 0.0;
    }
    if (all_zero || xa == 0.0 || xb == 0.0) continue;
    total += cut(sum * xa * xb);
  }
  if (c != 0.0) total += cut(c);
  return finish_int(p, total, grid);
}

// ---- one output ----------------------------------------------------------------------------

// sim's Engine::scaled_step on its reference path (DeviceGemm::scaled_reference), defined in
// gemm_engine_scaled.cuh (included at the end of this file).
template <class R>
__device__ inline double scaled_reference_step(const Params& p, const R a, const R b, At at,
                                               int n, double c, unsigned& err);

// The C value as it enters the accumulator registers (sim's Engine::c_in).
__device__ inline double c_in(const DeviceModel& m, float c) {
  return m.c_register_fp32 ? double(c) : quantize_rne(c, m.c_register);
}

// The chunk's partial result promoted into the FP32 main accumulator with its scales.
__device__ __forceinline__ float promote(const Params& p, float main, float part, int a_row,
                                         int b_row, int k0) {
  const DeviceGemm& g = p.g;
  if (!g.scaled) return __fadd_rn(main, part);
  const float sa = a_scale(g, a_row, k0), sb = b_scale(g, b_row, k0);
  if (g.scale_a_first) return __fmaf_rn(__fmul_rn(part, sa), sb, main);  // ScaleOrder::triton
  return __fmaf_rn(__fmul_rn(sa, sb), part, main);  // scales after K: sim/gemm_split
}

// The output type's value of the FP32 main accumulator (sim's to_out_type).
__device__ __forceinline__ float to_out_type(const Params& p, float v) {
  return p.g.out_fp32 ? v : float(quantize_rne(v, p.g.out_type));
}

// The FP32 main accumulator's start: never promoted, the output is the MMA's own result, and
// a main accumulator of -0 adds it unchanged, -0 included (as sim's Engine::dot).
__device__ __forceinline__ float main_start(const DeviceGemm& g) {
  return g.promote_every == 0 ? -0.0f : 0.0f;
}

// ---- a thread's tile of outputs (the tiled kernels) -----------------------------------------

// The C registers of a thread's TM x TN outputs from (row0, col0): fp32 (the tiled kernels run
// 8-bit-exponent outputs only), 0 beyond D's edge. Returns the outputs the per-output kernel
// redoes (bit i * TN + j): those with an Inf or NaN C.
template <int TM, int TN>
__device__ __forceinline__ unsigned load_c_tile(const DeviceGemm& g, int row0, int col0,
                                                float (&acc)[TM][TN]) {
  unsigned redo = 0;
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int row = row0 + i, col = col0 + j;
      const float c = g.C != nullptr && row < g.M && col < g.N ? g.C[std::size_t(row) * g.N + col]
                                                              : 0.0f;
      acc[i][j] = c;
      if (!isfinite(c)) redo |= 1u << (i * TN + j);
    }
  return redo;
}

// Writes a thread's outputs inside D: main(i, j) (its FP32 main accumulator) in the output
// type, or kRedoBits for the per-output kernel where bit i * TN + j of redo is set.
template <int TM, int TN, class Main>
__device__ __forceinline__ void store_d_tile(const Params& p, int row0, int col0, unsigned redo,
                                             Main main) {
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int row = row0 + i, col = col0 + j;
      if (row < p.g.M && col < p.g.N)
        p.g.D[std::size_t(row) * p.g.N + col] = (redo >> (i * TN + j)) & 1u
                                                    ? __uint_as_float(kRedoBits)
                                                    : to_out_type(p, main(i, j));
    }
  if (redo != 0 && p.redo_any != nullptr) *p.redo_any = 1u;
}

// sim's Engine::dot for output (a_row, b_row) on its rows a and b (float pointers or CodeRow):
// fast steps where exact, else reference.
template <class R>
__device__ inline float dot_rows(const Params& p, const R a, const R b, int a_row, int b_row,
                                 float c) {
  const DeviceGemm& g = p.g;
  const DeviceModel& m = g.model;
  const int K = g.K;
  const int chunk = g.promote_every == 0 ? K : g.promote_every;
  const int step = m.group == 0 ? chunk : (m.block ? m.block : m.group);
  float main = main_start(g);
  unsigned err = 0;  // the first error of a reference step with block scales
  for (int k0 = 0; k0 < K; k0 += chunk) {
    const int kend = min(K, k0 + chunk);
    double acc = k0 == 0 ? c_in(m, c) : 0.0;
    for (int k = k0; k < kend; k += step) {
      const int n = min(step, kend - k);
      const At at{a_row, b_row, k};
      if (g.group_sum > 1) {
        acc = group_sum_step(p, a + k, b + k, at, n, acc);
        continue;
      }
      if (g.scaled_reference) {
        acc = scaled_reference_step(p, a + k, b + k, at, n, acc, err);
        continue;
      }
      bool ok = p.fast != FastPath::none && isfinite(acc);
      double r = 0.0;
      if (ok) {
        r = p.fast == FastPath::f32 ? fast_step<float>(p, a + k, b + k, at, n, acc, ok)
                                    : fast_step<double>(p, a + k, b + k, at, n, acc, ok);
      }
      acc = ok ? r : reference_block(m, p, a + k, b + k, at, n, acc);
    }
    main = promote(p, main, float(acc), a_row, b_row, k0);
  }
  if (err != 0) {  // the CPU engine on one thread reports the first output's first error
    const unsigned long long out =
        g.batched ? unsigned(a_row) : unsigned(a_row) * (unsigned long long)g.N + unsigned(b_row);
    atomicMin(p.step_errors, out * 8 + err);
  }
  return to_out_type(p, main);
}

// sim's Engine::dot for output (a_row, b_row): on decoded values, or on codes (CODES:
// Params::codes; a kernel of its own, so that the values' kernel keeps its registers).
template <bool CODES>
__device__ inline float dot_output(const Params& p, int a_row, int b_row, float c) {
  const DeviceGemm& g = p.g;
  const int K = g.K;
  if constexpr (CODES) {
    return dot_rows(p, code_row<false>(p, a_row), code_row<true>(p, b_row), a_row, b_row, c);
  } else {
    return dot_rows(p, g.A + static_cast<std::size_t>(a_row) * K,
                    g.B + static_cast<std::size_t>(b_row) * K, a_row, b_row, c);
  }
}

}  // namespace fp8sim::gpu

#include "engine/gemm_engine_scaled.cuh"  // scaled_reference_step
