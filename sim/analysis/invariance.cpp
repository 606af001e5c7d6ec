// invariance: the plan at each M, its ranges, one row's movement at each change, and the fix.
#include "analysis/invariance.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "analysis/distributions.hpp"
#include "base/limits.hpp"
#include "base/parallel.hpp"
#include "base/rng.hpp"
#include "format/rounding.hpp"
#include "kernel/cublaslt_plan.hpp"
#include "kernel/kernel.hpp"
#include "scaling/scaling.hpp"

namespace fp8sim {
namespace {

// How each kernel's plan depends on M, as data with its evidence. `plan`: "cublaslt" (the
// recorded tables and their rules), "triton" (the config a server picks: plan_at's one
// Triton function), "fixed" (nothing the kernel decides per M enters an output's chain).
struct KernelPlanRule {
  std::string_view kernel, plan;
  int m_multiple;  // M must be a multiple of this (0: any M), else refused with m_refusal
  std::string_view evidence, m_refusal = "";
};

constexpr KernelPlanRule kPlanRules[] = {
    {"cublaslt", "cublaslt", 0,
     "cuBLASLt picks the algorithm per shape; its split-K count decides the bits "
     "(docs/cublaslt.md)"},
    {"cublaslt-fast-accum", "cublaslt", 0,
     "cuBLASLt picks the algorithm per shape; its split-K count decides the bits "
     "(docs/cublaslt.md)"},
    {"deepgemm-sm90-1d2d", "fixed", 0,
     "DeepGEMM's per-M heuristic picks block_m, block_n, stages and multicast, none of which "
     "enters an output's chain (no split-K; per 128-K block 4 wgmma from zero, then the fma): "
     "one preset reproduced every captured output at M = 1, 64, 129, 132, 300, 1024, 2048, "
     "4096 (tests/data/hw/kernels/deepgemm_sm90_1d2d)"},
    {"cutlass-sm90-blockwise", "fixed", 4,
     "CUTLASS example 67 runs one tile and schedule at every M (no split-K): one preset "
     "reproduced every captured output at M = 64, 132, 300 "
     "(tests/data/hw/kernels/cutlass_sm90_blockwise)",
     "CUTLASS's can_implement refuses M not a multiple of 4 (docs/kernels.md)"},
    {"triton-w8a8-block-fp8", "triton", 0,
     "vLLM and SGLang pick the launch config per M from a tuned JSON (or a default); the "
     "config decides the instruction (wgmma or mma.sync on f16)"},
    {"triton-fp8-dot", "fixed", 0,
     "our capture's fixed launch config (cuda/capture/capture_triton.py DOT_CONFIG)"},
    {"triton-fp8-dot-imprecise-acc-32", "fixed", 0,
     "our capture's fixed launch config (cuda/capture/capture_triton.py DOT_CONFIG)"},
    {"triton-fp8-dot-imprecise-acc-64", "fixed", 0,
     "our capture's fixed launch config (cuda/capture/capture_triton.py DOT_CONFIG)"},
    {"triton-fp8-dot-imprecise-acc-128", "fixed", 0,
     "our capture's fixed launch config (cuda/capture/capture_triton.py DOT_CONFIG)"},
};

const KernelPlanRule& plan_rule(std::string_view kernel) {
  for (const KernelPlanRule& r : kPlanRules)
    if (r.kernel == kernel) return r;
  kernel_by_name(kernel);  // throws the known names for an unknown kernel
  throw std::invalid_argument(fmt::format(
      "kernel {}: no rule says how its plan depends on M (sim/analysis/invariance.cpp)", kernel));
}

// The scaling the report uses: the one given, else the kernel's first (a loose recipe: tensor).
std::string scaling_of(const InvarianceSpec& s) {
  if (!s.scaling.empty()) return s.scaling;
  if (s.kernel.empty()) return "tensor";
  return std::string(to_string(kernel_by_name(s.kernel).scalings.front()));
}

// The GEMM options every M shares (the plan sets split_k and, for Triton, more).
GemmOptions base_options(const InvarianceSpec& s) {
  GemmOptions o;
  o.out_type = s.out_type;
  o.scaling = scaling_of(s);
  o.threads = s.threads;
  if (o.scaling == "block") o.block = 128;
  if (s.kernel.empty()) {
    o.model = s.model;
    o.promote_every = s.promote_every;
    o.scale_order = s.scale_order;
    o.split_k = s.split_k;
    o.split_k_align = s.split_k_align;
  } else {
    o.kernel = s.kernel;
  }
  return o;
}

// The torch._scaled_mm call a cuBLASLt preset runs at M = m.
ScaledMmCall scaled_mm_call(const InvarianceSpec& s, int m) {
  ScaledMmCall c;
  c.m = m;
  c.n = s.n;
  c.k = s.k;
  c.out = s.out_type == "fp32" ? "f32" : s.out_type == "fp16" ? "f16" : s.out_type;
  c.fast = s.kernel == "cublaslt-fast-accum";
  c.scale = scaling_of(s);
  c.bias = s.bias;
  return c;
}

// The Triton block kernel's plan at M: the one place its config enters (issue 36 wires
// sim/kernel/triton_config's triton_plan(spec, m, n, k, gpu) here: key "BLOCK_M.. <instr>",
// detail the config, source its config_source, options the instruction's model).
PlanAt triton_plan_at(const InvarianceSpec&, int) {
  throw std::invalid_argument("needs sim/kernel/triton_config (issue 36)");
}

// A GEMM's options as one comparable line: the arithmetic the row runs.
std::string options_text(const GemmOptions& o) {
  return fmt::format("{} {} {} {} {} {} {} {} {} {} {} {} {}", o.kernel, o.a_format, o.b_format,
                     o.model, o.promote_every, o.scaling, o.block, o.scale_order, o.out_type,
                     o.split_k, o.split_k_align, o.mx_block, o.mx_scale);
}

std::string m_range_text(int lo, int hi) {
  return lo == hi ? std::to_string(lo) : fmt::format("{}-{}", lo, hi);
}

// Seeded N(0, 1) values: element i of stream `name` (a pure function of i: any thread count).
std::vector<double> gaussian(std::uint64_t seed, std::string_view name, std::size_t count,
                             int threads) {
  static const DistributionSpec d = distribution_by_name("gaussian");
  std::vector<double> v(count);
  const std::uint64_t stream = stream_of(name);
  parallel_for(count, threads, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) v[i] = standard_draw(d, seed, stream, i);
  });
  return v;
}

