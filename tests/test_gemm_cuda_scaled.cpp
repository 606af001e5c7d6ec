// test_gemm_cuda_scaled: the reference step with block scales on the CUDA engine
// (scaled_reference_on_device, cuda/engine/gemm_engine_scaled.cuh) against the CPU engine's
// reference step (Engine::scaled_step -> fused_step_exponents with StepScales), bit for bit.
//
// Every block-scaled preset (kind::mxf8f6f4, mxf4, mxf4nvf4 with UE8M0 and UE4M3 scales) and
// custom block-scaled models that exercise the step's other parameters (lanes, c added after,
// cuts rne and rd, renormalised products, product overflow, no zero exponent, signed zeros,
// narrower outputs, other group sums and scale blocks), on operands the group-sum step and
// the folding do not take: fp32 and bf16 values against codes (as `fp8sim analyze`'s
// unquantised-operand stages run them), both unquantised, and codes whose group sums do not
// fit (e5m2); values near 1 and adversarial (each row one kind: windowed random values, the
// largest magnitudes, mostly zeros of both signs, the smallest magnitudes; Inf and NaN in
// some configurations), scales near 1 or over every code (zeros, NaN, the extremes), with and
// without C (adversarial C: Inf, NaN, zeros, subnormals), ragged shapes, K not a multiple of
// the promotion chunk, GEMMs and batched dot products. Where the CPU engine throws (a group
// sum not exact in a double, a term beyond 128 bits), the CUDA engine must throw the same
// message. Then gemm() with device cuda takes this route for fp32 operands (the dispatcher no
// longer falls back to the CPU) with the same bits.
// FP8SIM_SEED overrides the seed; the first mismatch is printed as one line.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/analyze.hpp"
#include "base/rng.hpp"
#include "gemm/gemm.hpp"
#include "kernel/recipe.hpp"
#include "gemm/gemm_device.hpp"
#include "gemm_cuda_util.hpp"

using namespace fp8sim;
using namespace fp8sim::gpu_test;

