// gemm: the FP8 GEMM engine. Integer inner loop for the common models; the reference fused
// step (accumulator.cpp) for everything else, so both always give the same bits.
//
// Fast clones in this file, each named after the function it clones and pinned to it bit
// for bit by tests/test_gemm_engine.cpp ("engine equals the reference step over a grid of
// models", "exact model equals the Boost exact reference"):
//   fused_step_fast                  fused_step_exponents steps 3-4 (align, cut, sum) in int32/int64
//   fused_step_exact_fast            fused_step_exponents step 2 (exact model) in 128-bit integers
//   round_accumulator_output_fast    round_accumulator_output for 8-bit-exponent outputs, rz/rne
//   the fmaf chain in Engine::dot    the exact model with group 1 and an fp32 rne output
// choose_gemm_path (gemm_path.hpp) decides which of them a model may take.
#include "gemm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "block_fold.hpp"
#include "gemm_device.hpp"
#include "gemm_path.hpp"
#include "gemm_split.hpp"
#include "parallel.hpp"

namespace fp8sim {

// ---- names and shapes ----------------------------------------------------------------------

Scaling parse_scaling(std::string_view s) {
  if (s == "none") return Scaling::none;
  if (s == "tensor") return Scaling::tensor;
  if (s == "row") return Scaling::row;
  if (s == "block") return Scaling::block;
  if (s == "mx") return Scaling::mx;
  throw std::invalid_argument(
      fmt::format("unknown scaling '{}' (known: none, tensor, row, block, mx)", s));
}

std::string_view to_string(Scaling s) {
  switch (s) {
    case Scaling::none: return "none";
    case Scaling::tensor: return "tensor";
    case Scaling::row: return "row";
    case Scaling::block: return "block";
    case Scaling::mx: return "mx";
  }
  return "?";
}

ScaleOrder parse_scale_order(std::string_view s) {
  if (s == "deepgemm") return ScaleOrder::deepgemm;
  if (s == "cublaslt") return ScaleOrder::cublaslt;
  if (s == "triton") return ScaleOrder::triton;
  throw std::invalid_argument(
      fmt::format("unknown scale order '{}' (known: deepgemm, cublaslt, triton)", s));
}

std::string_view to_string(ScaleOrder s) {
  switch (s) {
    case ScaleOrder::deepgemm: return "deepgemm";
    case ScaleOrder::cublaslt: return "cublaslt";
    case ScaleOrder::triton: return "triton";
  }
  return "?";
}

namespace {

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

// Scale block length along K (0 when one scale covers all of K).
int scale_block(const GemmSpec& s) {
  if (s.scaling == Scaling::block) return s.block;
  if (s.scaling == Scaling::mx) return s.mx_block;
  return 0;
}

bool is_output_type(const FormatSpec& f) {
  return f.specials == Specials::ieee &&
         ((f.exponent_bits == 8 && (f.mantissa_bits == 23 || f.mantissa_bits == 7)) ||
          (f.exponent_bits == 5 && f.mantissa_bits == 10));
}

}  // namespace

void use_model_block_scales(GemmSpec& s) {
  const auto& in = s.model.block_scale;
  if (!in) return;
  s.scaling = Scaling::mx;
  s.mx_block = in->block;
  s.mx_scale = in->format;
}

ScaleShapes scale_shapes(const GemmSpec& s, int M, int N, int K) {
  const std::size_t m = M, n = N, k = K;
  switch (s.scaling) {
    case Scaling::none: return {0, 0, 0, 0};
    case Scaling::tensor: return {1, 1, 1, 1};
    case Scaling::row: return {m, 1, n, 1};
    case Scaling::block: {
      const std::size_t g = s.block, kb = ceil_div(k, g);
      return {m, kb, ceil_div(n, g), kb};
    }
    case Scaling::mx: {
      const std::size_t kb = ceil_div(k, s.mx_block);
      return {m, kb, n, kb};
    }
  }
  return {0, 0, 0, 0};
}

int padded_k(const GemmSpec& s, int K) {
  if (s.k_tile <= 0 || K % s.k_tile == 0) return K;
  return static_cast<int>(ceil_div(std::size_t(K), std::size_t(s.k_tile)) * s.k_tile);
}

void validate(const GemmSpec& s, int M, int N, int K_given) {
  if (M < 0 || N < 0 || K_given < 1)
    throw std::invalid_argument(fmt::format(
        "GEMM shape M={} N={} K={}: K must be >= 1 and M, N >= 0 (M or N = 0: an empty D)", M,
        N, K_given));
  if (s.k_tile < 0)
    throw std::invalid_argument(fmt::format("k_tile = {} is negative", s.k_tile));
  const int K = padded_k(s, K_given);  // the chain runs on the zero-padded K
  validate(s.model);
  check_threads(s.threads);
  // Every integer setting within the CLI's option ranges (the same limits for every front-end).
  for (const auto& [name, v] : {std::pair<const char*, int>{"promote_every", s.promote_every},
                                {"block", s.block}, {"mx_block", s.mx_block},
                                {"split_k", s.split_k}, {"split_k_align", s.split_k_align}})
    if (v > limits::kMaxDim)
      throw std::invalid_argument(fmt::format("{} = {} is too large {}", name, v,
                                              limits::named("kMaxDim", limits::kMaxDim)));
  for (const FormatSpec* f : {&s.a_format, &s.b_format}) {
    validate(*f);
    if (f->exponent_bits > 8 || f->mantissa_bits > 23)
      throw std::invalid_argument(
          fmt::format("operand format {} is wider than fp32; the engine holds values as floats",
                      f->name));
  }
  if (s.split_k < 1)
    throw std::invalid_argument(fmt::format("split_k = {} must be >= 1", s.split_k));
  if (s.split_k_align < 1)
    throw std::invalid_argument(
        fmt::format("split_k_align = {} must be >= 1", s.split_k_align));
  if (!is_output_type(s.out_type))
    throw std::invalid_argument(
        fmt::format("output type {} is not f32, bf16 or f16", s.out_type.name));
  const int g = step_products(s.model);
  if (g > 0 && K % g != 0)
    throw std::invalid_argument(fmt::format(
        "K = {} is not a multiple of model {}'s group of {} products", K, s.model.name, g));
  if (s.promote_every < 0)
    throw std::invalid_argument(fmt::format("promote_every = {} is negative", s.promote_every));
  if (g > 0 && s.promote_every % g != 0)
    throw std::invalid_argument(fmt::format(
        "promote_every = {} is not a multiple of model {}'s group of {}", s.promote_every,
        s.model.name, g));
  const int bs = scale_block(s);
  if (s.scaling == Scaling::block && s.block < 1)
    throw std::invalid_argument(fmt::format("scale block {} must be >= 1", s.block));
  if (s.scaling == Scaling::mx && s.mx_block < 1)
    throw std::invalid_argument(fmt::format("MX scale block {} must be >= 1", s.mx_block));
  if (const auto& in = s.model.block_scale) {  // scales inside the MMA
    if (s.scaling != Scaling::mx || s.mx_block != in->block || !(s.mx_scale == in->format))
      throw std::invalid_argument(fmt::format(
          "model {} applies {} scales per {} elements inside the MMA: it needs scaling mx with "
          "mx_block {} and {} scales (got scaling {}, mx_block {}, {} scales)",
          s.model.name, in->format.name, in->block, in->block, in->format.name,
          to_string(s.scaling), s.mx_block, s.mx_scale.name));
    if (K % in->block != 0)
      throw std::invalid_argument(fmt::format("K = {} is not a multiple of model {}'s scale block {}",
                                              K, s.model.name, in->block));
  } else if (bs > 0) {
    const int chunk = s.promote_every == 0 ? K : s.promote_every;
    if (bs % chunk != 0 && !(s.promote_every == 0 && K <= bs))
      throw std::invalid_argument(fmt::format(
          "{} scaling with blocks of {} along K needs promote_every dividing {} (got {}): "
          "scales are applied when a chunk is promoted",
          to_string(s.scaling), bs, bs, s.promote_every == 0 ? "never" : std::to_string(chunk)));
  }
}

// ---- operands ------------------------------------------------------------------------------

namespace {

struct DecodedCode {
  float value;
  std::int16_t exponent;
  bool special;
};

DecodedCode decode_code(const FormatSpec& f, std::uint32_t code) {
  const ValueClass cls = classify(f, code);
  const double v = decode(f, code);
  switch (cls) {
    case ValueClass::nan:
    case ValueClass::inf: return {static_cast<float>(v), 0, true};
    case ValueClass::zero: return {static_cast<float>(v), Operand::kZeroExponent, false};
    case ValueClass::subnormal:
      return {static_cast<float>(v), static_cast<std::int16_t>(min_normal_exponent(f)), false};
    case ValueClass::normal: break;
  }
  const Decoded d = decode_parts(f, code);
  const int e = d.exponent + static_cast<int>(std::bit_width(d.significand)) - 1;
  return {static_cast<float>(v), static_cast<std::int16_t>(e), false};
}

template <class Code>
Operand decode_codes(const FormatSpec& f, int rows, int cols, std::span<const Code> codes) {
  validate(f);
  if (rows < 0 || cols < 0 || codes.size() != static_cast<std::size_t>(rows) * cols)
    throw std::invalid_argument(fmt::format("operand of {} codes is not {} x {}", codes.size(),
                                            rows, cols));
  Operand op;
  op.rows = rows;
  op.cols = cols;
  op.format = f;
  op.value.resize(codes.size());
  op.exponent.resize(codes.size());
  const bool tabled = total_bits(f) <= 16;
  std::vector<DecodedCode> table;
  if (tabled) {
    table.reserve(code_count(f));
    for (std::uint32_t c = 0; c < code_count(f); ++c) table.push_back(decode_code(f, c));
  }
  for (std::size_t i = 0; i < codes.size(); ++i) {
    if (!is_valid_code(f, codes[i]))
      throw std::invalid_argument(fmt::format("code {:#x} at ({}, {}) is not a code of {}",
                                              static_cast<std::uint64_t>(codes[i]), i / cols,
                                              i % cols, f.name));
    const DecodedCode d = tabled ? table[codes[i]] : decode_code(f, codes[i]);
    op.value[i] = d.value;
    op.exponent[i] = d.exponent;
    op.has_special = op.has_special || d.special;
  }
  return op;
}

}  // namespace

Operand decode_operand(const FormatSpec& f, int rows, int cols,
                       std::span<const std::uint8_t> codes) {
  if (total_bits(f) > 8)
    throw std::invalid_argument(fmt::format("format {} has {} bits: 8-bit codes cannot hold it",
                                            f.name, total_bits(f)));
  return decode_codes(f, rows, cols, codes);
}

Operand decode_operand(const FormatSpec& f, int rows, int cols,
                       std::span<const std::uint32_t> codes) {
  return decode_codes(f, rows, cols, codes);
}

Operand operand_from_values(const FormatSpec& f, int rows, int cols,
                            std::span<const double> values) {
  std::vector<std::uint32_t> codes(values.size());
  const RoundingSpec exact{Rounding::rne, Overflow::nonsat, 32};
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    const std::uint32_t c = encode(v, f, exact);
    const double back = decode(f, c);
    if (!(back == v || (std::isnan(back) && std::isnan(v))) ||
        (v == 0.0 && std::signbit(v) != std::signbit(back) && has_negative_zero(f)))
      throw std::invalid_argument(fmt::format("value {} at ({}, {}) is not representable in {}",
                                              format_value(v), i / (cols ? cols : 1),
                                              i % (cols ? cols : 1), f.name));
    codes[i] = c;
  }
  return decode_codes(f, rows, cols, std::span<const std::uint32_t>(codes));
}

