// probe: infer a black-box dot-product kernel's accumulator parameters from its outputs.
//
// probe() feeds a kernel batches of designed dot products (FP8 codes along K, an fp32 c per
// row) and reads back one fp32 result per row. Every vector is built so that exactly one
// parameter decides whether a chosen small term survives, e.g. "+P, -P, s" in one step keeps
// s only when s lies on the grid 2^(e_P - frac_bits). The inferences, in order:
//   1. group: +P at k=0, -P at k=i, a tiny s at k=i+1 survives iff i+1 starts a new step;
//      the group is the gcd of those i+1.
//   2. frac_bits and term cut (group >= 3): +P, -P, s = 2^(e_P - t) in one step: s survives
//      iff t <= frac_bits; s = 0.75 of the grid step gives 0 (rz) or one step (rne).
//      Group 1 or 2 with c in the alignment: c = P + 2^(e_P - t), one product -P.
//   3. renormalisation: +Q, -Q, s with Q = 1.5*1.5*2^E (significand in [2,4)): s = 2^(E - F)
//      survives iff the alignment exponent is e_a + e_b, not the exact product's.
//      Unpacking: the same with Q = (largest power of two) * (smallest subnormal): s on the
//      subnormal's own grid survives iff operands are unpacked to a wider format (sm_90
//      mma.sync: fp16). Observable only where that s is a product: with mixed e5m2 x e4m3
//      operands for a 25-bit step, with e4m3 alone for a 13-bit one.
//   4. c: c far below the grid of +P, -P: it survives iff c stays out of the alignment; with
//      c = -(big) and big + x needing one bit more than the output, x survives iff c is
//      added before the output rounding (else c is added after it, as on B200).
//   5. output bits: big + x for many spans (one product, g-1 large products, c + product);
//      x survives iff the span fits the output: each try bounds out_bits from one side.
//      When product sums keep fewer bits than c + product, c is added after the rounding in
//      a wider adder (a library epilogue such as cuBLASLt's D = acc + C): c_adder_bits.
//      Output rounding from big + {1/4, 1/2, 3/4} ulp, and -(big + 1/4 ulp).
//      Output range: two products of 2^15 in one step give Inf when the output is fp16-like.
//   6. promotion: P at k=0 and x = 2^(e_P - 23) at k=j (a multiple of the group): a limited
//      accumulator loses x, an FP32 main accumulator keeps it, so x survives iff k=j lies in
//      a later chunk than P; the smallest such j is the interval.
// Each inference appends one evidence line: the vector, what came back, what it means.
// When the group vector shows steps that are not consecutive runs of K, the steps are read
// position by position over two blocks (1b, in probe_sum.cpp): sm_90's mma.sync gives group 16,
// block 32, interleave; any other order is reported in one line as no model's order.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "accumulator/accumulator.hpp"
#include "format/format.hpp"
#include "format/rounding.hpp"

namespace fp8sim {

// T independent dot products of K codes each (a, b row-major T x K), c[t] entering each.
struct DotBatch {
  FormatSpec a_format, b_format;
  int T = 0, K = 0;
  std::vector<std::uint8_t> a, b;  // T x K codes each, row-major
  std::vector<float> c;            // T values (empty = zeros)
};

// The kernel under test: returns the T results of a batch (throws on failure).
using DotKernel = std::function<std::vector<float>(const DotBatch&)>;

struct ProbeOptions {
  FormatSpec format = format_by_name("e4m3");  // code format of A (and of B when b_format
                                                // is not set)
  std::optional<FormatSpec> b_format;          // B's code format when it differs
  int max_k = 4096;      // longest K tried (promotion search), 1..2^20; it must exceed the
                         // group found, else probe() throws std::invalid_argument
  int max_group = 256;   // largest group size looked for, 2..4096
  int k_multiple = 1;    // every batch's K is padded (with zero codes) to a multiple of this,
                         // 1..2^20
};

struct ProbeReport {
  int group = 0;                          // products fused per step
  int block = 0;                          // > 0: chained steps per instruction (mma.sync)
  bool interleave = false;                // the block's steps take k mod 4 in {0,1}, {2,3}
  std::string unpack;                     // "" or the format operands are unpacked to (fp16:
                                          // an FP8 subnormal aligns on its own exponent)
  bool unpack_identified = false;         // false: unpack not observable, "" assumed
  int frac_bits = -1;                     // -1: no cut seen (exact sum) within the tested span
  Rounding term_cut = Rounding::rz;       // rz or rne
  int out_bits = 24;                      // significant bits of the step output
  Rounding output_rounding = Rounding::rz;
  bool c_joins = true;                    // c aligned and cut with the products
  bool renormalise = false;               // alignment on the exact product's exponent
  int promote_every = 0;                  // 0: no promotion seen within max_k
  std::vector<std::string> evidence;      // one line per inference

  // Beyond the fixed interface:
  bool c_added_after = false;             // c added after the output rounding (B200)
  int c_adder_bits = 0;                   // > 0: c is added after, in an adder of these bits
                                          // wider than the output (a library epilogue);
                                          // as_model() cannot express it
  int out_max_exponent = 127;             // 15: the output overflows like fp16
  bool out_bits_identified = false;       // false: out_bits only bounded (lower bound kept)
  bool output_rounding_identified = false;

  AccumulatorSpec as_model() const;       // the model with these parameters (name "probed")
  std::string describe() const;           // one line, as `fp8sim models` prints a model
};

// The fields of r that disagree with model m promoted every `promote_every` products, as
// "group, frac" ("" when all agree). Only identified fields count: an output width or
// rounding the vectors could not reach, or an unobservable unpacking, is not held against m.
std::string disagreements(const ProbeReport& r, const AccumulatorSpec& m, int promote_every);

// Runs every probe against `kernel`. Throws std::runtime_error when the kernel returns the
// wrong number of results or results that fit no model (e.g. NaN for finite inputs).
ProbeReport probe(const DotKernel& kernel, const ProbeOptions& opts = {});

// A DotKernel that runs the simulator's engine (batched_dot) for `model` with promotion
// every `promote_every` products (0 = never); K is padded with zeros to the model's
// products per instruction (step_products).
DotKernel model_kernel(const AccumulatorSpec& model, int promote_every = 0);

}  // namespace fp8sim