// An operand's codes (one byte each).
std::vector<std::uint8_t> codes_of(const QuantisedOperand& q) {
  std::vector<std::uint8_t> c(q.operand.value.size());
  for (std::size_t i = 0; i < c.size(); ++i)
    c[i] = std::uint8_t(encode(double(q.operand.value[i]), q.operand.format));
  return c;
}

// The ordinal of a value of `f` (codes in value order; +0 and -0 both 0).
long long ordinal(const FormatSpec& f, float v) {
  const std::uint32_t code = encode(double(v), f);
  const std::uint32_t sign = sign_mask(f);
  const long long mag = code & ~sign;
  return (code & sign) ? -mag : mag;
}

// How many of `rows` differ in their bits from every row before them.
std::size_t distinct_rows(const std::string& out_type, const std::vector<std::vector<float>>& rows) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    bool seen = false;
    for (std::size_t j = 0; j < i && !seen; ++j) seen = row_movement(out_type, rows[j], rows[i]).changed == 0;
    n += !seen;
  }
  return n;
}

void check_spec(const InvarianceSpec& s) {
  if (!s.kernel.empty()) plan_rule(s.kernel);
  output_type_by_name(s.out_type, "out_type");
  const std::string sc = scaling_of(s);
  if (sc != "none" && sc != "tensor" && sc != "row" && sc != "block")
    throw std::invalid_argument(
        fmt::format("scaling '{}': the report takes none, tensor, row or block", sc));
  if (s.n < 1 || s.k < 1 || s.n > limits::kMaxDim || s.k > limits::kMaxDim)
    throw std::invalid_argument(
        fmt::format("N = {}, K = {}: each must be in 1..{}", s.n, s.k, limits::kMaxDim));
  if (sc == "block" && s.k % 128 != 0)
    throw std::invalid_argument(fmt::format(
        "K = {}: block scales quantise whole 1x128 / 128x128 blocks (K a multiple of 128)", s.k));
  if (s.m.empty()) throw std::invalid_argument("M: no values (give a range 1-4096 or a list 1,2,4)");
  for (std::size_t i = 0; i < s.m.size(); ++i)
    if (s.m[i] < 1 || (i > 0 && s.m[i] <= s.m[i - 1]))
      throw std::invalid_argument(fmt::format("M: {} is not >= 1 and above the M before it", s.m[i]));
  if (s.bias && s.out_type == "f32" && !s.kernel.empty() && plan_rule(s.kernel).plan == "cublaslt")
    throw std::invalid_argument("bias: the cuBLASLt plans take a bias with bf16 or f16 outputs");
  if (!s.a_row.empty() && s.a_row.size() != std::size_t(s.k))
    throw std::invalid_argument(
        fmt::format("a_row: {} values, but K = {}", s.a_row.size(), s.k));
  if (!s.b.empty() && s.b.size() != std::size_t(s.n) * std::size_t(s.k))
    throw std::invalid_argument(
        fmt::format("b: {} values, but N x K = {} x {}", s.b.size(), s.n, s.k));
  for (const auto* v : {&s.a_row, &s.b})
    for (std::size_t i = 0; i < v->size(); ++i)
      if (!std::isfinite((*v)[i]))
        throw std::invalid_argument(fmt::format("{}: element {} is {} (inputs must be finite)",
                                                v == &s.a_row ? "a_row" : "b", i, (*v)[i]));
}

}  // namespace

