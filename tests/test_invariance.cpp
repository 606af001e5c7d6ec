// test_invariance: the batch-invariance report (sim/analysis/invariance.hpp) against what it
// rests on: its plans against direct cublaslt_plan calls at every M, its rows against row 0 of
// real M-row GEMMs under the same plan (the invariance claim itself), its movement numbers
// against plain float bit arithmetic, and the model layer lists against the config formulas.
#include <fmt/format.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/invariance.hpp"
#include "analysis/model_layers.hpp"
#include "gemm/gemm.hpp"
#include "kernel/cublaslt_plan.hpp"
#include "sanitized.hpp"
#include "test_seed.hpp"

using namespace fp8sim;

namespace {

InvarianceSpec cublaslt_spec(int n, int k, std::vector<int> m, const std::string& out = "f32",
                             bool fast = false, const std::string& gpu = "h100") {
  InvarianceSpec s;
  s.kernel = fast ? "cublaslt-fast-accum" : "cublaslt";
  s.gpu = gpu;
  s.out_type = out;
  s.n = n;
  s.k = k;
  s.m = std::move(m);
  return s;
}

// The Triton block kernel with vLLM's configs on the H100, for an N x K weight at M in m.
InvarianceSpec triton_vllm_spec(int n, int k, std::vector<int> m) {
  InvarianceSpec s;
  s.kernel = "triton-w8a8-block-fp8";
  s.triton_config = "vllm";
  s.gpu = "h100";
  s.n = n;
  s.k = k;
  s.m = std::move(m);
  return s;
}

std::vector<int> range(int lo, int hi) {
  std::vector<int> v;
  for (int m = lo; m <= hi; ++m) v.push_back(m);
  return v;
}

// Row 0 of a real M-row GEMM under the plan at M: A's row 0 is the report's row, the other
// M - 1 rows random finite codes (with their own scales where scales are per row or block).
std::vector<float> row0_of_real_gemm(const InvarianceSpec& s, const InvarianceInputs& in, int M,
                                     std::mt19937_64& rng) {
  const PlanAt p = plan_at(s, M);
  GemmSpec g = gemm_spec(p.options, !in.sa.empty(), !in.sa.empty());
  apply_triton_config(g, p.options, M, s.n, s.k);  // a Triton plan's config, as launched
  std::vector<std::uint8_t> a(std::size_t(M) * s.k);
  std::copy(in.a.begin(), in.a.end(), a.begin());
  for (std::size_t i = in.a.size(); i < a.size(); ++i) {
    do a[i] = std::uint8_t(rng() & 0xff);
    while ((a[i] & 0x7f) == 0x7f);
  }
  std::vector<float> sa = in.sa;
  if (g.scaling == Scaling::row || g.scaling == Scaling::block) {
    std::uniform_real_distribution<float> u(0.01f, 2.0f);
    for (int r = 1; r < M; ++r)
      for (std::size_t c = 0; c < in.sa.size(); ++c) sa.push_back(u(rng));
  }
  std::vector<float> d(std::size_t(M) * s.n);
  gemm(g, M, s.n, s.k, a, in.b, {}, sa, in.sb, d, in.bias);
  return {d.begin(), d.begin() + s.n};
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::bit_cast<std::uint32_t>(x[i]) != std::bit_cast<std::uint32_t>(y[i])) return false;
  return true;
}

// f32 ordinal from the IEEE bits (sign-magnitude to a signed line), independent of encode().
long long f32_ordinal(float v) {
  const std::uint32_t b = std::bit_cast<std::uint32_t>(v);
  const long long mag = b & 0x7fffffffu;
  return (b >> 31) ? -mag : mag;
}

}  // namespace

