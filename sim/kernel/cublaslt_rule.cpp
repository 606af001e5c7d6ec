// cublaslt_rule: how a torch._scaled_mm shape becomes cuBLASLt's split-K count, step by step.
//
// Conventions: torch's call is (M x K) times (K x N); cuBLASLt sees it column-major, so its M is
// torch's N (that only matters for tiles, which this rule does not give). "S0(K)" below is the
// most slices the slice floor allows. The counts quoted are the recorded points of the H100's
// and the H200's tables (cuBLASLt 13.1.0, 26 M x 61 N x 56 K x 15 variants each) and the traced
// held-out calls (tests/data/cublaslt_heldout_<gpu>.json); cuda/capture/derive_cublaslt_rule.py
// re-derives every constant and prints these counts.
#include "kernel/cublaslt_rule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace fp8sim {
namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// The most slices the slice floor allows: the largest S with K / S > floor, i.e. every slice
// longer than `floor` K elements. Written as ceil(K / floor) - 1 (at least 1).
int max_slices(long long k, int floor) {
  return static_cast<int>(std::max(1LL, (k + floor - 1) / floor - 1));
}

// [x] where x is recorded; the recorded values on either side where x lies inside; {} outside.
std::vector<int> bracket(const std::vector<int>& axis, int x) {
  const auto hi = std::lower_bound(axis.begin(), axis.end(), x);
  if (hi != axis.end() && *hi == x) return {x};
  if (hi == axis.begin() || hi == axis.end()) return {};
  return {*(hi - 1), *hi};
}

std::string span(const std::vector<int>& v) {
  return v.size() == 1 ? fmt::format("= {}", v[0]) : fmt::format("{} and {}", v[0], v[1]);
}

}  // namespace

SplitRuleConstants split_rule_constants(const nlohmann::json& meta) {
  SplitRuleConstants r;
  try {
    const auto& axes = meta.at("axes");
    for (auto [axis, name] : {std::pair{&r.m_axis, "m"}, {&r.n_axis, "n"}, {&r.k_axis, "k"}}) {
      *axis = axes.at(name).get<std::vector<int>>();
      std::sort(axis->begin(), axis->end());
    }
    if (!meta.contains("split_rule")) return r;
    const auto& s = meta.at("split_rule");
    r.slice_floor_k = s.at("slice_floor_k").get<int>();
    r.never_split_scales = s.at("never_split_scales").get<std::vector<std::string>>();
    r.fast_same_split = s.at("fast_same_split").get<std::vector<std::string>>();
    r.bias_same_split = s.at("bias_same_split").get<std::vector<std::string>>();
    r.no_split_above_mn = s.at("no_split_above_mn").get<std::map<std::string, long long>>();
    r.checked_traced_calls = s.value("checked_traced_calls", 0L);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(fmt::format("cuBLASLt plan table: split_rule: {}", e.what()));
  }
  if (r.slice_floor_k < 128 || r.slice_floor_k % 128 != 0)
    throw std::invalid_argument(fmt::format(
        "cuBLASLt plan table: split_rule: slice_floor_k {} is not a positive multiple of 128",
        r.slice_floor_k));
  return r;
}

