// cublaslt_plan: which algorithm cuBLASLt runs for one torch._scaled_mm call, from tables
// recorded on a GPU (cuda/capture/record_cublaslt_plans.py), and the rules those tables show; a call
// the tables cannot decide is refused, never guessed.
//
// What decides the numerics is the split-K count (numSplitsK, reduction scheme
// COMPUTE_TYPE: sim/gemm/gemm_split.hpp); the tile, stages and cluster are reported as recorded.
// On a machine with the GPU itself, fp8sim.cublaslt_plan asks cuBLASLt instead (source
// "gpu-query"); this file is what answers without one.
//
// Tables: sim/data/cublaslt_plans_<gpu>.json (axes M, N, K; variants "<out> <scale>
// fast<0|1>"; the distinct algorithm configurations; provenance; rules) and .bin (zlib: per
// variant in the JSON's order, one little-endian uint16 configuration index per grid point,
// M-major then N then K; `none` where cuBLASLt returned no algorithm), built into the library.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fp8sim {

// One torch._scaled_mm call: a (m x k) times b (k x n), e4m3 operands.
struct ScaledMmCall {
  int m = 0, n = 0, k = 0;
  std::string out = "bf16";     // f32 | bf16 | f16 | e4m3
  bool fast = false;            // use_fast_accum
  std::string scale = "tensor"; // tensor | row | block (1x128 / 128x128)
  bool bias = false;
};

struct CublasltPlan {
  int split_k = 1;
  std::string reduction = "NONE";  // cuBLASLt's reduction scheme (COMPUTE_TYPE when split)
  std::string tile, stages, cluster;  // as recorded ("" when a rule decided)
  int algo_id = -1;                // -1 when a rule decided
  std::string source;              // "table" or "rule"
  std::string gpu;                 // the table's GPU name, e.g. "NVIDIA H100 80GB HBM3"
  std::string versions;            // "cuBLASLt 130100, torch 2.11.0+cu130, driver 580.159.04"
  std::string why;                 // the grid point or the rule, one line
};

// Names of the recorded GPUs ("h100", "h200").
std::vector<std::string> recorded_gpus();

// The plan for `call` on `gpu` (a recorded name, or a path to a table's .json with its .bin
// beside it). Throws std::invalid_argument with one line naming the shape, the GPU and the
// two ways to an answer (run on that GPU, or pass split_k) where the table has no point and
// no rule holds, or for an unknown GPU, output type or scale mode.
CublasltPlan cublaslt_plan(std::string_view gpu, const ScaledMmCall& call);

// "split-K 22 (COMPUTE_TYPE), tile 32x64, stages 128xAUTO, cluster 1x1x1, algo 66: table
// point M=64 N=64 K=65536 (NVIDIA H100 80GB HBM3; cuBLASLt 130100, ...)".
std::string describe(const CublasltPlan& p);

}  // namespace fp8sim