std::vector<int> parse_m_list(std::string_view text) {
  std::vector<int> out;
  auto number = [&](std::string_view t) {
    if (t.empty() || t.size() > 10 || t.find_first_not_of("0123456789") != std::string_view::npos)
      throw std::invalid_argument(fmt::format("M: '{}' is not a whole number", t));
    const long long v = std::stoll(std::string(t));
    if (v < 1 || v > limits::kMaxDim)
      throw std::invalid_argument(fmt::format("M: {} is not in 1..{}", v, limits::kMaxDim));
    return int(v);
  };
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    const std::size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      out.push_back(number(item));
    } else {
      const int lo = number(item.substr(0, dash)), hi = number(item.substr(dash + 1));
      if (hi < lo) throw std::invalid_argument(fmt::format("M: range '{}' runs backwards", item));
      if (std::size_t(hi - lo) + out.size() >= std::size_t(1) << 20)
        throw std::invalid_argument("M: more than 2^20 values");
      for (int m = lo; m <= hi; ++m) out.push_back(m);
    }
    start = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

PlanAt plan_at(const InvarianceSpec& s, int m) {
  PlanAt p;
  p.options = base_options(s);
  if (s.kernel.empty()) {  // a loose recipe: every setting given
    p.key = fmt::format("split-K {}", s.split_k);
    p.detail = fmt::format("model {}, promoted every {}, scales {}", s.model, s.promote_every,
                           s.scale_order);
    p.source = "given";
    p.why = "the recipe's settings, the same at every M";
    return p;
  }
  const KernelPlanRule& rule = plan_rule(s.kernel);
  if (rule.m_multiple > 1 && m % rule.m_multiple != 0)
    throw std::invalid_argument(fmt::format("{} at M = {}: {}", s.kernel, m, rule.m_refusal));
  if (rule.plan == "triton") return triton_plan_at(s, m);
  if (rule.plan == "fixed") {
    p.key = "preset";
    p.detail = describe(kernel_by_name(s.kernel));
    p.source = "preset";
    p.why = std::string(rule.evidence);
    return p;
  }
  const CublasltPlan c = cublaslt_plan(s.gpu, scaled_mm_call(s, m));
  p.options.split_k = c.split_k;
  p.key = fmt::format("split-K {}", c.split_k);
  p.detail = c.tile.empty() ? std::string("tile not recorded")
                            : fmt::format("tile {}, stages {}, cluster {}, algo {}", c.tile,
                                          c.stages, c.cluster, c.algo_id);
  p.source = c.source;
  p.why = fmt::format("{} ({}; {})", c.why, c.gpu, c.versions);
  return p;
}