// ---- the engine ----------------------------------------------------------------------------

namespace {

using i128 = __int128;

// Engine::dot is compiled for AVX2 and a default target, one picked at load time (an ifunc).
// ThreadSanitizer cannot run an ifunc resolver before it starts: its build has one target.
#if defined(__SANITIZE_THREAD__)
#define FP8SIM_TARGET_CLONES
#else
#define FP8SIM_TARGET_CLONES [[gnu::target_clones("avx2", "default")]]
#endif

struct ScaleRows {
  const float* a = nullptr;  // this output's row of A scales (null: unscaled)
  const float* b = nullptr;
  int block = 0;             // K elements per scale (0: one scale for all of K)
};

class Engine {
 public:
  Engine(const GemmSpec& s, const Operand& A, const Operand& B)
      : s_(s), m_(s.model),
        path_(choose_gemm_path(m_, A.format, B.format,
                               m_.group == 0 ? std::max(s.promote_every, A.cols) : m_.group)) {
    const FormatSpec& o = m_.output;
    // C enters the accumulator registers: fp32 for 8-bit-exponent outputs, else the output
    // format itself (an fp16 accumulator holds fp16 C).
    c_register_ = o.exponent_bits == 8 ? format_by_name("fp32") : o;
    c_min_exponent_ = c_min_exponent(m_);
    fp32_output_ = o == format_by_name("fp32");
    zero_matters_ = zero_exponent_matters(m_, A.format, B.format);
    group_sums_fast_ = group_sums_fit(m_, A.format, B.format);
  }

