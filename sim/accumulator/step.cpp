// step: the reference fused step (fused_step_exponents and its parts: terms, alignment, the cut
// to the grid, lanes, c, the output rounding), the plain arithmetic every fast clone is pinned to.
#include "accumulator/accumulator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "accumulator/exact.hpp"

namespace fp8sim {

using i128 = __int128;

namespace {

int exponent_of(double v) {
  int e = 0;
  std::frexp(v, &e);
  return e - 1;  // floor(log2|v|)
}

// x / 2^grid cut to an integer by `cut` (rz, rne or rd). x finite.
i128 cut_to_grid(double x, int grid, Rounding cut) {
  if (x == 0.0) return 0;
  int e = 0;
  const double fr = std::frexp(std::fabs(x), &e);
  const std::int64_t m = static_cast<std::int64_t>(std::ldexp(fr, 53));  // |x| = m * 2^(e-53)
  const int shift = e - 53 - grid;
  const bool away_down = cut == Rounding::rd && x < 0;  // rd: a negative x's magnitude rounds up
  i128 n;
  if (shift >= 0) {
    if (shift > 126 - 53) throw std::overflow_error("accumulator term beyond 128 bits");
    n = i128(m) << shift;
  } else if (-shift >= 64) {
    n = away_down ? 1 : 0;  // m < 2^53: below 2^-11 of a unit
  } else {
    const int s = -shift;
    n = m >> s;
    const std::uint64_t rest = std::uint64_t(m) & ((std::uint64_t{1} << s) - 1);
    if (cut == Rounding::rne) {
      const std::uint64_t half = std::uint64_t{1} << (s - 1);
      if (rest > half || (rest == half && (n & 1))) n += 1;
    } else if (away_down && rest != 0) {
      n += 1;
    }
  }
  return x < 0 ? -n : n;
}

// x * 2^from re-expressed on the grid 2^to, cut toward -inf where bits drop.
i128 floor_to_grid(i128 x, int from, int to) {
  if (to <= from) return x << (from - to);
  if (to - from >= 127) return x < 0 ? -1 : 0;
  return x >> (to - from);  // arithmetic shift: toward -inf
}

}  // namespace

Unrounded unrounded_from_int(i128 s, int grid) {
  Unrounded u;
  u.negative = s < 0;
  unsigned __int128 mag = u.negative ? static_cast<unsigned __int128>(-s)
                                     : static_cast<unsigned __int128>(s);
  u.exponent = grid;
  const auto hi = static_cast<std::uint64_t>(mag >> 64);
  if (hi != 0) {
    const int drop = 64 - std::countl_zero(hi);
    u.sticky = (mag & ((static_cast<unsigned __int128>(1) << drop) - 1)) != 0;
    mag >>= drop;
    u.exponent += drop;
  }
  u.significand = static_cast<std::uint64_t>(mag);
  return u;
}

namespace {

// s += sum * 2^grid exactly, in pieces of 40 bits (each exact in a double).
void add_i128(ExactSum& s, i128 sum, int grid) {
  const bool neg = sum < 0;
  unsigned __int128 mag = neg ? static_cast<unsigned __int128>(-sum)
                              : static_cast<unsigned __int128>(sum);
  for (int shift = 0; mag != 0; shift += 40, mag >>= 40) {
    const double piece = std::ldexp(static_cast<double>(std::uint64_t(mag) & ((1ull << 40) - 1)),
                                    grid + shift);
    s.add(neg ? -piece : piece);
  }
}

double quiet_nan() { return std::numeric_limits<double>::quiet_NaN(); }

constexpr int kNone = std::numeric_limits<int>::min();

// One term of a step: its exact value, alignment exponent, and whether it is a zero term.
struct Term {
  double v;
  int e;
  bool zero;
};

// The alignment exponent of a block scale s > 0 (a subnormal UE4M3 scale aligns on its
// format's smallest normal exponent).
int scale_exponent(const AccumulatorSpec& m, double s) {
  return std::max(exponent_of(s), min_normal_exponent(m.block_scale->format));
}

// The step's terms: products (times their block scales), or exact group sums.
std::vector<Term> step_terms(const AccumulatorSpec& m, const double* a, const int* ea,
                             const double* b, const int* eb, int n, StepScales sc) {
  std::vector<Term> t;
  if (m.group_sum == 1) {
    for (int i = 0; i < n; ++i) {
      const double p = a[i] * b[i];  // exact: operands have at most 24-bit significands
      Term x{p, m.renormalise_products && p != 0.0 ? exponent_of(p) : ea[i] + eb[i], p == 0.0};
      if (sc.sa != nullptr) {
        x.zero = x.zero || sc.sa[i] == 0.0 || sc.sb[i] == 0.0;
        if (!x.zero) {
          x.v = p * sc.sa[i] * sc.sb[i];  // exact: power-of-two scales (validate())
          x.e += scale_exponent(m, sc.sa[i]) + scale_exponent(m, sc.sb[i]);
        }
      }
      t.push_back(x);
    }
    return t;
  }
  for (int i = 0; i < n; i += m.group_sum) {
    const int end = std::min(n, i + m.group_sum);
    ExactSum s;
    bool all_zero = true;
    for (int j = i; j < end; ++j) {
      s.add_product(a[j], b[j]);
      all_zero = all_zero && a[j] * b[j] == 0.0;
    }
    const double sum = s.to_double();
    ExactSum rest = s;
    rest.add(-sum);
    if (!rest.is_zero())
      throw std::domain_error(fmt::format(
          "model '{}': a group sum of {} products is not exact in a double (operands too wide "
          "for group sums)", m.name, m.group_sum));
    const double xa = sc.sa[i], xb = sc.sb[i];
    Term x{0.0, 0, all_zero || xa == 0.0 || xb == 0.0};
    if (!x.zero) {
      x.v = sum * xa * xb;  // exact: a group sum of FP4 products times two 4-bit significands
      x.e = scale_exponent(m, xa) + scale_exponent(m, xb);
    }
    t.push_back(x);
  }
  return t;
}

// The largest alignment exponent of the terms t[i] with i % lanes == lane (kNone if none
// counts): nonzero terms, and zero terms at m.zero_exponent where set.
int lane_exponent(const AccumulatorSpec& m, const std::vector<Term>& t, int lane) {
  int emax = kNone;
  for (std::size_t i = lane; i < t.size(); i += m.lanes) {
    if (t[i].zero && !m.zero_exponent) continue;
    const int e = t[i].zero ? *m.zero_exponent : t[i].e;
    emax = std::max(emax, e);
  }
  return emax;
}

// CEntry::realign (AMD CDNA3): the cut sum `dot` (on the grid 2^gd, e_dot its alignment
// exponent, kNone when every product was zero) and c realigned, cut down, added, normalised,
// cut down to realign_frac bits and rounded to the output.
double realign_with_c(const AccumulatorSpec& m, i128 dot, int gd, int e_dot, double c) {
  const int cmin = c_min_exponent(m);
  const int e_c = c == 0.0 ? cmin : std::max(exponent_of(c), cmin);
  const int e_m = e_dot == kNone ? e_c : std::max(e_dot, e_c);
  const int g1 = e_m - (m.realign_frac + 1), g2 = e_m - m.frac_bits;
  i128 total = e_dot == kNone ? 0 : floor_to_grid(dot, gd, g1);
  if (!(m.realign_drop_far && e_c < e_m - m.frac_bits - 1))
    total += cut_to_grid(c, g2, Rounding::rd) << (g2 - g1);
  if (total == 0) return 0.0;
  const unsigned __int128 mag = total < 0 ? -static_cast<unsigned __int128>(total)
                                          : static_cast<unsigned __int128>(total);
  const auto top = static_cast<std::uint64_t>(mag >> 64);
  const int hi = top != 0 ? 127 - std::countl_zero(top)
                          : 63 - std::countl_zero(static_cast<std::uint64_t>(mag));
  const int E = std::max(g1 + hi, cmin);
  const int g3 = E - m.realign_frac;
  return round_accumulator_output(m, unrounded_from_int(floor_to_grid(total, g1, g3), g3));
}

// StepArithmetic::pairwise in fp32 arithmetic (round to nearest even, no flush by the
// hardware of this machine: the flushes are explicit).
double pairwise_step(const AccumulatorSpec& m, const double* a, const int* ea, const double* b,
                     const int* eb, int n, double c) {
  const float tiny = std::numeric_limits<float>::min();
  const auto flush_signed = [&](float x) { return std::fabs(x) < tiny ? x * 0.0f : x; };
  // An operand below its format's normal range (ea: that range's exponent), -0 included,
  // enters as +0.
  const auto input = [&](double v, int e) {
    return std::isfinite(v) && std::fabs(v) < std::ldexp(1.0, e) ? 0.0f : float(v);
  };
  float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int i = 0; i < n; ++i) p[i] = flush_signed(input(a[i], ea[i]) * input(b[i], eb[i]));
  float s = flush_signed(p[0] + p[1]);
  if (m.group == 4) s = flush_signed(s + flush_signed(p[2] + p[3]));
  return flush_signed(float(c) + s);  // c: entering_c, or a previous step's result
}

}  // namespace