SplitRuleAnswer cublaslt_split_rule(const ScaledMmCall& c, const SplitRuleConstants& r,
                                    const RecordedSplit& recorded) {
  if (r.slice_floor_k <= 0) return {0, "the table holds no split rule"};
  const std::string group = c.out + " " + c.scale;
  // 1. Row scales (and any scale mode in never_split_scales): cuBLASLt's row-scaled kernels
  //    never split K. Pinned by all 532,896 row-scaled recorded points of each GPU, 1x16x131072
  //    included, where tensor scales split 51 ways; held out: 1,920 calls of 1,920 on each GPU,
  //    and 270 of 270 (H100) with an f16 bias. A bias does not change the scale mode's kernel.
  if (contains(r.never_split_scales, c.scale))
    return {1, fmt::format("{} scales: no recorded call with them splits K", c.scale)};
  // 2. The slice floor: cuBLASLt splits K only into slices longer than slice_floor_k elements
  //    (2560 = 20 blocks of 128 on the H100 and H200), so S <= S0(K) = ceil(K / 2560) - 1.
  //    No recorded point of any variant splits more (1,332,240 per GPU); the floor is pinned
  //    from above by 1x16x131072 (split 51: floor < 131072/51 = 2570.04) and the K grain. Hence
  //    K <= 2 x 2560 = 5120 never splits: K = 5120 runs unsplit at all 1,586 (M, N) of every
  //    variant, and the held-out 1x2160x5280 and 12x3072x5312 split in two (issue 35), as S0
  //    allows. Applied to calls with a bias too (assumed: a bias epilogue does not shorten the
  //    slices), which the traced bf16- and f16-bias calls all bear out.
  const int s0 = max_slices(c.k, r.slice_floor_k);
  if (s0 <= 1)
    return {1, fmt::format("K = {} <= {}: two slices would be no longer than the slice floor "
                           "{}, and no recorded call splits below it", c.k, 2 * r.slice_floor_k,
                           r.slice_floor_k)};
  // 3. Fast accumulation never changes the split: at every recorded point the tensor-scaled
  //    (and row-scaled) plans with and without it split alike (88,816 pairs per output type and
  //    GPU). A bias: only where the traced calls show it never changed the split (bf16 out with
  //    tensor scales: 320 of 320 on each GPU), and by step 3 with fast accumulation as well.
  const auto mn_it = r.no_split_above_mn.find(group);
  if (mn_it == r.no_split_above_mn.end())
    return {0, fmt::format("no recorded plans for {} outputs with {} scales", c.out, c.scale)};
  if (c.fast && !contains(r.fast_same_split, group))
    return {0, "fast accumulation changes this variant's split at some recorded point"};
  if (c.bias && !contains(r.bias_same_split, group))
    return {0, "no traced calls show how a bias changes this variant's split"};
  // 4. Many output tiles: no recorded point with M*N above the largest that splits (129,280 =
  //    1 x 129280 for tensor scales, 129,024 for block scales; the H200's f32 129,024) splits;
  //    within the recorded ranges of M and N, so is taken for every such call. Held out: 719
  //    tensor- and block-scaled calls of 719 on each GPU.
  if (static_cast<long long>(c.m) * c.n > mn_it->second && !r.m_axis.empty() &&
      !r.n_axis.empty() && c.m <= r.m_axis.back() && c.n <= r.n_axis.back())
    return {1, fmt::format("M*N = {} above {}, the largest that splits at a recorded point",
                           static_cast<long long>(c.m) * c.n, mn_it->second)};
  // 5. An unsplit neighbourhood: at a recorded N, between the recorded K on either side (or at
  //    a recorded K) and between the recorded M on either side (or at a recorded M), where all
  //    these recorded plans run unsplit, and both M run the same kernel, no call splits. Along
  //    K, the split never falls as K grows between two unsplit points; along M, one kernel at
  //    both ends means the same tiles and clusters in between. Checked by leaving every recorded
  //    K, and every recorded M, out in turn: exact at all of them (every variant, both GPUs).
  //    Not between recorded N: N's divisibility by the tile changes the plan (N = 4096 splits
  //    where 3840 and 4608 do not, with one kernel at both), nor for plans that split alike.
  if (recorded) {
    const std::vector<int> ms = bracket(r.m_axis, c.m), ks = bracket(r.k_axis, c.k);
    if (!ms.empty() && !ks.empty() && ms.size() + ks.size() > 2) {
      bool unsplit = true;
      for (const int k : ks) {
        const RecordedPoint lo = recorded(ms.front(), c.n, k), hi = recorded(ms.back(), c.n, k);
        unsplit = unsplit && lo.split_k == 1 && hi.split_k == 1 && lo.kernel == hi.kernel;
      }
      if (unsplit)
        return {1, fmt::format("the recorded plans at M {}, N = {}, K {} all run unsplit, with "
                               "one kernel", span(ms), c.n, span(ks))};
    }
  }
  // Everything else is the split zone (small M*N, K > 5120): there cuBLASLt's choice between
  // S0(K) and fewer slices depends on M, N, K and the output type through a cost model that
  // the recordings do not pin (docs/cublaslt.md), so only a recorded point answers.
  return {0, fmt::format("in the split zone (K > {}, M*N <= {}), where only recorded points "
                         "answer", 2 * r.slice_floor_k, mn_it->second)};
}

}  // namespace fp8sim