InvarianceInputs invariance_inputs(const InvarianceSpec& s) {
  check_spec(s);
  const std::string sc = scaling_of(s);
  const FormatSpec e4m3 = format_by_name("e4m3");
  const ScalingSpec q = scaling_by_name(sc == "block" ? "block128" : sc);
  const std::vector<double> a = s.a_row.empty() ? gaussian(s.seed, "invariance a row", s.k, s.threads) : s.a_row;
  const std::vector<double> b = s.b.empty() ? gaussian(s.seed, "invariance b", std::size_t(s.n) * s.k, s.threads) : s.b;
  const QuantisedOperand qa = quantise_operand(q, OperandRole::a, e4m3, 1, s.k, a, 1, s.threads);
  const QuantisedOperand qb = quantise_operand(q, OperandRole::b, e4m3, s.n, s.k, b, s.n, s.threads);
  InvarianceInputs in;
  in.a = codes_of(qa);
  in.b = codes_of(qb);
  if (sc != "none") {
    in.sa = gemm_scales(q, OperandRole::a, qa);
    in.sb = gemm_scales(q, OperandRole::b, qb);
    if (sc == "tensor") in.sb.resize(1);  // one scale for all of B (every row holds it)
  }
  if (s.bias) {
    const FormatSpec out = output_type_by_name(s.out_type, "out_type");
    for (const double x : gaussian(s.seed, "invariance bias", s.n, s.threads))
      in.bias.push_back(float(fp8sim::quantize(x, out)));
  }
  const std::string who = s.a_row.empty() && s.b.empty()
                              ? fmt::format("seeded N(0, 1) activations and weights (seed {})", s.seed)
                          : s.b.empty()
                              ? fmt::format("the given activation row, seeded N(0, 1) weights (seed {})", s.seed)
                          : s.a_row.empty()
                              ? fmt::format("a seeded N(0, 1) activation row (seed {}), the given weights", s.seed)
                              : std::string("the given activation row and weights");
  in.what = fmt::format("{}, quantised to e4m3 with {} scales{}", who, sc == "block" ? "1x128 / 128x128" : sc,
                        s.bias ? fmt::format(", a seeded bias in {}", s.out_type) : "");
  return in;
}

std::vector<float> row_under(const InvarianceSpec& s, const InvarianceInputs& in,
                             const GemmOptions& options) {
  const bool scaled = !in.sa.empty();
  const GemmSpec g = gemm_spec(options, scaled, scaled);
  validate(g, 1, s.n, s.k);
  std::vector<float> d(std::size_t(s.n));
  gemm(g, 1, s.n, s.k, in.a, in.b, {}, in.sa, in.sb, d, in.bias);
  return d;
}

RowMovement row_movement(const std::string& out_type, const std::vector<float>& before,
                         const std::vector<float>& after) {
  const FormatSpec f = output_type_by_name(out_type, "out_type");
  RowMovement r;
  for (std::size_t i = 0; i < before.size() && i < after.size(); ++i) {
    if (encode(double(before[i]), f) == encode(double(after[i]), f)) continue;
    ++r.changed;
    r.max_ulp = std::max(r.max_ulp, double(std::llabs(ordinal(f, before[i]) - ordinal(f, after[i]))));
    const double d = std::fabs(double(after[i]) - double(before[i]));
    r.max_rel = std::max(r.max_rel, before[i] == 0 ? INFINITY : d / std::fabs(double(before[i])));
  }
  r.changed_share = before.empty() ? 0 : double(r.changed) / double(before.size());
  return r;
}

