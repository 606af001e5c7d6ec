// cublaslt_plan: recorded cuBLASLt plan tables (built in), looked up, ruled on, or refused.
#include "kernel/cublaslt_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "kernel/plan_table.hpp"
#include "kernel/plan_tables.hpp"

namespace fp8sim {
namespace {

using nlohmann::json;

int index_of(const std::vector<int>& axis, int v) {
  const auto it = std::find(axis.begin(), axis.end(), v);
  return it == axis.end() ? -1 : static_cast<int>(it - axis.begin());
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

std::vector<std::string> recorded_gpus() {
  std::vector<std::string> out;
  for (const BuiltinPlanTable& b : builtin_plan_tables()) out.emplace_back(b.gpu);
  return out;
}

CublasltPlan cublaslt_plan(std::string_view gpu, const ScaledMmCall& c) {
  if (c.out != "f32" && c.out != "bf16" && c.out != "f16")
    throw std::invalid_argument(fmt::format("out '{}': the plans are for f32, bf16, f16 outputs", c.out));
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
  if (c.bias) {  // the call without a bias, where the traced calls show a bias never changed it
    bool same = false;
    for (const json& b : t.meta.value("bias_same_split", json::array()))
      same = same || b.value("variant", "") == variant;
    if (!same) return refuse("no traced calls show how a bias changes this variant's plan");
  }
  const auto vit = std::find(t.variants.begin(), t.variants.end(), variant);
  const int v = vit == t.variants.end() ? -1 : static_cast<int>(vit - t.variants.begin());
  if (v < 0) return refuse("no plans were recorded for this variant");
  // 1. A recorded point.
  const int i = index_of(t.m, c.m), j = index_of(t.n, c.n), l = index_of(t.k, c.k);
  if (i >= 0 && j >= 0 && l >= 0) {
    const std::size_t at =
        ((std::size_t(v) * t.m.size() + i) * t.n.size() + j) * t.k.size() + l;
    const std::uint16_t code = t.codes[at];
    if (code == t.none) return refuse("cuBLASLt returned no algorithm when this was recorded");
    const json& cfg = t.meta.at("configs").at(code);  // columns as t.fields
    auto field = [&](const char* name) -> const json& {
      return cfg.at(std::find(t.fields.begin(), t.fields.end(), name) - t.fields.begin());
    };
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
  // 2. A rule the recordings show, inside the recorded ranges.
  const auto [mlo, mhi] = std::minmax_element(t.m.begin(), t.m.end());
  const auto [nlo, nhi] = std::minmax_element(t.n.begin(), t.n.end());
  const auto [klo, khi] = std::minmax_element(t.k.begin(), t.k.end());
  if (c.m < *mlo || c.m > *mhi || c.n < *nlo || c.n > *nhi || c.k < *klo || c.k > *khi)
    return refuse(fmt::format("outside the recorded ranges (M {}..{}, N {}..{}, K {}..{})", *mlo,
                              *mhi, *nlo, *nhi, *klo, *khi));
  for (const json& r : t.meta.value("rules", json::array())) {
    if (r.value("variant", "") != variant) continue;
    const bool never = r.value("never_splits", false);
    const long long mn = r.value("no_split_above_mn", -1LL);
    const int kmin = r.value("no_split_below_k", 0);
    const bool holds = never || (mn >= 0 && (long long)c.m * c.n > mn) || c.k < kmin;
    if (!holds) continue;
    p.source = "rule";
    p.why = std::string(c.bias ? "a bias never changed this variant's split in the traced calls; " : "") + (never ? fmt::format("no split at any of the {} recorded points of this variant",
                                r.value("points", 0))
                  : fmt::format("no recorded point with M*N > {} or K < {} splits ({} points)", mn,
                                kmin, r.value("points", 0)));
    return p;
  }
  return refuse("not a recorded point, and no rule of the recordings covers it");
}

std::string describe(const CublasltPlan& p) {
  std::string algo = p.algo_id < 0 ? std::string("algorithm not recorded")
                                   : fmt::format("tile {}, stages {}, cluster {}, algo {}", p.tile,
                                                 p.stages, p.cluster, p.algo_id);
  return fmt::format("split-K {} ({}), {}: {} {} ({}; {})", p.split_k, p.reduction, algo, p.source,
                     p.why, p.gpu, p.versions);
}

}  // namespace fp8sim
