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
#include "kernel/triton_config.hpp"
#include "scaling/scaling.hpp"

namespace fp8sim {

std::string m_range_text(int lo, int hi) {
  return lo == hi ? std::to_string(lo) : fmt::format("{}-{}", lo, hi);
}

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

// The Triton block kernel's plan at M: the one place its config enters. The config a server
// (or the user) gives at M (triton_plan), the instruction Triton lowers it to and the preset
// that models it; the row's GEMM runs under that config, pinned (not looked up again).
PlanAt triton_plan_at(const InvarianceSpec& s, int m) {
  const TritonPlan t = triton_plan(s.triton_config, m, s.n, s.k, s.gpu, s.kernel);
  PlanAt p;
  p.options = base_options(s);
  p.options.triton_config = to_string(t.config);
  p.options.gpu = s.gpu;
  p.key = fmt::format("config {} {}", to_string(t.config), t.instruction);
  p.detail = fmt::format("BLOCK_SIZE_M {}, N {}, K {}, {} warps, {} stages: {} ({})",
                         t.config.block_m, t.config.block_n, t.config.block_k,
                         t.config.num_warps, t.config.num_stages, t.instruction,
                         triton_kernel_for(s.kernel, t));
  // The file (or default) the config came from, not the entry: M that share a config share it.
  p.source = t.config_source.substr(0, t.config_source.find(", entry"));
  p.why = t.why;
  p.tile_m = t.config.block_m;
  return p;
}

// What a pinned Triton config changes in the arithmetic: the instruction it lowers to and
// BLOCK_SIZE_K (the promotion); its N, warps and stages change no output's chain.
std::string triton_arithmetic(const GemmOptions& o) {
  if (o.triton_config.empty()) return "";
  const TritonConfig c = parse_triton_config(o.triton_config);
  return fmt::format("{} BK {}", triton_lowering(c).first, c.block_k);
}

// A GEMM's options as one comparable line: the arithmetic the row runs.
std::string options_text(const GemmOptions& o) {
  return fmt::format("{} {} {} {} {} {} {} {} {} {} {} {} {} {}", o.kernel, triton_arithmetic(o),
                     o.a_format, o.b_format, o.model, o.promote_every, o.scaling, o.block,
                     o.scale_order, o.out_type, o.split_k, o.split_k_align, o.mx_block,
                     o.mx_scale);
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
std::size_t distinct_rows(const std::string& out_type,
                          const std::vector<std::vector<float>>& rows) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    bool seen = false;
    for (std::size_t j = 0; j < i && !seen; ++j)
      seen = row_movement(out_type, rows[j], rows[i]).changed == 0;
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
  // The row's weights live in memory as values, codes and the engine's decoded operand (about
  // 20 bytes an element): 2^28 elements is some 5 GB.
  constexpr std::size_t kMaxRowWeights = std::size_t(1) << 28;
  if (s.rows && std::size_t(s.n) * std::size_t(s.k) > kMaxRowWeights)
    throw std::invalid_argument(fmt::format(
        "N x K = {} x {}: more than 2^28 weights for the row's GEMM (rows=false / --no-rows "
        "reports the plans alone)",
        s.n, s.k));
  if (sc == "block" && s.k % 128 != 0)
    throw std::invalid_argument(fmt::format(
        "K = {}: block scales quantise whole 1x128 / 128x128 blocks (K a multiple of 128)", s.k));
  if (s.m.empty())
    throw std::invalid_argument("M: no values (give a range 1-4096 or a list 1,2,4)");
  for (std::size_t i = 0; i < s.m.size(); ++i)
    if (s.m[i] < 1 || (i > 0 && s.m[i] <= s.m[i - 1]))
      throw std::invalid_argument(
          fmt::format("M: {} is not >= 1 and above the M before it", s.m[i]));
  if (s.bias && s.out_type == "f32" && !s.kernel.empty() && plan_rule(s.kernel).plan == "cublaslt")
    throw std::invalid_argument("bias: the cuBLASLt plans take a bias with bf16 or f16 outputs");
  if (!s.a_row.empty() && s.a_row.size() != std::size_t(s.k))
    throw std::invalid_argument(fmt::format("a_row: {} values, but K = {}", s.a_row.size(), s.k));
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
  const ScaledMmCall call = scaled_mm_call(s, m);
  const CublasltPlan c = s.ask_cublaslt ? s.ask_cublaslt(call) : cublaslt_plan(s.gpu, call);
  if (c.split_k > 1 && c.reduction != "COMPUTE_TYPE")
    throw std::invalid_argument(fmt::format(
        "cuBLASLt at {}x{}x{}: split-K {} with reduction {} is not modelled (only "
        "COMPUTE_TYPE, docs/cublaslt.md)", m, s.n, s.k, c.split_k, c.reduction));
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
  const std::vector<double> a =
      s.a_row.empty() ? gaussian(s.seed, "invariance a row", s.k, s.threads) : s.a_row;
  const std::vector<double> b =
      s.b.empty() ? gaussian(s.seed, "invariance b", std::size_t(s.n) * s.k, s.threads) : s.b;
  const QuantisedOperand qa = quantise_operand(q, OperandRole::a, e4m3, 1, s.k, a, 1, s.threads);
  const QuantisedOperand qb =
      quantise_operand(q, OperandRole::b, e4m3, s.n, s.k, b, s.n, s.threads);
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
  const std::string who =
      s.a_row.empty() && s.b.empty()
          ? fmt::format("seeded N(0, 1) activations and weights (seed {})", s.seed)
      : s.b.empty()
          ? fmt::format("the given activation row, seeded N(0, 1) weights (seed {})", s.seed)
      : s.a_row.empty()
          ? fmt::format("a seeded N(0, 1) activation row (seed {}), the given weights", s.seed)
          : std::string("the given activation row and weights");
  in.what = fmt::format("{}, quantised to e4m3 with {} scales{}", who,
                        sc == "block" ? "1x128 / 128x128" : sc,
                        s.bias ? fmt::format(", a seeded bias in {}", s.out_type) : "");
  return in;
}

std::vector<float> row_under(const InvarianceSpec& s, const InvarianceInputs& in,
                             const GemmOptions& options) {
  const bool scaled = !in.sa.empty();
  GemmSpec g = gemm_spec(options, scaled, scaled);
  apply_triton_config(g, options, 1, s.n, s.k);  // a pinned config: routes, sets the promotion
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
    r.max_ulp =
        std::max(r.max_ulp, double(std::llabs(ordinal(f, before[i]) - ordinal(f, after[i]))));
    const double d = std::fabs(double(after[i]) - double(before[i]));
    r.max_rel = std::max(r.max_rel, before[i] == 0 ? INFINITY : d / std::fabs(double(before[i])));
  }
  r.changed_share = before.empty() ? 0 : double(r.changed) / double(before.size());
  return r;
}

