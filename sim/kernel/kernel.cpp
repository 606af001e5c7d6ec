// kernel: the kernel-preset table and how a preset sets a GemmSpec.
#include "kernel/kernel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "accumulator/accumulator.hpp"

namespace fp8sim {

namespace {

// The scalings a kernel takes, joined by `sep`.
std::string scalings_text(const KernelSpec& k, std::string_view sep) {
  std::string out;
  for (const Scaling x : k.scalings)
    out += (out.empty() ? "" : std::string(sep)) + std::string(to_string(x));
  return out;
}

}  // namespace

const std::vector<KernelSpec>& kernel_presets() {
  using enum Scaling;
  static const std::vector<KernelSpec> table = {
      {"cublaslt",
       "torch._scaled_mm through cuBLASLt on sm_90, fast accumulation off",
       "hopper-wgmma", 128, ScaleOrder::cublaslt, {tensor, row, block}, 32, 128, 512,
       "cuBLASLt 13.0 (closed source; torch 2.11 aten/src/ATen/cuda/CUDABlas.cpp scaled_gemm)",
       "tests/data/hw/scaled_mm_h100, scaled_mm_h200 (H100, H200, 2026-11-23): every case",
       "the split count is cuBLASLt's per-shape choice (fp8sim.torch.explain); FP8 outputs"},
      {"cublaslt-fast-accum",
       "torch._scaled_mm through cuBLASLt on sm_90, use_fast_accum=True",
       "hopper-wgmma", 0, ScaleOrder::cublaslt, {tensor, row}, 32, 128, 512,
       "cuBLASLt 13.0 (CUBLASLT_MATMUL_DESC_FAST_ACCUM)",
       "tests/data/hw/scaled_mm_h100, scaled_mm_h200, cublaslt_fastaccum (H100, H200)",
       "the split count (as cublaslt); cuBLASLt refuses fast accumulation with block scales"},
      {"deepgemm-sm90-1d2d",
       "DeepGEMM's SM90 FP8 GEMM (deep_gemm.fp8_gemm_nt, sm90_fp8_gemm_1d2d): 1x128 activation "
       "and 128x128 weight scales, bf16 D",
       "hopper-wgmma", 128, ScaleOrder::deepgemm, {block}, 128, 128, 0,
       "DeepGEMM 2.6.1 (54e2261) deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh: per "
       "128-K block 4 wgmma from zero, s = sa * sb, acc = fmaf(s, p, acc) (PTX fma.rn.f32), "
       "bf16 by __float22bfloat162_rn; K tail zero-filled by TMA",
       "tests/data/hw/kernels/deepgemm_sm90_1d2d (H100, 2026-11-24): 18 cases, 144928 bf16 "
       "outputs, 13 shapes from 1x128x128 to 4096x7168x512, M N K off the tiles: every output",
       "f32 D and C (DeepGEMM refuses them); its other recipes (1D1D, FP4)"},
      {"cutlass-sm90-blockwise",
       "CUTLASS's Hopper FP8 GEMM with 1x128 / 128x128 scales (example 67, groupwise "
       "configuration: KernelTmaWarpSpecializedCooperativeFP8BlockScaledAccum, 256x128x128 "
       "tile, cluster 1x2x1)",
       "hopper-wgmma", 128, ScaleOrder::deepgemm, {block}, 128, 128, 0,
       "CUTLASS 7107b05 sm90_mma_tma_gmma_ss_warpspecialized_fp8_blockwise_scaling.hpp and "
       "fp8_accumulation.hpp: per 128-K tile 4 wgmma from zero, s = sfa * sfb, "
       "acc += p * s (PTX fma.rn.f32); epilogue cvt.rn to bf16",
       "tests/data/hw/kernels/cutlass_sm90_blockwise (H100, 2026-11-24): 14 cases, 184512 "
       "outputs, bf16 and f32 D, 5 shapes, N K off the tiles: every output",
       "alpha / beta, other epilogues; M not a multiple of 4 (can_implement refuses it)"},
      {"triton-w8a8-block-fp8",
       "vLLM's and SGLang's Triton block-FP8 GEMM (DeepSeek-V3 checkpoints): 1x128 activation "
       "and 128x128 weight scales, default config 64x128x128 (--triton-config sets another)",
       "hopper-wgmma", 128, ScaleOrder::triton, {block}, 128, 128, 0,
       "vLLM 0.33.0 vllm/model_executor/layers/quantization/utils/fp8_utils.py "
       "_w8a8_triton_block_scaled_mm and SGLang 0.5.23 sglang/kernels/ops/gemm/fp8_kernel.py "
       "_w8a8_block_fp8_matmul, default configs (BLOCK_SIZE_M 64, N 128, K 128); Triton 3.6.0 "
       "PTX per 128-K block: 4 wgmma m64n128k32, one mul.f32 and one fma.rn.f32 an output",
       "tests/data/hw/kernels/triton_w8a8_block_fp8 (H100, 2026-11-24): 52 cases, 49120 "
       "outputs, f32 and bf16, M N K off the tiles (K = 1000), both copies: every output",
       "configs that lower to mma.sync (BLOCK_SIZE_M not a multiple of 64: --triton-config "
       "refuses them, sim/kernel/triton_config.hpp); BLOCK_SIZE_K 64 not captured yet; the "
       "FP8 quantisation kernel"},
      {"triton-fp8-dot",
       "a plain Triton FP8 GEMM loop, acc = tl.dot(a, b, acc) over BLOCK_K 128, tensor scales "
       "after the loop, max_num_imprecise_acc left unset (on sm_90 Triton then never promotes)",
       "hopper-wgmma", 0, ScaleOrder::cublaslt, {none, tensor}, 128, 128, 0,
       "cuda/capture/capture_triton.py's fp8_dot_kernel (ours); Triton 3.6.0: max_num_imprecise_acc "
       "defaults to 2^30 on sm_90 (third_party/nvidia/backend/compiler.py), and a partial "
       "accumulator is added every max_num_imprecise_acc K elements where that is <= BLOCK_K",
       "tests/data/hw/kernels/triton_fp8_dot (H100, 2026-11-24): 26 cases, 24560 outputs, f32 "
       "and bf16, K off the tile: every output",
       "tensor scales D = acc * (sa * sb) as our kernel writes them; other BLOCK_K"},
      {"triton-fp8-dot-imprecise-acc-32",
       "triton-fp8-dot with max_num_imprecise_acc=32: the wgmma result added into the fp32 "
       "accumulator every 32 K elements",
       "hopper-wgmma", 32, ScaleOrder::cublaslt, {none, tensor}, 128, 128, 0,
       "as triton-fp8-dot; PTX: 4 add.f32 an output per 128-K block",
       "tests/data/hw/kernels/triton_fp8_dot (H100, 2026-11-24): 26 cases, 24560 outputs: "
       "every output",
       "as triton-fp8-dot"},
      {"triton-fp8-dot-imprecise-acc-64",
       "triton-fp8-dot with max_num_imprecise_acc=64: promoted every 64 K elements",
       "hopper-wgmma", 64, ScaleOrder::cublaslt, {none, tensor}, 128, 128, 0,
       "as triton-fp8-dot; PTX: 2 add.f32 an output per 128-K block",
       "tests/data/hw/kernels/triton_fp8_dot (H100, 2026-11-24): 26 cases, 24560 outputs: "
       "every output",
       "as triton-fp8-dot"},
      {"triton-fp8-dot-imprecise-acc-128",
       "triton-fp8-dot with max_num_imprecise_acc=128: promoted every 128 K elements",
       "hopper-wgmma", 128, ScaleOrder::cublaslt, {none, tensor}, 128, 128, 0,
       "as triton-fp8-dot; PTX: 1 add.f32 an output per 128-K block",
       "tests/data/hw/kernels/triton_fp8_dot (H100, 2026-11-24): 26 cases, 24560 outputs: "
       "every output",
       "as triton-fp8-dot"},
      {"triton-w8a8-block-fp8-mma-f16",
       "triton-w8a8-block-fp8 under a config Triton does not lower to wgmma on sm_90 (BLOCK_SIZE_M "
       "not a multiple of 64, or warps not a multiple of 4: vLLM's tuned decode configs): FP16 "
       "HMMA on upcast FP8",
       "triton-mma-f16", 128, ScaleOrder::triton, {block}, 32, 128, 0,
       "as triton-w8a8-block-fp8; Triton 3.6.0 lib/Analysis/Utility.cpp supportMMA and "
       "AccelerateMatmul.cpp (MMAv2 on sm_90 for FP8: FP16 upcast); PTX per BLOCK_SIZE_K block: "
       "cvt.rn.f16x2.e4m3x2, mma.sync m16n8k16 f32.f16 chained from zero, one mul.f32 and one "
       "fma.rn.f32 an output",
       "tests/data/hw/kernels/triton_w8a8_block_fp8_served_h100 (H100, 2026-11-26): the "
       "BLOCK_SIZE_M 16 and 32 configs vLLM 0.33.0 and SGLang 0.5.23 pick for decode: every "
       "output",
       "as triton-w8a8-block-fp8"},
      {"triton-fp8-dot-mma-f16",
       "triton-fp8-dot under a config Triton does not lower to wgmma on sm_90 (BLOCK_M not a "
       "multiple of 64, warps not a multiple of 4, or max_num_imprecise_acc below 32): FP16 HMMA "
       "on upcast FP8, the dot's accumulator chained through every step, never promoted",
       "triton-mma-f16", 0, ScaleOrder::cublaslt, {none, tensor}, 32, 128, 0,
       "as triton-fp8-dot; PTX: cvt.rn.f16x2.e4m3x2 and mma.sync m16n8k16 f32.f16 with the "
       "accumulator as C (max_num_imprecise_acc has no effect on this path)",
       "tests/data/hw/kernels/triton_fp8_dot_mma_f16 (H100, 2026-11-26): 156 cases, 147360 "
       "outputs, f32 and bf16, BLOCK_M 16/32 (4 warps), 128 (2 warps), max_num_imprecise_acc "
       "0/16, K off the tile: every output",
       "as triton-fp8-dot"},
  };
  return table;
}

const KernelSpec& kernel_by_name(std::string_view name) {
  const auto& t = kernel_presets();
  const auto it = std::find_if(t.begin(), t.end(), [&](const KernelSpec& k) { return k.name == name; });
  if (it != t.end()) return *it;
  std::string known;
  for (const KernelSpec& k : t) known += (known.empty() ? "" : ", ") + k.name;
  throw std::invalid_argument(fmt::format("unknown kernel '{}' (known: {})", name, known));
}

void apply_kernel(GemmSpec& s, const KernelSpec& k) {
  if (std::find(k.scalings.begin(), k.scalings.end(), s.scaling) == k.scalings.end()) {
    throw std::invalid_argument(fmt::format("kernel {} does not take scaling {} (it takes {})",
                                            k.name, to_string(s.scaling),
                                            scalings_text(k, ", ")));
  }
  s.model = accumulator_by_name(k.model);
  s.promote_every = k.promote_every;
  s.order = k.order;
  s.k_tile = k.k_tile;
  s.split_k_align = s.scaling == Scaling::block && k.split_k_align_block > 0
                        ? k.split_k_align_block
                        : k.split_k_align;
}

std::string describe(const KernelSpec& k) {
  const std::string takes = scalings_text(k, "/");
  std::string d = fmt::format("model {}, {}, scales {} ({})", k.model,
                              k.promote_every == 0 ? std::string("never promoted")
                                                   : fmt::format("promoted every {}", k.promote_every),
                              to_string(k.order), takes);
  if (k.k_tile > 0) d += fmt::format(", K zero-padded to {}", k.k_tile);
  if (k.split_k_align_block > 0 && k.split_k_align_block != k.split_k_align)
    d += fmt::format(", split-K slices aligned to {} ({} with block scales)", k.split_k_align,
                     k.split_k_align_block);
  return d;
}

}  // namespace fp8sim