  // One output: the chain of steps over K, chunks promoted into the FP32 main accumulator.
  // With prefixes (increasing, each a multiple of the step, see gemm_prefixes): at[p] gets
  // the output the chain would give on the first prefix[p] elements of K alone, read off the
  // running state (the partial chunk promoted as if K ended there).
  FP8SIM_TARGET_CLONES float dot(const float* a, const std::int16_t* ea, const float* b, const std::int16_t* eb,
            int K, bool special, float c, const ScaleRows& sc,
            std::span<const int> prefix = {}, float* at = nullptr) const {
    const int chunk = s_.promote_every == 0 ? K : s_.promote_every;
    const int g = m_.group == 0 ? chunk : step_products(m_);
    // Never promoted, the output is the MMA's own result: a main accumulator of -0 adds it
    // unchanged, -0 included (+0 + -0 would be +0).
    float main = s_.promote_every == 0 ? -0.0f : 0.0f;
    std::size_t p = 0;
    auto promote = [&](float main, double acc, int k0) {
      const float part = static_cast<float>(acc);  // exact: outputs are at most fp32
      if (sc.a == nullptr || m_.block_scale) return main + part;  // scales in the MMA
      const int blk = sc.block == 0 ? 0 : k0 / sc.block;
      const float sa = sc.a[blk], sb = sc.b[blk];
      if (s_.order == ScaleOrder::triton) return std::fmaf(part * sa, sb, main);
      return std::fmaf(sa * sb, part, main);  // deepgemm, cublaslt (scales after K: gemm_split)
    };
    for (int k0 = 0; k0 < K; k0 += chunk) {
      const int kend = std::min(K, k0 + chunk);
      double acc = k0 == 0 ? c_in(c) : 0.0;
      const double acc0 = acc;
      float facc = static_cast<float>(acc);  // the fmaf chain's own state (keeps -0)
      for (int k = k0; k < kend;) {
        const int stop = p < prefix.size() && prefix[p] < kend ? prefix[p] : kend;
        if (stop < kend && m_.group == 0) {  // the chunk is one step: a cut chunk is another
          at[p++] = promote(main, step(a + k0, ea + k0, b + k0, eb + k0, stop - k0, acc0, special), k0);
          continue;
        }
        if (path_.step == StepPath::fmaf_chain && !special) {
          for (; k < stop; ++k) facc = std::fmaf(a[k], b[k], facc);
          acc = facc == 0.0f ? 0.0 : facc;
        } else {
          for (; k < stop; k += g) {
            const int n = std::min(g, stop - k);
            acc = m_.block_scale ? scaled_step(a + k, ea + k, b + k, eb + k, n, acc, sc, k, special)
                                 : step(a + k, ea + k, b + k, eb + k, n, acc, special);
          }
        }
        if (stop < kend) at[p++] = promote(main, acc, k0);
      }
      main = promote(main, acc, k0);
      for (; p < prefix.size() && prefix[p] == kend; ++p) at[p] = main;
    }
    return main;
  }

