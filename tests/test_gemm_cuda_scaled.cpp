// test_gemm_cuda_scaled: the reference step with block scales on the CUDA engine
// (scaled_reference_on_device, cuda/engine/gemm_engine_scaled.cuh) against the CPU engine's
// reference step (Engine::scaled_step -> fused_step_exponents with StepScales), bit for bit,
// over gemm_cuda_scaled_util.hpp's grid; gemm() with device cuda takes this route for fp32
// operands (the dispatcher no longer falls back to the CPU); and `fp8sim analyze` with device
// cuda writes device cpu's CSVs.
// FP8SIM_SEED overrides the seed; the first mismatch is printed as one line.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/analyze.hpp"
#include "base/rng.hpp"
#include "gemm/gemm.hpp"
#include "gemm/gemm_device.hpp"
#include "gemm_cuda_scaled_util.hpp"
#include "kernel/recipe.hpp"

using namespace fp8sim;
using namespace fp8sim::gpu_test;

namespace {

int scaled_reference_test() {
  Tally t;
  std::size_t errors = 0;
  scaled_grid([](const GemmSpec& s, const Operand& A, const Operand& B, std::span<const float> C,
                 std::span<const float> sa, std::span<const float> sb, std::span<float> D,
                 bool batched) { scaled_reference_on_device(s, A, B, C, sa, sb, D, batched); },
              t, errors);
  std::uint64_t stream = 19000;
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
