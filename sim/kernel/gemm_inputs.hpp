// gemm_inputs: what every GEMM front-end (CLI, Python, GPU harness) checks and converts
// before calling gemm(): output-type names, the problem shape, which scaling the given
// scales mean, and scale arrays (dtype, shape, E8M0 codes decoded, finite values).
//
// Errors are one line naming the source (a file path or an argument name) and the problem;
// the messages are the CLI's, so Python raises the same text the CLI prints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format/format.hpp"
#include "gemm/gemm.hpp"
#include "kernel/triton_config.hpp"

namespace fp8sim {

// A GEMM as a front-end names it: formats, model, scaling, scale order, output type and
// device spelled as the CLI's options take them.
// Every default here is the library's one default for that setting: the CLI's options, Python's
// fp8sim.gemm and the torch op take these (their None means "this value"); the numeric ones
// are GemmSpec's own.
struct GemmOptions {
  std::string a_format = "e4m3", b_format = "e4m3";
  std::string model = "hopper-wgmma";
  int promote_every = GemmSpec{}.promote_every;
  std::string scaling;  // empty: tensor when scales are given, else none (resolve_scaling);
                        // none|tensor|row|block|mx (with block, mx_block, mx_scale), or any
                        // quantiser scaling name (scaling_by_name: block128, mx16, nvfp4, ...),
                        // which sets the block and scale format itself
  int block = GemmSpec{}.block;
  std::string scale_order{to_string(GemmSpec{}.order)};
  std::string out_type = "f32";
  int threads = GemmSpec{}.threads;
  std::string device{to_string(GemmSpec{}.device)};
  int split_k = GemmSpec{}.split_k;  // K slices reduced in fp32 (cuBLASLt's numSplitsK;
                                     // sim/gemm/gemm_split.hpp)
  int split_k_align = GemmSpec{}.split_k_align;  // slice lengths round up to a multiple
  int mx_block = 0;         // MX scale block (0: the model's block scales', else 32)
  std::string mx_scale;     // MX scale format (empty: the model's block scales', else ue8m0)
  std::string kernel;       // a kernel preset (sim/kernel/kernel.hpp): sets model, promote_every,
                            // scale_order, split_k_align and the K tile, which must then be
                            // left at their defaults
  std::string triton_config;  // with a Triton kernel preset: vllm | sglang | BM,BN,BK,WARPS,
                              // STAGES | named keys (sim/kernel/triton_config.hpp); empty: the
                              // preset as it is (the kernel's default config)
  std::string gpu;          // the GPU vllm / sglang pick their config for (h100, h200; empty:
                            // h100)
  std::vector<std::string> given;  // the fields above the caller gave, by name ("promote_every"),
                                   // whatever their value: the front-ends fill it (a CLI option
                                   // given, a Python keyword not None); a field at a value
                                   // other than its default counts as given too
  bool is_given(std::string_view field) const;
};

// The GemmSpec the options name, for a call with or without scale arrays. Throws
// std::invalid_argument for an unknown name (messages of the parsers below), for a kernel
// given with an option it sets (given at all, even at its default value), and for an option
// that applies to nothing: block without block scaling, mx_block or mx_scale without MX
// scaling, split_k_align without a split (split_k 1).
GemmSpec gemm_spec(const GemmOptions& o, bool have_a_scales, bool have_b_scales);

// With o.triton_config: the Triton plan for an M x N x K problem (triton_plan) applied to `s`
// (apply_triton_plan), which gemm_spec() has set from o.kernel; std::nullopt without one.
// Throws std::invalid_argument with one line (a bad config, a refused plan).
std::optional<TritonPlan> apply_triton_config(GemmSpec& s, const GemmOptions& o, int M, int N,
                                              int K);

// "f32" (alias fp32), "bf16", "f16" (alias fp16); throws std::invalid_argument otherwise,
// naming the name as `what` calls it (an option, a manifest key).
FormatSpec output_type_by_name(std::string_view name, std::string_view what = "--out-type");

// Whether `name` is one of the engine's own scaling names (none, tensor, row, block, mx, or
// empty), not a quantiser's name that carries its block (scaling/scaling.hpp).
bool is_engine_scaling(std::string_view name);

// The engine's Scaling for a GemmOptions::scaling name of either kind ("" : none).
Scaling gemm_scaling_of(std::string_view name);

// The scaling a front-end's arguments ask for: `name` empty means tensor when both scale
// arrays are given, none when neither is. Throws std::invalid_argument when only one is
// given, when a scaling needs scales and has none, or when scales come with "none".
Scaling resolve_scaling(std::string_view name, bool have_a_scales, bool have_b_scales);

// Checks A (M x K) and B (N x Kb) codes: K equal and at least 1 (M or N may be 0: D is then
// empty, as torch.mm gives), within the engine's limits
// (M * N <= 2^31, K <= 2^30). Throws std::runtime_error("<a_source or b_source>: ...").
void check_gemm_problem(std::string_view a_source, std::string_view b_source, std::size_t M,
                        std::size_t K, std::size_t N, std::size_t Kb);

// A scale array as a front-end holds it: dtype spelled as .npy's descr ("<f4", or for MX
// "|u1" E8M0 codes), its shape, and its bytes (little-endian, C order).
struct ScaleArray {
  std::string descr;
  std::vector<std::size_t> shape;
  const void* data = nullptr;
};

// The scale values gemm() takes (rows x cols for `scaling`, see scale_shapes()): float32
// values, or for MX uint8 codes of code_format (GemmSpec::mx_scale) decoded (a NaN code is
// refused, as a NaN float32 scale is, unless nan_codes: mma(), the MMA instruction's own
// entry, takes it as the hardware does and gives NaN). Accepts shape (rows, cols), (rows,)
// when cols is 1 and () for a single scale. Throws std::runtime_error ("<source>: expected dtype <f4, got <f8",
// wrong shape, a non-finite float32 scale, a code beyond the format).
// scale_values' checks of the dtype and shape alone, for a header read before its data.
void check_scale_header(std::string_view source, const std::string& descr,
                        const std::vector<std::size_t>& shape, Scaling scaling, std::size_t rows,
                        std::size_t cols);
std::vector<float> scale_values(std::string_view source, const ScaleArray& a, Scaling scaling,
                                std::size_t rows, std::size_t cols,
                                const FormatSpec& code_format = format_by_name("ue8m0"),
                                bool nan_codes = false);

}  // namespace fp8sim
