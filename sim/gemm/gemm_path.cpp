// gemm_path: which inner loop the GEMM engine takes for a model and operand formats.
#include "gemm/gemm_path.hpp"

#include <algorithm>
#include <bit>

namespace fp8sim {

GemmPath choose_gemm_path(const AccumulatorSpec& m, const FormatSpec& a, const FormatSpec& b,
                          int step_products) {
  GemmPath p;
  // 1. The products' range: smallest lsb 2^lo_p, |p| < 2^hi, `sig` significant bits.
  const int lo = std::min(min_normal_exponent(a) - a.mantissa_bits,
                          min_normal_exponent(b) - b.mantissa_bits);
  const int hi = max_exponent(a) + max_exponent(b) + 2;
  const int sig = a.mantissa_bits + b.mantissa_bits + 2;
  const int lo_p = 2 * lo;
  const bool float_products = sig <= 24 && lo_p >= -126 && hi <= 127;
  // 2. Bits a sum of step_products + 1 terms (the products and c) adds above one term.
  const int sum_bits = static_cast<int>(std::bit_width(static_cast<unsigned>(step_products + 1)));
  const int f = m.frac_bits;
  const bool cut_rz = m.term_cut == Rounding::rz;

  // 3. The step path.
  if (m.exact) {
    const bool fp32_rne = m.output == format_by_name("fp32") && m.output_rounding == Rounding::rne;
    if (m.group == 1 && fp32_rne && float_products) {
      p.step = StepPath::fmaf_chain;
    } else if (hi - lo_p + sum_bits <= 120) {
      p.step = StepPath::exact_int;
      p.exact_grid = lo_p;
    }
  } else if (m.c_entry == CEntry::exact || needs_reference_step(m)) {
    p.step = StepPath::reference;
  } else if (float_products && f + 2 + sum_bits <= 31 && (cut_rz || f + 2 <= 22)) {
    p.step = StepPath::int32_float;
  } else if (f + 2 + sum_bits <= 62 && (cut_rz || f + 2 <= 51)) {
    p.step = StepPath::int64_double;
  }

  // 4. The CUDA engine's step (DeviceStep): float or double sums, tighter than int32 / int64.
  const bool integer_step = p.step == StepPath::int32_float || p.step == StepPath::int64_double;
  if (integer_step && m.block == 0 && !m.renormalise_products) {
    if (float_products && f + 2 + sum_bits <= 24 && f <= 20) p.device = DeviceStep::f32;
    else if (f + 2 + sum_bits <= 53 && f <= 49) p.device = DeviceStep::f64;
  }

  // 5. The output path.
  const FormatSpec& o = m.output;
  if (o.specials == Specials::ieee && o.exponent_bits == 8 && o.bias == 127 &&
      (m.output_rounding == Rounding::rz || m.output_rounding == Rounding::rne)) {
    p.out = m.output_rounding == Rounding::rz ? OutPath::e8_rz : OutPath::e8_rne;
    p.out_drop = 52 - o.mantissa_bits;
  }
  return p;
}

bool group_sums_fit(const AccumulatorSpec& m, const FormatSpec& a, const FormatSpec& b) {
  const auto& in = m.block_scale;
  if (m.group_sum < 2 || !in || m.lanes != 1 || m.c_entry != CEntry::join || m.block != 0 ||
      m.exact || m.renormalise_products || m.arithmetic != StepArithmetic::fused || m.group < 1 ||
      (m.term_cut != Rounding::rz && m.term_cut != Rounding::rne))
    return false;
  const int lo_p = min_normal_exponent(a) - a.mantissa_bits + min_normal_exponent(b) -
                   b.mantissa_bits;  // every product is a multiple of 2^lo_p
  const int hi_sum = max_exponent(a) + max_exponent(b) + 2 +  // |group sum| < 2^hi_sum
                     static_cast<int>(std::bit_width(static_cast<unsigned>(m.group_sum)));
  const int terms = m.group / m.group_sum + 1;  // and c
  return hi_sum - lo_p + 2 * (in->format.mantissa_bits + 1) <= 53 &&
         hi_sum + 2 + m.frac_bits + static_cast<int>(std::bit_width(unsigned(terms))) <= 62;
}

}  // namespace fp8sim
