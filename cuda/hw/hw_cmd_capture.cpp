// hw_cmd_capture: `fp8sim-hw capture`, each capture set's inputs and kernel outputs as .npy
// files plus manifest.json, for replay without a GPU (sim/io/replay.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "io/capture.hpp"
#include "hw/hw_candidates.hpp"
#include "hw/hw_commands.hpp"
#include "hw/hw_harness.hpp"
#include "hw/hw_kernel_table.hpp"
#include "hw/hw_provenance.hpp"
#include "io/revision.hpp"

namespace fp8sim::hw {
namespace {

// The case on its first k columns of K (capture.hpp's slice_k; the model does not matter).
Case cut_k(const Variant& v, const Case& c, int k) {
  const KSlice cut = slice_k(variant_spec(v, c, "exact", v.promote_every), c.M, c.N, c.K, c.A,
                             c.B, c.sa, c.sb, k);
  Case s = c;
  s.K = k;
  s.A = cut.a, s.B = cut.b, s.sa = cut.sa, s.sb = cut.sb;
  return s;
}

}  // namespace

int cmd_capture(const std::string& out, std::uint64_t seed) {
  const DeviceInfo dev = device_info();
  // Every capture set of the kernel table, in row order.
  std::vector<CaptureSet> sets;
  for (const Variant& v : make_variants()) sets.insert(sets.end(), v.captures.begin(), v.captures.end());
  const auto variants = variants_to_run();
  for (const auto& set : sets) {
    const auto it = std::find_if(variants.begin(), variants.end(), [&](const Variant& v) { return v.name == set.variant; });
    if (it == variants.end()) {
      fmt::print("{}: skipped (variant {} not run)\n", set.dir, set.variant);
      continue;
    }
    const Variant& v = *it;
    const std::string dir = out + "/" + set.dir;
    std::vector<CaseRun> runs;
    Capture cap;
    cap.provenance = {dev.name, dev.driver, dev.cuda, dev.date, git_revision(),
                      "fp8sim-hw capture", "", seed};
    for (const auto& s : set.suites)
      for (Case c : make_suite(s, fmt_of(v.a), fmt_of(v.b), seed, v.block_scales, set.max_k)) {
        c = adapt_case(v, c);
        if ((v.block_scales && c.K % 128) || c.K > set.max_k) continue;
        const auto d = v.run(c);
        CaptureCase cc{fmt::format("{}_k{}", s, c.K), v.kernel, s, fmt::format("{:#x}", c.seed),
                       "", variant_spec(v, c, "exact", v.promote_every), c.M, c.N, c.K, c.A, c.B,
                       c.C, c.sa, c.sb, {}, d, {}, {}, {}, {}, {}};
        // Prefixes (K >= 512): the kernel on the first k columns, k = K/4, 2K/4, 3K/4.
        const int unit = v.block_scales ? 128 : 32;
        for (int j = 1; j <= 4 && c.K >= 512; ++j) {
          const int k = std::max(unit, (c.K * j / 4) / unit * unit);
          if (k < c.K && (cc.prefix_k.empty() || cc.prefix_k.back() != k)) cc.prefix_k.push_back(k);
        }
        for (int k : cc.prefix_k) {
          const auto dk = v.run(cut_k(v, c, k));
          cc.d_prefix.insert(cc.d_prefix.end(), dk.begin(), dk.end());
        }
        cap.cases.push_back(std::move(cc));
        runs.push_back({std::move(c), d});
      }
    // The model: the variant's own if it matches every output, else a candidate that does.
    std::string model;
    int promote = v.promote_every;
    auto all_match = [&](const std::string& m, int p) {
      for (const auto& r : runs) {
        std::vector<float> want;
        try {
          want = run_model(variant_spec(v, r.c, m, p), r.c);
        } catch (const std::invalid_argument&) {
          return false;
        }
        for (std::size_t i = 0; i < want.size(); ++i)
          if (!same_bits(r.d[i], want[i])) return false;
      }
      return true;
    };
    if (!v.model.empty() && all_match(v.model, v.promote_every)) {
      model = v.model;
    } else {
      const auto ranked = rank_candidates(v, runs);
      if (!ranked.empty() && ranked[0].matches == ranked[0].total) model = ranked[0].model, promote = ranked[0].promote_every;
      std::string top;
      for (std::size_t i = 0; i < ranked.size() && i < 3; ++i)
        top += fmt::format("{}{}: {}/{}", i ? "; " : "", cand_label(ranked[i]), ranked[i].matches, ranked[i].total);
      fmt::print("{}: closest models: {}\n", set.dir, top);
    }
    for (auto& cc : cap.cases) {
      cc.model = model;
      cc.spec.promote_every = promote;
    }
    write_capture(dir, cap);
    fmt::print("{}: {} cases, model {}\n", set.dir, cap.cases.size(), model.empty() ? "unknown (null)" : model + fmt::format(" promote={}", promote));
  }
  return 0;
}


}  // namespace fp8sim::hw