 private:
  double c_in(float c) const {
    if (c_register_.mantissa_bits == 23) return entering_c(m_, c);
    return quantize(c, c_register_, {Rounding::rne, Overflow::nonsat, 32});
  }

  [[gnu::always_inline]] double step(const float* a, const std::int16_t* ea, const float* b, const std::int16_t* eb,
              int n, double c, bool special) const {
    if (m_.block != 0) return reference_step(a, ea, b, eb, n, c);  // fused_block
    if (m_.c_entry == CEntry::add && !special && std::isfinite(c)) {
      const double r = fused(a, ea, b, eb, n, 0.0, false);
      if (fp32_output_) return static_cast<float>(r) + static_cast<float>(c);
      return add_c_after(m_, r, c);
    }
    return fused(a, ea, b, eb, n, c, special);
  }

  [[gnu::always_inline]] double fused(const float* a, const std::int16_t* ea, const float* b, const std::int16_t* eb,
               int n, double c, bool special) const {
    if (!special && std::isfinite(c)) {
      switch (path_.step) {
        case StepPath::int32_float: return fused_step_fast<float, std::int32_t>(a, ea, b, eb, n, c);
        case StepPath::int64_double: return fused_step_fast<double, std::int64_t>(a, ea, b, eb, n, c);
        case StepPath::exact_int: return fused_step_exact_fast(a, b, n, c);
        default: break;
      }
    }
    return reference_step(a, ea, b, eb, n, c);
  }

  // A step of a model with block scales inside the MMA: product i's scales are those of
  // element k + i's block. Group sums take group_sum_step where it is exact, everything else
  // the reference step.
  double scaled_step(const float* a, const std::int16_t* ea, const float* b,
                     const std::int16_t* eb, int n, double c, const ScaleRows& sc, int k,
                     bool special) const {
    if (group_sums_fast_ && !special && std::isfinite(c))
      if (const auto r = group_sum_step(a, b, n, c, sc, k)) return *r;
    thread_local std::vector<double> xa, xb;
    xa.resize(n);
    xb.resize(n);
    for (int i = 0; i < n; ++i) {
      xa[i] = sc.a[(k + i) / sc.block];
      xb[i] = sc.b[(k + i) / sc.block];
    }
    return reference_step(a, ea, b, eb, n, c, StepScales{xa.data(), xb.data()});
  }

  // fused_step_exponents for a group-sum model (FP4 MMAs: kind::mxf4, kind::mxf4nvf4) on
  // finite operands and c, as step_terms (sim/accumulator.cpp) forms its terms: each group's
  // products summed exactly, times its two scales, aligned on the scales' exponents; a group
  // whose products are all zero, or with a zero scale, is a zero term. nullopt where a scale
  // is NaN or Inf (the reference step's special values).
  std::optional<double> group_sum_step(const float* a, const float* b, int n, double c,
                                       const ScaleRows& sc, int k) const {
    const int gs = m_.group_sum, smin = min_normal_exponent(m_.block_scale->format);
    thread_local std::vector<double> v;
    v.clear();
    int emax = INT_MIN / 2;
    bool zero_term = c == 0.0;  // a zero c joins as a zero term
    for (int i = 0; i < n; i += gs) {
      const double xa = sc.a[(k + i) / sc.block], xb = sc.b[(k + i) / sc.block];
      if (!std::isfinite(xa) || !std::isfinite(xb)) return std::nullopt;
      double sum = 0.0;
      bool all_zero = true;
      for (int j = i; j < std::min(n, i + gs); ++j) {
        const double p = double(a[j]) * double(b[j]);
        sum += p;  // exact: group_sums_fit
        all_zero = all_zero && p == 0.0;
      }
      if (all_zero || xa == 0.0 || xb == 0.0) {
        zero_term = true;
        continue;
      }
      const int te = std::max(std::ilogb(xa), smin) + std::max(std::ilogb(xb), smin);
      v.push_back(sum * xa * xb);
      emax = std::max(emax, te);
    }
    if (zero_term && m_.zero_exponent) emax = std::max(emax, *m_.zero_exponent);
    if (c != 0.0) emax = std::max({emax, exponent_of_normal(c), c_min_exponent_});
    if (emax == INT_MIN / 2) return 0.0;  // no term aligns and c is zero
    const int grid = emax - m_.frac_bits;
    const bool rz = m_.term_cut == Rounding::rz;
    const auto cut = [&](double x) {
      const double y = std::ldexp(x, -grid);
      return static_cast<std::int64_t>(rz ? std::trunc(y) : std::nearbyint(y));
    };
    std::int64_t total = 0;
    for (const double x : v) total += cut(x);
    if (c != 0.0) total += cut(c);
    return round_accumulator_output_fast(total, grid);
  }

