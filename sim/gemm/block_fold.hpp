// block_fold: power-of-two block scales folded into the operands of a block-scaled model.
//
// A model that applies UE8M0 scales to single products (no group sums: kind::mxf8f6f4) sees
// a term's value as its product's times both scales and its alignment exponent as its
// product's plus their log2. Folding the scales into the elements (value v * s, exponent
// + log2 s) gives the same steps, so the model without block scales runs the engines' fast
// paths on the folded operands.
#pragma once

#include <optional>
#include <span>

#include "gemm/gemm.hpp"

namespace fp8sim {

struct FoldedOperands {
  Operand a, b;                // each element v * s, its format folded_format's (the
                               // engines' paths for that range)
  FormatSpec a_format, b_format;  // the elements' own formats (the alignment floors)
};

// The format of a folded element of f: f's significand with an 8-bit exponent field.
FormatSpec folded_format(const FormatSpec& f);

// s with neither block scales in its model nor scaling: the model that runs on operands the
// scales have been folded into.
GemmSpec without_block_scales(const GemmSpec& s);

// s: a spec whose model applies block scales (s.model.block_scale), A and B as the engine
// sees them (unpacked), sa and sb the scales (a_cols, b_cols per row) already checked as
// values of the model's scale format. Each element becomes v * s (a NaN scale makes it NaN,
// as it makes the step's result). nullopt when the model's scales do not fold (group sums,
// scales that are not powers of two) or a scaled element is not an exact finite float.
std::optional<FoldedOperands> fold_block_scales(const GemmSpec& s, const Operand& A,
                                                const Operand& B, std::span<const float> sa,
                                                std::span<const float> sb, std::size_t a_cols,
                                                std::size_t b_cols);

}  // namespace fp8sim
