// test_replay: replay() and `fp8sim replay` on synthetic captures written at test time.
//
// The "kernel" is the simulator itself (gemm on the whole K and on each prefix of K), so a
// clean capture must match; the tests then corrupt it on purpose (a flipped bit, -0 for +0,
// a truncated file, a missing key, a wrong shape or dtype, an unknown model / format /
// scaling) and check the report or the one-line error. Seed: FP8SIM_SEED (default 1).
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "io/capture.hpp"
#include "gemm/gemm.hpp"
#include "io/npy.hpp"
#include "io/replay.hpp"
#include "base/rng.hpp"
#include "test_seed.hpp"

using namespace fp8sim;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A fresh temporary folder, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() / fmt::format("fp8sim_replay_{}_{}", getpid(), n++);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string str() const { return path.string(); }
};

constexpr int kM = 8, kN = 4, kK = 256;
const std::vector<int> kPrefix = {32, 64, 96, 128, 160, 192, 224};

void save_u8(const fs::path& p, const std::vector<std::uint8_t>& v, std::size_t r, std::size_t c) {
  write_npy(p.string(), "|u1", {r, c}, v.data(), v.size());
}
void save_f32(const fs::path& p, const std::vector<float>& v, std::vector<std::size_t> shape) {
  write_npy(p.string(), "<f4", shape, v.data(), v.size() * sizeof(float));
}

// Writes a capture of two cases made by the simulator: "plain" (no c, no prefixes) and
// "prefixed" (c, prefix outputs every 32 along K, one row of zeros and one with a NaN code).
json make_capture(const fs::path& dir, const char* model = "hopper-wgmma", int promote = 128) {
  const FormatSpec f = format_by_name("e4m3");
  std::uint64_t i = 0;
  auto draw = [&] { return random_u64(test_seed(), 7, i++); };
  auto codes = [&](int rows) {
    std::vector<std::uint8_t> v(std::size_t(rows) * kK);
    for (auto& c : v)
      do c = static_cast<std::uint8_t>(draw() & 0xbf);  // |value| < 2^8-ish, never NaN
      while (classify(f, c) == ValueClass::nan);
    return v;
  };
  GemmSpec s;
  s.a_format = s.b_format = f;
  s.model = accumulator_by_name(model);
  s.promote_every = promote;
  s.out_type = format_by_name("fp32");
  json cases = json::array();
  for (const bool prefixed : {false, true}) {
    const std::string name = prefixed ? "prefixed" : "plain";
    auto a = codes(kM), b = codes(kN);
    std::vector<float> c;
    if (prefixed) {
      for (int k = 0; k < kK; ++k) a[std::size_t(6) * kK + k] = 0;  // row 6: D = +0 exactly
      a[std::size_t(7) * kK + 5] = 0x7f;                            // row 7: NaN
      for (int t = 0; t < kM * kN; ++t) c.push_back(float(std::ldexp(to_unit_double(draw()) - 0.5, 4)));
      for (int n = 0; n < kN; ++n) c[6 * kN + n] = 0.0f;
    }
    std::vector<float> d(kM * kN);
    gemm(s, kM, kN, kK, a, b, c, {}, {}, d);
    save_u8(dir / (name + "_a.npy"), a, kM, kK);
    save_u8(dir / (name + "_b.npy"), b, kN, kK);
    save_f32(dir / (name + "_d.npy"), d, {kM, kN});
    json jc = {{"name", name}, {"kernel", "simulator"}, {"suite", "random"},
               {"a_format", "e4m3"}, {"b_format", "e4m3"}, {"model", model},
               {"promote_every", promote}, {"scaling", "none"}, {"block", 128},
               {"scale_order", "deepgemm"}, {"out_type", "f32"}, {"M", kM}, {"N", kN},
               {"K", kK}, {"a", name + "_a.npy"}, {"b", name + "_b.npy"}, {"c", nullptr},
               {"sa", nullptr}, {"sb", nullptr}, {"d", name + "_d.npy"},
               {"prefix_k", nullptr}, {"d_prefix", nullptr}};
    if (prefixed) {
      save_f32(dir / "prefixed_c.npy", c, {kM, kN});
      jc["c"] = "prefixed_c.npy";
      std::vector<float> dp;
      for (int k : kPrefix) {
        std::vector<float> dk(kM * kN);
        const KSlice cut = slice_k(s, kM, kN, kK, a, b, {}, {}, k);
        gemm(s, kM, kN, k, cut.a, cut.b, c, {}, {}, dk);
        dp.insert(dp.end(), dk.begin(), dk.end());
      }
      save_f32(dir / "prefixed_d_prefix.npy", dp, {kPrefix.size(), kM, kN});
      jc["prefix_k"] = kPrefix;
      jc["d_prefix"] = "prefixed_d_prefix.npy";
    }
    cases.push_back(jc);
  }
  json m = {{"fp8sim_capture", 1}, {"device", "simulator"}, {"driver", "none"},
            {"cuda", "none"}, {"date", "2026-01-01"}, {"git_revision", "test"},
            {"generator", "test_replay"}, {"seed", test_seed()}, {"cases", cases}};
  std::ofstream(dir / "manifest.json") << m.dump(1);
  return m;
}

