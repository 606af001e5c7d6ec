// test_hw_captures: hardware captures from fp8sim-hw (tests/data/hw) replayed without a GPU.
//
// Every GEMM case whose manifest names a model is recomputed with sim/gemm.hpp and compared
// bit for bit (outputs and K prefixes); the conversion captures are compared with encode()
// and decode(); the mma.sync capture is also checked against its SASS structure written out
// with plain 16-product steps (an independent check of the hopper-mma-sync preset). Failures print one line: <set>/<case> m n => got <hex> want <hex>.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "format.hpp"
#include "gemm.hpp"
#include "npy.hpp"
#include "rounding.hpp"

namespace {

using namespace fp8sim;
namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path hw_data() {
  const char* d = std::getenv("FP8SIM_TEST_DATA");
  return fs::path(d != nullptr ? d : "tests/data") / "hw";
}

json manifest(const fs::path& dir) { return json::parse(std::ifstream(dir / "manifest.json")); }

bool same(float x, float y) {
  return (std::isnan(x) && std::isnan(y)) || std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
}

std::string hex(float v) { return fmt::format("0x{:08x}", std::bit_cast<std::uint32_t>(v)); }

struct GemmCase {
  int M, N, K;
  std::vector<std::uint8_t> A, B;
  std::vector<float> C, sa, sb, D;
};

GemmCase load(const fs::path& dir, const json& c) {
  GemmCase g{c["M"], c["N"], c["K"], {}, {}, {}, {}, {}, {}};
  auto f = [&](const char* key) { return (dir / c[key].get<std::string>()).string(); };
  g.A = read_npy_checked(f("a"), "|u1", {std::size_t(g.M), std::size_t(g.K)}).as<std::uint8_t>();
  g.B = read_npy_checked(f("b"), "|u1", {std::size_t(g.N), std::size_t(g.K)}).as<std::uint8_t>();
  g.D = read_npy_checked(f("d"), "<f4", {std::size_t(g.M), std::size_t(g.N)}).as<float>();
  if (!c["c"].is_null()) g.C = read_npy(f("c")).as<float>();
  if (!c["sa"].is_null()) g.sa = read_npy(f("sa")).as<float>(), g.sb = read_npy(f("sb")).as<float>();
  return g;
}

// The first k columns of A and B (and of the scale grids, blocks of 128 along K).
GemmCase prefix(const GemmCase& g, int k) {
  GemmCase p = g;
  p.K = k;
  p.A.resize(std::size_t(g.M) * k);
  p.B.resize(std::size_t(g.N) * k);
  for (int r = 0; r < g.M; ++r) std::copy_n(&g.A[std::size_t(r) * g.K], k, &p.A[std::size_t(r) * k]);
  for (int r = 0; r < g.N; ++r) std::copy_n(&g.B[std::size_t(r) * g.K], k, &p.B[std::size_t(r) * k]);
  if (!g.sa.empty()) {
    const int ka = (g.K + 127) / 128, kb = (k + 127) / 128;
    const int rows_a = int(g.sa.size()) / ka, rows_b = int(g.sb.size()) / ka;
    p.sa.assign(std::size_t(rows_a) * kb, 0), p.sb.assign(std::size_t(rows_b) * kb, 0);
    for (int r = 0; r < rows_a; ++r) std::copy_n(&g.sa[std::size_t(r) * ka], kb, &p.sa[std::size_t(r) * kb]);
    for (int r = 0; r < rows_b; ++r) std::copy_n(&g.sb[std::size_t(r) * ka], kb, &p.sb[std::size_t(r) * kb]);
  }
  return p;
}

GemmSpec spec_of(const json& c) {
  GemmSpec s;
  s.a_format = format_by_name(c["a_format"].get<std::string>());
  s.b_format = format_by_name(c["b_format"].get<std::string>());
  s.model = accumulator_by_name(c["model"].get<std::string>());
  s.promote_every = c["promote_every"];
  s.scaling = parse_scaling(c["scaling"].get<std::string>());
  s.block = c["block"];
  s.order = parse_scale_order(c["scale_order"].get<std::string>());
  s.out_type = format_by_name(c["out_type"].get<std::string>());
  s.threads = 0;
  return s;
}

// Compares one output array; returns the number of equal elements, reports the first miss.
long compare(const std::string& where, const GemmCase& g, const std::vector<float>& got,
             const std::vector<float>& want) {
  long ok = 0;
  bool told = false;
  for (int m = 0; m < g.M; ++m)
    for (int n = 0; n < g.N; ++n) {
      const std::size_t i = std::size_t(m) * g.N + n;
      if (same(got[i], want[i])) {
        ++ok;
      } else if (!told) {
        told = true;
        fmt::print("{}\n", fmt::format("{} K={} m={} n={} c={} => got {} want {}", where, g.K, m, n,
                                  g.C.empty() ? "none" : hex(g.C[i]), hex(got[i]), hex(want[i])));
      }
    }
  return ok;
}

}  // namespace

