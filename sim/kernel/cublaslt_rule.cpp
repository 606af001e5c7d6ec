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
    r.groups = s.at("groups").get<std::vector<std::string>>();
    r.workspace_limit = s.at("workspace_limit").get<long long>();
    r.workspace_header = s.at("workspace_header").get<long long>();
    r.partial_n_min = s.at("partial_n_min").get<int>();
    r.checked_traced_calls = s.value("checked_traced_calls", 0L);
    if (s.contains("fill_boxes")) {
      const auto tile = s.at("fill_tile").get<std::vector<int>>();
      if (tile.size() != 2 || tile[0] < 1 || tile[1] < 1)
        throw std::invalid_argument("cuBLASLt plan table: split_rule: fill_tile is not 2 sizes");
      r.fill_tile_n = tile[0], r.fill_tile_m = tile[1];
      for (const auto& b : s.at("fill_boxes")) {
        const auto box = b.get<std::vector<long long>>();
        if (box.size() != 2 || box[0] < 2 || box[0] > 1 << 20 || box[1] < 2)
          throw std::invalid_argument("cuBLASLt plan table: split_rule: a malformed fill box");
        r.fill_boxes.emplace_back(static_cast<int>(box[0]), box[1]);
      }
      r.fill_pinned_by = s.at("fill_pinned_by").get<std::vector<std::string>>();
      r.fill_groups = s.at("fill_groups").get<std::vector<std::string>>();
      r.fill_bias = s.at("fill_bias").get<std::vector<std::string>>();
      if (r.fill_pinned_by.size() != r.fill_boxes.size())
        throw std::invalid_argument("cuBLASLt plan table: split_rule: fill_pinned_by does not "
                                    "name one counterexample per fill box");
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(fmt::format("cuBLASLt plan table: split_rule: {}", e.what()));
  }
  if (r.workspace_limit <= r.workspace_header || r.partial_n_min < 1)
    throw std::invalid_argument("cuBLASLt plan table: split_rule: a malformed workspace");
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
  // 3. The workspace: each slice's partial result is M x max(N, 32) floats in the workspace
  //    torch gives (1 MiB), after a 16-byte header. All 78,641 (H100) and 87,178 (H200) split
  //    points need exactly 4 S M max(N, 32) + 16 (or 20) bytes, and none splits more than
  //    (1 MiB - 16) / (4 M max(N, 32)) slices. So M max(N, 32) > 131,070 never splits: the
  //    grid's largest M N that splits is 1 x 129,280, and none of its shapes with M N = 131,072
  //    (1 x 131072, 2 x 65536, ... 512 x 256) splits at any K. The partial results are FP32
  //    whatever the output type, the bias or fast accumulation, so this step holds for every
  //    variant, e4m3 outputs and every bias included: of 660,000 random calls recorded on the
  //    H100 on 2026-11-26 (11,000 shapes x 60 variants), the 31,592 that pass steps 1 and 2
  //    with room for at most one slice all run unsplit, in every variant (15,887 of them are in
  //    tests/data/cublaslt_random_h100.json).
  const long long partial = static_cast<long long>(c.m) * std::max(c.n, r.partial_n_min);
  const long long ws_slices = (r.workspace_limit - r.workspace_header) / 4 / partial;
  if (ws_slices <= 1)
    return {1, fmt::format("two slices of {} x {} floats do not fit the {}-byte workspace", c.m,
                           std::max(c.n, r.partial_n_min), r.workspace_limit)};
  // 6 (taken before 4: it holds for every variant it was seen for, a bias included). The fill
  //    boxes: where even at the most slices the output is covered by few CTAs, cuBLASLt takes
  //    the most slices, S = S_max = min(S0(K), workspace slices). "Few" is measured in tiles
  //    of cuBLASLt's smallest split-K tile (64x8 in its column-major view, i.e. 64 of torch's N
  //    by 8 of torch's M), whatever tile it then runs: C = ceil(N/64) ceil(M/8) S_max CTAs. On
  //    the H100 (cuda/capture/derive_cublaslt_rule.py --fill, from the 1.3 M recorded points
  //    and 77,286 traced calls, 67,687 of them random calls of every variant) S = S_max at all
  //    22,916 tensor-scaled points with S_max <= 2 and C <= 98, S_max <= 4 and C <= 90, <= 8
  //    and 78, <= 16 and 63, or <= 32 and 42; each box stops below a counterexample (the
  //    table's fill_pinned_by: e.g. 14x64x56608, e4m3 out, S_max 22 and C 44, cuBLASLt 21).
  //    Beyond them cuBLASLt often takes fewer slices (one wave of 132 SMs is not its bound:
  //    1x512x32768 runs 8 tiles x 9 slices where 12 fit). Block scales break it at C = 14
  //    (8x16x36864: 13 slices of 14), so the boxes are for the groups in fill_groups only.
  if (!r.fill_boxes.empty() && contains(r.fill_groups, group) &&
      (!c.bias || contains(r.fill_bias, group))) {
    const int s_max = static_cast<int>(std::min<long long>(s0, ws_slices));
    const long long tiles = (static_cast<long long>(c.n) + r.fill_tile_n - 1) / r.fill_tile_n *
                            ((static_cast<long long>(c.m) + r.fill_tile_m - 1) / r.fill_tile_m);
    const long long ctas = tiles * s_max;
    for (std::size_t b = 0; b < r.fill_boxes.size(); ++b)
      if (s_max <= r.fill_boxes[b].first && ctas <= r.fill_boxes[b].second)
        return {s_max, fmt::format("the split zone's fill box {} (at most {} slices and {} "
                                   "CTAs of {}x{} tiles): {} slices, {} CTAs, so cuBLASLt "
                                   "takes them all", b + 1, r.fill_boxes[b].first,
                                   r.fill_boxes[b].second, r.fill_tile_n, r.fill_tile_m, s_max,
                                   ctas)};
  }
  // 4. Which variants the recorded points speak for. Fast accumulation never changes the split
  //    at a recorded point: the tensor-scaled (and row-scaled) plans with and without it split
  //    alike at all of them (88,816 pairs per output type and GPU); off the grid it does, in the
  //    split zone only (114x528x5968, f32/bf16/f16 out, H100: unsplit without it, two slices
  //    with it, another kernel), so step 5 asks the call's own variant. A bias: only where the
  //    traced calls show it never changed the split (f16 out with row scales); with tensor
  //    scales it can (36x512x11200, bf16 out, H100: 4 slices without a bf16 bias, 3 with it).
  //    Steps 1 to 3 hold with any bias: a bias changes neither the scale mode, K nor the
  //    partial results.
  if (!contains(r.groups, group))
    return {0, fmt::format("no recorded plans for {} outputs with {} scales", c.out, c.scale)};
  if (c.fast && !contains(r.fast_same_split, group))
    return {0, "fast accumulation changes this variant's split at some recorded point"};
  if (c.bias && !contains(r.bias_same_split, group))
    return {0, "no traced calls show how a bias changes this variant's split"};
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
  // Everything else is the split zone: 2 <= min(S0(K), workspace slices). There cuBLASLt picks
  // between 1 and that many slices, with the tile and cluster, by a cost with no closed form in
  // the recordings (docs/cublaslt.md has the study of 36,095 random H100 calls in the zone):
  // the output type enters beyond its size (1x16x86576, one 64x8 2x1x1 kernel: 33 slices for
  // bf16 out, 32 for f16), the slice is no fixed length (one tile of 64x8 1x1x1: 1x16x120896
  // cuts 47 slices of 2572, 5x16x115232 42 of 2744 where 45 fit), filling one wave of 132 SMs
  // is right at 72% of them even given cuBLASLt's tile, and the tile itself changes with N's
  // divisibility, the output type and M (1x18432x106496, f32 out: 192x8 and 4 slices at M = 1,
  // 384x8 and 7 at M = 2, 192x8 and 4 at M = 3). So only a recorded point answers.
  return {0, fmt::format("in the split zone (up to {} slices by K, {} by the workspace), where "
                         "only recorded points answer", s0, ws_slices)};
}

}  // namespace fp8sim