TEST_CASE("plans at every M are cublaslt_plan's own, regions partition the range", "[unit]") {
  for (const std::string gpu : {"h100", "h200"})
    for (const bool fast : {false, true})
      for (const auto& [n, k] : {std::pair{576, 7168}, {4096, 14336}, {7168, 2048}, {64, 65536}}) {
        InvarianceSpec s = cublaslt_spec(n, k, range(1, 300), "bf16", fast, gpu);
        s.rows = false;
        const InvarianceReport r = invariance_report(s);
        REQUIRE(r.points.size() == 300);
        std::size_t refused = 0;
        for (const PlanPoint& p : r.points) {
          ScaledMmCall c;
          c.m = p.m;
          c.n = n;
          c.k = k;
          c.out = "bf16";
          c.fast = fast;
          std::string why;
          int split = -1;
          std::string source;
          try {
            const CublasltPlan d = cublaslt_plan(gpu, c);
            split = d.split_k;
            source = d.source;
          } catch (const std::invalid_argument& e) {
            why = e.what();
          }
          INFO(fmt::format("{} fast{} {}x{}x{}", gpu, int(fast), p.m, n, k));
          CHECK(p.refused == (split < 0));
          if (p.refused) {
            CHECK(p.refusal == why);
            ++refused;
          } else {
            CHECK(p.plan.options.split_k == split);
            CHECK(p.plan.source == source);
            CHECK(p.plan.key == fmt::format("split-K {}", split));
          }
        }
        CHECK(r.refused == refused);
        // Regions: consecutive, covering every point once, one key each, neighbours differ.
        std::size_t covered = 0;
        for (std::size_t g = 0; g < r.regions.size(); ++g) {
          const PlanRegion& x = r.regions[g];
          CHECK(x.m_hi - x.m_lo + 1 == int(x.points));  // M 1..300: every integer
          for (int m = x.m_lo; m <= x.m_hi; ++m) {
            const PlanPoint& p = r.points[m - 1];
            CHECK((p.refused ? std::string("refused") : p.plan.key) == x.key);
          }
          if (g > 0) {
            CHECK(r.regions[g - 1].m_hi + 1 == x.m_lo);
            CHECK((r.regions[g - 1].key != x.key || r.regions[g - 1].variant != x.variant));
          }
          covered += x.points;
        }
        CHECK(covered == 300);
      }
}

TEST_CASE("a real M-row GEMM's row 0 is the report's row under the plan at M",
          "[unit][differential]") {
  std::mt19937_64 rng(test_seed());
  // cuBLASLt at recorded points that split (16x16x16384: split 6 on the H100), fast
  // accumulation on so that the split moves the row; and DeepGEMM's preset with block scales.
  InvarianceSpec cub = cublaslt_spec(16, 16384, {1, 2, 3, 4, 8, 16, 24, 32, 48, 64}, "f32", true);
  InvarianceSpec deep;
  deep.kernel = "deepgemm-sm90-1d2d";
  deep.n = 200;
  deep.k = 1024;
  deep.m = {1, 3, 17, 64, 129};
  InvarianceSpec row = cublaslt_spec(96, 2048, {1, 5, 33}, "bf16");
  row.scaling = "row";
  InvarianceSpec bias = cublaslt_spec(64, 2048, {1, 2, 64, 300}, "bf16");  // a bf16 bias
  bias.bias = true;
  // The Triton block kernel with vLLM's configs: BLOCK_SIZE_M 16 (FP16 mma.sync) at M = 1,
  // 64 (wgmma) above, for DeepSeek-V3's kv_a_proj_with_mqa on the H100.
  const InvarianceSpec tri = triton_vllm_spec(576, 7168, {1, 2, 3});
  for (const InvarianceSpec& s : {cub, deep, row, bias, tri}) {
    const InvarianceReport r = invariance_report(s);
    const InvarianceInputs in = invariance_inputs(s);
    for (const PlanPoint& p : r.points) {
      if (p.refused) continue;
      INFO(fmt::format("{} {}x{}x{}: {}", s.kernel, p.m, s.n, s.k, p.plan.key));
      CHECK(same_bits(row0_of_real_gemm(s, in, p.m, rng), r.rows[p.variant]));
      CHECK(same_bits(row_under(s, in, p.plan.options), r.rows[p.variant]));
    }
  }
}

