// hw_cmd_capture: `fp8sim-hw capture`, each capture set's inputs and kernel outputs as .npy
// files plus manifest.json, for replay without a GPU (sim/replay.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "hw_candidates.hpp"
#include "hw_commands.hpp"
#include "hw_harness.hpp"
#include "hw_kernel_table.hpp"
#include "hw_provenance.hpp"
#include "npy.hpp"

namespace fp8sim::hw {
namespace {

namespace fs = std::filesystem;

Case slice_k(const Case& c, int k) {
  Case s = c;
  s.K = k;
  s.A.resize(static_cast<std::size_t>(c.M) * k);
  s.B.resize(static_cast<std::size_t>(c.N) * k);
  for (int m = 0; m < c.M; ++m)
    std::copy_n(c.A.begin() + static_cast<std::ptrdiff_t>(m) * c.K, k, s.A.begin() + static_cast<std::ptrdiff_t>(m) * k);
  for (int n = 0; n < c.N; ++n)
    std::copy_n(c.B.begin() + static_cast<std::ptrdiff_t>(n) * c.K, k, s.B.begin() + static_cast<std::ptrdiff_t>(n) * k);
  if (!c.sa.empty()) {
    const int ka = (c.K + 127) / 128, kb = (k + 127) / 128, rows_b = static_cast<int>(c.sb.size()) / ka;
    s.sa.resize(static_cast<std::size_t>(c.M) * kb);
    s.sb.resize(static_cast<std::size_t>(rows_b) * kb);
    for (int m = 0; m < c.M; ++m)
      for (int j = 0; j < kb; ++j) s.sa[m * kb + j] = c.sa[m * ka + j];
    for (int r = 0; r < rows_b; ++r)
      for (int j = 0; j < kb; ++j) s.sb[r * kb + j] = c.sb[r * ka + j];
  }
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
    fs::create_directories(dir);
    std::vector<CaseRun> runs;
    json cases = json::array();
    for (const auto& s : set.suites)
      for (Case c : make_suite(s, fmt_of(v.a), fmt_of(v.b), seed, v.block_scales, set.max_k)) {
        c = adapt_case(v, c);
        if ((v.block_scales && c.K % 128) || c.K > set.max_k) continue;
        const auto d = v.run(c);
        const std::string stem = fmt::format("{}_k{}", s, c.K);
        write_npy(dir + "/" + stem + "_a.npy", "|u1", {static_cast<std::size_t>(c.M), static_cast<std::size_t>(c.K)}, c.A.data(), c.A.size());
        write_npy(dir + "/" + stem + "_b.npy", "|u1", {static_cast<std::size_t>(c.N), static_cast<std::size_t>(c.K)}, c.B.data(), c.B.size());
        write_npy(dir + "/" + stem + "_d.npy", "<f4", {static_cast<std::size_t>(c.M), static_cast<std::size_t>(c.N)}, d.data(), d.size() * 4);
        json jc{{"name", stem}, {"kernel", v.kernel}, {"suite", s}, {"a_format", c.a_format.name},
                {"b_format", c.b_format.name}, {"model", nullptr}, {"promote_every", v.promote_every},
                {"scaling", v.block_scales ? "block" : "none"}, {"block", 128}, {"scale_order", "deepgemm"},
                {"out_type", v.out_type == "fp32" ? "f32" : v.out_type == "fp16" ? "f16" : "bf16"},
                {"M", c.M}, {"N", c.N}, {"K", c.K}, {"a", stem + "_a.npy"}, {"b", stem + "_b.npy"},
                {"c", nullptr}, {"sa", nullptr}, {"sb", nullptr}, {"d", stem + "_d.npy"},
                {"prefix_k", nullptr}, {"d_prefix", nullptr}, {"seed", fmt::format("{:#x}", c.seed)}};
        if (!c.C.empty()) {
          write_npy(dir + "/" + stem + "_c.npy", "<f4", {static_cast<std::size_t>(c.M), static_cast<std::size_t>(c.N)}, c.C.data(), c.C.size() * 4);
          jc["c"] = stem + "_c.npy";
        }
        if (!c.sa.empty()) {
          const std::size_t ka = (c.K + 127) / 128;
          write_npy(dir + "/" + stem + "_sa.npy", "<f4", {static_cast<std::size_t>(c.M), ka}, c.sa.data(), c.sa.size() * 4);
          write_npy(dir + "/" + stem + "_sb.npy", "<f4", {c.sb.size() / ka, ka}, c.sb.data(), c.sb.size() * 4);
          jc["sa"] = stem + "_sa.npy";
          jc["sb"] = stem + "_sb.npy";
        }
        // Prefixes (K >= 512): the kernel on the first k columns, k = K/4, 2K/4, 3K/4.
        const int unit = v.block_scales ? 128 : 32;
        std::vector<int> prefix;
        for (int j = 1; j <= 4 && c.K >= 512; ++j) {
          const int k = std::max(unit, (c.K * j / 4) / unit * unit);
          if (k < c.K && (prefix.empty() || prefix.back() != k)) prefix.push_back(k);
        }
        if (!prefix.empty()) {
          std::vector<float> dp;
          for (int k : prefix) {
            const auto dk = v.run(slice_k(c, k));
            dp.insert(dp.end(), dk.begin(), dk.end());
          }
          write_npy(dir + "/" + stem + "_dprefix.npy", "<f4", {prefix.size(), static_cast<std::size_t>(c.M), static_cast<std::size_t>(c.N)}, dp.data(), dp.size() * 4);
          jc["prefix_k"] = prefix;
          jc["d_prefix"] = stem + "_dprefix.npy";
        }
        cases.push_back(jc);
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
    for (auto& jc : cases) {
      jc["model"] = model.empty() ? json(nullptr) : json(model);
      jc["promote_every"] = promote;
    }
    json m{{"fp8sim_capture", 1}};
    m.update(provenance(dev, seed, "fp8sim-hw capture"));
    m["cases"] = cases;
    std::ofstream(dir + "/manifest.json") << m.dump(2) << "\n";
    fmt::print("{}: {} cases, model {}\n", set.dir, cases.size(), model.empty() ? "unknown (null)" : model + fmt::format(" promote={}", promote));
  }
  return 0;
}


}  // namespace fp8sim::hw