  double reference_step(const float* a, const std::int16_t* ea, const float* b,
                        const std::int16_t* eb, int n, double c, StepScales scales = {}) const {
    thread_local std::vector<double> av, bv;
    thread_local std::vector<int> eav, ebv;
    av.assign(a, a + n);
    bv.assign(b, b + n);
    eav.assign(ea, ea + n);
    ebv.assign(eb, eb + n);
    // An exception must not leave dot(): GCC's target_clones copies of it cannot be unwound
    // through (std::terminate). The first message is kept and rethrown by run_engine.
    try {
      return fused_block(m_, av.data(), eav.data(), bv.data(), ebv.data(), n, c, scales);
    } catch (const std::exception& e) {
      const std::lock_guard<std::mutex> lock(error_mutex_);
      if (error_.empty()) error_ = e.what();
      return std::numeric_limits<double>::quiet_NaN();
    }
  }

 public:
  // The first error a reference step raised (empty: none); run_engine throws it.
  const std::string& error() const { return error_; }

 private:

  // Steps 3-4 of fused_step_exponents with products held in V and terms summed in I.
  template <class V, class I>
  [[gnu::always_inline]] double fused_step_fast(const float* a, const std::int16_t* ea, const float* b,
                   const std::int16_t* eb, int n, double c) const {
    // 3. Alignment exponent (zero operands carry kZeroExponent, far below any product).
    int emax = INT_MIN / 2;
    if (m_.renormalise_products) {
      for (int i = 0; i < n; ++i) {
        const V p = V(a[i]) * V(b[i]);
        if (p != V(0)) emax = std::max(emax, std::ilogb(p));
      }
    } else {
      for (int i = 0; i < n; ++i) emax = std::max(emax, ea[i] + eb[i]);
      // A nonzero product's exponent is above -300; one with a zero operand is below -600.
      if (emax < Operand::kZeroExponent + 400) emax = INT_MIN / 2;
      // A zero term (a zero product, or a zero c that joins) counts at the zero exponent.
      if (zero_matters_ && emax < *m_.zero_exponent) {
        bool zero = m_.c_entry == CEntry::join && c == 0.0;
        for (int i = 0; i < n && !zero; ++i) zero = ea[i] + eb[i] < Operand::kZeroExponent + 400;
        if (zero) emax = *m_.zero_exponent;
      }
    }
    if (c != 0.0) emax = std::max({emax, exponent_of_normal(c), c_min_exponent_});
    if (emax == INT_MIN / 2) return 0.0;  // every product zero and c zero
    const int shift = m_.frac_bits - emax;
    if (shift > max_shift<V>() || shift < -max_shift<V>())
      return reference_step(a, ea, b, eb, n, c);
    const V scale = pow2<V>(shift);

    // 4. Cut every term to the grid and add exactly.
    I sum = 0;
    if (m_.term_cut == Rounding::rz) {
      for (int i = 0; i < n; ++i) sum += static_cast<I>(V(a[i]) * V(b[i]) * scale);
    } else {
      constexpr V magic = std::numeric_limits<V>::digits == 24 ? V(0x1.8p23) : V(0x1.8p52);
      for (int i = 0; i < n; ++i) {
        const V x = V(a[i]) * V(b[i]) * scale;
        sum += static_cast<I>((x + magic) - magic);
      }
    }
    if (c != 0.0) {
      const double x = c * pow2<double>(shift);
      sum += static_cast<I>(m_.term_cut == Rounding::rz ? std::trunc(x) : std::nearbyint(x));
    }
    return round_accumulator_output_fast(sum, emax - m_.frac_bits);
  }

  // Step 2 of fused_step_exponents (exact model): products on the grid 2^exact_grid in i128.
  double fused_step_exact_fast(const float* a, const float* b, int n, double c) const {
    const double to_grid = std::ldexp(1.0, -path_.exact_grid);
    i128 sum = 0;
    for (int i = 0; i < n; ++i) sum += static_cast<i128>(double(a[i]) * double(b[i]) * to_grid);
    if (c != 0.0) {
      const double t = std::ldexp(c, -path_.exact_grid);
      if (t != std::trunc(t) || std::fabs(t) >= 0x1p100) return fused_step_exact_wide(a, b, n, c);
      sum += static_cast<i128>(t);
    }
    return round_accumulator_output(m_, unrounded_from_int(sum, path_.exact_grid));
  }