TEST_CASE("movement at each change: plain float bit arithmetic agrees", "[unit]") {
  // N = 512: four changes of plan (split-K 5, 3, 5, 3, 5); N = 4096: one (2 -> 1 at M 24 ->
  // 32) on a row 8 times longer, not under the sanitizers (sanitized.hpp).
  for (const int n : test::kSanitized ? std::vector<int>{512} : std::vector<int>{512, 4096}) {
    const InvarianceSpec s = cublaslt_spec(n, 14336, {1, 2, 4, 8, 16, 24, 32, 48, 64}, "f32", true);
    const InvarianceReport r = invariance_report(s);
    REQUIRE_FALSE(r.changes.empty());
    bool moved = false;
    for (const PlanChange& c : r.changes) {
      const auto& a = r.rows[r.regions[c.from].variant];
      const auto& b = r.rows[r.regions[c.to].variant];
      std::size_t changed = 0;
      long long ulp = 0;
      double rel = 0;
      for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::bit_cast<std::uint32_t>(a[i]) == std::bit_cast<std::uint32_t>(b[i])) continue;
        ++changed;
        ulp = std::max(ulp, std::llabs(f32_ordinal(a[i]) - f32_ordinal(b[i])));
        rel = std::max(rel, std::fabs(double(b[i]) - double(a[i])) / std::fabs(double(a[i])));
      }
      CHECK(c.movement.changed == changed);
      CHECK(c.movement.max_ulp == double(ulp));
      CHECK(c.movement.max_rel == rel);
      moved = moved || changed > 0;
    }
    CHECK(moved);
    CHECK_FALSE(r.invariant);
    // The fix: split_k = 1 at every M, its row the engine's under split 1, the same at every M.
    REQUIRE(r.fix.has_value());
    CHECK(r.fix->checked);
    CHECK(r.fix->invariant);
    CHECK(r.fix->options.split_k == 1);
  }
}

TEST_CASE("fixed presets: DeepGEMM invariant over 1..4096, CUTLASS refuses M not a multiple of 4",
          "[unit]") {
  InvarianceSpec s;
  s.kernel = "deepgemm-sm90-1d2d";
  s.n = 256;
  s.k = 512;
  s.m = range(1, 4096);
  const InvarianceReport r = invariance_report(s);
  CHECK(r.invariant);
  CHECK(r.regions.size() == 1);
  CHECK(r.rows.size() == 1);
  CHECK_FALSE(r.fix.has_value());
  s.kernel = "cutlass-sm90-blockwise";
  s.m = range(1, 16);
  const InvarianceReport c = invariance_report(s);
  CHECK(c.refused == 12);
  CHECK_FALSE(c.invariant);
  for (const PlanPoint& p : c.points) CHECK(p.refused == (p.m % 4 != 0));
}

// vLLM's tuned file for N 7168, K 1024 on the H100 picks BLOCK_SIZE_M 16 at M = 1 (FP16
// mma.sync on sm_90) and 64 from M = 2 (wgmma): the report sees both, and the row it computes
// under each plan is the row of a real M-row GEMM run under that plan's pinned config.
TEST_CASE("the Triton block kernel's plan per M is the server's config and its instruction", "[unit]") {
  InvarianceSpec s = triton_vllm_spec(7168, 1024, {1, 2, 3, 4});
  const InvarianceReport r = invariance_report(s);
  REQUIRE(r.points.size() == 4);
  for (const PlanPoint& p : r.points) {
    const TritonPlan t = triton_plan("vllm", p.m, s.n, s.k, "h100");
    CHECK(p.plan.key == fmt::format("config {} {}", to_string(t.config), t.instruction));
    CHECK(p.plan.tile_m == t.config.block_m);
  }
  CHECK(r.points[0].plan.key.find("mma.sync.f16") != std::string::npos);
  CHECK(r.points[1].plan.key.find("wgmma") != std::string::npos);
  CHECK_FALSE(r.invariant);
  // A GPU with no recorded files refuses every M (with the lookup's own line).
  s.gpu = "a100";
  CHECK_THROWS_WITH(invariance_report(s), Catch::StartsWith("every M refused: gpu 'a100'"));
}