double round_accumulator_output(const AccumulatorSpec& m, const Unrounded& u) {
  // Past the output's largest binade the accumulator overflows to Inf, whatever the
  // rounding direction; inside it, round once.
  if (u.significand != 0) {
    const int msb = 63 - std::countl_zero(u.significand);
    if (u.exponent + msb > max_exponent(m.output))
      return u.negative ? -std::numeric_limits<double>::infinity()
                        : std::numeric_limits<double>::infinity();
  }
  RoundingSpec r{m.output_rounding, Overflow::nonsat, 32};
  const std::uint32_t code = round_to_format(u, m.output, r);
  const double v = decode(m.output, code);
  // A +-0 result of a fused sum is +0 (as IEEE addition of opposite signs gives); with
  // signed_zero a nonzero sum that rounds to zero keeps its sign (IEEE underflow).
  if (v != 0.0) return v;
  return m.signed_zero && u.negative && (u.significand != 0 || u.sticky) ? -0.0 : 0.0;
}

double fused_step_exponents(const AccumulatorSpec& m, const double* a, const int* ea,
                            const double* b, const int* eb, int n, double c, StepScales sc) {
  if (m.arithmetic == StepArithmetic::pairwise) return pairwise_step(m, a, ea, b, eb, n, c);
  // 1. Special values.
  bool nan = std::isnan(c), pos_inf = c == INFINITY, neg_inf = c == -INFINITY;
  for (int i = 0; i < n; ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) nan = true;
    if (sc.sa != nullptr && (std::isnan(sc.sa[i]) || std::isnan(sc.sb[i]))) nan = true;
    bool ainf = std::isinf(a[i]), binf = std::isinf(b[i]);
    if (m.product_overflow && !ainf && !binf &&
        std::fabs(a[i] * b[i]) >= std::ldexp(1.0, max_exponent(m.output) + 1))
      ainf = true;  // the product itself overflows: an Inf of its sign
    if (ainf || binf) {
      if (a[i] == 0.0 || b[i] == 0.0) {
        nan = true;
      } else if ((a[i] < 0) != (b[i] < 0)) {
        neg_inf = true;
      } else {
        pos_inf = true;
      }
    }
  }
  if (nan || (pos_inf && neg_inf)) return quiet_nan();
  if (pos_inf) return INFINITY;
  if (neg_inf) return -INFINITY;
  if (m.c_entry == CEntry::add) {
    AccumulatorSpec products_only = m;
    products_only.c_entry = CEntry::exact;  // c = 0 below: the products alone
    return add_c_after(m, fused_step_exponents(products_only, a, ea, b, eb, n, 0.0, sc), c);
  }

  // 2. Exact model: one exact sum, one rounding.
  if (m.exact) {
    ExactSum s;
    s.add(c);
    for (int i = 0; i < n; ++i) s.add_product(a[i], b[i]);
    return round_accumulator_output(m, s.unrounded());
  }

  // 3. The terms and each lane's alignment exponent; c joins lane 0 of a one-lane step.
  const std::vector<Term> terms = step_terms(m, a, ea, b, eb, n, sc);
  const bool join = m.c_entry == CEntry::join;
  std::vector<int> emax(m.lanes);
  for (int l = 0; l < m.lanes; ++l) emax[l] = lane_exponent(m, terms, l);
  if (join && (c != 0.0 || m.zero_exponent)) {
    // c is a value of the accumulator's register format; a subnormal c aligns on that
    // format's smallest normal exponent, as a subnormal operand does (measured: H100 wgmma
    // with an fp16 accumulator, tests/data/hw/wgmma_f16_e5m2_subnormals).
    const int e = c != 0.0 ? std::max(exponent_of(c), c_min_exponent(m)) : *m.zero_exponent;
    emax[0] = std::max(emax[0], e);
  }

  // 4. Each lane's terms cut to its grid 2^(emax - frac_bits) and added exactly; lanes
  //    realigned on the largest of them, cut toward -inf.
  const int e_dot = *std::max_element(emax.begin(), emax.end());
  if (e_dot == kNone && m.c_entry != CEntry::realign) {  // nothing aligns: c alone
    ExactSum s;
    s.add(c);
    return round_accumulator_output(m, s.unrounded());
  }
  const int grid = e_dot == kNone ? 0 : e_dot - m.frac_bits;
  i128 sum = 0;
  for (int l = 0; l < m.lanes; ++l) {
    if (emax[l] == kNone) continue;
    const int g = emax[l] - m.frac_bits;
    i128 lane = 0;
    for (std::size_t i = l; i < terms.size(); i += m.lanes)
      lane += cut_to_grid(terms[i].v, g, m.term_cut);
    if (join) lane += cut_to_grid(c, g, m.term_cut);
    sum += floor_to_grid(lane, g, grid);
  }
  switch (m.c_entry) {
    case CEntry::join: return round_accumulator_output(m, unrounded_from_int(sum, grid));
    case CEntry::realign: return realign_with_c(m, sum, grid, e_dot, c);
    default: break;
  }
  // 5. c outside the alignment: added exactly to the cut sum before the output rounding.
  ExactSum s;
  s.add(c);
  add_i128(s, sum, grid);
  return round_accumulator_output(m, s.unrounded());
}

