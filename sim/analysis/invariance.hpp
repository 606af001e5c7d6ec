// invariance: which batch sizes change one request's bits. For a GEMM kernel (cuBLASLt as
// torch._scaled_mm runs it, with its recorded plans; DeepGEMM; CUTLASS; the Triton block-FP8
// kernel; a loose recipe), N, K and a list of M: the plan the kernel runs at each M and where
// that answer came from, the M ranges of one plan, and at each change of plan how far ONE
// fixed input row's output moves, computed with the library's GEMM (gemm.hpp, CPU engine);
// then the setting that removes the change, checked the same way.
//
// What the report rests on:
//   1. The kernel's arithmetic for one output depends on M only through the plan (split-K,
//      instruction): every output of gemm() is one chain over K, whatever the other rows hold
//      (tests/test_invariance.cpp checks row 0 of real M-row GEMMs against the 1-row one).
//      So the row's D (1 x N) under the plan at M is the row's D in the M-row call.
//   2. The plan at M comes from the plan's own source, never a guess: cuBLASLt's recorded
//      tables and their rules (kernel/cublaslt_plan.hpp) or cuBLASLt itself asked on a GPU
//      (ask_cublaslt), a preset with no per-M setting
//      (DeepGEMM, CUTLASS: no split-K, one instruction), the user's fixed split, or the
//      Triton config a server picks and the instruction Triton lowers it to (plan_at). An M
//      whose plan no source decides is reported as refused with the source's one line; the
//      report fails only when every M is.
//   3. The input row and its scales are fixed: the row's codes and scale are the same at
//      every M. A per-tensor activation scale computed from the whole batch (dynamic
//      "tensor" quantisation) changes with the batch by itself; that is outside the GEMM and
//      not modelled here (row or block activation scales do not depend on other rows).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/model_layers.hpp"
#include "kernel/cublaslt_plan.hpp"
#include "kernel/gemm_inputs.hpp"