TEST_CASE("refusals: every M refused is an error", "[unit]") {
  InvarianceSpec s;
  s = cublaslt_spec(1024, 9728, {87}, "bf16");
  CHECK_THROWS_WITH(invariance_report(s),
                    Catch::StartsWith("every M refused: torch._scaled_mm 87x1024x9728"));
  s.m = {0};
  CHECK_THROWS_AS(invariance_report(s), std::invalid_argument);
  s.m = {4, 2};
  CHECK_THROWS_AS(invariance_report(s), std::invalid_argument);
  s = cublaslt_spec(64, 1000, {1}, "bf16");
  s.scaling = "block";
  CHECK_THROWS_WITH(invariance_report(s), Catch::Contains("K a multiple of 128"));
  s = cublaslt_spec(64, 256, {1}, "bf16");
  s.a_row = {1.0, 2.0};
  CHECK_THROWS_WITH(invariance_report(s), "a_row: 2 values, but K = 256");
}

TEST_CASE("M lists: ranges, lists, sorted and unique; bad items named", "[unit]") {
  CHECK(parse_m_list("1-4") == std::vector<int>{1, 2, 3, 4});
  CHECK(parse_m_list("8,1-3,2") == std::vector<int>{1, 2, 3, 8});
  for (const char* bad : {"", "0", "4-1", "a", "1,,2", "1-", "-3", "2147483648"})
    CHECK_THROWS_AS(parse_m_list(bad), std::invalid_argument);
}

TEST_CASE("layer lists: N and K from the config.json values they cite", "[unit]") {
  const ModelLayers d = model_layers("deepseek-v3");
  // DeepSeek-V3 config.json: hidden 7168, intermediate 18432, moe 2048, q_lora 1536,
  // kv_lora 512, heads 128, qk_nope 128, qk_rope 64, v_head 128.
  const int h = 7168, heads = 128, nope = 128, rope = 64, v = 128;
  const std::vector<std::tuple<std::string, int, int>> want = {
      {"q_a_proj", 1536, h},
      {"q_b_proj", heads * (nope + rope), 1536},
      {"kv_a_proj_with_mqa", 512 + rope, h},
      {"kv_b_proj", heads * (nope + v), 512},
      {"o_proj", h, heads * v},
      {"dense gate_up_proj", 2 * 18432, h},
      {"dense down_proj", h, 18432},
      {"expert gate_up_proj", 2 * 2048, h},
      {"expert down_proj", h, 2048}};
  REQUIRE(d.layers.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    CHECK(d.layers[i].name == std::get<0>(want[i]));
    CHECK(d.layers[i].n == std::get<1>(want[i]));
    CHECK(d.layers[i].k == std::get<2>(want[i]));
  }
  // Llama 3 8B: hidden 4096, intermediate 14336, heads 32, kv heads 8, head_dim 128.
  const ModelLayers l = model_layers("llama-3-8b");
  const std::vector<std::tuple<std::string, int, int>> lw = {
      {"q_proj", 32 * 128, 4096},   {"k_proj", 8 * 128, 4096},  {"v_proj", 8 * 128, 4096},
      {"qkv_proj", 48 * 128, 4096}, {"o_proj", 4096, 32 * 128}, {"gate_up_proj", 2 * 14336, 4096},
      {"down_proj", 4096, 14336}};
  REQUIRE(l.layers.size() == lw.size());
  for (std::size_t i = 0; i < lw.size(); ++i) {
    CHECK(l.layers[i].name == std::get<0>(lw[i]));
    CHECK(l.layers[i].n == std::get<1>(lw[i]));
    CHECK(l.layers[i].k == std::get<2>(lw[i]));
  }
  CHECK_THROWS_WITH(model_layers("gpt-5"),
                    Catch::StartsWith("unknown model 'gpt-5' (known: deepseek-v3, llama-3-8b"));
}