double add_c_after(const AccumulatorSpec& m, double r, double c) {
  if (!std::isfinite(r) || !std::isfinite(c)) return r + c;  // IEEE: Inf - Inf is NaN
  ExactSum s;
  s.add(r);
  s.add(c);
  AccumulatorSpec adder = m;
  adder.output_rounding = Rounding::rne;
  return round_accumulator_output(adder, s.unrounded());
}

double fused_step(const AccumulatorSpec& m, const double* a, const double* b, int n, double c) {
  std::vector<int> ea(n), eb(n);
  for (int i = 0; i < n; ++i) {
    ea[i] = a[i] == 0.0 || !std::isfinite(a[i]) ? 0 : exponent_of(a[i]);
    eb[i] = b[i] == 0.0 || !std::isfinite(b[i]) ? 0 : exponent_of(b[i]);
  }
  return fused_step_exponents(m, a, ea.data(), b, eb.data(), n, c);
}

int operand_exponent(const AccumulatorSpec& m, const FormatSpec& f, double v) {
  return std::max(exponent_of(v), min_normal_exponent(m.unpack ? *m.unpack : f));
}

int c_min_exponent(const AccumulatorSpec& m) { return min_normal_exponent(m.output); }

int step_products(const AccumulatorSpec& m) { return m.block ? m.block : m.group; }

