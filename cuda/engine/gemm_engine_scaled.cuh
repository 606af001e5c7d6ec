// gemm_engine_scaled: the reference step of a model with block scales inside the MMA
// (DeviceGemm::scaled_reference) on the GPU, the same bits as the CPU engine's: sim's
// Engine::scaled_step (sim/gemm/engine_cpu.cpp) hands every step of such a model (its operands
// wider than the group-sum step takes: fp32, bf16) to fused_step_exponents with StepScales
// (sim/accumulator/step.cpp), which this file mirrors function by function in the same 128-bit
// integers: step_terms (products times their scales, or exact group sums times their group's
// scales), lane_exponent, cut_to_grid, floor_to_grid, unrounded_from_int and the output
// rounding. A step's error (sim throws it, Engine::reference_step keeps the first and returns
// NaN, and the CPU engine rethrows it as std::domain_error) is kept per output, the first
// along K (`err`, a DeviceStepError), and dot_rows reports the first output's
// (Params::step_errors), which the host turns into sim's message (sim/gemm/gemm_device.cpp).
#pragma once

#include <cstdint>

#include "engine/gemm_engine_step.cuh"

namespace fp8sim::gpu {

using i128 = __int128;
using u128 = unsigned __int128;

// step.cpp's exponent_of: floor(log2|v|) of a finite nonzero double (frexp's exponent - 1).
__device__ __forceinline__ int step_exponent_of(double v) {
  int e = 0;
  frexp(v, &e);
  return e - 1;
}

// step.cpp's cut_to_grid: x / 2^grid cut to an integer by `cut` (kRz, kRne or kRd), x finite.
// Returns false where sim throws "accumulator term beyond 128 bits".
__device__ inline bool scaled_cut_to_grid(double x, int grid, int cut, i128& out) {
  out = 0;
  if (x == 0.0) return true;
  int e = 0;
  const double fr = frexp(fabs(x), &e);
  const long long m = static_cast<long long>(ldexp(fr, 53));  // |x| = m * 2^(e-53)
  const int shift = e - 53 - grid;
  const bool away_down = cut == kRd && x < 0;  // rd: a negative x's magnitude rounds up
  i128 n;
  if (shift >= 0) {
    if (shift > 126 - 53) return false;
    n = i128(m) << shift;  // m >= 0
  } else if (-shift >= 64) {
    n = away_down ? 1 : 0;  // m < 2^53: below 2^-11 of a unit
  } else {
    const int s = -shift;
    n = m >> s;
    const std::uint64_t rest = static_cast<std::uint64_t>(m) & ((std::uint64_t{1} << s) - 1);
    if (cut == kRne) {
      const std::uint64_t half = std::uint64_t{1} << (s - 1);
      if (rest > half || (rest == half && (n & 1))) n += 1;
    } else if (away_down && rest != 0) {
      n += 1;
    }
  }
  out = x < 0 ? -n : n;
  return true;
}

// step.cpp's floor_to_grid: x * 2^from on the grid 2^to, cut toward -inf where bits drop.
__device__ __forceinline__ i128 scaled_floor_to_grid(i128 x, int from, int to) {
  if (to <= from) return x << (from - to);
  if (to - from >= 127) return x < 0 ? -1 : 0;
  return x >> (to - from);  // arithmetic shift: toward -inf
}

// step.cpp's unrounded_from_int: s * 2^grid as 64 significant bits plus sticky.
__device__ inline Unrounded unrounded_from_i128(i128 s, int grid) {
  Unrounded u;
  u.neg = s < 0;
  u128 mag = u.neg ? u128(0) - static_cast<u128>(s) : static_cast<u128>(s);
  u.exp = grid;
  const std::uint64_t hi = static_cast<std::uint64_t>(mag >> 64);
  if (hi != 0) {
    const int drop = 64 - __clzll(static_cast<long long>(hi));
    u.sticky = (mag & ((u128(1) << drop) - 1)) != 0;
    mag >>= drop;
    u.exp += drop;
  }
  u.sig = static_cast<std::uint64_t>(mag);
  return u;
}

// Bit length and trailing zeros of a nonzero magnitude.
__device__ __forceinline__ int bit_length(u128 x) {
  const std::uint64_t hi = static_cast<std::uint64_t>(x >> 64);
  return hi ? 128 - __clzll(static_cast<long long>(hi))
            : 64 - __clzll(static_cast<long long>(static_cast<std::uint64_t>(x)));
}
__device__ __forceinline__ int trailing_zeros(u128 x) {
  const std::uint64_t lo = static_cast<std::uint64_t>(x);
  return lo ? __ffsll(static_cast<long long>(lo)) - 1
            : 64 + __ffsll(static_cast<long long>(static_cast<std::uint64_t>(x >> 64))) - 1;
}

// A nonzero finite double as m * 2^e with m a 53-bit-or-narrower integer.
__device__ __forceinline__ void split_double(double x, long long& m, int& e) {
  int fe = 0;
  const double fr = frexp(fabs(x), &fe);
  m = static_cast<long long>(ldexp(fr, 53));
  e = fe - 53;
  if (x < 0) m = -m;
}

// step.cpp's step_terms, one group sum: the exact sum of the products a[j] * b[j],
// j in [i, end) (each exact in a double: operands are floats), as a double where it is one
// (ExactSum's to_double, its rest zero). False where it is not (sim throws "a group sum of
// ... products is not exact in a double"). all_zero: every product is zero.
// First in doubles, each addition checked exact (Knuth's TwoSum: its error term zero), which
// decides nearly every group of bf16 or narrower values; where an addition is not exact, in
// 128-bit integers where the products span few enough bits, else in WideSum.
template <class R>
__device__ inline bool exact_group_sum(const R a, const R b, int i, int end, double& sum,
                                       bool& all_zero) {
  sum = 0.0;
  all_zero = true;
  bool exact = true;
  for (int j = i; j < end; ++j) {
    const double p = double(a[j]) * double(b[j]);
    all_zero = all_zero && p == 0.0;
    const double s = __dadd_rn(sum, p);  // TwoSum(sum, p): s + e == sum + p exactly
    const double bv = __dadd_rn(s, -sum);
    const double e = __dadd_rn(__dadd_rn(sum, -__dadd_rn(s, -bv)), __dadd_rn(p, -bv));
    exact = exact && e == 0.0;
    sum = s;
  }
  if (exact) {  // every partial sum exact: sum is the exact sum (+0 where it is zero)
    if (sum == 0.0) sum = 0.0;
    return true;
  }
  sum = 0.0;
  // Product j as m * 2^e; false where it is zero.
  const auto product_parts = [&](int j, long long& m, int& e) {
    const double p = double(a[j]) * double(b[j]);
    if (p == 0.0) return false;
    split_double(p, m, e);
    return true;
  };
  int lo = 1 << 20, hi = -(1 << 20);
  for (int j = i; j < end; ++j) {
    long long m;
    int e;
    if (!product_parts(j, m, e)) continue;
    lo = min(lo, e);
    hi = max(hi, e);
  }
  const int carry = 32 - __clz(end - i);  // bits a sum of end - i terms adds
  if (hi - lo + 53 + carry <= 126) {
    i128 s = 0;
    for (int j = i; j < end; ++j) {
      long long m;
      int e;
      if (!product_parts(j, m, e)) continue;
      const i128 t = static_cast<i128>(static_cast<u128>(m < 0 ? -m : m) << (e - lo));
      s += m < 0 ? -t : t;
    }
    if (s == 0) return true;  // +0, as ExactSum::to_double gives
    const u128 mag = s < 0 ? u128(0) - static_cast<u128>(s) : static_cast<u128>(s);
    const int tz = trailing_zeros(mag);
    if (bit_length(mag) - tz > 53) return false;
    const double v = ldexp(static_cast<double>(static_cast<std::uint64_t>(mag >> tz)), lo + tz);
    sum = s < 0 ? -v : v;
    return true;
  }
  WideSum w;  // products of floats lie within its range (2^-298 .. 2^256)
  for (int j = i; j < end; ++j) w.add(double(a[j]) * double(b[j]));
  const Unrounded u = w.unrounded();
  if (u.sig == 0) return !u.sticky;
  const int bits = 64 - __clzll(static_cast<long long>(u.sig)) -
                   (__ffsll(static_cast<long long>(u.sig)) - 1);
  if (u.sticky || bits > 53) return false;
  const double v = ldexp(static_cast<double>(u.sig), u.exp);
  sum = u.neg ? -v : v;
  return true;
}

// step.cpp's Term: a term's exact value, alignment exponent, and whether it is a zero term.
struct ScaledTerm {
  double v = 0.0;
  int e = 0;
  bool zero = true;
};

// step.cpp's scale_exponent: a block scale's alignment exponent (a subnormal scale aligns on
// its format's smallest normal exponent). s > 0.
__device__ __forceinline__ int scale_exponent(const DeviceGemm& g, double s) {
  return max(step_exponent_of(s), g.scale_min_exponent);
}

// step.cpp's step_terms, term t of the step at `at` (n products): with group sums
// (g.model_group_sum > 1) the exact sum of products t * gs .. times the group's two scales, else
// product t times its two scales. False where the group sum is not exact in a double.
template <class R>
__device__ inline bool scaled_term(const Params& p, const R a, const R b, At at, int n, int t,
                                   ScaledTerm& x) {
  const DeviceGemm& g = p.g;
  const DeviceModel& m = g.model;
  const int gs = g.model_group_sum;
  if (gs == 1) {
    const double prod = double(a[t]) * double(b[t]);  // exact: operands are floats
    x.v = prod;
    x.e = m.renormalise && prod != 0.0
              ? step_exponent_of(prod)
              : align_exponent(a[t], g.a_align_min) + align_exponent(b[t], g.b_align_min);
    x.zero = prod == 0.0;
    const double xa = a_scale(g, at.a_row, at.k + t), xb = b_scale(g, at.b_row, at.k + t);
    x.zero = x.zero || xa == 0.0 || xb == 0.0;
    if (!x.zero) {
      x.v = __dmul_rn(__dmul_rn(prod, xa), xb);  // sim: p * sa * sb
      x.e += scale_exponent(g, xa) + scale_exponent(g, xb);
    }
    return true;
  }
  const int i = t * gs, end = min(n, i + gs);
  double sum = 0.0;
  bool all_zero = true;
  if (!exact_group_sum(a, b, i, end, sum, all_zero)) return false;
  const double xa = a_scale(g, at.a_row, at.k + i), xb = b_scale(g, at.b_row, at.k + i);
  x.v = 0.0;
  x.e = 0;
  x.zero = all_zero || xa == 0.0 || xb == 0.0;
  if (!x.zero) {
    x.v = __dmul_rn(__dmul_rn(sum, xa), xb);  // sim: sum * xa * xb
    x.e = scale_exponent(g, xa) + scale_exponent(g, xb);
  }
  return true;
}

constexpr int kMaxScaledLanes = 8;  // DeviceGemm::lanes on this path (the host checks it)
constexpr int kTermCache = 8;       // group-sum terms a step keeps between its two passes

__device__ __forceinline__ double step_nan() { return __longlong_as_double(0x7ff8000000000000LL); }

// Steps 3-5 of sim's fused_step_exponents for a block-scaled model after step 1 found no
// special value: c joining (c_entry 0) or, c_entry 1 with c = 0, the products alone (add's
// first half). An error sets err (where no earlier step of the output set it) and gives NaN
// (sim's Engine::reference_step returns NaN where a step threw).
template <class R>
__device__ inline double scaled_step_sum(const Params& p, const R a, const R b, At at, int n,
                                         double c, int c_entry, unsigned& err) {
  const DeviceGemm& g = p.g;
  const DeviceModel& m = g.model;
  // 3. The terms (step_terms) and each lane's alignment exponent (lane_exponent: zero terms
  //    at the zero exponent where the model has one); c joins lane 0.
  const int gs = g.model_group_sum;
  const int terms = gs == 1 ? n : (n + gs - 1) / gs;
  const int lanes = g.lanes;
  int emax[kMaxScaledLanes];
  for (int l = 0; l < lanes; ++l) emax[l] = kNoExponent;
  // Group sums' values kept for step 4 (the first kTermCache terms; the rest recomputed).
  double cached[kTermCache];
  for (int t = 0; t < terms; ++t) {
    ScaledTerm x;
    if (!scaled_term(p, a, b, at, n, t, x)) {
      if (err == 0) err = kStepGroupSumInexact;
      return step_nan();
    }
    if (gs > 1 && t < kTermCache) cached[t] = x.v;
    if (x.zero && !m.zero_on) continue;
    const int e = x.zero ? m.zero_exponent : x.e;
    emax[t % lanes] = max(emax[t % lanes], e);
  }
  const bool join = c_entry == 0;
  if (join && (c != 0.0 || m.zero_on)) {
    const int e = c != 0.0 ? max(step_exponent_of(c), m.c_min_exponent) : m.zero_exponent;
    emax[0] = max(emax[0], e);
  }

  // 4. Each lane's terms cut to its grid 2^(emax - frac_bits) and added exactly; lanes
  //    realigned on the largest of them, cut toward -inf.
  int e_dot = kNoExponent;
  for (int l = 0; l < lanes; ++l) e_dot = max(e_dot, emax[l]);
  if (e_dot == kNoExponent) {  // nothing aligns: c alone (sim: ExactSum of c, rounded)
    return round_output(m, c == 0.0 ? Unrounded{} : unrounded_from_double(c), m.output_rounding);
  }
  const int grid = e_dot - m.frac_bits;
  i128 sum = 0;
  for (int l = 0; l < lanes; ++l) {
    if (emax[l] == kNoExponent) continue;
    const int gl = emax[l] - m.frac_bits;
    i128 lane = 0;
    for (int t = l; t < terms; t += lanes) {
      ScaledTerm x;
      if (gs > 1 && t < kTermCache) x.v = cached[t];
      else scaled_term(p, a, b, at, n, t, x);  // exact: checked in 3.
      i128 cut;
      if (!scaled_cut_to_grid(x.v, gl, m.term_cut, cut)) {
        if (err == 0) err = kStepTermBeyond128;
        return step_nan();
      }
      lane += cut;
    }
    if (join) {
      i128 cut;
      if (!scaled_cut_to_grid(c, gl, m.term_cut, cut)) {
        if (err == 0) err = kStepTermBeyond128;
        return step_nan();
      }
      lane += cut;
    }
    sum += scaled_floor_to_grid(lane, gl, grid);
  }
  // 5. c joined: the cut sum rounded once. Else (c = 0 here) sim adds the cut sum into an
  //    ExactSum (add_i128), whose fixed-point grid is 2^-320 (ExactSum::kScaleBits): bits
  //    below it throw "exact sum: value below the fixed-point grid".
  if (!join && sum != 0) {
    const u128 mag = sum < 0 ? u128(0) - static_cast<u128>(sum) : static_cast<u128>(sum);
    if (grid + trailing_zeros(mag) < -320) {
      if (err == 0) err = kStepBelowExactGrid;
      return step_nan();
    }
  }
  return round_output(m, unrounded_from_i128(sum, grid), m.output_rounding);
}

// sim's Engine::scaled_step on its reference path: fused_block of a model with block scales
// (which has no chained blocks: fused_step_exponents with the step's scales), c entering as
// the model says (join, or add: the products alone, then add_c_after). The host sends only
// those two entries here (scaled_reference_on_device_fit).
template <class R>
__device__ inline double scaled_reference_step(const Params& p, const R a, const R b, At at,
                                               int n, double c, unsigned& err) {
  const DeviceGemm& g = p.g;
  const DeviceModel& m = g.model;
  // 1. Special values: NaN operands or scales, 0 x Inf, Inf - Inf; Inf products (and, with
  //    product_overflow, products past the output's range).
  bool nan = isnan(c), pos_inf = c == INFINITY, neg_inf = c == -INFINITY;
  const double overflow = ldexp(1.0, m.output.max_exponent + 1);
  for (int i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    if (isnan(x) || isnan(y)) nan = true;
    if (isnan(a_scale(g, at.a_row, at.k + i)) || isnan(b_scale(g, at.b_row, at.k + i))) nan = true;
    bool xinf = isinf(x);
    const bool yinf = isinf(y);
    if (g.product_overflow && !xinf && !yinf && fabs(x * y) >= overflow) xinf = true;
    if (xinf || yinf) {
      if (x == 0.0 || y == 0.0) nan = true;
      else if ((x < 0) != (y < 0)) neg_inf = true;
      else pos_inf = true;
    }
  }
  if (nan || (pos_inf && neg_inf)) return step_nan();
  if (pos_inf) return INFINITY;
  if (neg_inf) return -INFINITY;
  if (m.c_entry == 2)  // add: the products alone (c = 0, c exact), then c in one IEEE add
    return add_c_after(m, scaled_step_sum(p, a, b, at, n, 0.0, 1, err), c);
  return scaled_step_sum(p, a, b, at, n, c, 0, err);
}

}  // namespace fp8sim::gpu
