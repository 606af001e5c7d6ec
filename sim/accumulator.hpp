// accumulator: tensor-core accumulator models as data (AccumulatorSpec) and the fused step.
//
// A tensor core's FP8 dot product is modelled as a *fused group sum*: per step it takes
// `group` exact products a_i*b_i and (optionally) the incoming accumulator c, aligns them to
// the largest exponent among them, cuts each term to `frac_bits` fraction bits below that
// exponent, adds the cut terms exactly, and rounds the sum once to the output grid.
// A dot product along K is a chain of such steps, each step's output being the next c.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format.hpp"
#include "rounding.hpp"

namespace fp8sim {

// Where the incoming accumulator c enters a step.
enum class CEntry : std::uint8_t {
  join,   // c is aligned and cut with the products (wgmma)
  exact,  // c is added exactly to the cut product sum, before the output rounding
  add,    // c is added after the products' sum is rounded to the output: one IEEE add,
          // round to nearest even (B200, sm_90 mma.sync)
};
CEntry parse_c_entry(std::string_view s);  // join|exact|add
std::string_view to_string(CEntry c);

// One accumulator model. Which fields count in which combination:
//   exact = true   c and the step's products are summed exactly and rounded once, so
//                  frac_bits, term_cut, renormalise_products and unpack are ignored and
//                  c_entry only tells add from the rest (join and exact give the same sum);
//                  group 0 (one step per chunk) is allowed only here;
//   block = 0      one step per instruction; interleave must be false (validate() rejects it);
//   block > 0      a multiple of group, steps chained from zero, their result entering c
//                  with one add: c_entry must be add (validate() rejects the others).
// validate() also rejects out-of-range values (see validate below).
struct AccumulatorSpec {
  std::string name;            // preset name, the custom: text it was parsed from, or "probed"
                               // (ProbeReport::as_model)
  int group = 32;              // products fused per step (>= 1)
  int frac_bits = 13;          // fraction bits kept below the group's largest exponent (0..62)
  Rounding term_cut = Rounding::rz;  // how each aligned term is cut: rz or rne
  CEntry c_entry = CEntry::join;     // where c enters each step
  int block = 0;               // products per instruction when it is several chained steps
                               // (sm_90 mma.sync: 32 = two 16-product steps): the steps start
                               // from 0 and their result enters c as with CEntry::add;
                               // 0: one step per instruction
  bool interleave = false;     // within each block, the first step takes the elements with
                               // k mod 4 in {0,1}, the second those in {2,3} (FP8 unpacked to
                               // FP16 pairs on sm_90)
  std::optional<FormatSpec> unpack;  // operands enter the tensor core in this wider format
                                     // (sm_90 mma.sync: fp16, F2FP.F16.E4M3.UNPACK_B), so an
                                     // FP8 subnormal that is normal there aligns on its own
                                     // exponent, not on the FP8 format's smallest normal one
  bool renormalise_products = false; // false: a product's exponent is e_a+e_b (significand
                                     // in [1,4)); true: exponent of the exact product
  FormatSpec output;           // output grid (e8m13: 14 significant bits in an fp32 container)
  Rounding output_rounding = Rounding::rz;
  bool exact = false;          // exact model: exact sum of c and all products, one rounding
  std::string evidence;        // where the parameters come from (paper section, probe, data)
};

// Every preset, in the order `fp8sim models` lists them:
// hopper-wgmma, hopper-wgmma-f16, ada-fp8, ada-fp8-f16, blackwell-fp8, hopper-mma-sync,
// hopper-mma-sync-f16, fp32, exact.
const std::vector<AccumulatorSpec>& accumulator_presets();

// A preset by name, or a custom model: "custom:group=32,frac=13,out=14,cut=rz" with optional
// keys outround=rz|rne|..., c=join|exact|add, renorm=0|1, block=N, interleave=0|1,
// unpack=<format>|none, outfmt=<format> (overrides out=).
// `out=B` means B significant bits in an fp32 container (format e8m(B-1)).
// Throws std::invalid_argument naming the bad key or value.
AccumulatorSpec accumulator_by_name(std::string_view name);

// Checks ranges (group >= 1, frac_bits 0..62, output width) and the combinations above;
// throws std::invalid_argument.
void validate(const AccumulatorSpec& m);

// One line: "group=32 frac=13 cut=rz c=join renorm=0 out=e8m13 outround=rz" (then block,
// interleave and unpack where set).
std::string describe(const AccumulatorSpec& m);

// One fused step with exact input values (each a decoded format value):
//   result = round_output( c (+) sum_{i<n} a[i]*b[i] ),  n <= group.
// Special values: any NaN operand, 0*Inf, or Inf-Inf gives NaN; otherwise an Inf product
// or c gives that Inf; a finite sum beyond the output's range overflows to Inf.
// Each operand aligns on its own exponent: the formats are unknown here (chained_dot takes
// them, for subnormal operands and AccumulatorSpec::unpack).
// This is the plain reference implementation; sim/gemm.cpp's fast clones (fused_step_fast,
// fused_step_exact_fast, round_accumulator_output_fast) are pinned to it by
// tests/test_gemm_engine.cpp.
double fused_step(const AccumulatorSpec& m, const double* a, const double* b, int n, double c);

// The same step with each operand's alignment exponent given (gemm.hpp's Operand::exponent:
// for subnormal inputs the format's minimum normal exponent, which fused_step cannot know).
double fused_step_exponents(const AccumulatorSpec& m, const double* a, const int* ea,
                            const double* b, const int* eb, int n, double c);

// The step's final rounding: u into m.output by m.output_rounding; beyond the output's
// largest binade the result is +-Inf whatever the direction; a zero result is +0.
double round_accumulator_output(const AccumulatorSpec& m, const Unrounded& u);

// The exact value s * 2^grid as an Unrounded (64-bit significand plus sticky).
Unrounded unrounded_from_int(__int128 s, int grid);

// The step's c entry for models with CEntry::add: r (the rounded product sum, a value of
// m.output) plus c in one IEEE add into m.output, rounded to nearest even.
double add_c_after(const AccumulatorSpec& m, double r, double c);

// The alignment exponent of a finite nonzero operand value v of format f: its own exponent,
// raised to the smallest normal exponent of f (or of m.unpack when the model unpacks).
int operand_exponent(const AccumulatorSpec& m, const FormatSpec& f, double v);

// The smallest alignment exponent c takes in a step: the output format's smallest normal
// exponent (a subnormal c aligns there, as a subnormal operand does).
int c_min_exponent(const AccumulatorSpec& m);

// Products one instruction consumes: m.block, or m.group when the model has no block.
int step_products(const AccumulatorSpec& m);

// One instruction of a model with a block (m.block > 0): its steps from zero in the block's
// element order, then added into c (add_c_after). Without a block: fused_step_exponents.
double fused_block(const AccumulatorSpec& m, const double* a, const int* ea, const double* b,
                   const int* eb, int n, double c);

// A dot product along K of values of formats fa and fb: steps of step_products(m) products
// (fused_block), c entering the first; alignment exponents from operand_exponent.
double chained_dot(const AccumulatorSpec& m, const FormatSpec& fa, const double* a,
                   const FormatSpec& fb, const double* b, int k, double c);

}  // namespace fp8sim
