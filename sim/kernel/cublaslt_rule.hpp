// cublaslt_rule: the split-K count cuBLASLt 13.1's heuristic gives torch._scaled_mm, as a rule
// read off its recorded answers (sim/data/cublaslt_plans_<gpu>: 1,332,240 per GPU) and proven on
// every one of them and on traced held-out calls (tests/test_cublaslt_plan.cpp); where the rule
// cannot decide, it says so and the caller uses the table's own point or refuses.
//
// The split alone decides the numerics (sim/gemm/gemm_split.hpp); the rule gives no tile or
// cluster: those follow a cost model with no closed form in the recordings (docs/cublaslt.md).
// The per-GPU constants are data: the table's "split_rule", written by
// cuda/capture/derive_cublaslt_rule.py --write, which re-derives and checks them for any GPU.
#pragma once

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernel/cublaslt_plan.hpp"

namespace fp8sim {

// One GPU's constants (groups are "<out> <scale>", e.g. "bf16 tensor").
struct SplitRuleConstants {
  int slice_floor_k = 0;                       // 0: the table holds no rule
  std::vector<std::string> never_split_scales;  // scale modes that never split ("row")
  std::vector<std::string> fast_same_split;     // groups where fast accumulation never changes it
  std::vector<std::string> bias_same_split;     // groups where a bias never changed it (traced)
  std::vector<std::string> groups;              // the groups the table recorded
  long long workspace_limit = 0;   // bytes torch gives cuBLASLt (1 MiB)
  long long workspace_header = 0;  // bytes a split needs besides its partial results (16)
  int partial_n_min = 0;           // a slice's partial result is M x max(N, this) floats (32)
  std::vector<int> m_axis, n_axis, k_axis;      // the recorded M, N, K, ascending
  // Step 6, the fill boxes (absent: the step decides nothing). A call in the split zone whose
  // output, covered by tiles of fill_tile (torch's N x torch's M: cuBLASLt's smallest split-K
  // tile, 64x8 in its column-major view), launches C = tiles x S_max CTAs at S_max slices (the
  // most steps 2 and 3 allow) takes S_max when S_max <= box[0] and C <= box[1] for a box.
  int fill_tile_n = 0, fill_tile_m = 0;
  std::vector<std::pair<int, long long>> fill_boxes;
  std::vector<std::string> fill_pinned_by;      // the counterexample that bounds each box
  std::vector<std::string> fill_groups;         // the groups the boxes were seen exact for
  std::vector<std::string> fill_bias;           // ... and with a bias
  long checked_traced_calls = 0;  // traced calls the rule decides, all exact when it was written
};

// The table's "split_rule" and axes; an absent "split_rule" gives constants that decide nothing.
// Throws std::invalid_argument naming the field when one is malformed.
SplitRuleConstants split_rule_constants(const nlohmann::json& table_meta);

// What the table recorded at a grid point of the call's variant: the split count (0 where
// cuBLASLt returned no algorithm, -1 where (m, n, k) is not a recorded point) and the kernel
// ("algo tile stages custom cluster": the configuration, its split and workspace aside).
struct RecordedPoint {
  int split_k = -1;
  std::string kernel;
};
using RecordedSplit = std::function<RecordedPoint(int m, int n, int k)>;

struct SplitRuleAnswer {
  int split_k = 0;  // 0: not decided by the rule
  std::string why;  // the step that decided it, or why none did
};

// The rule's split for `call`. `recorded` may be empty (then step 5 is skipped).
SplitRuleAnswer cublaslt_split_rule(const ScaledMmCall& call, const SplitRuleConstants& rule,
                                    const RecordedSplit& recorded);

// A recorded GPU's constants and its recorded points (defined with the tables, in
// cublaslt_plan.cpp); `gpu` as for cublaslt_plan(). The test checks the rule at every point.
const SplitRuleConstants& cublaslt_split_rule_constants(std::string_view gpu);
RecordedPoint cublaslt_recorded_point(std::string_view gpu, const ScaledMmCall& call);

}  // namespace fp8sim