namespace {

// The block-scaled models: every preset, then custom ones.
std::vector<AccumulatorSpec> scaled_models() {
  std::vector<AccumulatorSpec> v;
  for (const auto& p : accumulator_presets())
    if (p.block_scale) v.push_back(p);
  for (const char* name : {
           "custom:group=32,frac=25,out=24,zero=-133,scale=ue8m0:32,cut=rne",
           "custom:group=32,frac=20,out=24,zero=-133,scale=ue8m0:32,cut=rd,c=add,lanes=2",
           "custom:group=16,frac=30,out=24,scale=ue8m0:16,renorm=1,zero=none",
           "custom:group=32,frac=25,out=11,outround=rne,scale=ue8m0:32,overflow=1,zero=-20",
           "custom:group=64,frac=35,out=24,zero=-139,groupsum=8,scale=ue4m3:16,signedzero=1",
           "custom:group=64,frac=40,out=24,groupsum=16,scale=ue8m0:32,c=add,lanes=4,cut=rne",
           "custom:group=16,frac=12,outfmt=fp16,outround=rne,groupsum=16,scale=ue4m3:16,zero=-30",
           "custom:group=32,frac=62,out=24,outround=rne,groupsum=4,scale=ue8m0:32,lanes=2,c=add"})
    v.push_back(accumulator_by_name(name));
  return v;
}

// Operands of format f (rows x cols): values near 1 (`adversarial` false), else each row one
// kind by row % 4 (adversarial_code_values' kinds, with its random-code rows replaced by codes
// whose exponents lie in a window, so that the group sums of most GEMMs stay exact). fp32
// values are drawn as bf16 codes widened with random low bits. Inf and NaN at `special` per
// mille.
Operand operand(const FormatSpec& f, int rows, int cols, std::uint64_t stream, bool adversarial,
                int special) {
  const bool fp32 = f.name == "fp32";
  const FormatSpec& base = fp32 ? format_by_name("bf16") : f;
  std::vector<std::uint32_t> codes =
      adversarial ? adversarial_code_values(base, rows, cols, stream, special)
                  : std::vector<std::uint32_t>(std::size_t(rows) * cols, 0);
  const int e_bits = base.exponent_bits, m_bits = base.mantissa_bits;
  const std::uint32_t bias = (1u << (e_bits - 1)) - 1;
  for (int r = 0; r < rows; ++r) {
    if (adversarial && r % 4 != 0) continue;
    for (int k = 0; k < cols; ++k) {
      const std::size_t i = std::size_t(r) * cols + k;
      const std::uint64_t x = random_u64(seed(), stream + 1, i);
      // Exponent fields bias - 3 .. bias + 3 (a window of 7 binades) within the normal
      // range, either sign.
      const int top = (1 << e_bits) - 2;
      const std::uint32_t e =
          std::uint32_t(std::clamp(int(bias) - 3 + int(x % 7), 1, std::max(1, top)));
      codes[i] = ((x >> 8) & 1) << (e_bits + m_bits) | e << m_bits |
                 std::uint32_t((x >> 16) % (1u << m_bits));
    }
  }
  Operand op = decode_operand(base, rows, cols, std::span<const std::uint32_t>(codes));
  if (!fp32) return op;
  std::vector<double> v(op.value.begin(), op.value.end());
  for (std::size_t i = 0; i < v.size(); ++i) {  // low bits below bf16's (finite normals only)
    const float x = op.value[i];
    if (!std::isfinite(x) || x == 0.0f || std::fabs(x) < 0x1p-126f) continue;
    const std::uint32_t low = std::uint32_t(random_u64(seed(), stream + 2, i) % (1u << 16));
    const float w = std::bit_cast<float>(std::bit_cast<std::uint32_t>(x) | low);
    v[i] = std::isfinite(w) ? w : x;
  }
  return operand_from_values(format_by_name("fp32"), rows, cols, v);
}

// Group sums whose partial sums are not exact but whose whole sum is (the device's slower
// exact paths): in every fourth row of A (fp32), each run of 4 elements k becomes
// (t, X, -X, t) with X = A[k+1] 2^s and t = A[k] 2^-s (s 30: the products span about 60 bits;
// 50 in every eighth row: about 100 bits), and every row of B gets B[k+2] = B[k+1], so the
// products X B[k+1] cancel.
void paired(Operand& B);
void cancelling(Operand& A, Operand& B) {
  const int K = A.cols;
  std::vector<double> a(A.value.begin(), A.value.end()), b(B.value.begin(), B.value.end());
  for (int r = 0; r < A.rows; r += 4)
    for (int k = 0; k + 3 < K; k += 4) {
      double* x = a.data() + std::size_t(r) * K + k;
      const int sh = r % 8 == 0 ? 30 : 50;
      if (!std::isfinite(x[0] + x[1] + x[3])) continue;
      x[1] = std::ldexp(x[1], sh);
      x[2] = -x[1];
      x[0] = std::ldexp(x[0], -sh);
      x[3] = std::ldexp(x[3], -sh);
    }
  A = operand_from_values(A.format, A.rows, K, a);
  paired(B);
}
void paired(Operand& B) {
  const int K = B.cols;
  std::vector<double> b(B.value.begin(), B.value.end());
  for (int r = 0; r < B.rows; ++r)
    for (int k = 0; k + 3 < K; k += 4) b[std::size_t(r) * K + k + 2] = b[std::size_t(r) * K + k + 1];
  B = operand_from_values(B.format, B.rows, K, b);
}

// n block scales of format sf: near 1, or (adversarial) every code (NaN included, rarely),
// a third of them among the lowest codes (zeros, subnormals, 2^-127).
std::vector<float> scales(const FormatSpec& sf, std::size_t n, std::uint64_t stream,
                          bool adversarial) {
  if (!adversarial) return block_scales_near_one(sf, n, stream);
  std::vector<float> v(n);
  const std::uint32_t codes = code_count(sf);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t r = random_u64(seed(), stream, i);
    std::uint32_t c = std::uint32_t(r % codes);
    if ((r >> 32) % 3 == 0) c = std::uint32_t((r >> 40) % 8);
    if (std::isnan(decode(sf, c)) && (r >> 48) % 8 != 0) c = codes / 2;  // NaN: 1 in 8 draws
    v[i] = static_cast<float>(decode(sf, c));
  }
  return v;
}