  double fused_step_exact_wide(const float* a, const float* b, int n, double c) const {
    thread_local std::vector<double> av, bv;
    av.assign(a, a + n);
    bv.assign(b, b + n);
    return fused_step(m_, av.data(), bv.data(), n, c);  // exact model: exponents unused
  }

  // round_accumulator_output(m_, unrounded_from_int(sum, grid)) (steps 4-5 of
  // fused_step_exponents), by clearing double bits for an e8 output rounded rz or rne.
  template <class I>
  [[gnu::always_inline]] double round_accumulator_output_fast(I sum, int grid) const {
    if (sum == 0) return 0.0;
    constexpr I kExactInDouble = I(1) << (sizeof(I) == 4 ? 30 : 53);
    if (path_.out != OutPath::generic && sum < kExactInDouble && -sum < kExactInDouble) {
      const double v = static_cast<double>(sum) * pow2<double>(grid);
      const double mag = std::fabs(v);
      if (mag >= 0x1p-126) {
        if (mag >= 0x1p128) return std::copysign(INFINITY, v);
        std::uint64_t bits = std::bit_cast<std::uint64_t>(v);
        const std::uint64_t low = (std::uint64_t{1} << path_.out_drop) - 1;
        if (path_.out == OutPath::e8_rne) {
          const std::uint64_t sign = bits & (std::uint64_t{1} << 63);
          std::uint64_t m = bits & ~(std::uint64_t{1} << 63);
          m += ((m >> path_.out_drop) & 1) + (low >> 1);
          bits = sign | (m & ~low);
        } else {
          bits &= ~low;
        }
        const double r = std::bit_cast<double>(bits);
        return std::fabs(r) >= 0x1p128 ? std::copysign(INFINITY, r) : r;
      }
    }
    return round_accumulator_output(m_, unrounded_from_int(static_cast<i128>(sum), grid));
  }

  // floor(log2|x|) of a nonzero double that is a normal number (every fp32 value is).
  static int exponent_of_normal(double x) {
    return static_cast<int>((std::bit_cast<std::uint64_t>(x) >> 52) & 0x7ff) - 1023;
  }
  template <class V>
  static constexpr int max_shift() {
    return std::numeric_limits<V>::max_exponent - 2;
  }
  template <class V>
  static V pow2(int e) {
    if constexpr (std::numeric_limits<V>::digits == 24) {
      return std::bit_cast<float>(static_cast<std::uint32_t>(e + 127) << 23);
    } else {
      return std::bit_cast<double>(static_cast<std::uint64_t>(e + 1023) << 52);
    }
  }

