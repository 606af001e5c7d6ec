// gemm_device: a GemmSpec and decoded operands as the CUDA engine's plain-data DeviceGemm.
#include "gemm/gemm_device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "format/per_format.hpp"
#include "gemm/device_gemm.hpp"
#include "gemm/gemm_path.hpp"
#include "gemm/gemm_split.hpp"

namespace fp8sim {

DeviceFormat device_format(const FormatSpec& f) {
  return {f.mantissa_bits, min_normal_exponent(f), max_exponent(f)};
}

namespace {

// The model on operands of formats fa and fb as the CUDA engine's numbers; a model with a
// feature only the CPU's reference step computes is refused with one line (block scales on
// group sums are taken by the group-sum step, `group_sums`, where group_sums_fit holds; block
// scales elsewhere by the reference step with block scales, `scaled_reference`, where
// scaled_reference_on_device_fit holds).
DeviceModel device_model(const AccumulatorSpec& m, const FormatSpec& fa, const FormatSpec& fb,
                         bool group_sums, bool scaled_reference) {
  if (needs_reference_step(m) && !(group_sums && group_sums_fit(m, fa, fb)) &&
      !(scaled_reference && scaled_reference_on_device_fit(m)))
    throw std::invalid_argument(fmt::format(
        "model {} ({}) runs on the CPU engine only: use device cpu", m.name, describe(m)));
  DeviceModel d;
  d.zero_on = zero_exponent_matters(m, fa, fb);
  d.zero_exponent = m.zero_exponent.value_or(0);
  d.group = m.group;
  d.frac_bits = m.frac_bits;
  d.term_cut = static_cast<int>(m.term_cut);
  d.c_entry = static_cast<int>(m.c_entry);
  d.block = m.block;
  d.interleave = m.interleave;
  d.renormalise = m.renormalise_products;
  d.exact = m.exact;
  d.signed_zero = m.signed_zero;
  d.output = device_format(m.output);
  d.output_rounding = static_cast<int>(m.output_rounding);
  // C enters the accumulator registers: fp32 for 8-bit-exponent outputs, else the output
  // format itself (as the CPU engine's Engine::c_in).
  d.c_register_fp32 = m.output.exponent_bits == 8;
  d.c_register = d.c_register_fp32 ? device_format(format_by_name("fp32")) : d.output;
  d.c_min_exponent = c_min_exponent(m);
  return d;
}

// The spec's model, promotion, scaling and formats (fa, fb: the operands') as numbers.
DeviceGemm device_spec(const GemmSpec& s, const FormatSpec& fa, const FormatSpec& fb,
                       bool group_sums = false, bool scaled_reference = false) {
  DeviceGemm g;
  g.model = device_model(s.model, fa, fb, group_sums, scaled_reference);
  g.promote_every = s.promote_every;
  g.scaled = s.scaling != Scaling::none;
  g.scale_a_first = s.order == ScaleOrder::triton;
  g.scale_block = s.scaling == Scaling::block ? s.block : s.scaling == Scaling::mx ? s.mx_block : 0;
  g.out_type = device_format(s.out_type);
  g.out_fp32 = s.out_type.mantissa_bits == 23;
  const FormatSpec& ua = s.model.unpack ? *s.model.unpack : fa;
  const FormatSpec& ub = s.model.unpack ? *s.model.unpack : fb;
  g.a_align_min = min_normal_exponent(ua);
  g.b_align_min = min_normal_exponent(ub);
  // The step path: one decision for both engines (choose_gemm_path), on the formats the
  // engine sees.
  g.fast_step = static_cast<int>(choose_gemm_path(s.model, fa, fb, step_products(s.model)).device);
  return g;
}

// Scale layout of a GEMM (not batched) of M x N outputs.
void set_scale_layout(const GemmSpec& s, DeviceGemm& g) {
  const ScaleShapes sh = scale_shapes(s, g.M, g.N, g.K);
  g.a_cols = static_cast<int>(sh.a_cols);
  g.b_cols = static_cast<int>(sh.b_cols);
  g.a_bcast = sh.a_rows == 1;
  g.b_bcast = sh.b_rows == 1;
  g.b_div = s.scaling == Scaling::block ? s.block : 1;
}

DeviceGemm device_gemm(const GemmSpec& s, const Operand& A, const Operand& B,
                       std::span<const float> C, std::span<const float> sa,
                       std::span<const float> sb, std::span<float> D,
                       bool group_sums = false, bool scaled_reference = false) {
  DeviceGemm g = device_spec(s, A.format, B.format, group_sums, scaled_reference);
  g.M = A.rows;
  g.N = B.rows;
  g.K = A.cols;
  g.A = A.value.data();
  g.B = B.value.data();
  g.C = C.empty() ? nullptr : C.data();
  g.sa = sa.data();
  g.sb = sb.data();
  g.sa_size = sa.size();
  g.sb_size = sb.size();
  g.D = D.data();
  return g;
}

// g's scales as s's MX block scales (mx_block elements each), for a GEMM or for batched dot
// products (one row of scales per row of A and of B).
void set_mx_scales(const GemmSpec& s, DeviceGemm& g, bool batched) {
  g.scale_block = s.mx_block;
  if (batched) {
    g.batched = true;
    g.N = 1;
    g.a_cols = g.b_cols = (g.K + g.scale_block - 1) / g.scale_block;
  } else {
    set_scale_layout(s, g);
  }
}

// Runs g, whose scales are s's MX block scales, as a GEMM or as batched dot products.
void run_with_mx_scales(const GemmSpec& s, DeviceGemm& g, bool batched,
                        const DeviceLaunch& launch) {
  set_mx_scales(s, g, batched);
  run_device_gemm(g, launch);
}

}  // namespace

void gemm_on_device(const GemmSpec& s, const Operand& A, const Operand& B,
                    std::span<const float> C, std::span<const float> sa,
                    std::span<const float> sb, std::span<float> D,
                    const DeviceLaunch& launch) {
  DeviceGemm g = device_gemm(s, A, B, C, sa, sb, D);
  set_scale_layout(s, g);
  run_device_gemm(g, launch);
}

void batched_dot_on_device(const GemmSpec& s, const Operand& A, const Operand& B,
                           std::span<const float> C, std::span<const float> sa,
                           std::span<const float> sb, std::span<float> D) {
  DeviceGemm g = device_gemm(s, A, B, C, sa, sb, D);
  g.batched = true;
  g.N = 1;
  const int per_row = g.scale_block == 0 ? 1 : (g.K + g.scale_block - 1) / g.scale_block;
  g.a_cols = g.b_cols = per_row;
  run_device_gemm(g);
}

namespace {

// The log2 range of scales on the host (check_scales_on_device finds it on the device): the
// exponent field of a normal float, ilogb of a subnormal one.
ScaleLog2 log2_range(std::span<const float> v) {
  ScaleLog2 r;
  for (float x : v) {
    const std::uint32_t b = std::bit_cast<std::uint32_t>(x);
    const int field = static_cast<int>((b >> 23) & 0xffu);
    if (field == 0xff || (b << 1) == 0) {
      r.all_finite_nonzero = false;
      continue;
    }
    const int e = field != 0 ? field - 127 : std::ilogb(x);
    r.lo = std::min(r.lo, e);
    r.hi = std::max(r.hi, e);
  }
  return r;
}

// The lowest log2 of a run's scales, at most 0 (0 where none is finite and nonzero).
int lowest_log2(const ScaleLog2& r) { return r.lo > r.hi ? 0 : std::min(0, r.lo); }

// g, set up for the folded operands' formats, made to fold s's power-of-two scales (sa, sb)
// into elements of formats fa and fb: their alignment floors, moved per element by the scales,
// and the zero exponent on these scales (every element's floor is at least its format's plus
// the log2 of the smallest scale, so where that sum of A's and B's lies at or above the zero
// exponent, a zero term never changes a step and the tiled kernels run).
void set_folded(const GemmSpec& plain, const FormatSpec& fa, const FormatSpec& fb,
                const ScaleLog2& la, const ScaleLog2& lb, DeviceGemm& g) {
  const DeviceGemm own = device_spec(plain, fa, fb);
  g.a_align_min = own.a_align_min;
  g.b_align_min = own.b_align_min;
  g.fold = true;
  g.model.zero_on = zero_exponent_matters(
      plain.model, g.a_align_min + lowest_log2(la) + g.b_align_min + lowest_log2(lb));
}

}  // namespace

void folded_on_device(const GemmSpec& s, const FoldedOperands& f, std::span<const float> C,
                      std::span<const float> sa, std::span<const float> sb,
                      std::span<float> D, bool batched, const DeviceLaunch& launch) {
  const GemmSpec plain = without_block_scales(s);
  DeviceGemm g = device_gemm(plain, f.a, f.b, C, sa, sb, D);
  set_folded(plain, f.a_format, f.b_format, log2_range(sa), log2_range(sb), g);
  run_with_mx_scales(s, g, batched, launch);
}

bool folded_codes_fit(const GemmSpec& s, const ScaleLog2& la, const ScaleLog2& lb) {
  const auto& in = s.model.block_scale;
  if (!in || s.model.group_sum > 1 || in->format.mantissa_bits != 0 ||
      needs_reference_step(without_block_scales(s).model))
    return false;
  // Every element times its scale an exact finite float: the format's largest exponent with
  // the largest scale's at most float's, its lowest bit with the smallest scale's at least
  // float's lowest (2^-149); scales finite and nonzero.
  const auto exact = [](const FormatSpec& f, const ScaleLog2& r) {
    if (!r.all_finite_nonzero) return false;
    const bool none = r.lo > r.hi;  // no scales
    const int lo = none ? 0 : r.lo, hi = none ? 0 : r.hi;
    return hi + max_exponent(f) <= 127 && lo + min_normal_exponent(f) - f.mantissa_bits >= -149;
  };
  return exact(s.a_format, la) && exact(s.b_format, lb);
}

bool folded_codes_fit(const GemmSpec& s, std::span<const float> sa, std::span<const float> sb) {
  return folded_codes_fit(s, log2_range(sa), log2_range(sb));
}

bool group_sums_on_device_fit(const GemmSpec& s, const FormatSpec& a, const FormatSpec& b,
                              bool finite_elements, std::span<const float> C,
                              std::span<const float> sa, std::span<const float> sb) {
  const auto finite = [](std::span<const float> v) {
    return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
  };
  return group_sums_fit(s.model, a, b) && finite_elements && finite(C) && finite(sa) &&
         finite(sb);
}

bool group_sums_on_device_fit(const GemmSpec& s, const Operand& A, const Operand& B,
                              std::span<const float> C, std::span<const float> sa,
                              std::span<const float> sb) {
  return group_sums_on_device_fit(s, A.format, B.format, !A.has_special && !B.has_special, C,
                                  sa, sb);
}

namespace {

// The group-sum step's numbers (DeviceGemm::group_sum and after) for operands of formats fa, fb.
void set_group_sums(const GemmSpec& s, const FormatSpec& fa, const FormatSpec& fb, DeviceGemm& g) {
  g.scaled = false;  // the scales are inside the MMA
  g.group_sum = s.model.group_sum;
  const FormatSpec& sf = s.model.block_scale->format;
  g.scale_min_exponent = min_normal_exponent(sf);
  g.scale_mantissa_bits = sf.mantissa_bits;
  // The tiled kernel's integer group sums (DeviceGemm::int8_groups).
  const auto unit = [](const FormatSpec& f) { return min_normal_exponent(f) - f.mantissa_bits; };
  g.a_unit = unit(fa);
  g.b_unit = unit(fb);
  const double na = std::ldexp(max_finite(fa), -g.a_unit);
  const double nb = std::ldexp(max_finite(fb), -g.b_unit);
  const double ns = std::ldexp(1.0, sf.mantissa_bits + 1);  // a scale's significand < ns
  g.int8_groups = na <= 127 && nb <= 127 && s.model.group_sum * na * nb * ns * ns < 0x1p31 &&
                  sf.mantissa_bits <= 7 && min_normal_exponent(sf) >= -128 &&
                  max_exponent(sf) <= 127;
}

}  // namespace

void group_sums_on_device(const GemmSpec& s, const Operand& A, const Operand& B,
                          std::span<const float> C, std::span<const float> sa,
                          std::span<const float> sb, std::span<float> D, bool batched,
                          const DeviceLaunch& launch) {
  DeviceGemm g = device_gemm(s, A, B, C, sa, sb, D, /*group_sums=*/true);
  set_group_sums(s, A.format, B.format, g);
  run_with_mx_scales(s, g, batched, launch);
}

bool scaled_reference_on_device_fit(const AccumulatorSpec& m) {
  return m.block_scale && m.arithmetic == StepArithmetic::fused && !m.exact && m.block == 0 &&
         (m.c_entry == CEntry::join || m.c_entry == CEntry::add) && m.lanes >= 1 &&
         m.lanes <= 8;
}

DeviceGemm scaled_reference_device_gemm(const GemmSpec& s, const Operand& A, const Operand& B,
                                        std::span<const float> C, std::span<const float> sa,
                                        std::span<const float> sb, std::span<float> D,
                                        bool batched) {
  DeviceGemm g = device_gemm(s, A, B, C, sa, sb, D, /*group_sums=*/false,
                             /*scaled_reference=*/true);
  g.scaled = false;  // the scales are inside the MMA
  g.scaled_reference = true;
  g.model_group_sum = s.model.group_sum;
  g.lanes = s.model.lanes;
  g.product_overflow = s.model.product_overflow;
  g.scale_min_exponent = min_normal_exponent(s.model.block_scale->format);
  set_mx_scales(s, g, batched);
  return g;
}

void throw_step_error(const AccumulatorSpec& m, unsigned error) {
  // sim/accumulator/step.cpp's words, which the CPU engine rethrows.
  if (error == kStepGroupSumInexact)
    throw std::domain_error(fmt::format(
        "model '{}': a group sum of {} products is not exact in a double (operands too wide "
        "for group sums)", m.name, m.group_sum));
  if (error == kStepTermBeyond128) throw std::domain_error("accumulator term beyond 128 bits");
  if (error == kStepBelowExactGrid)
    throw std::domain_error("exact sum: value below the fixed-point grid");
}

void scaled_reference_on_device(const GemmSpec& s, const Operand& A, const Operand& B,
                                std::span<const float> C, std::span<const float> sa,
                                std::span<const float> sb, std::span<float> D, bool batched,
                                const DeviceLaunch& launch) {
  DeviceGemm g = scaled_reference_device_gemm(s, A, B, C, sa, sb, D, batched);
  unsigned error = 0;
  g.step_errors = &error;
  run_device_gemm(g, launch);
  // The CPU engine throws the first error a step raised: on one thread, the first output's
  // first, which the device reports.
  throw_step_error(s.model, error);
}

namespace {

// Code -> value table of a format of at most 8 bits (every code; larger codes are reported
// as bad), made once per format; `checked` (DeviceLaunch::codes_checked): 256 entries, 0 past
// the format's codes, so that none is reported.
const std::vector<float>& resident_code_table(const FormatSpec& f, bool checked) {
  auto make = [](const FormatSpec& format, std::size_t size) {
    std::vector<float> t(size, 0.0f);
    for (std::uint32_t c = 0; c < code_count(format); ++c)
      t[c] = static_cast<float>(decode(format, c));
    return t;
  };
  if (checked)
    return once_per_format<std::vector<float>>(
        f, [&](const FormatSpec& format) { return make(format, 256); });
  return once_per_format<std::vector<float>>(
      f, [&](const FormatSpec& format) { return make(format, code_count(format)); });
}

}  // namespace

void resident_on_device(const GemmSpec& s, int M, int N, int ld, int k0, int len, int cols,
                        const std::uint8_t* A, const std::uint8_t* B, const float* C,
                        std::span<const float> sa, std::span<const float> sb, float* D,
                        void* stream, int device, const DeviceLaunch& base) {
  const int K = len;
  const std::vector<float>& lut_a = resident_code_table(s.a_format, base.codes_checked);
  const std::vector<float>& lut_b = resident_code_table(s.b_format, base.codes_checked);
  const bool group_sums = s.model.block_scale && s.model.group_sum > 1;
  const bool fold = s.model.block_scale && !group_sums;
  DeviceGemm g;
  if (fold) {  // folded_codes_fit: the plain model on the folded formats' path
    const GemmSpec plain = without_block_scales(s);
    g = device_spec(plain, folded_format(s.a_format), folded_format(s.b_format));
    // The scales' log2 ranges: found with their device check, or here from host memory.
    if (base.scales_on_device)
      set_folded(plain, s.a_format, s.b_format, base.scale_log2[0], base.scale_log2[1], g);
    else
      set_folded(plain, s.a_format, s.b_format, log2_range(sa), log2_range(sb), g);
  } else {
    g = device_spec(s, s.a_format, s.b_format, group_sums);
    if (group_sums) set_group_sums(s, s.a_format, s.b_format, g);
  }
  g.M = M;
  g.N = N;
  g.K = K;
  set_scale_layout(s, g);
  if (fold) g.scale_block = s.mx_block;
  g.resident = true;
  g.A_codes = A;
  g.B_codes = B;
  g.a_lut = lut_a.data();
  g.b_lut = lut_b.data();
  g.a_lut_size = static_cast<int>(lut_a.size());
  g.b_lut_size = static_cast<int>(lut_b.size());
  g.a_name = s.a_format.name.c_str();
  g.b_name = s.b_format.name.c_str();
  g.C = C;
  g.sa = sa.data();
  g.sb = sb.data();
  g.sa_size = sa.size();
  g.sb_size = sb.size();
  g.D = D;
  g.code_ld = ld;
  g.code_k0 = k0;
  g.code_cols = cols;
  DeviceLaunch launch = base;
  launch.stream = stream;
  launch.device = device;
  run_device_gemm(g, launch);
}


}  // namespace fp8sim
