// engine_cpu: the CPU engine. Integer inner loop for the common models; the reference fused
// step (sim/accumulator/step.cpp) for everything else, so both always give the same bits.
//
// Fast clones in this file, each named after the function it clones and pinned to it bit
// for bit by tests/test_gemm_engine.cpp ("engine equals the reference step over a grid of
// models", "exact model equals the Boost exact reference"):
//   fused_step_fast                  fused_step_exponents steps 3-4 (align, cut, sum) in int32/int64
//   fused_step_exact_fast            fused_step_exponents step 2 (exact model) in 128-bit integers
//   round_accumulator_output_fast    round_accumulator_output for 8-bit-exponent outputs, rz/rne
//   the fmaf chain in Engine::dot    the exact model with group 1 and an fp32 rne output
// Engine::dot_many runs dot()'s steps for several outputs at once, interleaved (the same
// functions in the same order per output, so the same bits), where dot_many_fits.
// choose_gemm_path (gemm_path.hpp) decides which of them a model may take.
#include "gemm/engine_cpu.hpp"

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

#include "base/parallel.hpp"
#include "gemm/gemm_path.hpp"

namespace fp8sim {

namespace {

using i128 = __int128;

// Engine::dot is compiled for AVX2 and a default target, one picked at load time (an ifunc).
// ThreadSanitizer cannot run an ifunc resolver before it starts: its build has one target.
#if defined(__SANITIZE_THREAD__)
#define FP8SIM_TARGET_CLONES
#else
#define FP8SIM_TARGET_CLONES [[gnu::target_clones("avx2", "default")]]
#endif
// Clang (14, the sanitizer and fuzz builds) cannot multiversion a function template: there
// Engine::dot_many has the default target only (the same bits, slower).
#if defined(__clang__)
#define FP8SIM_TARGET_CLONES_TEMPLATE
#else
#define FP8SIM_TARGET_CLONES_TEMPLATE FP8SIM_TARGET_CLONES
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
    auto promote = [&](float main, double acc, int k0) { return promoted(main, acc, k0, sc); };
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

  // Whether dot_many gives dot()'s outputs: no prefixes, steps of the step loop (not the fmaf
  // chain, nor block scales inside the MMA).
  bool dot_many_fits(std::span<const int> prefix) const {
    return prefix.empty() && !m_.block_scale && path_.step != StepPath::fmaf_chain;
  }

  // dot() (without prefixes) of J outputs at once, output j on rows a[j] and b[j]: every
  // output's steps and promotions as dot() runs them, the J chains interleaved step by step
  // so that the CPU overlaps their latencies. Where dot_many_fits.
  template <int J>
  FP8SIM_TARGET_CLONES_TEMPLATE void dot_many(const float* const* a, const std::int16_t* const* ea,
                                     const float* const* b, const std::int16_t* const* eb,
                                     int K, const bool* special, const float* c,
                                     const ScaleRows* sc, float* out) const {
    const int chunk = s_.promote_every == 0 ? K : s_.promote_every;
    const int g = m_.group == 0 ? chunk : step_products(m_);
    float main[J];
    for (int j = 0; j < J; ++j) main[j] = s_.promote_every == 0 ? -0.0f : 0.0f;
    for (int k0 = 0; k0 < K; k0 += chunk) {
      const int kend = std::min(K, k0 + chunk);
      double acc[J];
      for (int j = 0; j < J; ++j) acc[j] = k0 == 0 ? c_in(c[j]) : 0.0;
      for (int k = k0; k < kend; k += g) {
        const int n = std::min(g, kend - k);
#pragma GCC unroll 8
        for (int j = 0; j < J; ++j)
          acc[j] = step(a[j] + k, ea[j] + k, b[j] + k, eb[j] + k, n, acc[j], special[j]);
      }
      for (int j = 0; j < J; ++j) main[j] = promoted(main[j], acc[j], k0, sc[j]);
    }
    for (int j = 0; j < J; ++j) out[j] = main[j];
  }

