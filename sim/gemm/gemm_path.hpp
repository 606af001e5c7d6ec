// gemm_path: which inner loop the GEMM engine takes for a model and operand formats (a
// choice made from the model's data, shared by the CPU engine and any other engine's host).
#pragma once

#include <cstdint>

#include "accumulator/accumulator.hpp"
#include "format/format.hpp"

namespace fp8sim {

// How one fused step is computed. Every path gives the bits of fused_step_exponents().
enum class StepPath : std::uint8_t {
  fmaf_chain,    // exact model, group 1, fp32 rne output: one fmaf per product
  int32_float,   // products in float, terms cut to int32 (frac small enough)
  int64_double,  // products in double, terms cut to int64
  exact_int,     // exact model: products on a fixed grid in 128-bit integers
  reference,     // fused_step_exponents (any model, specials)
};

// The step's output rounding: an 8-bit-exponent IEEE output (e8mX, fp32) rounded rz or rne
// by clearing bits of a double, or round_accumulator_output (generic).
enum class OutPath : std::uint8_t { e8_rz, e8_rne, generic };

// The CUDA engine's fast step (cuda/engine/gemm_engine_step.cuh, cuda/gemm_engine_tiled*.cuh): each
// product cut to the step's grid by one add of a magic constant and the cut terms summed in
// float (f32) or double (f64). It is exact where the products are exact in float (f32), where
// a step's step_products + 1 terms (the products and c), of frac + 2 bits each, sum within
// the type's significand (frac + 2 + carry bits <= 24 / 53), and where the magic constant
// lies at least two bits above every term (frac <= 20 / 49). These bounds are tighter than
// the CPU's integer paths (whose sums are int32 / int64), so a model can run int32_float on
// the CPU and f64 (or none) on the GPU. Only single steps (no chained blocks, no
// renormalised products) of models the CPU runs on an integer path take it; none: the
// reference step (or, for FP4 block-scaled models, the group-sum step).
// Numbered as DeviceGemm::fast_step (sim/gemm/device_gemm.hpp) and gpu::FastPath.
enum class DeviceStep : std::uint8_t { none = 0, f32 = 1, f64 = 2 };

struct GemmPath {
  StepPath step = StepPath::reference;
  DeviceStep device = DeviceStep::none;  // the CUDA engine's step (above)
  OutPath out = OutPath::generic;
  int exact_grid = 0;  // exact_int: the exponent of the grid's lsb (the smallest product lsb)
  int out_drop = 0;    // e8_rz / e8_rne: fraction bits of a double dropped (52 - mantissa)
};

// The paths for model m on operands of formats a and b, each step fusing at most
// `step_products` products (m.group, or the chunk length for an exact model with group 0).
// Integer paths are taken only where the products, the cut terms and their sum provably
// fit the integer type and the float products are exact; everything else is `reference`.
GemmPath choose_gemm_path(const AccumulatorSpec& m, const FormatSpec& a, const FormatSpec& b,
                          int step_products);

// Whether the group-sum step (FP4 MMAs with block scales on sums of group_sum products:
// kind::mxf4, kind::mxf4nvf4) is exact in doubles and int64 for model m on operands of
// formats a and b: a one-lane fused step of group sums that c joins, cut rz or rne, where
// each group's sum is exact in a double, times its two scales too, and the cut terms and
// their sum fit int64. The CPU engine and the CUDA engine take it where this holds.
bool group_sums_fit(const AccumulatorSpec& m, const FormatSpec& a, const FormatSpec& b);

}  // namespace fp8sim
