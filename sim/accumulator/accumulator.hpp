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

#include "format/format.hpp"
#include "format/rounding.hpp"

namespace fp8sim {

// Where the incoming accumulator c enters a step.
enum class CEntry : std::uint8_t {
  join,     // c is aligned and cut with the products (wgmma, tcgen05, Ada mma)
  exact,    // c is added exactly to the cut product sum, before the output rounding
  add,      // c is added after the products' sum is rounded to the output: one IEEE add,
            // round to nearest even (B200 kind::f8f6f4 as fitted, sm_90 mma.sync)
  realign,  // AMD CDNA3 MFMA: the cut product sum and c are realigned on the larger of
            // their exponents, the sum cut down to realign_frac + 1 fraction bits and c to
            // frac_bits, added, normalised, cut down to realign_frac bits, then rounded
};
CEntry parse_c_entry(std::string_view s);  // join|exact|add|realign
std::string_view to_string(CEntry c);

// How a step computes: the fused group sum above, or IEEE fp32 arithmetic.
enum class StepArithmetic : std::uint8_t {
  fused,     // align, cut, add exactly, round once (everything below)
  pairwise,  // AMD CDNA2 16-bit MFMA (MMA-Sim's FTZ_MUL_ADD): subnormal operands enter as
             // +0, and so does a subnormal or -0 C entering the chain (entering_c); each
             // product rounded to fp32; the step's `group` (2 or 4) products summed in a
             // pairwise tree of fp32 adds, then added to c; every product and sum rounded to
             // nearest even, a subnormal result flushed to a zero of its sign
};
StepArithmetic parse_step_arithmetic(std::string_view s);  // fused|pairwise
std::string_view to_string(StepArithmetic a);

// Block scales applied inside the step (block-scaled MMAs: kind::mxf8f6f4, mxf4, mxf4nvf4):
// A and B each carry one scale of `format` per `block` elements along K. A term's alignment
// exponent includes both scales' exponents and its value both scales' significands.
struct BlockScale {
  FormatSpec format;  // ue8m0 or ue4m3
  int block = 32;     // elements per scale along K (32 or 16)
  friend bool operator==(const BlockScale&, const BlockScale&) = default;
};

// One accumulator model: one instruction's arithmetic, as data. The fields come in four
// parts; validate() rejects the combinations that mean nothing (listed there), and every
// model a front-end can name passes through it (accumulator_by_name).
//
// 1. What one step takes. A step fuses `group` products. Each is a term of its own, or with
//    group_sum > 1 consecutive runs of group_sum products are summed exactly into one term
//    (two-level sum; the term's alignment exponent is then its block scales', mxf4nvf4). With lanes > 1 the step's
//    terms split by k mod lanes into sub-sums, each aligned and cut on its own largest
//    exponent, then realigned on the largest of them and cut down (toward -inf) to
//    frac_bits (AMD CDNA3 FP8: even and odd products). With block > 0 one instruction is
//    block / group chained steps from zero whose result enters c with one add (sm_90
//    mma.sync), optionally over interleaved K.
// 2. Alignment. Terms align on the largest alignment exponent among them (and c's when c
//    joins): a product's is e_a + e_b (its significand in [1, 4)), or with renormalise the
//    exact product's own. Zero terms take no part, unless zero_exponent is set: then a zero
//    term (and a zero c that joins) counts with that exponent (MMA-Sim's e_zero). Each term
//    is cut to frac_bits fraction bits below the alignment exponent by term_cut (rz toward
//    zero, rne, rd toward -inf) and the cut terms are added exactly.
// 3. Where c enters: c_entry (with realign_frac and realign_drop_far for realign).
// 4. The output: one rounding of the step's sum into `output` by output_rounding; or, with
//    exact, the exact sum of c and the step's products rounded once (parts 1-3 unused).
struct AccumulatorSpec {
  std::string name;                  // preset name (after the instruction), the custom: text
                                     // it was parsed from, or "probed" (ProbeReport::as_model)
  std::vector<std::string> aliases;  // short names accumulator_by_name also takes
  std::string instruction;           // the PTX / ISA instruction and qualifiers it models
  // 1. The step
  StepArithmetic arithmetic = StepArithmetic::fused;  // pairwise: parts 2-4 unused but the
                                     // output (fp32)
  int group = 32;                    // products fused per step (>= 1; 0: one step per
                                     // chunk, exact models only)
  int group_sum = 1;                 // products summed exactly into one term
  int lanes = 1;                     // interleaved sub-sums (1: none; 2: even/odd k)
  int block = 0;                     // products per instruction when it is several chained
                                     // steps (sm_90 mma.sync: 32 = two 16-product steps);
                                     // 0: one step per instruction
  bool interleave = false;           // within each block, the first step takes the elements
                                     // with k mod 4 in {0,1}, the second those in {2,3}
  std::optional<FormatSpec> unpack;  // operands enter the tensor core in this wider format
                                     // (sm_90 mma.sync: fp16, F2FP.F16.E4M3.UNPACK_B), so an
                                     // FP8 subnormal that is normal there aligns on its own
                                     // exponent, not on the FP8 format's smallest normal one
  std::optional<BlockScale> block_scale;  // scales applied inside the step
  bool product_overflow = false;     // a product beyond the output's range is +-Inf before
                                     // any sum (CDNA3: a bf16 x bf16 product past 2^128)
  // 2. Alignment
  bool renormalise_products = false; // false: a product's exponent is e_a+e_b; true: the
                                     // exact product's
  std::optional<int> zero_exponent;  // a zero term's (and zero c's) alignment exponent
  int frac_bits = 13;                // fraction bits kept below the alignment exponent (0..62)
  Rounding term_cut = Rounding::rz;  // rz, rne or rd
  // 3. c
  CEntry c_entry = CEntry::join;
  int realign_frac = 0;              // realign: fraction bits of the realigned sum (CDNA3: 31)
  bool realign_drop_far = false;     // realign: c below 2^(e - frac_bits - 1) of the realigned
                                     // exponent e counts as zero (CDNA3 FP8)
  // 4. The output
  FormatSpec output;                 // output grid (e8m13: 14 significant bits in fp32)
  Rounding output_rounding = Rounding::rz;
  bool signed_zero = false;          // a nonzero sum that rounds to zero keeps its sign (IEEE:
                                     // AMD, fmaf); false: +0 (NVIDIA, MMA-Sim's "+ 0.0")
  bool exact = false;                // exact sum of c and the step's products, one rounding
  std::string evidence;              // where the parameters come from: own capture, public
                                     // vectors, MMA-Sim file and version
};

// Every preset, in the order `fp8sim models` lists them (NVIDIA by architecture, then AMD,
// then the plain fp32 and exact models). Names follow the instruction
// ("sm_90a.wgmma.f32.f8"); aliases are the short names ("hopper-wgmma").
const std::vector<AccumulatorSpec>& accumulator_presets();

// A preset by name or alias, or a custom model: "custom:group=32,frac=13,out=14,cut=rz" with
// optional keys outround=rz|rne|..., c=join|exact|add|realign, renorm=0|1, block=N,
// arith=fused|pairwise,
// interleave=0|1, unpack=<format>|none, outfmt=<format> (overrides out=), zero=<exponent>|
// none, groupsum=N, lanes=N, realign=<frac>, dropfar=0|1, scale=<format>:<block>|none,
// overflow=0|1, signedzero=0|1.
// `out=B` means B significant bits in an fp32 container (format e8m(B-1)).
// Throws std::invalid_argument naming the bad key or value.
AccumulatorSpec accumulator_by_name(std::string_view name);

// Checks ranges (group >= 1, frac_bits 0..62, output width) and the combinations that mean
// nothing: block with c other than add or with lanes, group sums or block scales; group_sum
// not dividing group, or without block scales; lanes not dividing group, or with c=join;
// realign parameters without c=realign; block scales whose block does not hold whole steps'
// runs; a cut other than rz, rne or rd. Throws std::invalid_argument.
void validate(const AccumulatorSpec& m);

// One line: "group=32 frac=13 cut=rz c=join renorm=0 out=e8m13 outround=rz" (then the
// fields that differ from their defaults: block, interleave, unpack, zero, groupsum, lanes,
// realign, dropfar, scale, overflow, signedzero, arith).
std::string describe(const AccumulatorSpec& m);

// Block scales of the products of one step (BlockScale): sa[i] and sb[i] are the decoded
// scales of product i's A and B blocks (values of the model's scale format).
struct StepScales {
  const double* sa = nullptr;
  const double* sb = nullptr;
};

// One fused step with exact input values (each a decoded format value):
//   result = round_output( c (+) sum_{i<n} a[i]*b[i] ),  n <= group.
// Special values: any NaN operand or scale, 0*Inf, or Inf-Inf gives NaN; otherwise an Inf
// product or c gives that Inf; a finite sum beyond the output's range overflows to Inf.
// Each operand aligns on its own exponent: the formats are unknown here (chained_dot takes
// them, for subnormal operands and AccumulatorSpec::unpack).
// This is the plain reference implementation; sim/gemm/engine_cpu.cpp's fast clones (fused_step_fast,
// fused_step_exact_fast, round_accumulator_output_fast) are pinned to it by
// tests/test_gemm_engine.cpp.
double fused_step(const AccumulatorSpec& m, const double* a, const double* b, int n, double c);

// The same step with each operand's alignment exponent given (gemm.hpp's Operand::exponent:
// for subnormal inputs the format's minimum normal exponent, which fused_step cannot know),
// and the step's block scales where the model has them.
double fused_step_exponents(const AccumulatorSpec& m, const double* a, const int* ea,
                            const double* b, const int* eb, int n, double c,
                            StepScales scales = {});

// The step's final rounding: u into m.output by m.output_rounding; beyond the output's
// largest binade the result is +-Inf whatever the direction; a zero result is +0, or with
// m.signed_zero the sign of a nonzero u that rounds to zero.
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

// C as it enters a chain of steps: c itself, or for StepArithmetic::pairwise +0 when it is
// below fp32's normal range (-0 included).
double entering_c(const AccumulatorSpec& m, double c);

// Products one instruction consumes: m.block, or m.group when the model has no block.
int step_products(const AccumulatorSpec& m);

// Whether m.zero_exponent can change a step on operands of formats a and b: only when it
// lies above the smallest alignment exponent a nonzero product or c can have.
bool zero_exponent_matters(const AccumulatorSpec& m, const FormatSpec& a, const FormatSpec& b);
// The same where every nonzero product's alignment exponent is known to be at least `lowest`
// (operands whose floors moved with folded block scales: sim/gemm/block_fold.hpp).
bool zero_exponent_matters(const AccumulatorSpec& m, int lowest);

// Whether the model uses a feature only the reference step computes (group sums, lanes,
// block scales, c realigned, cuts toward -inf): the fast engines take it where this is false.
bool needs_reference_step(const AccumulatorSpec& m);

// One instruction of a model with a block (m.block > 0): its steps from zero in the block's
// element order, then added into c (add_c_after). Without a block: fused_step_exponents.
double fused_block(const AccumulatorSpec& m, const double* a, const int* ea, const double* b,
                   const int* eb, int n, double c, StepScales scales = {});

// A dot product along K of values of formats fa and fb: steps of step_products(m) products
// (fused_block), c entering the first; alignment exponents from operand_exponent. With
// block scales, sa and sb hold one decoded scale per element of a and b (k of them).
double chained_dot(const AccumulatorSpec& m, const FormatSpec& fa, const double* a,
                   const FormatSpec& fb, const double* b, int k, double c,
                   const double* sa = nullptr, const double* sb = nullptr);

}  // namespace fp8sim
