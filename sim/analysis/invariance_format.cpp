// invariance_format: the batch-invariance report as the CLI prints it, CSV and JSON.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "analysis/invariance.hpp"

namespace fp8sim {

namespace {

std::string csv_field(std::string_view v) {
  if (v.find_first_of(",\"\n") == std::string_view::npos) return std::string(v);
  std::string out = "\"";
  for (const char c : v) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string number(double v) {
  return std::isinf(v) ? std::string("inf") : fmt::format("{:.3g}", v);
}

}  // namespace

std::string format_report(const InvarianceReport& r) {
  const InvarianceSpec& s = r.spec;
  std::string o = fmt::format("invariance: {}; N {}, K {}; M {} ({} values)\n", r.kernel_text, s.n,
                              s.k, m_range_text(s.m.front(), s.m.back()), s.m.size());
  if (!r.input_text.empty()) o += fmt::format("row: {}\n", r.input_text);
  o += fmt::format("\n{:<13} {:>6}  {:<14} {:<22} {}\n", "M", "points", "plan", "source", "detail");
  for (const PlanRegion& g : r.regions)
    o += fmt::format("{:<13} {:>6}  {:<14} {:<22} {}\n", m_range_text(g.m_lo, g.m_hi), g.points,
                     g.key, g.sources, g.detail);
  if (!r.changes.empty()) {
    o += "\nchanges of plan (the row's D before -> after):\n";
    for (const PlanChange& c : r.changes) {
      const PlanRegion &a = r.regions[c.from], &b = r.regions[c.to];
      std::string moved =
          c.same_arithmetic ? std::string("same arithmetic: the row's bits cannot move")
          : r.rows.empty()
              ? std::string("rows not computed")
              : fmt::format("{} of {} outputs changed ({:.1f}%), max {} ULP, max rel {}",
                            c.movement.changed, s.n, 100 * c.movement.changed_share,
                            number(c.movement.max_ulp), number(c.movement.max_rel));
      o += fmt::format("M {} -> {}: {} -> {}: {}\n", c.m_before, c.m_after, a.key, b.key, moved);
    }
  }
  if (r.regions.size() == 1 && !r.points.front().refused)
    o += fmt::format("\nwhy (M = {}): {}\n", r.points.front().m, r.points.front().plan.why);
  o += fmt::format("\nverdict: {}\n", r.verdict);
  if (r.fix) {
    const InvarianceFix& f = *r.fix;
    o += fmt::format("fix: {}: {}\n", f.setting, f.detail);
    o += f.checked ? fmt::format("  checked: {} at every M under it ({} distinct row{})\n",
                                 f.invariant ? "the row's bits equal" : "the row still moves",
                                 f.distinct_rows, f.distinct_rows == 1 ? "" : "s")
                   : std::string("  not checked (rows not computed)\n");
    o += fmt::format("  cost: {}\n", f.cost);
  }
  return o;
}

std::string regions_csv(const InvarianceReport& r, std::string_view layer, bool header) {
  std::string o = header ? "layer,n,k,m_lo,m_hi,points,plan,source,refused,variant,changed_share,"
                           "max_ulp,max_rel,detail\n"
                         : "";
  for (std::size_t g = 0; g < r.regions.size(); ++g) {
    const PlanRegion& x = r.regions[g];
    std::string moved = ",,";  // the movement into this region from the answered one before
    for (const PlanChange& c : r.changes)
      if (c.to == int(g) && (c.same_arithmetic || !r.rows.empty()))
        moved = fmt::format("{},{},{}", c.movement.changed_share, c.movement.max_ulp,
                            number(c.movement.max_rel));
    o += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(layer), r.spec.n, r.spec.k,
                     x.m_lo, x.m_hi, x.points, csv_field(x.key), csv_field(x.sources),
                     x.refused ? 1 : 0, x.variant, moved, csv_field(x.detail));
  }
  return o;
}

std::string points_csv(const InvarianceReport& r, std::string_view layer, bool header) {
  std::string o = header ? "layer,n,k,m,plan,source,refused,variant,split_k,detail,why\n" : "";
  for (const PlanPoint& p : r.points)
    o += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(layer), r.spec.n, r.spec.k, p.m,
        csv_field(p.refused ? "refused" : p.plan.key), csv_field(p.refused ? "" : p.plan.source),
        p.refused ? 1 : 0, p.variant, p.refused ? 0 : p.plan.options.split_k,
        csv_field(p.refused ? "" : p.plan.detail), csv_field(p.refused ? p.refusal : p.plan.why));
  return o;
}