namespace {

InvarianceReport build_report(const InvarianceSpec& s, bool all_refused_is_error) {
  check_spec(s);
  InvarianceReport r;
  r.spec = s;
  r.spec.a_row.clear();
  r.spec.b.clear();
  const std::string sc = scaling_of(s);
  r.kernel_text = s.kernel.empty()
      ? fmt::format("a loose recipe ({}, promoted every {}, scales {}, split-K {}), {} out, {} scales",
                    s.model, s.promote_every, s.scale_order, s.split_k, s.out_type, sc)
      : fmt::format("{}{}, {} out, {} scales{}", s.kernel,
                    plan_rule(s.kernel).plan == "cublaslt" ? fmt::format(" on {}", s.gpu) : "",
                    s.out_type, sc, s.bias ? ", bias" : "");
  // 1. The plan at every M, and the distinct arithmetic among them.
  std::map<std::string, int> variant_of;
  std::vector<GemmOptions> variants;
  for (const int m : s.m) {
    PlanPoint p;
    p.m = m;
    try {
      p.plan = plan_at(s, m);
      const auto [it, fresh] = variant_of.emplace(options_text(p.plan.options), int(variants.size()));
      if (fresh) variants.push_back(p.plan.options);
      p.variant = it->second;
    } catch (const std::invalid_argument& e) {
      p.refused = true;
      p.refusal = e.what();
      ++r.refused;
    }
    r.points.push_back(std::move(p));
  }
  if (r.refused == r.points.size()) {
    if (all_refused_is_error)
      throw std::invalid_argument(fmt::format("every M refused: {}", r.points.front().refusal));
    PlanRegion g{s.m.front(), s.m.back(), s.m.size(), true, "refused", r.points.front().refusal,
                 "refused " + std::to_string(s.m.size()), r.points.front().refusal, -1};
    r.regions.push_back(g);
    r.verdict = fmt::format("unknown: every M refused ({})", r.points.front().refusal);
    return r;
  }
  // 2. Regions: maximal runs of one key (refused points: one run of refusals).
  std::map<std::string, std::size_t> sources;
  std::vector<std::string> details;
  auto close_region = [&](PlanRegion& g) {
    for (const auto& [src, n] : sources) g.sources += (g.sources.empty() ? "" : ", ") + fmt::format("{} {}", src, n);
    sources.clear();
    // The first point's detail (a refusal: the first refusal's line), and how many others.
    g.detail = details.front();
    if (details.size() > 1 && !g.refused)
      g.detail += fmt::format(" (at M = {}; {} other detail{} in the range)", g.m_lo,
                              details.size() - 1, details.size() > 2 ? "s" : "");
    details.clear();
    r.regions.push_back(g);
  };
  PlanRegion cur;
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    const PlanPoint& p = r.points[i];
    const std::string key = p.refused ? std::string("refused") : p.plan.key;
    if (i == 0 || key != cur.key || (!p.refused && p.variant != cur.variant)) {
      if (i > 0) close_region(cur);
      cur = PlanRegion{};
      cur.m_lo = p.m;
      cur.key = key;
      cur.refused = p.refused;
      cur.refusal = p.refusal;
      cur.variant = p.variant;
    }
    cur.m_hi = p.m;
    ++cur.points;
    ++sources[p.refused ? std::string("refused") : p.plan.source];
    const std::string& d = p.refused ? p.refusal : p.plan.detail;
    if (std::find(details.begin(), details.end(), d) == details.end()) details.push_back(d);
  }
  close_region(cur);
  // 3. The row under each arithmetic, and its movement at each change of plan.
  std::optional<InvarianceInputs> in;
  if (s.rows) {
    in = invariance_inputs(s);
    r.input_text = in->what;
    for (const GemmOptions& o : variants) r.rows.push_back(row_under(s, *in, o));
  }
  int last = -1;
  for (std::size_t g = 0; g < r.regions.size(); ++g) {
    if (r.regions[g].refused) continue;
    if (last >= 0 && (r.regions[last].key != r.regions[g].key ||
                      r.regions[last].variant != r.regions[g].variant)) {
      PlanChange c;
      c.from = last;
      c.to = int(g);
      c.m_before = r.regions[last].m_hi;
      c.m_after = r.regions[g].m_lo;
      c.same_arithmetic = r.regions[last].variant == r.regions[g].variant;
      if (!r.rows.empty() && !c.same_arithmetic)
        c.movement = row_movement(s.out_type, r.rows[r.regions[last].variant], r.rows[r.regions[g].variant]);
      r.changes.push_back(c);
    }
    last = int(g);
  }
  // 4. The verdict: one arithmetic (and, with rows, one row) over every answered M.
  const std::size_t distinct = r.rows.empty() ? variants.size() : distinct_rows(s.out_type, r.rows);
  const std::string range = m_range_text(s.m.front(), s.m.back());
  const std::size_t answered = r.points.size() - r.refused;
  // Invariant: one arithmetic at every M (then no input's bits can move); several arithmetics
  // whose rows happen to agree for this input are not (another row may move).
  r.invariant = r.refused == 0 && variants.size() == 1;
  const std::string hidden =
      variants.size() > 1 && distinct == 1
          ? fmt::format("; this row's bits are equal under all {} (the {} rounding hides their fp32 "
                        "difference here), another row's may not be", variants.size(), s.out_type)
          : "";
  if (r.invariant) {
    r.verdict = fmt::format("invariant over M {} ({} values): every M answered, one arithmetic{}",
                            range, s.m.size(), r.rows.empty() ? "" : ", the row's bits equal at every M");
  } else if (variants.size() == 1) {
    r.verdict = fmt::format("unknown at {} of {} M (refused); the {} answered M run one arithmetic",
                            r.refused, s.m.size(), answered);
  } else {
    r.verdict = fmt::format("varies over M {}: {} arithmetics{}{}{}", range, variants.size(),
                            r.rows.empty() ? "" : fmt::format(", {} distinct rows", distinct),
                            r.refused ? fmt::format(", {} M refused", r.refused) : "", hidden);
  }
  // 5. The fix: the setting that makes every M run one arithmetic, checked over the range.
  // Offered where the plans vary; where they only leave M open, the refusal says how to know.
  if (variants.size() > 1 && !s.kernel.empty() && plan_rule(s.kernel).plan == "cublaslt") {
    InvarianceFix f;
    f.options = base_options(s);
    f.options.split_k = 1;
    f.setting = "split_k=1";
    f.detail = "cuBLASLt: an algorithm with CUBLASLT_ALGO_CONFIG_SPLITK_NUM = 1 "
               "(torch._scaled_mm has no switch for it); fp8sim: --split-k 1";
    // Every M under the fix (refused ones too: the fix decides what they left open), each
    // distinct arithmetic through the engine.
    std::map<std::string, GemmOptions> fixed;
    for (std::size_t i = 0; i < s.m.size(); ++i) fixed.emplace(options_text(f.options), f.options);
    f.distinct_rows = fixed.size();
    if (s.rows) {
      std::vector<std::vector<float>> rows;
      for (const auto& [text, o] : fixed) {  // a row already computed under these options is kept
        const auto known = variant_of.find(text);
        rows.push_back(known != variant_of.end() ? r.rows[known->second] : row_under(s, *in, o));
      }
      f.checked = true;
      f.distinct_rows = distinct_rows(s.out_type, rows);
      f.invariant = f.distinct_rows == 1;
      int same = 0;
      for (const PlanPoint& p : r.points) same += !p.refused && options_text(p.plan.options) == options_text(f.options);
      f.detail += fmt::format("; the plan cuBLASLt itself runs at {} of the {} M", same, s.m.size());
    }
    f.mac_ratio = 1;
    f.cost = "1.00x the emulated MACs at every M (split-K cuts K, it adds no MACs); the cost is "
             "parallelism: where cuBLASLt split K in S slices, S times fewer CTAs run";
    r.fix = f;
  }
  return r;
}

}  // namespace