  const GemmSpec& s_;
  const AccumulatorSpec& m_;
  const GemmPath path_;
  FormatSpec c_register_;
  int c_min_exponent_ = 0;
  bool fp32_output_ = false;
  bool zero_matters_ = false;  // m_.zero_exponent can change a step on these formats
  bool group_sums_fast_ = false;  // group_sum_step is exact (group_sums_fit)
  mutable std::mutex error_mutex_;
  mutable std::string error_;
};

std::vector<char> special_rows(const Operand& op) {
  std::vector<char> rows(op.rows, 0);
  if (!op.has_special) return rows;
  for (int r = 0; r < op.rows; ++r)
    for (int k = 0; k < op.cols; ++k)
      if (!std::isfinite(op.value[static_cast<std::size_t>(r) * op.cols + k])) rows[r] = 1;
  return rows;
}


// op with zero columns appended up to `cols` (+0 codes: value 0, the zero exponent).
Operand zero_padded(const Operand& op, int cols) {
  Operand o;
  o.rows = op.rows;
  o.cols = cols;
  o.format = op.format;
  o.has_special = op.has_special;
  o.value.assign(std::size_t(op.rows) * cols, 0.0f);
  o.exponent.assign(o.value.size(), Operand::kZeroExponent);
  for (int r = 0; r < op.rows; ++r) {
    const std::size_t from = std::size_t(r) * op.cols, to = std::size_t(r) * cols;
    std::copy_n(op.value.begin() + from, op.cols, o.value.begin() + to);
    std::copy_n(op.exponent.begin() + from, op.cols, o.exponent.begin() + to);
  }
  return o;
}

// With a model that unpacks its operands (AccumulatorSpec::unpack), a copy of op with the
// alignment exponents of the unpacked values; otherwise nothing (op is used as it is).
std::optional<Operand> unpacked(const AccumulatorSpec& m, const Operand& op) {
  if (!m.unpack) return std::nullopt;
  Operand u = op;
  for (std::size_t i = 0; i < u.value.size(); ++i)
    if (u.value[i] != 0.0f && std::isfinite(u.value[i]))
      u.exponent[i] = static_cast<std::int16_t>(operand_exponent(m, op.format, u.value[i]));
  return u;
}

void check_span(std::string_view what, std::size_t got, std::size_t want) {
  if (got != want)
    throw std::invalid_argument(fmt::format("{} has {} elements, expected {}", what, got, want));
}

// Scales a model applies inside the MMA must be values of its scale format (NaN included).
void check_block_scales(const GemmSpec& s, const FormatSpec& f, std::span<const float> sa,
                        std::span<const float> sb) {
  const RoundingSpec exact{Rounding::rne, Overflow::nonsat, 32};
  for (const auto& [what, v] : {std::pair{"A scales", sa}, std::pair{"B scales", sb}})
    for (std::size_t i = 0; i < v.size(); ++i) {
      const double back = decode(f, encode(v[i], f, exact));
      if (!(back == v[i] || (std::isnan(back) && std::isnan(v[i]))))
        throw std::invalid_argument(fmt::format(
            "{}[{}] = {} is not a {} value (model {} applies its scales inside the MMA)", what,
            i, format_value(v[i]), f.name, s.model.name));
    }
}

// Which rows of A and B each output dots together.
enum class Pairing {
  all_pairs,   // gemm(): output (m, n) = A row m . B row n, D is M x N
  row_by_row,  // batched_dot(): output t = A row t . B row t, D has T elements
};

// The one engine entry under gemm(), gemm_prefixes() and batched_dot(): operands unpacked
// for the model, the spec checked against the shapes, then every output through one Engine
// (or the device's). With prefixes (all_pairs only), D_prefix (P x M x N) gets the outputs
// at each prefix of K, read off the running state.
void run_engine(const GemmSpec& s, const Operand& A_in, const Operand& B_in,
                std::span<const float> C, std::span<const float> sa, std::span<const float> sb,
                std::span<float> D, Pairing pairing, std::span<const int> prefix = {},
                std::span<float> D_prefix = {}, std::span<const float> bias = {}) {
  if (A_in.rows == 0 || B_in.rows == 0) {  // an empty D, as torch.mm gives: nothing to run
    validate(s, A_in.rows, B_in.rows, A_in.cols);
    return;
  }
  if (const int Kp = padded_k(s, A_in.cols); Kp != A_in.cols && B_in.cols == A_in.cols) {
    // A kernel's masked tail loads: the chain runs on K zero-padded to its tile (the scale
    // columns already cover the padded K: ceil(K / block) of them either way).
    return run_engine(s, zero_padded(A_in, Kp), zero_padded(B_in, Kp), C, sa, sb, D, pairing,
                      prefix, D_prefix, bias);
  }
  if (needs_library_gemm(s, !bias.empty())) {  // split-K, epilogue scales, bias
    if (!prefix.empty())
      throw std::invalid_argument(
          "prefix outputs are not read with split-K, a bias or scales applied after K "
          "(scale order cublaslt with tensor or row scales)");
    return library_gemm(s, A_in, B_in, pairing == Pairing::row_by_row, C, sa, sb, bias, D,
                        [pairing](const GemmSpec& in, const Operand& a, const Operand& b,
                                  std::span<const float> c, std::span<const float> xa,
                                  std::span<const float> xb, std::span<float> d) {
                          run_engine(in, a, b, c, xa, xb, d, pairing);
                        });
  }
  const auto ua = unpacked(s.model, A_in), ub = unpacked(s.model, B_in);
  const Operand& A = ua ? *ua : A_in;
  const Operand& B = ub ? *ub : B_in;
  const bool all_pairs = pairing == Pairing::all_pairs;
  const int M = A.rows, K = A.cols;
  const int N = all_pairs ? B.rows : 1;
  if (all_pairs && B.cols != K)
    throw std::invalid_argument(fmt::format("A is {} x {} but B is {} x {}: K differs", A.rows,
                                            A.cols, B.rows, B.cols));
  if (!all_pairs && (B.rows != M || B.cols != K))
    throw std::invalid_argument(fmt::format(
        "batched_dot: A is {} x {} but B is {} x {}; both must be T x K", A.rows, A.cols,
        B.rows, B.cols));
  GemmSpec spec = s;
  spec.a_format = A.format;
  spec.b_format = B.format;
  validate(spec, M, N, K);
  const int bs = scale_block(spec);
  // Scale rows: gemm() in scale_shapes(); batched_dot() per row of A and B (a g x g block
  // of B reduces to the 1 x g scales of its one column).
  const ScaleShapes sh = all_pairs ? scale_shapes(spec, M, N, K)
                                   : ScaleShapes{std::size_t(M), bs == 0 ? 1 : ceil_div(K, bs),
                                                 std::size_t(M), bs == 0 ? 1 : ceil_div(K, bs)};
  const std::size_t outputs = std::size_t(M) * N;
  if (!C.empty()) check_span("C", C.size(), outputs);
  check_span("D", D.size(), outputs);
  if (all_pairs || spec.scaling != Scaling::none) {  // gemm() without scales: both empty
    check_span("A scales", sa.size(), sh.a_rows * sh.a_cols);
    check_span("B scales", sb.size(), sh.b_rows * sh.b_cols);
  }
  check_span("D prefixes", D_prefix.size(), prefix.size() * outputs);
  if (const auto& in = spec.model.block_scale) {
    check_block_scales(spec, in->format, sa, sb);
    if (auto folded = fold_block_scales(spec, A, B, sa, sb, sh.a_cols, sh.b_cols)) {
      if (spec.device == Device::cuda && prefix.empty())
        return folded_on_device(spec, *folded, C, sa, sb, D, !all_pairs);
      GemmSpec plain = spec;
      plain.model.block_scale.reset();
      plain.scaling = Scaling::none;
      return run_engine(plain, folded->a, folded->b, C, {}, {}, D, pairing, prefix, D_prefix);
    }
    if (spec.device == Device::cuda && prefix.empty() &&
        group_sums_on_device_fit(spec, A, B, C, sa, sb))
      return group_sums_on_device(spec, A, B, C, sa, sb, D, !all_pairs);
    spec.device = Device::cpu;  // the reference step applies the scales (GemmSpec::device)
  }
  if (spec.device == Device::cuda && !prefix.empty())
    throw std::invalid_argument(
        "prefix outputs are read off the CPU engine's running state: device cuda runs each "
        "prefix as a GEMM of its own");
  if (spec.device == Device::cuda)
    return all_pairs ? gemm_on_device(spec, A, B, C, sa, sb, D)
                     : batched_dot_on_device(spec, A, B, C, sa, sb, D);

  const Engine engine(spec, A, B);
  const auto a_special = special_rows(A), b_special = special_rows(B);
  parallel_for(outputs, spec.threads, [&](std::size_t begin, std::size_t end) {
    std::vector<float> at(prefix.size());
    for (std::size_t i = begin; i < end; ++i) {
      const std::size_t m = i / N, n = all_pairs ? i % N : i;
      ScaleRows sc;
      if (spec.scaling != Scaling::none) {
        const std::size_t brow = all_pairs && spec.scaling == Scaling::block ? n / spec.block : n;
        sc.a = sa.data() + (sh.a_rows == 1 ? 0 : m * sh.a_cols);
        sc.b = sb.data() + (sh.b_rows == 1 ? 0 : brow * sh.b_cols);
        sc.block = bs;
      }
      const std::size_t ra = m * K, rb = n * K;
      const float d = engine.dot(A.value.data() + ra, A.exponent.data() + ra,
                                 B.value.data() + rb, B.exponent.data() + rb, K,
                                 a_special[m] || b_special[n], C.empty() ? 0.0f : C[i], sc,
                                 prefix, at.data());
      D[i] = to_out_type(spec.out_type, d);
      for (std::size_t p = 0; p < prefix.size(); ++p)
        D_prefix[p * outputs + i] = to_out_type(spec.out_type, at[p]);
    }
  });
  if (!engine.error().empty()) throw std::domain_error(engine.error());
}

}  // namespace

