// test_hw_captures: hardware captures from fp8sim-hw (tests/data/hw) replayed without a GPU.
//
// Every GEMM capture set is read by the capture module (sim/io/capture.hpp) and replayed once,
// with replay(), through the model its manifest names (outputs and K prefixes); the conversion captures are compared with encode()
// and decode(); the mma.sync capture is also checked against its SASS structure written out
// with plain 16-product steps (an independent check of the hopper-mma-sync preset). Failures print one line: <set>/<case> m n => got <hex> want <hex>.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>

#include "base/bits.hpp"
#include "io/capture.hpp"
#include "format/format.hpp"
#include "gemm/gemm.hpp"
#include "io/npy.hpp"
#include "io/replay.hpp"
#include "format/rounding.hpp"

namespace {

using namespace fp8sim;
namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path hw_data() {
  const char* d = std::getenv("FP8SIM_TEST_DATA");
  return fs::path(d != nullptr ? d : "tests/data") / "hw";
}

json manifest(const fs::path& dir) { return json::parse(std::ifstream(dir / "manifest.json")); }

// Compares one output array; returns the number of equal elements, reports the first miss.
long compare(const std::string& where, const CaptureCase& g, const std::vector<float>& got,
             const std::vector<float>& want) {
  long ok = 0;
  bool told = false;
  for (int m = 0; m < g.M; ++m)
    for (int n = 0; n < g.N; ++n) {
      const std::size_t i = std::size_t(m) * g.N + n;
      if (same_bits(got[i], want[i])) {
        ++ok;
      } else if (!told) {
        told = true;
        fmt::print("{}\n", fmt::format("{} K={} m={} n={} c={} => got {} want {}", where, g.K, m, n,
                                  g.c.empty() ? "none" : hex_bits(g.c[i]), hex_bits(got[i]), hex_bits(want[i])));
      }
    }
  return ok;
}

// The GEMM capture sets (folders whose manifest says "fp8sim_capture").
std::vector<std::string> capture_sets() {
  std::vector<std::string> sets;
  for (const auto& e : fs::directory_iterator(hw_data()))
    if (fs::exists(e.path() / "manifest.json") && manifest(e.path()).contains("fp8sim_capture"))
      sets.push_back(e.path().filename().string());
  std::sort(sets.begin(), sets.end());
  return sets;
}

}  // namespace

// The one replay of the golden captures: replay() (the library behind `fp8sim replay`) on
// every set, each case through the model its manifest names, outputs and K prefixes.
TEST_CASE("hardware GEMM captures replay bit for bit through their models", "[golden][hw]") {
  long cases = 0, bad = 0;
  const auto sets = capture_sets();
  REQUIRE(sets.size() >= 10);
  for (const auto& set : sets) {
    const std::string dir = (hw_data() / set).string();
    // Provenance: every capture says where and when it came from.
    const CaptureProvenance p = read_capture(dir).provenance;
    for (const std::string* v : {&p.device, &p.driver, &p.cuda, &p.date, &p.git_revision, &p.generator})
      CHECK(!v->empty());
    for (const ReplayCase& c : replay(dir).cases) {
      ++cases;
      if (!c.ok()) ++bad, fmt::print("{}/{}\n", set, format_case(c));
    }
  }
  INFO(fmt::format("{} cases, {} differ", cases, bad));
  CHECK(cases >= 60);
  CHECK(bad == 0);
}