TEST_CASE("hardware GEMM captures replay bit for bit through gemm()", "[golden][hw]") {
  long cases = 0, outputs = 0, matches = 0;
  std::vector<std::string> sets;
  for (const auto& e : fs::directory_iterator(hw_data()))
    if (fs::exists(e.path() / "manifest.json") && manifest(e.path()).contains("fp8sim_capture"))
      sets.push_back(e.path().filename().string());
  std::sort(sets.begin(), sets.end());
  REQUIRE(sets.size() >= 10);
  for (const auto& set : sets) {
    const fs::path dir = hw_data() / set;
    const json m = manifest(dir);
    // Provenance: every capture says where and when it came from.
    for (const char* key : {"device", "driver", "cuda", "date", "git_revision", "generator", "seed"})
      CHECK(m.contains(key));
    for (const auto& c : m["cases"]) {
      if (c["model"].is_null()) continue;  // measured paths without a preset: tested below
      const GemmCase g = load(dir, c);
      const GemmSpec s = spec_of(c);
      const std::string where = fmt::format("{}/{} ({}, {} promote={})", set, c["name"].get<std::string>(),
                                            c["kernel"].get<std::string>(), s.model.name, s.promote_every);
      std::vector<float> want(g.D.size());
      gemm(s, g.M, g.N, g.K, g.A, g.B, g.C, g.sa, g.sb, want);
      matches += compare(where, g, g.D, want);
      outputs += long(want.size());
      if (!c["prefix_k"].is_null()) {
        const auto ks = c["prefix_k"].get<std::vector<int>>();
        const auto dp = read_npy_checked((dir / c["d_prefix"].get<std::string>()).string(), "<f4",
                                         {ks.size(), std::size_t(g.M), std::size_t(g.N)}).as<float>();
        for (std::size_t p = 0; p < ks.size(); ++p) {
          const GemmCase gp = prefix(g, ks[p]);
          std::vector<float> wp(g.D.size()), hp(dp.begin() + long(p * g.D.size()), dp.begin() + long((p + 1) * g.D.size()));
          gemm(s, gp.M, gp.N, gp.K, gp.A, gp.B, gp.C, gp.sa, gp.sb, wp);
          matches += compare(where + " prefix", gp, hp, wp);
          outputs += long(wp.size());
        }
      }
      ++cases;
    }
  }
  INFO(fmt::format("{} cases, {} of {} outputs equal", cases, matches, outputs));
  CHECK(cases >= 60);
  CHECK(matches == outputs);
}