struct Outcome {
  std::vector<float> d;
  std::string error;  // the engine's std::domain_error, if any
};

template <class Run>
Outcome outcome(std::size_t n, Run run) {
  Outcome o;
  o.d.assign(n, 0.0f);
  try {
    run(o.d);
  } catch (const std::domain_error& e) {
    o.error = e.what();
  }
  return o;
}

// Both engines' outcomes: the same error, or no error and the same bits.
void tally_outcomes(const Outcome& cpu, const Outcome& gpu, int N, Tally& t,
                    const std::string& what, std::size_t& errors) {
  if (!cpu.error.empty() || !gpu.error.empty()) {
    ++t.configs;
    ++errors;
    if (cpu.error != gpu.error && t.bad++ == 0)
      t.first = fmt::format("seed={} {}: cpu error '{}' cuda error '{}'", seed(), what,
                            cpu.error, gpu.error);
    return;
  }
  tally(cpu.d, gpu.d, N, t, what);
}

int scaled_reference_test() {
  Tally t;
  std::size_t errors = 0;
  std::uint64_t stream = 9000;
  std::size_t config = 0;
  // Operand formats (A, B): unquantised against codes both ways, both unquantised, and codes
  // whose group sums do not fit.
  const char* pairs[][2] = {{"fp32", "code"}, {"code", "fp32"}, {"bf16", "code"},
                            {"code", "bf16"}, {"fp32", "fp32"}, {"e5m2", "e5m2"}};
  for (const AccumulatorSpec& model : scaled_models()) {
    const bool fp4 = model.group_sum > 1;
    const FormatSpec code = format_by_name(fp4 ? "e2m1" : "e4m3");
    for (const auto& pair : pairs) {
      for (const bool adversarial : {false, true}) {
        GemmSpec s;
        s.model = model;
        use_model_block_scales(s);
        s.out_type = format_by_name(config % 3 == 1 ? "bf16" : "fp32");
        const int g = step_products(model);
        // Promotion never, every step, or every two steps with K = 5 steps (a last chunk of
        // one step: K not a multiple of the chunk).
        const int promote[] = {0, g, 2 * g};
        s.promote_every = promote[config % 3];
        const int steps = config % 3 == 2 ? 5 : 1 + int(config % 4);
        const int K = steps * g;
        const int M = config % 2 ? 37 : 24, N = config % 2 ? 29 : 40;
        const int special = adversarial && config % 4 == 3 ? 20 : 0;
        const auto fmt_of = [&](const char* name) {
          return std::string(name) == "code" ? code : format_by_name(name);
        };
        const FormatSpec fa = fmt_of(pair[0]), fb = fmt_of(pair[1]);
        Operand A = operand(fa, M, K, stream, adversarial, special);
        Operand B = operand(fb, N, K, stream + 3, adversarial, special);
        Operand Bt = operand(fb, M, K, stream + 6, adversarial, special);
        if (fa.name == "fp32" && fb.name == "fp32" && !adversarial) {
          cancelling(A, B);
          paired(Bt);
        }
        stream += 10;
        const FormatSpec& sf = model.block_scale->format;
        const ScaleShapes sh = scale_shapes(s, M, N, K);
        const auto sa = scales(sf, sh.a_rows * sh.a_cols, stream++, adversarial);
        const auto sb = scales(sf, sh.b_rows * sh.b_cols, stream++, adversarial);
        std::vector<float> C;
        if (config % 3 != 0)
          C = adversarial ? adversarial_c(std::size_t(M) * N, stream++)
                          : random_floats(std::size_t(M) * N, stream++, -20, 12);
        const std::string what = fmt::format(
            "model={} a={} b={} M={} N={} K={} promote={} out={} C={} adversarial={} "
            "special={}", model.name, fa.name, fb.name, M, N, K, s.promote_every,
            s.out_type.name, C.empty() ? 0 : 1, adversarial, special);
        // gemm(): the CPU engine against the CUDA engine's reference step with block scales.
        // On one thread the CPU engine's error (where steps raise several) is the first
        // output's, which the CUDA engine reports.
        GemmSpec cpu_spec = s;
        cpu_spec.device = Device::cpu;
        cpu_spec.threads = 1;
        const std::size_t outputs = std::size_t(M) * N;
        const Outcome cpu = outcome(outputs, [&](std::span<float> d) {
          gemm(cpu_spec, A, B, C, sa, sb, d);
        });
        const Outcome gpu = outcome(outputs, [&](std::span<float> d) {
          scaled_reference_on_device(s, A, B, C, sa, sb, d, false);
        });
        tally_outcomes(cpu, gpu, N, t, what, errors);
        // batched_dot(): row t of A against row t of Bt.
        const std::size_t per_row = std::size_t(K) / s.mx_block;
        const auto ta = scales(sf, M * per_row, stream++, adversarial);
        const auto tb = scales(sf, M * per_row, stream++, adversarial);
        std::vector<float> Ct;
        if (!C.empty()) Ct.assign(C.begin(), C.begin() + M);
        const Outcome tcpu = outcome(M, [&](std::span<float> d) {
          batched_dot(cpu_spec, A, Bt, Ct, ta, tb, d);
        });
        const Outcome tgpu = outcome(M, [&](std::span<float> d) {
          scaled_reference_on_device(s, A, Bt, Ct, ta, tb, d, true);
        });
        tally_outcomes(tcpu, tgpu, 1, t, what + " batched", errors);
        ++config;
      }
    }
  }
  // gemm() with device cuda routes an unquantised operand against a block-scaled model here
  // (as fp8sim analyze's quant_a / quant_b stages do: scales 1 on the fp32 side).
  for (const AccumulatorSpec& model : scaled_models()) {
    if (!scaled_reference_on_device_fit(model)) continue;
    GemmSpec s;
    s.model = model;
    use_model_block_scales(s);
    s.out_type = format_by_name("fp32");
    const int M = 48, N = 40, K = 4 * step_products(model);
    const FormatSpec code = format_by_name(model.group_sum > 1 ? "e2m1" : "e4m3");
    const Operand A = operand(format_by_name("fp32"), M, K, stream, false, 0);
    const Operand B = operand(code, N, K, stream + 3, false, 0);
    stream += 10;
    const ScaleShapes sh = scale_shapes(s, M, N, K);
    const std::vector<float> ones(sh.a_rows * sh.a_cols, 1.0f);
    const auto sb = scales(model.block_scale->format, sh.b_rows * sh.b_cols, stream++, false);
    const std::size_t outputs = std::size_t(M) * N;
    GemmSpec cpu_spec = s;
    cpu_spec.device = Device::cpu;
    cpu_spec.threads = 1;
    s.device = Device::cuda;
    const Outcome cpu = outcome(outputs, [&](std::span<float> d) {
      gemm(cpu_spec, A, B, {}, ones, sb, d);
    });
    const Outcome gpu = outcome(outputs, [&](std::span<float> d) {
      gemm(s, A, B, {}, ones, sb, d);
    });
    tally_outcomes(cpu, gpu, N, t, fmt::format("gemm() device cuda model={} a=fp32 b={} M={} "
                                               "N={} K={}", model.name, code.name, M, N, K),
                   errors);
  }
  fmt::print("block-scaled reference step: {} configurations ({} with an error on both "
             "engines), {} outputs, {} mismatches\n", t.configs, errors, t.outputs, t.bad);
  if (t.bad) fmt::print("FAIL: first mismatch: {}\n", t.first);
  // The grid must mostly compare bits (not only errors), and cover enough outputs.
  if (errors * 2 > t.configs || t.outputs < 50000) {
    fmt::print("FAIL: too few configurations compared bit for bit ({} of {} errored, {} "
               "outputs)\n", errors, t.configs, t.outputs);
    return 1;
  }
  return t.bad ? 1 : 0;
}