void write_manifest(const fs::path& dir, const json& m) {
  std::ofstream(dir / "manifest.json") << m.dump(1);
}

std::vector<float> load_f32(const fs::path& p) { return read_npy(p.string()).as<float>(); }

// The error replay() throws for a capture folder (or "" when it does not throw).
std::string replay_error(const std::string& dir, const ReplayOptions& o = {}) {
  try {
    replay(dir, o);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// Runs the fp8sim CLI; returns {exit code, stdout + stderr}.
std::pair<int, std::string> run_cli(const std::string& args) {
  const char* cli = std::getenv("FP8SIM_CLI");
  REQUIRE(cli != nullptr);
  const std::string cmd = fmt::format("'{}' {} 2>&1", cli, args);
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  std::array<char, 4096> buf;
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string hex(float v) { return fmt::format("{:#010x}", std::bit_cast<std::uint32_t>(v)); }

}  // namespace

TEST_CASE("a clean capture replays with every element matching", "[unit]") {
  TempDir t;
  make_capture(t.path);
  const ReplayReport r = replay(t.str());
  REQUIRE(r.cases.size() == 2);
  for (const ReplayCase& c : r.cases) {
    INFO(format_case(c));
    CHECK(c.ok());
    CHECK(c.matches == std::size_t(kM * kN));
    CHECK(c.model == "hopper-wgmma");
    CHECK(c.promote_every == 128);
  }
  CHECK(r.cases[1].prefixes == int(kPrefix.size()));
  CHECK(r.all_match());
  CHECK(format_case(r.cases[1]) == fmt::format("prefixed: {}/{} match", kM * kN, kM * kN));
  CHECK(r.device == "simulator");
}

TEST_CASE("a flipped bit is reported at its element and K chunk", "[unit]") {
  TempDir t;
  make_capture(t.path);
  // The kernel "goes wrong" in the chunk K = 96..128: element (5,2) of every prefix output
  // from K = 128 on, and of d, has its lowest bit flipped.
  const int m = 5, n = 2;
  auto d = load_f32(t.path / "prefixed_d.npy");
  auto dp = load_f32(t.path / "prefixed_d_prefix.npy");
  const float want = d[m * kN + n];
  auto flip = [](float& v) { v = std::bit_cast<float>(std::bit_cast<std::uint32_t>(v) ^ 1u); };
  flip(d[m * kN + n]);
  for (std::size_t p = 3; p < kPrefix.size(); ++p) flip(dp[p * kM * kN + m * kN + n]);
  save_f32(t.path / "prefixed_d.npy", d, {kM, kN});
  save_f32(t.path / "prefixed_d_prefix.npy", dp, {kPrefix.size(), kM, kN});

  const ReplayReport r = replay(t.str());
  const ReplayCase& c = r.cases[1];
  INFO(format_case(c));
  CHECK(r.cases[0].ok());
  CHECK(!r.all_match());
  CHECK(c.matches == std::size_t(kM * kN - 1));
  REQUIRE(c.first);
  CHECK(c.first->m == m);
  CHECK(c.first->n == n);
  CHECK(hex(c.first->got) == hex(d[m * kN + n]));
  CHECK(hex(c.first->want) == hex(want));
  REQUIRE(c.divergence);
  CHECK(c.divergence->first == 96);
  CHECK(c.divergence->second == 128);
  CHECK(format_case(c) == fmt::format("prefixed: {}/{} match; first mismatch (5,2) got {} want {}; "
                                      "first divergence at K = 96..128",
                                      kM * kN - 1, kM * kN, hex(d[m * kN + n]), hex(want)));

  const auto [code, out] = run_cli(fmt::format("replay --captures '{}'", t.str()));
  INFO(out);
  CHECK(code == 1);
  CHECK(out.find("first divergence at K = 96..128") != std::string::npos);
  CHECK(out.find("plain: 32/32 match\n") != std::string::npos);
  CHECK(out.find("replay: 1 of 2 cases match") != std::string::npos);

  // Only d wrong (prefixes all right): the divergence is after the last prefix.
  dp = load_f32(t.path / "prefixed_d_prefix.npy");
  for (std::size_t p = 3; p < kPrefix.size(); ++p) flip(dp[p * kM * kN + m * kN + n]);
  save_f32(t.path / "prefixed_d_prefix.npy", dp, {kPrefix.size(), kM, kN});
  const ReplayReport r2 = replay(t.str());
  REQUIRE(r2.cases[1].divergence);
  CHECK(r2.cases[1].divergence->first == 224);
  CHECK(r2.cases[1].divergence->second == kK);
}

TEST_CASE("-0 for +0 is a mismatch, any NaN matches NaN", "[unit]") {
  TempDir t;
  make_capture(t.path);
  auto d = load_f32(t.path / "prefixed_d.npy");
  REQUIRE(std::bit_cast<std::uint32_t>(d[6 * kN + 1]) == 0u);  // row 6 is exactly +0
  REQUIRE(std::isnan(d[7 * kN + 0]));                          // row 7 holds a NaN code
  d[7 * kN + 0] = std::bit_cast<float>(0xffc00123u);             // another NaN payload
  save_f32(t.path / "prefixed_d.npy", d, {kM, kN});
  CHECK(replay(t.str()).all_match());
  d[6 * kN + 1] = -0.0f;
  save_f32(t.path / "prefixed_d.npy", d, {kM, kN});
  const ReplayCase c = replay(t.str()).cases[1];
  REQUIRE(c.first);
  CHECK(c.first->m == 6);
  CHECK(c.first->n == 1);
  CHECK(format_case(c).find("got 0x80000000 want 0x00000000") != std::string::npos);
}

TEST_CASE("bad captures end in one line naming the file and the problem", "[unit]") {
  TempDir t;
  const json good = make_capture(t.path);
  auto expect_error = [&](const json& m, const std::string& part, const ReplayOptions& o = {}) {
    write_manifest(t.path, m);
    const std::string e = replay_error(t.str(), o);
    INFO("error: " << e);
    CHECK(e.find(part) != std::string::npos);
    CHECK(e.find('\n') == std::string::npos);
    write_manifest(t.path, good);
  };
  json m = good;
  m["cases"][1].erase("d");
  expect_error(m, "case 'prefixed': missing key 'd'");
  m = good;
  m["cases"][0]["model"] = "hopper-wgmma-x";
  expect_error(m, "unknown model 'hopper-wgmma-x'");
  m = good;
  m["cases"][0]["model"] = nullptr;
  expect_error(m, "case 'plain': model is null (unknown): pass --model");
  m = good;
  m["cases"][0]["a_format"] = "e4m4x";
  expect_error(m, "unknown format");
  m = good;
  m["cases"][0]["scaling"] = "blockwise";
  expect_error(m, "blockwise");
  m = good;
  m["cases"][0]["M"] = "8";
  expect_error(m, "key 'M' must be an integer");
  m = good;
  m["cases"][0]["K"] = 128;  // files hold K = 256
  expect_error(m, "plain_a.npy");
  m = good;
  m["cases"][1]["prefix_k"] = {32, 64};  // d_prefix holds 7 prefixes
  expect_error(m, "prefixed_d_prefix.npy");
  m = good;
  m["cases"][1]["prefix_k"] = {64, 32};
  expect_error(m, "prefix_k must increase");
  m = good;
  m.erase("fp8sim_capture");
  expect_error(m, "fp8sim_capture");
  m = good;
  m["cases"][0]["a"] = "missing.npy";
  expect_error(m, "missing.npy");
  ReplayOptions only;
  only.case_name = "nosuch";
  expect_error(good, "no case named 'nosuch'", only);

  // Shape: B written with half of K.
  const auto b = read_npy((t.path / "plain_b.npy").string()).as<std::uint8_t>();
  GemmSpec plain;
  save_u8(t.path / "plain_b.npy", slice_k(plain, kN, kN, kK, b, b, {}, {}, kK / 2).b, kN, kK / 2);
  expect_error(good, "plain_b.npy");
  save_u8(t.path / "plain_b.npy", b, kN, kK);
  // dtype: d as float64.
  const auto d = load_f32(t.path / "plain_d.npy");
  std::vector<double> d64(d.begin(), d.end());
  write_npy((t.path / "plain_d.npy").string(), "<f8", {kM, kN}, d64.data(), d64.size() * 8);
  expect_error(good, "plain_d.npy: expected dtype <f4");
  save_f32(t.path / "plain_d.npy", d, {kM, kN});
  // Truncated .npy: the last 5 bytes cut off.
  const fs::path a = t.path / "prefixed_a.npy";
  fs::resize_file(a, fs::file_size(a) - 5);
  expect_error(good, "prefixed_a.npy");
  // The CLI: exit 2 and one line on stderr.
  const auto [code, out] = run_cli(fmt::format("replay --captures '{}'", t.str()));
  CHECK(code == 2);
  CHECK(out.rfind("fp8sim: error: ", 0) == 0);
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
  const auto [code2, out2] = run_cli(fmt::format("replay --captures '{}/nowhere'", t.str()));
  CHECK(code2 == 2);
  CHECK(out2.find("manifest.json: cannot open") != std::string::npos);
}

TEST_CASE("--model and --promote-every override the cases'", "[unit]") {
  TempDir t;
  make_capture(t.path, "hopper-wgmma", 128);
  ReplayOptions o;
  o.model = "ada-fp8";
  o.promote_every = 0;
  const ReplayReport r = replay(t.str(), o);
  for (const ReplayCase& c : r.cases) {
    CHECK(c.model == "ada-fp8");
    CHECK(c.promote_every == 0);
  }
  // A model with no "model" key in the capture needs --model, and then replays.
  json m = json::parse(std::ifstream(t.path / "manifest.json"));
  m["cases"][0]["model"] = nullptr;
  m["cases"][1]["model"] = nullptr;
  write_manifest(t.path, m);
  o = {};
  o.model = "hopper-wgmma";
  CHECK(replay(t.str(), o).all_match());
  o.case_name = "plain";
  CHECK(replay(t.str(), o).cases.size() == 1);

  const auto [code, out] = run_cli(fmt::format(
      "replay --captures '{}' --model hopper-wgmma --case prefixed --json '{}/r.json'", t.str(),
      t.str()));
  INFO(out);
  CHECK(code == 0);
  CHECK(out.find("prefixed: 32/32 match") != std::string::npos);
  const json rj = json::parse(std::ifstream(t.path / "r.json"));
  CHECK(rj["all_match"] == true);
  CHECK(rj["cases"][0]["matches"] == kM * kN);
}
