// cmd_gemm: `fp8sim gemm` (the GEMM engine on .npy files) and `fp8sim models`.
#include <fmt/format.h>

#include <cstdio>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "accumulator/accumulator.hpp"
#include "kernel/cublaslt_plan.hpp"
#include "commands.hpp"
#include "cli/options.hpp"
#include "gemm/gemm.hpp"
#include "kernel/gemm_inputs.hpp"
#include "kernel/kernel.hpp"
#include "kernel/triton_config.hpp"
#include "io/npy.hpp"

namespace fp8sim::cli {
namespace {

struct GemmArgs : GemmOptions {
  std::string a, b, c, a_scales, b_scales, bias;
  std::string out = "D.npy";
  bool split_k_given = false;
};

// The torch._scaled_mm call a cuBLASLt kernel preset runs (for its recorded plan).
ScaledMmCall scaled_mm_call(const GemmSpec& s, const std::string& kernel, std::size_t M,
                            std::size_t N, std::size_t K, bool bias) {
  if (kernel != "cublaslt" && kernel != "cublaslt-fast-accum")
    throw std::invalid_argument(
        "--gpu looks up cuBLASLt's split-K (--kernel cublaslt or cublaslt-fast-accum) or a "
        "server's Triton config (a Triton --kernel with --triton-config vllm or sglang)");
  ScaledMmCall c;
  c.m = int(M);
  c.n = int(N);
  c.k = int(K);
  c.out = s.out_type.mantissa_bits == 23 ? "f32" : s.out_type.exponent_bits == 8 ? "bf16" : "f16";
  c.fast = kernel == "cublaslt-fast-accum";
  c.scale = std::string(to_string(s.scaling));
  c.bias = bias;
  return c;
}

// Scale values from a .npy whose header was checked: float32 values, or for MX uint8 codes.
std::vector<float> scale_array(NpyReader& r, const GemmSpec& s, std::size_t rows,
                               std::size_t cols) {
  const NpyArray a = r.read();
  return scale_values(r.path(), {a.descr, a.shape, a.data.data()}, s.scaling, rows, cols,
                      s.mx_scale);
}

void run_gemm(const GemmArgs& g) {
  GemmSpec s = gemm_spec(g, !g.a_scales.empty(), !g.b_scales.empty());
  const bool triton = is_triton_kernel(g.kernel);
  if (triton && !g.gpu.empty() && g.triton_config != "vllm" && g.triton_config != "sglang")
    throw std::invalid_argument(
        "--gpu with a Triton kernel names the GPU whose server config is looked up: give "
        "--triton-config vllm or sglang, or drop --gpu");
  if (!triton && !g.gpu.empty() && g.split_k_given)
    throw std::invalid_argument("--gpu looks the split up: drop --split-k, or --gpu");
  // 1. Both headers and every check on them before any data is read.
  NpyReader ra(g.a), rb(g.b);
  ra.expect("|u1", {0, 0});
  rb.expect("|u1", {0, 0});
  const std::size_t M = ra.shape()[0], K = ra.shape()[1], N = rb.shape()[0];
  check_gemm_problem(g.a, g.b, M, K, N, rb.shape()[1]);
  if (const auto p = apply_triton_config(s, g, int(M), int(N), int(K)))
    std::fprintf(stderr, "fp8sim: triton config %s, %s (%s)\n", to_string(p->config).c_str(),
                 p->instruction.c_str(), p->config_source.c_str());
  if (!triton && !g.gpu.empty()) {
    const CublasltPlan p =
        cublaslt_plan(g.gpu, scaled_mm_call(s, g.kernel, M, N, K, !g.bias.empty()));
    s.split_k = p.split_k;
    std::fprintf(stderr, "fp8sim: plan: %s\n", describe(p).c_str());
  }
  validate(s, int(M), int(N), int(K));
  std::optional<NpyReader> rc, rbias, rsa, rsb;
  if (!g.c.empty()) rc.emplace(g.c).expect_exactly("<f4", {M, N});
  if (!g.bias.empty()) rbias.emplace(g.bias).expect_exactly("<f4", {N});
  ScaleShapes sh{};
  if (s.scaling != Scaling::none) {
    sh = scale_shapes(s, int(M), int(N), int(K));
    check_scale_header(g.a_scales, rsa.emplace(g.a_scales).descr(), rsa->shape(), s.scaling,
                       sh.a_rows, sh.a_cols);
    check_scale_header(g.b_scales, rsb.emplace(g.b_scales).descr(), rsb->shape(), s.scaling,
                       sh.b_rows, sh.b_cols);
  }
  // 2. The data.
  const NpyArray a = ra.read(), b = rb.read();
  std::vector<float> C, sa, sb, bias;
  if (rc) C = rc->read().as<float>();
  if (rsa) sa = scale_array(*rsa, s, sh.a_rows, sh.a_cols);
  if (rsb) sb = scale_array(*rsb, s, sh.b_rows, sh.b_cols);
  if (rbias) bias = rbias->read().as<float>();
  std::vector<float> D(M * N);
  gemm(s, int(M), int(N), int(K), a.as<std::uint8_t>(), b.as<std::uint8_t>(), C, sa, sb, D,
       bias);
  write_npy(g.out, "<f4", {M, N}, D.data(), D.size() * sizeof(float));
}

}  // namespace

void add_gemm_commands(CLI::App& app) {
  auto g = std::make_shared<GemmArgs>();
  auto* cmd = app.add_subcommand(
      "gemm", "D = A * B^T through a tensor-core accumulator model (A: M x K, B: N x K codes)");
  cmd->add_option("--a", g->a, "A.npy: uint8 codes, shape (M, K), C order")->required();
  cmd->add_option("--b", g->b, "B.npy: uint8 codes, shape (N, K) (cuBLASLt TN)")->required();
  cmd->add_option("--c", g->c, "C.npy: float32 (M, N), enters the first K chunk");
  cmd->add_option("--a-format", g->a_format, "Format of A's codes")->capture_default_str();
  cmd->add_option("--b-format", g->b_format, "Format of B's codes")->capture_default_str();
  cmd->add_option("--model", g->model, "Accumulator model (see `fp8sim models`)")
      ->capture_default_str();
  cmd->add_option("--kernel", g->kernel,
                  "A kernel preset (see `fp8sim kernels`): sets the model, promotion, scale "
                  "order and split alignment as that kernel does");
  add_integer_option(cmd, "--promote-every", g->promote_every,
                     "K elements per chunk promoted to FP32 (0 = never)", 0, limits::kMaxDim);
  cmd->add_option("--a-scales", g->a_scales,
                  "SA.npy: float32 scales (MX: or uint8 codes of the MX scale format)");
  cmd->add_option("--b-scales", g->b_scales,
                  "SB.npy: float32 scales (MX: or uint8 codes of the MX scale format)");
  cmd->add_option("--scaling", g->scaling,
                  "none|tensor|row|block|mx, or a quantiser's name that carries its block "
                  "(block128, tile128, mx16, nvfp4; as fp8sim.quantize takes them) (default: "
                  "tensor when scales are given, else none)");
  add_integer_option(cmd, "--block", g->block,
                     "Block size g for --scaling block (A 1 x g, B g x g)", 1, limits::kMaxDim);
  add_integer_option(cmd, "--mx-block", g->mx_block,
                     "K elements per MX scale (default: the model's block scales', else 32; "
                     "NVFP4: 16)", 1, limits::kMaxDim);
  cmd->add_option("--mx-scale", g->mx_scale,
                  "MX scale format ue8m0|ue4m3 (default: the model's block scales', else "
                  "ue8m0)");
  cmd->add_option("--scale-order", g->scale_order,
                  "deepgemm (scales at each chunk) | cublaslt (tensor/row scales after K, as "
                  "cuBLASLt)")->capture_default_str();
  cmd->add_option("--bias", g->bias, "BIAS.npy: float32 (N,), added in fp32 before the output "
                                     "rounding (a bf16/fp16 bias as its float32 values)");
  add_integer_option(cmd, "--split-k", g->split_k,
                     "K slices reduced in fp32, as cuBLASLt's numSplitsK (slices of "
                     "ceil(K/S) rounded up to --split-k-align)", 1, limits::kMaxDim)
      ->each([g](const std::string&) { g->split_k_given = true; });
  cmd->add_option("--triton-config", g->triton_config,
                  "With a Triton --kernel: the launch config, BM,BN,BK,WARPS,STAGES or named "
                  "keys (BLOCK_SIZE_M=..), or vllm | sglang for the one that server picks for "
                  "this shape on --gpu; it decides the instruction (see `fp8sim explain`)");
  cmd->add_option("--gpu", g->gpu,
                  "With --kernel cublaslt[-fast-accum]: the split-K cuBLASLt runs on this "
                  "recorded GPU (h100, h200; see `fp8sim explain`), in place of --split-k; "
                  "with --triton-config vllm|sglang: the GPU whose tuned files are read "
                  "(default h100)");
  add_integer_option(cmd, "--split-k-align", g->split_k_align,
                     "Slice lengths round up to a multiple of this (cuBLASLt: 128; its "
                     "block-scaled kernels: 512)", 1, limits::kMaxDim);
  cmd->add_option("--out-type", g->out_type, "f32|bf16|f16")->capture_default_str();
  cmd->add_option("--out", g->out, "Output D.npy (float32 (M, N))")->capture_default_str();
  add_threads_option(cmd, g->threads);
  add_device_option(cmd, g->device);
  cmd->callback([g, cmd] {
    g->given = given_options(*cmd);  // a kernel preset refuses them at any value
    run_gemm(*g);
  });

  auto e = std::make_shared<ScaledMmCall>();
  auto egpu = std::make_shared<std::string>("h100");
  auto ekernel = std::make_shared<std::string>();
  auto econfig = std::make_shared<std::string>();
  auto* explain = app.add_subcommand(
      "explain", "The plan cuBLASLt runs for one torch._scaled_mm call on a recorded GPU "
                 "(split-K, reduction, tile), from the recorded tables or their rules; or, "
                 "with a Triton --kernel, its config and the instruction Triton lowers it to; "
                 "exit 2 where they cannot decide");
  explain->add_option("--kernel", *ekernel,
                      "cublaslt (the default), cublaslt-fast-accum, or a Triton kernel preset "
                      "(triton-w8a8-block-fp8, triton-fp8-dot, ...)");
  explain->add_option("--triton-config", *econfig,
                      "With a Triton --kernel: vllm | sglang (the config that server picks), "
                      "or BM,BN,BK,WARPS,STAGES or named keys (default: the kernel's own)");
  add_integer_option(explain, "--m", e->m, "Rows of a (tokens)", 1, limits::kMaxDim)->required();
  add_integer_option(explain, "--n", e->n, "Columns of b", 1, limits::kMaxDim)->required();
  add_integer_option(explain, "--k", e->k, "The reduction length", 1, limits::kMaxDim)->required();
  explain->add_option("--out-type", e->out, "f32|bf16|f16|e4m3")->capture_default_str();
  explain->add_flag("--fast-accum", e->fast, "use_fast_accum=True");
  explain->add_option("--scaling", e->scale, "tensor|row|block")->capture_default_str();
  explain->add_flag("--bias", e->bias, "A bias in the call");
  explain->add_option("--gpu", *egpu, "A recorded GPU (h100, h200) or a table's .json path")
      ->capture_default_str();
  explain->callback([e, egpu, ekernel, econfig] {
    if (is_triton_kernel(*ekernel)) {
      kernel_by_name(*ekernel);  // a known preset
      if (e->fast || e->bias || e->scale != ScaledMmCall{}.scale || e->out != ScaledMmCall{}.out)
        throw std::invalid_argument(
            "--fast-accum, --bias, --scaling and --out-type describe a torch._scaled_mm call: "
            "drop them with a Triton kernel");
      const TritonPlan p = triton_plan(*econfig, e->m, e->n, e->k, *egpu, *ekernel);
      fmt::print("{} {}x{}x{} on {}\n{}\n", *ekernel, e->m, e->n, e->k, *egpu,
                 describe(p, *ekernel));
      return;
    }
    if (!econfig->empty())
      throw std::invalid_argument("--triton-config goes with a Triton --kernel");
    if (!ekernel->empty() && *ekernel != "cublaslt" && *ekernel != "cublaslt-fast-accum")
      throw std::invalid_argument(fmt::format(
          "explain --kernel {}: explain knows cuBLASLt's plans (cublaslt, cublaslt-fast-accum) "
          "and Triton kernels' configs", *ekernel));
    ScaledMmCall c = *e;
    if (*ekernel == "cublaslt-fast-accum") c.fast = true;
    if (c.out == "fp32") c.out = "f32";
    if (c.out == "fp16") c.out = "f16";
    fmt::print("{}\n", describe(cublaslt_plan(*egpu, c)));
  });

  auto* kernels = app.add_subcommand("kernels", "List the GEMM kernel presets (--kernel)");
  auto kernels_md = std::make_shared<bool>(false);
  kernels->add_flag("--markdown", *kernels_md,
                    "One Markdown table: kernel, what it is, model, upstream, evidence, not "
                    "modelled");
  kernels->callback([kernels_md] {
    if (*kernels_md)
      fmt::print("| kernel | what it is | model | upstream | evidence | not modelled |\n"
                 "|---|---|---|---|---|---|\n");
    for (const KernelSpec& k : kernel_presets()) {
      if (*kernels_md) {
        fmt::print("| `{}` | {} | {} | {} | {} | {} |\n", k.name, k.description, describe(k),
                   k.upstream, k.evidence, k.not_modelled);
      } else {
        fmt::print("{}\n    {}\n    {}\n    upstream: {}\n    evidence: {}\n    not modelled: {}\n",
                   k.name, k.description, describe(k), k.upstream, k.evidence, k.not_modelled);
      }
    }
  });

  auto* models = app.add_subcommand("models", "List the accumulator model presets");
  auto markdown = std::make_shared<bool>(false);
  models->add_flag("--markdown", *markdown,
                   "One Markdown table: name, aliases, instruction, parameters, evidence");
  models->callback([markdown] {
    if (*markdown)
      fmt::print("| model | aliases | instruction | parameters | evidence |\n|---|---|---|---|---|\n");
    for (const auto& m : accumulator_presets()) {
      std::string aliases;
      for (const auto& a : m.aliases) aliases += (aliases.empty() ? "" : " ") + a;
      if (*markdown) {
        fmt::print("| `{}` | {} | {} | `{}` | {} |\n", m.name, aliases, m.instruction,
                   describe(m), m.evidence);
      } else {
        fmt::print("{} {}\n    {}\n    instruction: {}\n    evidence: {}\n", m.name,
                   aliases.empty() ? "" : "(" + aliases + ")", describe(m), m.instruction,
                   m.evidence);
      }
    }
  });
}

}  // namespace fp8sim::cli
