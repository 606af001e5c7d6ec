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

struct GemmPath {
  StepPath step = StepPath::reference;
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
