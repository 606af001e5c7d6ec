// hw_cmd_check: `fp8sim-hw check`, suites x kernels compared bit for bit with their models.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "hw/hw_candidates.hpp"
#include "hw/hw_commands.hpp"
#include "hw/hw_harness.hpp"
#include "hw/hw_kernel_table.hpp"
#include "hw/hw_provenance.hpp"
#include "io/output_file.hpp"

namespace fp8sim::hw {
namespace {

bool selected(const std::string& name, const std::vector<std::string>& filters) {
  if (filters.empty()) return true;
  for (const auto& f : filters)
    if (name.find(f) != std::string::npos) return true;
  return false;
}

}  // namespace

int cmd_check(std::uint64_t seed, int max_k, const std::string& json_path,
              const std::vector<std::string>& kernels, const std::vector<std::string>& suites_in,
              bool closest_all) {
  const DeviceInfo dev = device_info();
  fmt::print("device: {} | driver {} | {}\nseed: {}\n", dev.name, dev.driver, dev.cuda, seed);
  const std::vector<std::string> suites = suites_in.empty() ? suite_names() : suites_in;
  json report = provenance(dev, seed, "fp8sim-hw check");
  report["variants"] = json::array();
  bool any_fail = false;

  std::vector<std::vector<std::string>> table;
  std::vector<std::string> header = {"kernel"};
  for (const auto& s : suites) header.push_back(s);
  header.push_back("status");
  table.push_back(header);

  for (const Variant& v : variants_to_run()) {
    if (!selected(v.name, kernels)) continue;
    json jv{{"name", v.name}, {"kernel", v.kernel}, {"path", to_string(v.path)},
            {"model", v.model.empty() ? json(nullptr) : json(v.model)},
            {"promote_every", v.promote_every}, {"scaling", v.block_scales ? "block" : "none"},
            {"out_type", v.out_type}, {"suites", json::object()}};
    std::vector<std::string> row = {v.name};
    std::vector<CaseRun> runs;
    long vm = 0, vt = 0;
    std::string first_bad;
    for (const auto& s : suites) {
      long sm = 0, st = 0;
      for (Case c : make_suite(s, fmt_of(v.a), fmt_of(v.b), seed, v.block_scales, max_k)) {
        c = adapt_case(v, c);
        std::vector<float> want;
        if (!v.model.empty()) {
          try {
            want = run_model(variant_spec(v, c, v.model, v.promote_every), c);
          } catch (const std::invalid_argument&) {
            continue;  // e.g. K not a multiple of the scale block: not applicable
          }
        } else if (v.block_scales && c.K % 128) {
          continue;
        }
        std::vector<float> got;
        try {
          got = v.run(c);
        } catch (const std::exception& e) {
          fmt::print("{} {} K={}: {}\n", v.name, s, c.K, e.what());
          any_fail = true;
          continue;
        }
        if (!want.empty()) {
          for (int m = 0; m < c.M; ++m)
            for (int n = 0; n < c.N; ++n) {
              const std::size_t i = static_cast<std::size_t>(m) * c.N + n;
              if (same_bits(got[i], want[i])) {
                ++sm;
                continue;
              }
              if (first_bad.empty())
                first_bad = fmt::format("{} suite={} seed={:#x} K={} m={} n={} c={} => got {} want {} (replay the capture for the inputs)",
                                        v.name, s, c.seed, c.K, m, n, c.C.empty() ? "none" : hex_bits(c.C[i]),
                                        hex_bits(got[i]), hex_bits(want[i]));
            }
          st += static_cast<long>(want.size());
        } else {
          st += static_cast<long>(got.size());
        }
        runs.push_back({std::move(c), std::move(got)});
      }
      vm += sm, vt += st;
      jv["suites"][s] = st == 0 ? json(nullptr) : json{{"matches", sm}, {"total", st}};
      row.push_back(st == 0 ? "n/a" : v.model.empty() ? fmt::format("({})", st) : fmt::format("{}/{}", sm, st));
    }
    std::string status;
    const bool known = !v.model.empty();
    if (known && vm == vt) {
      status = "ok";
    } else {
      if (known) any_fail = true, status = "FAIL";
      else status = "measure";
      jv["first_mismatch"] = first_bad.empty() ? json(nullptr) : json(first_bad);
      if (!first_bad.empty()) fmt::print("first mismatch: {}\n", first_bad);
    }
    if (!known || vm != vt || closest_all || v.model.empty()) {
      const auto ranked = rank_candidates(v, runs);
      json jc = json::array();
      for (std::size_t i = 0; i < ranked.size() && i < 5; ++i)
        jc.push_back({{"model", ranked[i].model}, {"promote_every", ranked[i].promote_every},
                      {"matches", ranked[i].matches}, {"total", ranked[i].total}});
      jv["closest"] = jc;
      if (!ranked.empty())
        status += fmt::format(" (closest: {}: {}/{})", cand_label(ranked[0]), ranked[0].matches, ranked[0].total);
    }
    jv["matches"] = vm;
    jv["total"] = vt;
    jv["status"] = status;
    row.push_back(status);
    table.push_back(row);
    report["variants"].push_back(jv);
    std::fflush(stdout);
  }

  // The table: kernel x suite, matches/total ("(n)" = outputs measured, model unknown).
  std::vector<std::size_t> width(table[0].size(), 0);
  for (const auto& r : table)
    for (std::size_t i = 0; i + 1 < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  for (const auto& r : table) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i)
      line += i + 1 < r.size() ? fmt::format("{:<{}} ", r[i], width[i]) : r[i];
    fmt::print("{}\n", line);
  }
  report["result"] = any_fail ? "FAIL" : "ok";
  if (!json_path.empty()) {
    write_file(json_path, report.dump(2) + "\n");
    fmt::print("report: {}\n", json_path);
  }
  return any_fail ? 1 : 0;
}

}  // namespace fp8sim::hw