std::string report_json(const InvarianceReport& r) {
  using nlohmann::json;
  const InvarianceSpec& s = r.spec;
  json j = {{"kernel", s.kernel},
            {"gpu", s.gpu},
            {"out_type", s.out_type},
            {"scaling", s.scaling},
            {"bias", s.bias},
            {"n", s.n},
            {"k", s.k},
            {"seed", s.seed},
            {"kernel_text", r.kernel_text},
            {"input", r.input_text},
            {"refused", r.refused},
            {"invariant", r.invariant},
            {"verdict", r.verdict}};
  json pts = json::array(), regs = json::array(), chs = json::array();
  for (const PlanPoint& p : r.points) {
    json x = {{"m", p.m},
              {"refused", p.refused},
              {"plan", p.refused ? "refused" : p.plan.key},
              {"source", p.refused ? "" : p.plan.source},
              {"variant", p.variant},
              {"split_k", p.refused ? 0 : p.plan.options.split_k},
              {"detail", p.refused ? "" : p.plan.detail},
              {"why", p.refused ? p.refusal : p.plan.why}};
    if (!p.refused) {  // the GEMM the row runs at this M, as fp8sim.gemm's keywords
      // Only the keywords that apply: a kernel preset sets the model, promotion, scale order
      // and split alignment itself (gemm() refuses them beside it), block goes with block
      // scaling and the split alignment with a split.
      const GemmOptions& o = p.plan.options;
      json opt = {{"scaling", o.scaling}, {"out_type", o.out_type}, {"split_k", o.split_k}};
      if (o.scaling == "block") opt["block"] = o.block;
      if (!o.kernel.empty()) {
        opt["kernel"] = o.kernel;
        if (!o.triton_config.empty()) opt["config"] = o.triton_config;
        if (!o.gpu.empty() && !o.triton_config.empty()) opt["gpu"] = o.gpu;
      } else {
        opt["model"] = o.model;
        opt["promote_every"] = o.promote_every;
        opt["scale_order"] = o.scale_order;
        if (o.split_k > 1) opt["split_k_align"] = o.split_k_align;
      }
      x["options"] = opt;
    }
    pts.push_back(x);
  }
  for (const PlanRegion& g : r.regions)
    regs.push_back({{"m_lo", g.m_lo},
                    {"m_hi", g.m_hi},
                    {"points", g.points},
                    {"plan", g.key},
                    {"sources", g.sources},
                    {"refused", g.refused},
                    {"variant", g.variant},
                    {"detail", g.detail}});
  for (const PlanChange& c : r.changes)
    chs.push_back(
        {{"m_before", c.m_before},
         {"m_after", c.m_after},
         {"from", r.regions[c.from].key},
         {"to", r.regions[c.to].key},
         {"same_arithmetic", c.same_arithmetic},
         {"changed", c.movement.changed},
         {"changed_share", c.movement.changed_share},
         {"max_ulp", c.movement.max_ulp},
         {"max_rel", std::isinf(c.movement.max_rel) ? json("inf") : json(c.movement.max_rel)}});
  j["points"] = pts;
  j["regions"] = regs;
  j["changes"] = chs;
  if (r.fix)
    j["fix"] = {{"setting", r.fix->setting},
                {"detail", r.fix->detail},
                {"checked", r.fix->checked},
                {"invariant", r.fix->invariant},
                {"distinct_rows", r.fix->distinct_rows},
                {"mac_ratio", r.fix->mac_ratio},
                {"cost", r.fix->cost}};
  return j.dump(1) + "\n";
}

std::string format_model_table(const ModelLayers& m, const std::vector<LayerInvariance>& v) {
  if (v.empty()) return "";
  const InvarianceReport& r0 = v.front().report;
  std::string o =
      fmt::format("invariance by layer: {}; {}; M {} ({} values)\n", m.model, r0.kernel_text,
                  m_range_text(r0.spec.m.front(), r0.spec.m.back()), r0.spec.m.size());
  o += fmt::format("layers: {}\n\n", m.source);
  o += fmt::format("{:<22} {:>6} {:>6}  {:<10} {:<28} {:>7}  {}\n", "layer", "N", "K", "verdict",
                   "plans over M", "refused", "plan changes at M");
  for (const LayerInvariance& l : v) {
    const InvarianceReport& r = l.report;
    std::string plans, at;
    for (const PlanRegion& g : r.regions)
      if (!g.refused && plans.find(g.key) == std::string::npos)
        plans += (plans.empty() ? "" : ", ") + g.key;
    for (const PlanChange& c : r.changes)
      if (!c.same_arithmetic)
        at += (at.empty() ? "" : ", ") + fmt::format("{}->{}", c.m_before, c.m_after);
    const std::string verdict = r.invariant                          ? "invariant"
                                : r.verdict.rfind("unknown", 0) == 0 ? "unknown"
                                                                     : "varies";
    o += fmt::format("{:<22} {:>6} {:>6}  {:<10} {:<28} {:>7}  {}\n", l.layer.name, l.layer.n,
                     l.layer.k, verdict, plans.empty() ? "-" : plans, r.refused,
                     at.empty() ? "-" : at);
  }
  // The fix of the layers that vary, one line per setting.
  std::vector<std::pair<std::string, std::string>> fixes;  // setting, layers
  bool checked = true;
  for (const LayerInvariance& l : v) {
    if (!l.report.fix) continue;
    checked = checked && l.report.fix->checked && l.report.fix->invariant;
    auto it = std::find_if(fixes.begin(), fixes.end(),
                           [&](const auto& f) { return f.first == l.report.fix->setting; });
    if (it == fixes.end()) it = fixes.insert(fixes.end(), {l.report.fix->setting, ""});
    it->second += (it->second.empty() ? "" : ", ") + l.layer.name;
  }
  for (const auto& [setting, layers] : fixes)
    o += fmt::format("\nfix: {} removes the change in {} ({})\n", setting, layers,
                     checked ? "checked: the row's bits equal at every M under it"
                             : "not checked: --no-rows computes no row");
  return o;
}

}  // namespace fp8sim