bool zero_exponent_matters(const AccumulatorSpec& m, const FormatSpec& a, const FormatSpec& b) {
  return zero_exponent_matters(m, min_normal_exponent(m.unpack ? *m.unpack : a) +
                                      min_normal_exponent(m.unpack ? *m.unpack : b));
}

bool zero_exponent_matters(const AccumulatorSpec& m, int lowest) {
  if (!m.zero_exponent || m.exact) return false;
  if (m.block_scale || m.renormalise_products) return true;
  const bool c_joins = m.c_entry == CEntry::join;
  return *m.zero_exponent > lowest || (c_joins && *m.zero_exponent > c_min_exponent(m));
}

bool needs_reference_step(const AccumulatorSpec& m) {
  return m.arithmetic != StepArithmetic::fused || m.group_sum != 1 || m.lanes != 1 ||
         m.block_scale || m.c_entry == CEntry::realign ||
         m.term_cut == Rounding::rd || m.product_overflow ||
         (m.renormalise_products && m.zero_exponent);
}

double fused_block(const AccumulatorSpec& m, const double* a, const int* ea, const double* b,
                   const int* eb, int n, double c, StepScales scales) {
  if (m.block == 0) return fused_step_exponents(m, a, ea, b, eb, n, c, scales);
  // 1. The block's element order: k mod 4 in {0,1} first, then {2,3}, when interleaved.
  std::vector<int> order;
  for (int pass = 0; pass < (m.interleave ? 2 : 1); ++pass)
    for (int k = 0; k < n; ++k)
      if (!m.interleave || ((k % 4) < 2) == (pass == 0)) order.push_back(k);
  std::vector<double> pa(n), pb(n);
  std::vector<int> pea(n), peb(n);
  for (int i = 0; i < n; ++i) {
    pa[i] = a[order[i]], pb[i] = b[order[i]], pea[i] = ea[order[i]], peb[i] = eb[order[i]];
  }
  // 2. Chained steps, each joined by the previous step's output: from zero with c=add, from
  //    c itself with c=join (an instruction chain whose accumulator is c, as Triton's FP16
  //    HMMA chain for FP8 dots on sm_90).
  AccumulatorSpec step = m;
  step.block = 0;
  step.interleave = false;
  step.c_entry = CEntry::join;
  const bool joins = m.c_entry == CEntry::join;
  double s = joins ? c : 0.0;
  for (int i = 0; i < n; i += m.group)
    s = fused_step_exponents(step, pa.data() + i, pea.data() + i, pb.data() + i, peb.data() + i,
                             std::min(m.group, n - i), s);
  // 3. With c=add the block's result enters c with one IEEE add.
  return joins ? s : add_c_after(m, s, c);
}

double entering_c(const AccumulatorSpec& m, double c) {
  if (m.arithmetic != StepArithmetic::pairwise) return c;
  return std::fabs(c) < std::numeric_limits<float>::min() ? 0.0 : c;
}

double chained_dot(const AccumulatorSpec& m, const FormatSpec& fa, const double* a,
                   const FormatSpec& fb, const double* b, int k, double c, const double* sa,
                   const double* sb) {
  const int g = m.group == 0 ? k : step_products(m);
  double acc = entering_c(m, c);
  for (int i = 0; i < k; i += g) {
    const int n = std::min(g, k - i);
    std::vector<int> ea(n), eb(n);
    for (int j = 0; j < n; ++j) {
      ea[j] = a[i + j] == 0.0 || !std::isfinite(a[i + j]) ? 0 : operand_exponent(m, fa, a[i + j]);
      eb[j] = b[i + j] == 0.0 || !std::isfinite(b[i + j]) ? 0 : operand_exponent(m, fb, b[i + j]);
    }
    const StepScales sc = sa ? StepScales{sa + i, sb + i} : StepScales{};
    acc = fused_block(m, a + i, ea.data(), b + i, eb.data(), n, acc, sc);
  }
  return acc;
}

}  // namespace fp8sim