// The capture module writes what it reads: every committed set read and written again gives
// the same files, byte for byte (fp8sim-hw capture writes through write_capture()).
TEST_CASE("captures read and written again are byte-identical", "[golden][hw]") {
  const fs::path tmp = fs::temp_directory_path() / fmt::format("fp8sim_capture_{}", ::getpid());
  for (const auto& set : capture_sets()) {
    const fs::path dir = hw_data() / set;
    fs::remove_all(tmp);
    write_capture(tmp.string(), read_capture(dir.string()));
    long files = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
      const auto slurp = [](const fs::path& p) {
        std::ifstream f(p, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(f), {});
      };
      INFO(set << "/" << e.path().filename().string());
      CHECK(slurp(e.path()) == slurp(tmp / e.path().filename()));
      ++files;
    }
    CHECK(std::distance(fs::directory_iterator(tmp), fs::directory_iterator()) == files);
  }
  fs::remove_all(tmp);
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
    GemmSpec s;
    s.model = accumulator_by_name("custom:group=16,frac=25,cut=rz,out=24,outround=rz,c=join,unpack=fp16");
    s.promote_every = 0;
    s.out_type = format_by_name("fp32");
    for (const CaptureCase& g : read_capture(dir.string()).cases) {
      s.a_format = g.spec.a_format;
      s.b_format = g.spec.b_format;
      REQUIRE(g.K % 32 == 0);
      std::vector<float> d(g.d.size());
      for (std::size_t i = 0; i < d.size(); ++i) d[i] = g.c.empty() ? 0.0f : g.c[i];
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
        gather(g.a, a, g.M), gather(g.b, b, g.N);
        std::vector<float> part(d.size());
        gemm(s, g.M, g.N, 32, a, b, {}, {}, {}, part);
        for (std::size_t i = 0; i < d.size(); ++i) d[i] = d[i] + part[i];
      }
      matches += compare(std::string(set) + "/" + g.name, g, g.d, d);
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
          if (bad++ == 0) fmt::print("{}\n", fmt::format("{} x={} => got 0x{:02x}, not a NaN", ins, hex_bits(x[i]), y[i]));
        }
        continue;
      }
      const std::uint32_t want = encode(x[i], f, {Rounding::rne, Overflow::saturate, 32});
      if (y[i] != want && bad++ == 0)
        fmt::print("{}\n", fmt::format("{} x={} => got 0x{:02x} want 0x{:02x}", ins, hex_bits(x[i]), y[i], want));
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

// Triton's FP8 tl.dot where it lowers to mma.sync on sm_90 (BLOCK_M not a multiple of 64, 2
// warps, max_num_imprecise_acc below 32; tests/data/hw/kernels/triton_fp8_dot_mma_f16), as its
// PTX shows: cvt.rn.f16x2.e4m3x2, then mma.sync m16n8k16 f32.f16 with the dot's accumulator as C
// over the whole K. Written out here with plain 16-product steps, independent of the
// triton-mma-f16 preset: K zero-padded to 32 (masked loads), each 32 gathered as k % 4 in
// {0, 1} then {2, 3} (Triton's FP8 operand order), one chain of steps with c joining each;
// then D = acc * fl32(sa * sb) rounded to the output type.
TEST_CASE("Triton FP8 dot captures on mma.sync follow their PTX: one HMMA chain, K in operand order",
          "[golden][hw]") {
  const fs::path dir = hw_data() / "kernels" / "triton_fp8_dot_mma_f16";
  GemmSpec s;
  s.model = accumulator_by_name(
      "custom:group=16,frac=25,cut=rz,out=24,outround=rz,c=join,unpack=fp16,zero=-133");
  s.promote_every = 0;
  s.out_type = format_by_name("fp32");
  long outputs = 0, matches = 0;
  for (const CaptureCase& g : read_capture(dir.string()).cases) {
    s.a_format = g.spec.a_format;
    s.b_format = g.spec.b_format;
    const int Kp = (g.K + 31) / 32 * 32;
    auto gather = [&](const std::vector<std::uint8_t>& src, int rows) {
      std::vector<std::uint8_t> dst(std::size_t(rows) * Kp, 0);
      for (int r = 0; r < rows; ++r) {
        int j = 0;
        for (int k0 = 0; k0 < Kp; k0 += 32)
          for (int half = 0; half < 2; ++half)
            for (int k = k0; k < k0 + 32; ++k)
              if ((k % 4) / 2 == half)
                dst[std::size_t(r) * Kp + j++] = k < g.K ? src[std::size_t(r) * g.K + k] : 0;
      }
      return dst;
    };
    std::vector<float> acc(g.d.size());
    gemm(s, g.M, g.N, Kp, gather(g.a, g.M), gather(g.b, g.N), {}, {}, {}, acc);
    const float scale = g.sa.empty() ? 1.0f : g.sa[0] * g.sb[0];
    std::vector<float> d(acc.size());
    for (std::size_t i = 0; i < d.size(); ++i)
      d[i] = float(quantize(double(acc[i] * scale), g.spec.out_type, {Rounding::rne, Overflow::nonsat}));
    matches += compare("triton_fp8_dot_mma_f16/" + g.name, g, g.d, d);
    outputs += long(d.size());
  }
  INFO(fmt::format("{} of {} outputs equal", matches, outputs));
  CHECK(outputs >= 100000);
  CHECK(matches == outputs);
}
