// recipe: an FP8 GEMM recipe (element formats, scaling, accumulator model, promotion, output
// type) and the table of named recipes (deepseek-v3, te-tensorwise, mxfp8, fast-accum, nvfp4)
// that every front-end (the CLI's `fp8sim analyze`, the Python package) reads.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "accumulator/accumulator.hpp"
#include "format/format.hpp"
#include "gemm/gemm.hpp"
#include "scaling/scaling.hpp"

namespace fp8sim {

// One recipe, parsed: how A (M x K activations) and B (N x K weights) are quantised and
// multiplied. Quantisation is scaling.hpp's quantise_operand; the product is gemm.hpp's
// engine with `model`, `promote_every`, `order`, and `out_type` as the result's type.
struct Recipe {
  std::string name;  // the table's name, or the grid's "<format>/<scaling>/<model>/p<promote>"
  FormatSpec a_format, b_format;
  ScalingSpec scaling;          // granularity and encoding, the same rule for A and B
  AccumulatorSpec model;
  int promote_every = 0;        // 0 = never
  ScaleOrder order = ScaleOrder::deepgemm;
  FormatSpec out_type;          // fp32, bf16 or fp16
  std::string kernel;           // the kernel preset the GEMM emulates ("": none)
};

// A row of the named-recipe table: names as the parsers take them (format_by_name,
// scaling_by_name, accumulator_by_name), so the table is plain data. The row is the
// recipe's Fprop GEMM (Y = X W^T: A activations, B weights); Dgrad and Wgrad take A as the
// gradient, in grad_format, promoted every grad_promote_every, and the rest as Fprop.
struct NamedRecipe {
  std::string name;
  std::string a_format, b_format, scaling, model;
  int promote_every = 0;
  std::string order;            // "deepgemm" | "cublaslt"
  std::string out_type;
  std::string description;      // one line: what the recipe is
  std::string evidence;         // where its parameters come from
  std::string grad_format = ""; // A's format in Dgrad and Wgrad ("": a_format)
  int grad_promote_every = -1;  // Dgrad's and Wgrad's promotion (-1: promote_every)
  std::string kernel = "";      // the kernel preset (sim/kernel/kernel.hpp) the recipe's GEMMs run
                                // as: it sets model, promotion and scale order ("": none)
  std::string grad_kernel = ""; // Dgrad's and Wgrad's kernel ("": kernel)
};

// The table, in the order `fp8sim recipes` prints it. Every front-end reads it: `fp8sim
// analyze` and fp8sim.analyze (the Fprop GEMM), fp8sim.torch's recipes (all three GEMMs).
const std::vector<NamedRecipe>& named_recipes();

// The three GEMMs of a linear layer's training step.
enum class GemmRole { fprop, dgrad, wgrad };

// The engine's spec for a recipe's GEMM, the one way the library's analyses (analyze, the
// sweeps) turn a recipe into a GemmSpec: its formats, model, promotion, scale order and
// scaling (set_engine_scaling), an fp32 result (the analyses round it to out_type as a stage
// of their own), on `device` with `threads`. The kernel preset's K tile and split-K are not
// applied: an analysis models the recipe's numerics at the shape it is given.
GemmSpec engine_spec(const Recipe& r, int threads, Device device);

// A named recipe's GEMM, parsed. Throws std::invalid_argument for an unknown name (listing
// the known ones).
Recipe recipe_by_name(std::string_view name, GemmRole role = GemmRole::fprop);

// The grid's recipe for one combination (name "<format>/<scaling>/<model>/p<promote>"; A and
// B in the same format, deepgemm scale order). Throws std::invalid_argument naming a bad value.
Recipe grid_recipe(const FormatSpec& format, const ScalingSpec& scaling,
                   const AccumulatorSpec& model, int promote_every, const FormatSpec& out_type);

// The recipes a front-end asks for (`fp8sim analyze`, fp8sim.analyze): named ones ("all":
// every one), then the grid's cross product of the axes given (axes left out take
// the defaults e4m3, tensor, fp32, hopper-wgmma, 128), each recipe once; every
// named recipe when nothing is asked. Every value given is checked, whether it is used or
// not, and a value that applies to no recipe is refused: out_type without a grid (named
// recipes carry their own), encodings when no scaling of the grid takes one (none, mx,
// nvfp4 and a scaling spelt with ':' name theirs). Throws std::invalid_argument naming it.
struct RecipeRequest {
  std::vector<std::string> names;
  std::vector<std::string> formats, scalings, encodings, models;
  std::vector<int> promote_every;
  std::optional<std::string> out_type;  // none: f32 (given, even "", it is checked)
};
std::vector<Recipe> recipe_list(const RecipeRequest& q);

}  // namespace fp8sim