// mma.sync.m16n8k32.row.col.f32.<a>.<b>.f32 on sm_90a, as its SASS shows (F2FP.F16.<fmt>.UNPACK_B,
// two HMMA.16816.F32 per k32 -- the first from zero -- then FADD into d): per 32-block of K,
// the 16 elements with k % 4 in {0, 1} go to the first HMMA and the other 16 to the second (the
// fragment unpacking interleaves them); each HMMA is a fused step of 16 fp16 products (an e4m3
// subnormal is a normal fp16 there) with 25 fraction bits cut toward zero, c joining the
// alignment, rounded toward zero to fp32; the block's result is added into d (starting at C)
// with one fp32 add, nearest even. Built here from plain steps, independent of the preset.
TEST_CASE("mma.sync captures follow their SASS: permuted k16 HMMA pairs, FADD into C", "[golden][hw]") {
  long outputs = 0, matches = 0;
  for (const char* set : {"mma_sync_e4m3", "mma_sync_e5m2_e4m3"}) {
    const fs::path dir = hw_data() / set;
    const json m = manifest(dir);
    GemmSpec s;
    s.model = accumulator_by_name("custom:group=16,frac=25,cut=rz,out=24,outround=rz,c=join,unpack=fp16");
    s.promote_every = 0;
    s.out_type = format_by_name("fp32");
    for (const auto& c : m["cases"]) {
      s.a_format = format_by_name(c["a_format"].get<std::string>());
      s.b_format = format_by_name(c["b_format"].get<std::string>());
      const GemmCase g = load(dir, c);
      REQUIRE(g.K % 32 == 0);
      std::vector<float> d(g.D.size());
      for (std::size_t i = 0; i < d.size(); ++i) d[i] = g.C.empty() ? 0.0f : g.C[i];
      for (int k0 = 0; k0 < g.K; k0 += 32) {
        std::vector<std::uint8_t> a(std::size_t(g.M) * 32), b(std::size_t(g.N) * 32);
        auto gather = [&](const std::vector<std::uint8_t>& src, std::vector<std::uint8_t>& dst, int rows) {
          for (int r = 0; r < rows; ++r) {
            int j = 0;
            for (int half = 0; half < 2; ++half)
              for (int k = 0; k < 32; ++k)
                if ((k % 4) / 2 == half) dst[std::size_t(r) * 32 + j++] = src[std::size_t(r) * g.K + k0 + k];
          }
        };
        gather(g.A, a, g.M), gather(g.B, b, g.N);
        std::vector<float> part(d.size());
        gemm(s, g.M, g.N, 32, a, b, {}, {}, {}, part);
        for (std::size_t i = 0; i < d.size(); ++i) d[i] = d[i] + part[i];
      }
      matches += compare(std::string(set) + "/" + c["name"].get<std::string>(), g, g.D, d);
      outputs += long(d.size());
    }
  }
  INFO(fmt::format("{} of {} outputs equal", matches, outputs));
  CHECK(outputs >= 12000);
  CHECK(matches == outputs);
}

TEST_CASE("cvt captures: hardware FP8 conversions equal encode() and decode()", "[golden][hw]") {
  const fs::path dir = hw_data() / "cvt";
  const json m = manifest(dir);
  REQUIRE(m["sets"].size() == 2);
  for (const auto& set : m["sets"]) {
    const FormatSpec f = format_by_name(set["format"].get<std::string>());
    const std::string ins = set["instruction"];
    const auto x = read_npy((dir / set["in"].get<std::string>()).string()).as<float>();
    const auto y = read_npy((dir / set["out"].get<std::string>()).string()).as<std::uint8_t>();
    REQUIRE(x.size() == y.size());
    REQUIRE(x.size() > 50000);
    long bad = 0, nan_in = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i])) {
        ++nan_in;
        if (classify(f, y[i]) != ValueClass::nan) {
          if (bad++ == 0) fmt::print("{}\n", fmt::format("{} x={} => got 0x{:02x}, not a NaN", ins, hex(x[i]), y[i]));
        }
        continue;
      }
      const std::uint32_t want = encode(x[i], f, {Rounding::rne, Overflow::saturate, 32});
      if (y[i] != want && bad++ == 0)
        fmt::print("{}\n", fmt::format("{} x={} => got 0x{:02x} want 0x{:02x}", ins, hex(x[i]), y[i], want));
    }
    CHECK(nan_in > 0);
    CHECK(bad == 0);
    // The decode direction: every code's fp16 bits from cvt.rn.f16x2.<f>x2.
    const auto h = read_npy((dir / set["decode_f16"].get<std::string>()).string()).as<std::uint16_t>();
    REQUIRE(h.size() == 256);
    const FormatSpec fp16 = format_by_name("fp16");
    for (std::uint32_t code = 0; code < 256; ++code) {
      const double v = decode(f, code);
      if (std::isnan(v)) {
        CHECK(classify(fp16, h[code]) == ValueClass::nan);
        continue;
      }
      const std::uint32_t want = encode(v, fp16, {Rounding::rne, Overflow::nonsat, 32});
      INFO(fmt::format("{} code=0x{:02x} => got 0x{:04x} want 0x{:04x}", set["decode_instruction"].get<std::string>(), code, h[code], want));
      CHECK(h[code] == want);
    }
  }
}
