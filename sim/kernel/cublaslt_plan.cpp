// cublaslt_plan: recorded cuBLASLt plan tables (built in), looked up, ruled on, or refused.
#include "kernel/cublaslt_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "kernel/cublaslt_rule.hpp"
#include "kernel/plan_table.hpp"
#include "kernel/plan_tables.hpp"

namespace fp8sim {
namespace {

using nlohmann::json;

int index_of(const std::vector<int>& axis, int v) {
  const auto it = std::find(axis.begin(), axis.end(), v);
  return it == axis.end() ? -1 : static_cast<int>(it - axis.begin());
}

// The configuration recorded at (m, n, k) of variant v: -1 off the grid (or v < 0), t.none
// where cuBLASLt returned no algorithm, else its index into meta["configs"].
int code_at(const PlanTable& t, int v, int m, int n, int k) {
  const int i = index_of(t.m, m), j = index_of(t.n, n), l = index_of(t.k, k);
  if (v < 0 || i < 0 || j < 0 || l < 0) return -1;
  return t.codes[((std::size_t(v) * t.m.size() + i) * t.n.size() + j) * t.k.size() + l];
}

// A column of configuration `code` (meta["configs"] rows hold t.fields).
const json& field_of(const PlanTable& t, int code, const char* name) {
  return t.meta.at("configs").at(code).at(std::find(t.fields.begin(), t.fields.end(), name) -
                                          t.fields.begin());
}

// The split and kernel recorded at (m, n, k) of variant v (split -1 off the grid, 0 where
// cuBLASLt returned no algorithm).
RecordedPoint point_at(const PlanTable& t, int v, int m, int n, int k) {
  const int code = code_at(t, v, m, n, k);
  if (code < 0) return {};
  if (code == t.none) return {0, ""};
  auto field = [&](const char* name) -> const json& { return field_of(t, code, name); };
  return {std::max(1, field("split_k").get<int>()),
          fmt::format("{} {} {} {} {}", field("algo_id").dump(), field("tile").dump(),
                      field("stages").dump(), field("custom").dump(), field("cluster").dump())};
}

int variant_index(const PlanTable& t, const ScaledMmCall& c) {
  const std::string variant = fmt::format("{} {} fast{}", c.out, c.scale, c.fast ? 1 : 0);
  const auto it = std::find(t.variants.begin(), t.variants.end(), variant);
  return it == t.variants.end() ? -1 : static_cast<int>(it - t.variants.begin());
}

std::string versions_of(const json& p) {
  auto s = [&](const char* key) {
    if (!p.contains(key)) return std::string("?");
    return p[key].is_string() ? p[key].get<std::string>() : p[key].dump();
  };
  return fmt::format("cuBLASLt {}, torch {}, driver {}, recorded {}", s("cublaslt_version"),
                     s("torch"), s("driver"), s("date"));
}

}  // namespace

const SplitRuleConstants& cublaslt_split_rule_constants(std::string_view gpu) {
  return plan_table(gpu).rule;
}

RecordedPoint cublaslt_recorded_point(std::string_view gpu, const ScaledMmCall& c) {
  const PlanTable& t = plan_table(gpu);
  return point_at(t, variant_index(t, c), c.m, c.n, c.k);
}

std::vector<std::string> recorded_gpus() {
  std::vector<std::string> out;
  for (const BuiltinPlanTable& b : builtin_plan_tables()) out.emplace_back(b.gpu);
  return out;
}

CublasltPlan cublaslt_plan(std::string_view gpu, const ScaledMmCall& c) {
  if (c.out != "f32" && c.out != "bf16" && c.out != "f16" && c.out != "e4m3")
    throw std::invalid_argument(
        fmt::format("out '{}': the plans are for f32, bf16, f16 and e4m3 outputs", c.out));
  if (c.scale != "tensor" && c.scale != "row" && c.scale != "block")
    throw std::invalid_argument(
        fmt::format("scale '{}': the plans are for tensor, row and block scales", c.scale));
  if (c.m < 1 || c.n < 1 || c.k < 1)
    throw std::invalid_argument(fmt::format("shape {}x{}x{}: every dimension must be >= 1", c.m, c.n, c.k));
  const PlanTable& t = plan_table(gpu);  // checked whole: the lookups below cannot fail
  const json& prov = t.meta.at("provenance");
  CublasltPlan p;
  p.gpu = prov.value("gpu", t.name);
  p.versions = versions_of(prov);
  const std::string shape = fmt::format("{}x{}x{}", c.m, c.n, c.k);
  const std::string variant = fmt::format("{} {} fast{}", c.out, c.scale, c.fast ? 1 : 0);
  auto refuse = [&](const std::string& why) -> CublasltPlan {
    throw std::invalid_argument(fmt::format(
        "torch._scaled_mm {} ({}{}) on {}: {}; run it on that GPU (CUDA tensors ask cuBLASLt) "
        "or pass split_k (--split-k)", shape, variant, c.bias ? ", bias" : "", t.name, why));
  };
  const int v = variant_index(t, c);
  // The split rule (sim/kernel/cublaslt_rule.cpp): at a recorded point the table answers and the
  // rule is only cross-checked (tests/test_cublaslt_plan.cpp); elsewhere the rule decides or
  // the call is refused.
  const SplitRuleAnswer rule = cublaslt_split_rule(
      c, t.rule, [&](int m, int n, int k) { return point_at(t, v, m, n, k); });
  auto by_rule = [&]() {
    p.split_k = rule.split_k;
    p.reduction = rule.split_k > 1 ? "COMPUTE_TYPE" : "NONE";
    p.source = "rule";
    p.why = rule.split_k > 0 && t.rule.checked_traced_calls > 0
                ? fmt::format("{} (the split rule: exact at all {} traced calls it decides)",
                              rule.why, t.rule.checked_traced_calls)
                : rule.why;
    return p;
  };
  if (c.bias) {  // the call without a bias, where the traced calls show a bias never changed it
    bool same = false;  // the traced variant, or it with fast accumulation (never changes it)
    for (const json& b : t.meta.value("bias_same_split", json::array()))
      same = same || b.value("variant", "") == variant;
    for (const std::string& g : t.rule.bias_same_split) same = same || g == c.out + " " + c.scale;
    if (!same && rule.split_k > 0) return by_rule();
    if (!same) return refuse("no traced calls show how a bias changes this variant's plan");
  }
  // e4m3 outputs: no recorded plans, only the rule's steps 1 to 3 (which hold for any output).
  if (v < 0 && rule.split_k > 0) return by_rule();
  if (v < 0) return refuse("no plans were recorded for this variant");
  // 1. A recorded point.
  if (const int code = code_at(t, v, c.m, c.n, c.k); code >= 0) {
    if (code == t.none) return refuse("cuBLASLt returned no algorithm when this was recorded");
    auto field = [&](const char* name) -> const json& { return field_of(t, code, name); };
    p.algo_id = field("algo_id").get<int>();
    p.tile = field("tile").get<std::string>();
    p.stages = field("stages").get<std::string>();
    p.split_k = std::max(1, field("split_k").get<int>());
    p.reduction = field("reduction").get<std::string>();
    p.cluster = field("cluster").get<std::string>();
    p.source = "table";
    p.why = fmt::format("recorded point M={} N={} K={}{}", c.m, c.n, c.k,
                        c.bias ? " (without a bias, which never changed this variant's split "
                                 "in the traced calls)" : "");
    if (p.split_k > 1 && p.reduction != "COMPUTE_TYPE")
      return refuse(fmt::format("its split-K reduction {} is not modelled", p.reduction));
    return p;
  }
  // 2. The split rule, anywhere it decides.
  if (rule.split_k > 0) return by_rule();
  return refuse(fmt::format("not a recorded point, and the split rule does not decide it ({})",
                            rule.why));
}

std::string describe(const CublasltPlan& p) {
  std::string algo = p.algo_id < 0 ? std::string("algorithm not recorded")
                                   : fmt::format("tile {}, stages {}, cluster {}, algo {}", p.tile,
                                                 p.stages, p.cluster, p.algo_id);
  return fmt::format("split-K {} ({}), {}: {} {} ({}; {})", p.split_k, p.reduction, algo, p.source,
                     p.why, p.gpu, p.versions);
}

}  // namespace fp8sim