float to_out_type(const FormatSpec& out, float v) {
  if (out.mantissa_bits == 23) return v;
  return static_cast<float>(quantize(v, out, {Rounding::rne, Overflow::nonsat, 32}));
}

void gemm(const GemmSpec& s, const Operand& A, const Operand& B, std::span<const float> C,
          std::span<const float> sa, std::span<const float> sb, std::span<float> D,
          std::span<const float> bias) {
  run_engine(s, A, B, C, sa, sb, D, Pairing::all_pairs, {}, {}, bias);
}

void gemm_prefixes(const GemmSpec& s, const Operand& A, const Operand& B,
                   std::span<const float> C, std::span<const float> sa,
                   std::span<const float> sb, std::span<const int> prefix_k, std::span<float> D,
                   std::span<float> D_prefix) {
  int last = 0;
  for (const int k : prefix_k) {
    const int K = A.cols;
    if (k <= last || k > K)
      throw std::invalid_argument(fmt::format(
          "prefix_k {} after {}: prefixes must increase and lie in 1..K = {}", k, last, K));
    GemmSpec at_k = s;
    at_k.a_format = A.format;
    at_k.b_format = B.format;
    validate(at_k, A.rows, B.rows, k);
    last = k;
  }
  run_engine(s, A, B, C, sa, sb, D, Pairing::all_pairs, prefix_k, D_prefix);
}

void gemm(const GemmSpec& s, int M, int N, int K, std::span<const std::uint8_t> A,
          std::span<const std::uint8_t> B, std::span<const float> C, std::span<const float> sa,
          std::span<const float> sb, std::span<float> D, std::span<const float> bias) {
  validate(s, M, N, K);
  const Operand a = decode_operand(s.a_format, M, K, A);
  const Operand b = decode_operand(s.b_format, N, K, B);
  gemm(s, a, b, C, sa, sb, D, bias);
}

void batched_dot(const GemmSpec& s, const Operand& A, const Operand& B,
                 std::span<const float> C, std::span<const float> sa, std::span<const float> sb,
                 std::span<float> D) {
  run_engine(s, A, B, C, sa, sb, D, Pairing::row_by_row);
}

}  // namespace fp8sim