namespace fp8sim {

// What runs, and the problem: every setting except M.
struct InvarianceSpec {
  std::string kernel = "cublaslt";  // a kernel preset (kernel_presets()), or "" for a loose
                                    // recipe (model, promote_every, scale_order, split_k below)
  std::string gpu = "h100";         // cuBLASLt kernels: a recorded GPU or a plan table's .json
  // cuBLASLt kernels: when set, the plan at each M is asked of this instead of `gpu`'s tables
  // (the Python front-end's gpu="cuda" asks cuBLASLt on this machine's GPU, as torch asks
  // it; `gpu` then names that GPU). Throws std::invalid_argument (one line) where it has no
  // answer; that M is refused.
  std::function<CublasltPlan(const ScaledMmCall&)> ask_cublaslt;
  std::string out_type = "bf16";    // f32 | bf16 | f16
  std::string scaling;              // tensor | row | block ("": the kernel's first: cuBLASLt
                                    // tensor, the block-FP8 kernels block)
  bool bias = false;                // a bias in the call (cuBLASLt's plan for it; the row gets
                                    // a seeded bias rounded to bf16 / f16)
  std::string triton_config;        // triton-w8a8-block-fp8: the config (issue 36's spec)
  // A loose recipe (kernel ""): the GEMM options, fixed at every M.
  std::string model = "hopper-wgmma";
  int promote_every = 128;
  std::string scale_order = "deepgemm";
  int split_k = 1;
  int split_k_align = 128;
  int n = 0, k = 0;
  std::vector<int> m;               // increasing, distinct, each >= 1
  std::uint64_t seed = 1;           // the seeded Gaussian row and weights
  std::vector<double> a_row;        // the user's activation row (K values); empty: seeded N(0, 1)
  std::vector<double> b;            // the user's weights (N x K); empty: seeded N(0, 1)
  bool rows = true;                 // compute the row movement (false: plans only)
  int threads = 0;
};

// The plan at one M: what decides the row's arithmetic, as GEMM options, and where it came
// from. Two plans with equal `key` are one plan; equal `options` are one arithmetic.
struct PlanAt {
  std::string key;      // what the plan decides, comparable: "split-K 2", "preset", "BLOCK_M 16
                        // mma.sync.f16"
  std::string detail;   // the whole plan as its source states it (tile, stages, config)
  std::string source;   // table | rule | preset | given | server file | ...
  std::string why;      // one line: the grid point, the rule, the preset's evidence
  GemmOptions options;  // the GEMM the row runs with at this M
  int tile_m = 0;       // rows of A per tile (padded MACs); 0: not known
};

// The plan of `s`'s kernel at M = m (n, k from s). Throws std::invalid_argument with the
// source's one line where it cannot decide (cuBLASLt off its tables and rules; CUTLASS's
// can_implement refusing M; a Triton config a server cannot pick, e.g. a GPU with no files).
PlanAt plan_at(const InvarianceSpec& s, int m);

// The operands of the report's row, quantised as the kernel takes them: A's row (1 x K
// codes), B (N x K codes), the scales gemm() takes for them (one per tensor, per row, or per
// block), and the bias (N values of the output's type, or empty).
struct InvarianceInputs {
  std::vector<std::uint8_t> a, b;
  std::vector<float> sa, sb, bias;
  std::string what;     // "seeded N(0, 1) activations and weights, seed 1" or "the user's ..."
};
InvarianceInputs invariance_inputs(const InvarianceSpec& s);

// The row's D (N values of the output type, as float) under `options`.
std::vector<float> row_under(const InvarianceSpec& s, const InvarianceInputs& in,
                             const GemmOptions& options);

// How far one row moved between two plans.
struct RowMovement {
  std::size_t changed = 0;   // outputs whose bits differ
  double changed_share = 0;  // changed / N
  double max_ulp = 0;        // largest distance in units of the output type (ordinals)
  double max_rel = 0;        // largest |after - before| / |before| (inf where before is 0)
};
RowMovement row_movement(const std::string& out_type, const std::vector<float>& before,
                         const std::vector<float>& after);

// One M of the range.
struct PlanPoint {
  int m = 0;
  bool refused = false;
  std::string refusal;       // the source's one line
  PlanAt plan;               // when not refused
  int variant = -1;          // index into InvarianceReport::rows (distinct arithmetic); -1
};

// A maximal run of consecutive points of the range with one plan key (or all refused).
struct PlanRegion {
  int m_lo = 0, m_hi = 0;
  std::size_t points = 0;
  bool refused = false;
  std::string key, detail, sources;  // sources: "table 5, rule 120"
  std::string refusal;               // the first refusal's line
  int variant = -1;
};

// A change of plan between two answered regions (refused ones between them skipped).
struct PlanChange {
  int from = 0, to = 0;            // region indices
  int m_before = 0, m_after = 0;   // the last M of `from`, the first of `to`
  bool same_arithmetic = false;    // the two plans run the same GEMM options
  RowMovement movement;            // zero when same_arithmetic (or rows not computed)
};

// The setting that removes the change, checked with the same engine over the range.
struct InvarianceFix {
  std::string setting;         // "split_k=1 (--split-k 1)", "pin the config ..."
  std::string detail;
  GemmOptions options;         // the GEMM every M then runs
  bool checked = false;        // rows computed at every answered M under the fix
  bool invariant = false;      // the row's bits equal at every M of the range
  std::size_t distinct_rows = 0;
  double mac_ratio = 1;        // emulated MACs at the smallest M, relative to its own plan
  std::string cost;            // one line
};

struct InvarianceReport {
  InvarianceSpec spec;                  // as given (user rows left out)
  std::string kernel_text;              // "cublaslt (h100, bf16 out, tensor scales, ...)"
  std::string input_text;               // what the row is
  std::vector<PlanPoint> points;
  std::vector<PlanRegion> regions;
  std::vector<PlanChange> changes;
  std::vector<std::vector<float>> rows; // the row's D per distinct arithmetic (spec.rows)
  std::size_t refused = 0;
  bool invariant = false;               // every M answered, one arithmetic (and, with rows,
                                        // the row's bits equal at every M)
  std::string verdict;                  // one line
  std::optional<InvarianceFix> fix;     // for a variant range, where a setting removes it
};

// The report. Throws std::invalid_argument for a bad spec (unknown kernel, output type or
// scaling, N or K < 1, an empty or unordered M list, user rows of the wrong size, a row or
// weight not finite) and when every M is refused (the first refusal's line).
InvarianceReport invariance_report(const InvarianceSpec& s);

// The model-level view: the report of every layer of `m` (N and K from the layer, every other
// setting from `s`). A layer whose every M is refused gets a report of refusals (its verdict
// says so) instead of an error.
struct LayerInvariance {
  ModelLayer layer;
  InvarianceReport report;
};
std::vector<LayerInvariance> model_invariance(const InvarianceSpec& s, const ModelLayers& m);

// One table: per layer N, K, the verdict, the plans over the range and the M where the plan
// changes.
std::string format_model_table(const ModelLayers& m, const std::vector<LayerInvariance>& v);

// "1-4096" (every integer), "1,2,4,8" or a mix ("1-8,16,32"), each >= 1, increasing after
// sorting, at most limits::kMaxDim; throws std::invalid_argument naming the bad item.
std::vector<int> parse_m_list(std::string_view text);

// An M range as the tables print it: "5" (one M) or "1-16".
std::string m_range_text(int lo, int hi);

// The tables, as the CLI prints them and the CSV / JSON writers write them.
std::string format_report(const InvarianceReport& r);
std::string regions_csv(const InvarianceReport& r, std::string_view layer = "",
                        bool header = true);
std::string points_csv(const InvarianceReport& r, std::string_view layer = "",
                       bool header = true);
std::string report_json(const InvarianceReport& r);

}  // namespace fp8sim
