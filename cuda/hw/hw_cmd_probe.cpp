// hw_cmd_probe: `fp8sim-hw probe`, sim/analysis/probe.hpp's accumulator probes run on each kernel.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "hw/hw_commands.hpp"
#include "hw/hw_harness.hpp"
#include "hw/hw_kernel_table.hpp"
#include "hw/hw_provenance.hpp"
#include "analysis/probe.hpp"
#include "io/output_file.hpp"

namespace fp8sim::hw {
namespace {

// A GEMM variant as a DotKernel: rows t of a batch go 64 at a time into A (64 x K) and B
// (64 x K); the result is the diagonal of the 64 x 64 GEMM, with C's diagonal = c.
DotKernel as_dot_kernel(const Variant& v) {
  return [v](const DotBatch& batch) {
    std::vector<float> out(batch.T);
    for (int t0 = 0; t0 < batch.T; t0 += 64) {
      const int rows = std::min(64, batch.T - t0);
      Case c;
      c.a_format = batch.a_format, c.b_format = batch.b_format;
      c.M = 64, c.N = 64, c.K = batch.K;
      c.A.assign(static_cast<std::size_t>(64) * batch.K, 0);
      c.B.assign(static_cast<std::size_t>(64) * batch.K, 0);
      std::copy_n(batch.a.begin() + static_cast<std::ptrdiff_t>(t0) * batch.K, static_cast<std::size_t>(rows) * batch.K, c.A.begin());
      std::copy_n(batch.b.begin() + static_cast<std::ptrdiff_t>(t0) * batch.K, static_cast<std::size_t>(rows) * batch.K, c.B.begin());
      if (!batch.c.empty() && v.takes_c) {
        c.C.assign(64 * 64, 0.0f);
        for (int r = 0; r < rows; ++r) c.C[r * 64 + r] = batch.c[t0 + r];
      }
      if (!batch.c.empty() && !v.takes_c && v.run_epilogue_c) {
        c.C.assign(64 * 64, 0.0f);
        for (int r = 0; r < rows; ++r) c.C[r * 64 + r] = batch.c[t0 + r];
      }
      const auto d = c.C.empty() || v.takes_c ? v.run(c) : v.run_epilogue_c(c);
      for (int r = 0; r < rows; ++r) out[t0 + r] = d[r * 64 + r];
    }
    return out;
  };
}

}  // namespace

int cmd_probe(const std::vector<std::string>& kernels, const std::string& json_path) {
  const DeviceInfo dev = device_info();
  json report = provenance(dev, 0, "fp8sim-hw probe");
  report["kernels"] = json::array();
  std::vector<std::string> defaults;
  for (const Variant& v : make_variants())
    if (v.probe) defaults.push_back(v.name);
  const auto& want = kernels.empty() ? defaults : kernels;
  int rc = 0;
  for (const Variant& v : variants_to_run()) {
    if (std::find(want.begin(), want.end(), v.name) == want.end()) continue;
    ProbeOptions o;
    o.format = fmt_of(v.a);
    if (v.b != v.a) o.b_format = fmt_of(v.b);
    o.k_multiple = 32;
    o.max_k = v.path == Path::cublaslt ? 16384 : 4096;
    json jk{{"kernel", v.name}};
    try {
      const auto t0 = std::chrono::steady_clock::now();
      const ProbeReport r = probe(as_dot_kernel(v), o);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      fmt::print("{}: {} ({:.1f} s)\n", v.name, r.describe(), s);
      for (const auto& e : r.evidence) fmt::print("    {}\n", e);
      jk["found"] = r.describe();
      jk["group"] = r.group, jk["frac_bits"] = r.frac_bits, jk["out_bits"] = r.out_bits;
      jk["promote_every"] = r.promote_every, jk["c_joins"] = r.c_joins, jk["c_added_after"] = r.c_added_after;
      jk["evidence"] = r.evidence;
      // A kernel with a preset must give back that preset's parameters.
      if (!v.model.empty()) {
        const AccumulatorSpec preset = accumulator_by_name(v.model);
        const std::string bad = disagreements(r, preset, v.promote_every);
        jk["expected"] = describe(preset);
        jk["agrees"] = bad.empty();
        fmt::print("    {}\n", bad.empty() ? fmt::format("agrees with {}", v.model)
                                          : fmt::format("DISAGREES with {}: {}", v.model, bad));
        if (!bad.empty()) rc = 1;
      }
    } catch (const std::exception& e) {
      fmt::print("{}: probe failed: {}\n", v.name, e.what());
      jk["error"] = e.what();
      rc = 1;
    }
    report["kernels"].push_back(jk);
    std::fflush(stdout);
  }
  if (!json_path.empty()) write_file(json_path, report.dump(2) + "\n");
  return rc;
}

}  // namespace fp8sim::hw