// fp8sim analyze on a small layer (bf16 activations with outlier channels, Gaussian bf16
// weights) with device cuda against device cpu: the same three CSVs, byte for byte, for every
// named recipe (nvfp4's unquantised-operand stages run the reference step with block scales
// on the GPU).
int analyze_test() {
  const int M = 48, N = 40, K = 256;
  const FormatSpec bf16 = format_by_name("bf16");
  const auto layer = [&](int rows, std::uint64_t stream, double scale, bool outliers) {
    InputMatrix x{rows, K, "bf16", {}};
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < K; ++k) {
        const std::size_t i = std::size_t(r) * K + k;
        // A Gaussian from two uniforms (Box-Muller), rounded to bf16.
        const double u1 = (double(random_u64(seed(), stream, 2 * i) >> 11) + 1) * 0x1p-53;
        const double u2 = double(random_u64(seed(), stream, 2 * i + 1) >> 11) * 0x1p-53;
        double v = scale * std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
        if (outliers && k % 37 == 5) v *= 30;
        x.values.push_back(decode(bf16, encode(v, bf16, {Rounding::rne, Overflow::nonsat, 32})));
      }
    return x;
  };
  const InputMatrix A = layer(M, 9900, 1.0, true), B = layer(N, 9901, 0.02, false);
  AnalyzeSpec spec;
  for (const auto& r : named_recipes()) spec.recipes.push_back(recipe_by_name(r.name));
  spec.pairs = 500;
  spec.skip_invalid = true;
  std::string csv[2];
  for (const Device d : {Device::cpu, Device::cuda}) {
    spec.device = d;
    const AnalyzeResult r = analyze(spec, A, B);
    std::ostringstream out;
    write_analyze_csv(out, r);
    write_analyze_rows_csv(out, r);
    write_analyze_pairs_csv(out, r);
    for (const RecipeResult& x : r.recipes)
      for (std::size_t st = 0; st < x.stages.size(); ++st)
        out << x.recipe.name << " " << kAnalyzeStages[st] << " unmeasured: "
            << x.stages[st].unmeasured << "\n";
    csv[d == Device::cuda] = out.str();
  }
  fmt::print("analyze with device cuda and cpu: {} recipes, {} bytes of CSV, {}\n",
             spec.recipes.size(), csv[0].size(), csv[0] == csv[1] ? "identical" : "DIFFERENT");
  if (csv[0] == csv[1]) return 0;
  std::size_t at = 0;
  while (at < csv[0].size() && at < csv[1].size() && csv[0][at] == csv[1][at]) ++at;
  const std::size_t line = csv[0].rfind('\n', at) == std::string::npos ? 0 : csv[0].rfind('\n', at) + 1;
  fmt::print("FAIL: seed={} first difference at byte {}: cpu '{}' cuda '{}'\n", seed(), at,
             csv[0].substr(line, csv[0].find('\n', at) - line),
             csv[1].substr(line, csv[1].find('\n', at) - line));
  return 1;
}

}  // namespace

TEST_CASE("fp8sim analyze with device cuda writes device cpu's CSVs", "[gpu]") {
  CHECK(analyze_test() == 0);
}

TEST_CASE("the reference step with block scales on the CUDA engine equals the CPU engine",
          "[gpu]") {
  CHECK(scaled_reference_test() == 0);
}