namespace {

// Rows of A the plan's tiles hold for m rows (m itself when the tile is not known).
double padded_rows(int tile_m, int m) {
  return tile_m > 0 ? double((m + tile_m - 1) / tile_m) * tile_m : double(m);
}

// The plan to pin at every M where a kernel has one, with its setting and cost: cuBLASLt's
// split_k = 1; the Triton kernel's config at the largest answered M (the wgmma path, its
// BLOCK_SIZE_M padded at small M). Kernels with fixed plans need none.
std::optional<InvarianceFix> pinned_fix(const InvarianceSpec& s, const InvarianceReport& r) {
  if (s.kernel.empty()) return std::nullopt;
  const std::string_view plan = plan_rule(s.kernel).plan;
  const PlanPoint* first = nullptr;
  for (const PlanPoint& p : r.points)
    if (!p.refused && !first) first = &p;
  InvarianceFix f;
  int same = 0;
  if (plan == "cublaslt") {
    f.options = base_options(s);
    f.options.split_k = 1;
    f.setting = "split_k=1";
    f.detail =
        "cuBLASLt: an algorithm with CUBLASLT_ALGO_CONFIG_SPLITK_NUM = 1 "
        "(torch._scaled_mm has no switch for it); fp8sim: --split-k 1";
    f.cost =
        "1.00x the emulated MACs at every M (split-K cuts K, it adds no MACs); the cost is "
        "parallelism: where cuBLASLt split K in S slices, S times fewer CTAs run";
  } else if (plan == "triton") {
    const PlanPoint* last = nullptr;
    for (const PlanPoint& p : r.points)
      if (!p.refused) last = &p;
    f.options = last->plan.options;
    f.setting = fmt::format("pin the config of M = {}: {}", last->m, last->plan.key);
    f.detail = last->plan.detail;
    f.mac_ratio =
        padded_rows(last->plan.tile_m, first->m) / padded_rows(first->plan.tile_m, first->m);
    f.cost = fmt::format("{:.2f}x the emulated MACs at M = {} (rows padded to the pinned tile)",
                         f.mac_ratio, first->m);
  } else {
    return std::nullopt;
  }
  for (const PlanPoint& p : r.points)
    same += !p.refused && options_text(p.plan.options) == options_text(f.options);
  f.detail += fmt::format("; the plan the kernel itself runs at {} of the {} M", same, s.m.size());
  return f;
}

InvarianceReport build_report(const InvarianceSpec& s, bool all_refused_is_error) {
  check_spec(s);
  InvarianceReport r;
  r.spec = s;
  r.spec.a_row.clear();
  r.spec.b.clear();
  const std::string sc = scaling_of(s);
  r.spec.scaling = sc;
  r.kernel_text =
      s.kernel.empty()
          ? fmt::format(
                "a loose recipe ({}, promoted every {}, scales {}, split-K {}), {} out, {} scales",
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
      const auto [it, fresh] =
          variant_of.emplace(options_text(p.plan.options), int(variants.size()));
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
    PlanRegion g{s.m.front(),
                 s.m.back(),
                 s.m.size(),
                 true,
                 "refused",
                 r.points.front().refusal,
                 "refused " + std::to_string(s.m.size()),
                 r.points.front().refusal,
                 -1};
    r.regions.push_back(g);
    r.verdict = fmt::format("unknown: every M refused ({})", r.points.front().refusal);
    return r;
  }
  // 2. Regions: maximal runs of one key (refused points: one run of refusals).
  std::map<std::string, std::size_t> sources;
  std::vector<std::string> details;
  auto close_region = [&](PlanRegion& g) {
    for (const auto& [src, n] : sources)
      g.sources += (g.sources.empty() ? "" : ", ") + fmt::format("{} {}", src, n);
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
        c.movement =
            row_movement(s.out_type, r.rows[r.regions[last].variant], r.rows[r.regions[g].variant]);
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
          ? fmt::format("; this row's bits are equal under all {} (for this input they round "
                        "alike), another row's may not be",
                        variants.size())
          : "";
  if (r.invariant) {
    r.verdict =
        fmt::format("invariant over M {} ({} values): every M answered, one arithmetic{}", range,
                    s.m.size(), r.rows.empty() ? "" : ", the row's bits equal at every M");
  } else if (variants.size() == 1) {
    r.verdict = fmt::format("unknown at {} of {} M (refused); the {} answered M run one arithmetic",
                            r.refused, s.m.size(), answered);
  } else {
    r.verdict = fmt::format("varies over M {}: {} arithmetics{}{}{}", range, variants.size(),
                            r.rows.empty() ? "" : fmt::format(", {} distinct rows", distinct),
                            r.refused ? fmt::format(", {} M refused", r.refused) : "", hidden);
  }
  // 5. The fix: the plan pinned at every M, checked over the range. Offered where the plans
  // vary; where they only leave M open, the refusal says how to know.
  if (variants.size() > 1) {
    if (std::optional<InvarianceFix> f = pinned_fix(s, r)) {
      // Every M runs the pinned plan (refused ones too: the fix decides what they left
      // open); each distinct arithmetic through the engine, a row already computed kept.
      std::map<std::string, GemmOptions> fixed;
      for (std::size_t i = 0; i < s.m.size(); ++i)
        fixed.emplace(options_text(f->options), f->options);
      f->distinct_rows = fixed.size();
      if (s.rows) {
        std::vector<std::vector<float>> rows;
        for (const auto& [text, o] : fixed) {
          const auto known = variant_of.find(text);
          rows.push_back(known != variant_of.end() ? r.rows[known->second] : row_under(s, *in, o));
        }
        f->checked = true;
        f->distinct_rows = distinct_rows(s.out_type, rows);
        f->invariant = f->distinct_rows == 1;
      }
      r.fix = f;
    }
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
    if (!x.b.empty())
      throw std::invalid_argument("b: the model view draws each layer's weights (drop b)");
    if (!x.a_row.empty() && x.a_row.size() != std::size_t(l.k))
      throw std::invalid_argument(
          fmt::format("a_row: {} values, but layer {} has K = {}", x.a_row.size(), l.name, l.k));
    out.push_back({l, build_report(x, false)});
  }
  return out;
}

}  // namespace fp8sim