InvarianceReport invariance_report(const InvarianceSpec& s) { return build_report(s, true); }

std::vector<LayerInvariance> model_invariance(const InvarianceSpec& s, const ModelLayers& m) {
  std::vector<LayerInvariance> out;
  for (const ModelLayer& l : m.layers) {
    InvarianceSpec x = s;
    x.n = l.n;
    x.k = l.k;
    if (!x.b.empty()) throw std::invalid_argument("b: the model view draws each layer's weights (drop b)");
    if (!x.a_row.empty() && x.a_row.size() != std::size_t(l.k))
      throw std::invalid_argument(fmt::format("a_row: {} values, but layer {} has K = {}",
                                              x.a_row.size(), l.name, l.k));
    out.push_back({l, build_report(x, false)});
  }
  return out;
}

std::string format_model_table(const ModelLayers& m, const std::vector<LayerInvariance>& v) {
  if (v.empty()) return "";
  const InvarianceReport& r0 = v.front().report;
  std::string o = fmt::format("invariance by layer: {}; {}; M {} ({} values)\n", m.model,
                              r0.kernel_text, m_range_text(r0.spec.m.front(), r0.spec.m.back()),
                              r0.spec.m.size());
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
      if (!c.same_arithmetic) at += (at.empty() ? "" : ", ") + fmt::format("{}->{}", c.m_before, c.m_after);
    const std::string verdict = r.invariant ? "invariant"
                                : r.verdict.rfind("unknown", 0) == 0 ? "unknown"
                                                                     : "varies";
    o += fmt::format("{:<22} {:>6} {:>6}  {:<10} {:<28} {:>7}  {}\n", l.layer.name, l.layer.n,
                     l.layer.k, verdict, plans.empty() ? "-" : plans, r.refused,
                     at.empty() ? "-" : at);
  }
  return o;
}

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
  std::string o = fmt::format("invariance: {}; N {}, K {}; M {} ({} values)\n", r.kernel_text,
                              s.n, s.k, m_range_text(s.m.front(), s.m.back()), s.m.size());
  if (!r.input_text.empty()) o += fmt::format("row: {}\n", r.input_text);
  o += fmt::format("\n{:<13} {:>6}  {:<14} {:<22} {}\n", "M", "points", "plan", "source", "detail");
  for (const PlanRegion& g : r.regions)
    o += fmt::format("{:<13} {:>6}  {:<14} {:<22} {}\n", m_range_text(g.m_lo, g.m_hi), g.points,
                     g.key, g.sources, g.detail);
  if (!r.changes.empty()) {
    o += "\nchanges of plan (the row's D before -> after):\n";
    for (const PlanChange& c : r.changes) {
      const PlanRegion &a = r.regions[c.from], &b = r.regions[c.to];
      std::string moved = c.same_arithmetic ? std::string("same arithmetic: the row's bits cannot move")
                          : r.rows.empty() ? std::string("rows not computed")
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
    o += f.checked ? fmt::format("  checked: {} at every M of the range ({} distinct row{})\n",
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
    o += fmt::format("{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(layer), r.spec.n, r.spec.k,
                     p.m, csv_field(p.refused ? "refused" : p.plan.key),
                     csv_field(p.refused ? "" : p.plan.source), p.refused ? 1 : 0, p.variant,
                     p.refused ? 0 : p.plan.options.split_k,
                     csv_field(p.refused ? "" : p.plan.detail),
                     csv_field(p.refused ? p.refusal : p.plan.why));
  return o;
}

std::string report_json(const InvarianceReport& r) {
  using nlohmann::json;
  const InvarianceSpec& s = r.spec;
  json j = {{"kernel", s.kernel}, {"gpu", s.gpu}, {"out_type", s.out_type},
            {"scaling", scaling_of(s)}, {"bias", s.bias}, {"n", s.n}, {"k", s.k},
            {"seed", s.seed}, {"kernel_text", r.kernel_text}, {"input", r.input_text},
            {"refused", r.refused}, {"invariant", r.invariant}, {"verdict", r.verdict}};
  json pts = json::array(), regs = json::array(), chs = json::array();
  for (const PlanPoint& p : r.points) {
    json x = {{"m", p.m}, {"refused", p.refused}, {"plan", p.refused ? "refused" : p.plan.key},
              {"source", p.refused ? "" : p.plan.source}, {"variant", p.variant},
              {"split_k", p.refused ? 0 : p.plan.options.split_k},
              {"detail", p.refused ? "" : p.plan.detail},
              {"why", p.refused ? p.refusal : p.plan.why}};
    if (!p.refused) {  // the GEMM the row runs at this M, as fp8sim.gemm's keywords
      const GemmOptions& o = p.plan.options;
      x["options"] = {{"kernel", o.kernel}, {"model", o.model}, {"promote_every", o.promote_every},
                      {"scaling", o.scaling}, {"block", o.block}, {"scale_order", o.scale_order},
                      {"out_type", o.out_type}, {"split_k", o.split_k},
                      {"split_k_align", o.split_k_align}};
    }
    pts.push_back(x);
  }
  for (const PlanRegion& g : r.regions)
    regs.push_back({{"m_lo", g.m_lo}, {"m_hi", g.m_hi}, {"points", g.points}, {"plan", g.key},
                    {"sources", g.sources}, {"refused", g.refused}, {"variant", g.variant},
                    {"detail", g.detail}});
  for (const PlanChange& c : r.changes)
    chs.push_back({{"m_before", c.m_before}, {"m_after", c.m_after},
                   {"from", r.regions[c.from].key}, {"to", r.regions[c.to].key},
                   {"same_arithmetic", c.same_arithmetic}, {"changed", c.movement.changed},
                   {"changed_share", c.movement.changed_share}, {"max_ulp", c.movement.max_ulp},
                   {"max_rel", std::isinf(c.movement.max_rel) ? json("inf") : json(c.movement.max_rel)}});
  j["points"] = pts;
  j["regions"] = regs;
  j["changes"] = chs;
  if (r.fix)
    j["fix"] = {{"setting", r.fix->setting}, {"detail", r.fix->detail}, {"checked", r.fix->checked},
                {"invariant", r.fix->invariant}, {"distinct_rows", r.fix->distinct_rows},
                {"mac_ratio", r.fix->mac_ratio}, {"cost", r.fix->cost}};
  return j.dump(1) + "\n";
}

}  // namespace fp8sim