 private:
  // A chunk's result acc promoted into the FP32 main accumulator, with its scales (sc).
  [[gnu::always_inline]] float promoted(float main, double acc, int k0, const ScaleRows& sc) const {
    const float part = static_cast<float>(acc);  // exact: outputs are at most fp32
    if (sc.a == nullptr || m_.block_scale) return main + part;  // scales in the MMA
    const int blk = sc.block == 0 ? 0 : k0 / sc.block;
    const float sa = sc.a[blk], sb = sc.b[blk];
    if (s_.order == ScaleOrder::triton) return std::fmaf(part * sa, sb, main);
    return std::fmaf(sa * sb, part, main);  // deepgemm, cublaslt (scales after K: gemm_split)
  }

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
        // A step of 32 products (FP8 MMAs) with its loops' trip count known at compile time.
        case StepPath::int32_float:
          return n == 32 ? fused_step_fast<float, std::int32_t, 32>(a, ea, b, eb, n, c)
                         : fused_step_fast<float, std::int32_t>(a, ea, b, eb, n, c);
        case StepPath::int64_double:
          return n == 32 ? fused_step_fast<double, std::int64_t, 32>(a, ea, b, eb, n, c)
                         : fused_step_fast<double, std::int64_t>(a, ea, b, eb, n, c);
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
  // finite operands and c, as step_terms (sim/accumulator/step.cpp) forms its terms: each group's
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
    // through (std::terminate). The first message is kept and rethrown by cpu_engine.
    try {
      return fused_block(m_, av.data(), eav.data(), bv.data(), ebv.data(), n, c, scales);
    } catch (const std::exception& e) {
      const std::lock_guard<std::mutex> lock(error_mutex_);
      if (error_.empty()) error_ = e.what();
      return std::numeric_limits<double>::quiet_NaN();
    }
  }

 public:
  // The first error a reference step raised (empty: none); cpu_engine throws it.
  const std::string& error() const { return error_; }

 private:

  // Steps 3-4 of fused_step_exponents with products held in V and terms summed in I; Fixed:
  // n where it is known at compile time (0: not).
  template <class V, class I, int Fixed = 0>
  [[gnu::always_inline]] double fused_step_fast(const float* a, const std::int16_t* ea, const float* b,
                   const std::int16_t* eb, int n_in, double c) const {
    const int n = Fixed != 0 ? Fixed : n_in;
    // 3. Alignment exponent (zero operands carry kZeroExponent, far below any product).
    int emax = INT_MIN / 2;
    if (m_.renormalise_products) {
      for (int i = 0; i < n; ++i) {
        const V p = V(a[i]) * V(b[i]);
        if (p != V(0)) emax = std::max(emax, std::ilogb(p));
      }
    } else {
      // In int16 lanes (twice as many per vector): exponent sums lie within +-2400.
      std::int16_t e16 = INT16_MIN;
      for (int i = 0; i < n; ++i)
        e16 = std::max(e16, static_cast<std::int16_t>(ea[i] + eb[i]));
      emax = e16;
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

}  // namespace

void cpu_engine(const GemmSpec& spec, const Operand& A, const Operand& B, std::span<const float> C,
                std::span<const float> sa, std::span<const float> sb, const ScaleShapes& sh,
                std::span<float> D, Pairing pairing, std::span<const int> prefix,
                std::span<float> D_prefix) {
  const bool all_pairs = pairing == Pairing::all_pairs;
  const int M = A.rows, K = A.cols;
  const int N = all_pairs ? B.rows : 1;
  const std::size_t outputs = std::size_t(M) * N;
  const int bs = scale_block(spec);
  const Engine engine(spec, A, B);
  const auto a_special = special_rows(A), b_special = special_rows(B);
  const auto scales_of = [&](std::size_t m, std::size_t n) {
    ScaleRows sc;
    if (spec.scaling != Scaling::none) {
      const std::size_t brow = all_pairs && spec.scaling == Scaling::block ? n / spec.block : n;
      sc.a = sa.data() + (sh.a_rows == 1 ? 0 : m * sh.a_cols);
      sc.b = sb.data() + (sh.b_rows == 1 ? 0 : brow * sh.b_cols);
      sc.block = bs;
    }
    return sc;
  };
  constexpr int J = 4;  // outputs per dot_many
  const bool many = engine.dot_many_fits(prefix);
  parallel_for(outputs, spec.threads, [&](std::size_t begin, std::size_t end) {
    std::vector<float> at(prefix.size());
    std::size_t i = begin;
    for (; many && i + J <= end; i += J) {
      const float* a[J];
      const float* b[J];
      const std::int16_t* ea[J];
      const std::int16_t* eb[J];
      bool special[J];
      float c[J], d[J];
      ScaleRows sc[J];
      for (int j = 0; j < J; ++j) {
        const std::size_t o = i + j, m = o / N, n = all_pairs ? o % N : o;
        a[j] = A.value.data() + m * K;
        ea[j] = A.exponent.data() + m * K;
        b[j] = B.value.data() + n * K;
        eb[j] = B.exponent.data() + n * K;
        special[j] = a_special[m] || b_special[n];
        c[j] = C.empty() ? 0.0f : C[o];
        sc[j] = scales_of(m, n);
      }
      engine.dot_many<J>(a, ea, b, eb, K, special, c, sc, d);
      for (int j = 0; j < J; ++j) D[i + j] = to_out_type(spec.out_type, d[j]);
    }
    for (; i < end; ++i) {
      const std::size_t m = i / N, n = all_pairs ? i % N : i;
      const ScaleRows sc = scales_of(m, n);
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


}  // namespace fp8sim
