// triton_config: the launch config a Triton FP8 GEMM runs under, and what Triton lowers its
// tl.dot to under that config (issue 36).
//
// A config is BLOCK_SIZE_M/N/K, GROUP_SIZE_M, num_warps and num_stages. It is given, or
// picked as a server picks it: vLLM's and SGLang's block-FP8 wrappers
// (w8a8_triton_block_scaled_mm, w8a8_block_fp8_matmul_triton) open a tuned JSON file named
// after N, K and the GPU, and take the entry whose batch-size key is nearest to M; without a
// file they launch their default config. The recorded files (sim/data/triton_configs/, from
// the released wheels, with provenance) are those for the H100 and the H200.
//
// The config decides the instruction. On sm_90, Triton 3.6 lowers an e4m3 dot with an fp32
// accumulator to wgmma (MMAv3) only when the CTA's M is a multiple of 64, N a multiple of 8,
// K at least 32 and the warps a multiple of 4 (and max_num_imprecise_acc >= 32); otherwise to
// MMAv2, which on sm_90 upcasts the operands to FP16 and runs mma.sync m16n8k16 (HMMA). The
// two sum differently: a kernel preset models one of them (kernel.hpp), and a config that
// lowers to the other routes to that one's preset (triton_kernel_for) or is refused.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "gemm/gemm.hpp"

namespace fp8sim {

struct TritonConfig {
  int block_m = 0, block_n = 0, block_k = 0, group_m = 0, num_warps = 0, num_stages = 0;
};

struct TritonPlan {
  TritonConfig config;
  std::string config_source;  // where the config came from: the given text, the server's
                              // file and entry, or a default and why
  std::string instruction;    // "wgmma" | "mma.sync.f16"
  std::string why;            // the lowering rule's reason, citing Triton's source
};

// The plan of a Triton kernel for one GEMM (M x N x K) on `gpu` ("h100", "h200", or the
// device names "NVIDIA H100 80GB HBM3", "NVIDIA H200"; "" when no server lookup is needed).
// `spec`: "vllm" or "sglang" (the config that server picks, as its code does), a config as
// "BM,BN,BK,WARPS,STAGES[,GROUP_M]" or named keys "BLOCK_SIZE_M=16,BLOCK_SIZE_N=64,
// BLOCK_SIZE_K=128,num_warps=4,num_stages=3[,GROUP_SIZE_M=..]", or "" (the kernel's own
// default config). `kernel` names the preset the plan is for: the servers pick configs for
// triton-w8a8-block-fp8 only. Throws std::invalid_argument with one line: a malformed or
// out-of-range config, a server spec for another kernel, a GPU with no recorded files.
TritonPlan triton_plan(std::string_view spec, int m, int n, int k, std::string_view gpu,
                       std::string_view kernel = "triton-w8a8-block-fp8");

// A config string parsed (the forms above); throws std::invalid_argument naming the problem.
TritonConfig parse_triton_config(std::string_view text);

// "16,64,128,4,3" (BM,BN,BK,WARPS,STAGES: the form parse_triton_config takes).
std::string to_string(const TritonConfig& c);

// Triton 3.6's choice on sm_90 for an e4m3 x e4m3 -> fp32 dot of this config:
// {instruction, why}. max_num_imprecise_acc as tl.dot takes it (2^30: Triton's sm_90
// default).
std::pair<std::string, std::string> triton_lowering(const TritonConfig& c,
                                                    int max_num_imprecise_acc = 1 << 30);

// The kernel preset that models `kernel` under the plan's instruction: `kernel` itself for
// wgmma, "<kernel>-mma-f16" for mma.sync on FP16 operands. The one place a config routes.
std::string triton_kernel_for(std::string_view kernel, const TritonPlan& p);

// Sets `s` as the kernel runs under the plan: the routed preset (apply_kernel), K padded to
// BLOCK_SIZE_K, and for the block kernel its per-tile promotion every BLOCK_SIZE_K. Throws
// std::invalid_argument with one line when the routed preset is not modelled yet, or when the
// config leaves what the preset was measured under (e.g. an imprecise-acc interval longer
// than BLOCK_SIZE_K).
void apply_triton_plan(GemmSpec& s, std::string_view kernel, const TritonPlan& p);

// Whether `kernel` is a preset built from a Triton kernel (takes a config).
bool is_triton_kernel(std::string_view kernel);

// Several lines for `fp8sim explain`: the config and where it came from, the instruction and
// why, the preset that models it.
std::string describe(const TritonPlan& p, std::string_view kernel);

}  // namespace fp8sim
