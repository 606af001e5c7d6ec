// gemm_split: a GEMM as a library runs it around the tensor-core chain -- K cut into split-K
// slices whose partial results are reduced in fp32, then the epilogue (scales applied after
// the whole K, bias, output rounding). The data are GemmSpec::split_k, GemmSpec::order and
// the bias; gemm() and batched_dot() come here when any of them asks for it.
//
// Measured on cuBLASLt (torch._scaled_mm, CUDA 13, H100 and H200; docs/cublaslt.md):
//   - split-K with S slices (cuBLASLt's numSplitsK, reduction scheme COMPUTE_TYPE): slices
//     of ceil(K / S) rounded up to a multiple of A (GemmSpec::split_k_align: 128, and 512
//     for the block-scaled kernels) in K order (the last one shorter), each
//     accumulated from zero through the model (C enters the first), the partial results
//     summed in fp32 in slice order;
//   - then, with ScaleOrder::cublaslt, tensor scales D = acc * fp32(sa * sb) and row scales
//     D = (acc * sb[n]) * sa[m] (block and MX scales stay inside each slice's chunks);
//   - then bias[n] added in fp32, then the output rounding (to nearest even).
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "gemm/gemm.hpp"

namespace fp8sim {

// Elements of K in each split-K slice (K itself when s.split_k <= 1).
int split_slice(const GemmSpec& s, int K);

// Whether s applies its scales in the epilogue, once after K (cuBLASLt's order, tensor or row
// scales).
bool epilogue_scales(const GemmSpec& s);

// Whether gemm() must run the library GEMM: split-K, scales in the epilogue or a bias.
bool needs_library_gemm(const GemmSpec& s, bool has_bias);

// The spec each slice runs with: one slice, fp32 output, and no scales where the epilogue
// applies them.
GemmSpec slice_spec(const GemmSpec& s);

// One split-K slice: columns [k0, k0 + len) of K, and the scales slice_spec(s) takes for it
// (block and MX scales: the columns covering the slice; tensor and row scales as given, or
// none where the epilogue applies them).
struct KSliceCut {
  int k0 = 0, len = 0;
  std::vector<float> sa, sb;
};

// The slices of a GEMM of K columns (K itself when s.split_k <= 1), in K order. Throws
// std::invalid_argument where a slice would cut a block or MX scale block.
std::vector<KSliceCut> split_k_slices(const GemmSpec& s, int K, std::span<const float> sa,
                                      std::span<const float> sb);

// The epilogue on fp32 results acc (M x N; batched: M x 1 with per-row scales): scales where
// s.order puts them after K, bias[n], rounding to s.out_type. D may alias acc.
void apply_epilogue(const GemmSpec& s, int M, int N, bool batched, std::span<const float> sa,
                    std::span<const float> sb, std::span<const float> bias,
                    std::span<const float> acc, std::span<float> D);

// The engine one slice runs on: gemm() (all pairs) or batched_dot() (row by row) semantics.
using SliceEngine = std::function<void(const GemmSpec&, const Operand&, const Operand&,
                                       std::span<const float> C, std::span<const float> sa,
                                       std::span<const float> sb, std::span<float> D)>;

// One slice of the library GEMM: its fp32 result (M x N) into `out`, run with spec `in`
// (slice_spec of the GEMM's) on columns [cut.k0, cut.k0 + cut.len) with cut.sa / cut.sb (C
// enters the slice at k0 = 0 only).
using SliceRun = std::function<void(const GemmSpec& in, const KSliceCut& cut, std::span<float> out)>;

// The library GEMM's reduction, whatever holds the operands: the slices of K (split_k_slices)
// run one by one, their results summed in fp32 in slice order, then apply_epilogue into D.
void reduce_slices(const GemmSpec& s, int M, int N, int K, bool batched,
                   std::span<const float> sa, std::span<const float> sb,
                   std::span<const float> bias, std::span<float> D, const SliceRun& run);

// The library GEMM: slices (copies of A's and B's columns, and of the block/MX scale columns
// covering them) through `engine`, the fp32 reduction, then apply_epilogue. Checks the
// slices against the spec (each must pass validate()) and bias (N values, or empty);
// throws std::invalid_argument naming the problem.
void library_gemm(const GemmSpec& s, const Operand& A, const Operand& B, bool batched,
                  std::span<const float> C, std::span<const float> sa, std::span<const float> sb,
                  std::span<const float> bias, std::span<float> D, const SliceEngine& engine);

}  // namespace fp8sim
