// test_cli_reliability: the error contract of the command-line tools under bad values and
// faults: exit 2 with one short line on stderr for bad input; a non-zero exit and no output
// file (and no temporary) when a write fails; no hang on a FIFO; replay linear in the prefixes.
//
// Write faults: the tools run with a small file size limit (ulimit -f, SIGXFSZ ignored), so
// write() fails with EFBIG mid-file exactly as it fails with ENOSPC on a full disk.
// FP8SIM_CLI is fp8sim; FP8SIM_EXP an experiment binary (exp_g_storage).
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "npy.hpp"

using namespace fp8sim;
using fp8sim::test::Run;
using fp8sim::test::run_cli;
using fp8sim::test::run_program;
using fp8sim::test::workdir;
namespace fs = std::filesystem;

namespace {

constexpr const char* kFullDisk = "trap '' XFSZ; ulimit -f 4; exec ";

// Bad input: exit 2, one line "<tool>: error: ..." naming `needle`, nothing on stdout.
void expect_bad_input(const Run& r, const std::string& what, const std::string& needle) {
  INFO(what << " => rc " << r.status << " stderr: " << r.err.substr(0, 300));
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.size() < 400);
  CHECK(r.err.find("error: ") != std::string::npos);
  CHECK(r.err.find(needle) != std::string::npos);
}

void bad(const std::string& args, const std::string& needle) {
  expect_bad_input(run_cli(args), "fp8sim " + args, needle);
}

// The files in workdir() whose names start with `stem` (outputs and their temporaries).
std::vector<std::string> files_like(const std::string& stem) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(workdir()))
    if (e.path().filename().string().rfind(stem, 0) == 0) out.push_back(e.path().string());
  return out;
}

void save_u8(const std::string& name, std::size_t r, std::size_t c, std::uint8_t code) {
  const std::vector<std::uint8_t> v(r * c, code);
  write_npy((workdir() / name).string(), "|u1", {r, c}, v.data(), v.size());
}

// A capture of `cases` 64 x 64 x 32 cases, all codes 0x38 (1.0): d = 32 everywhere.
void make_capture(const std::string& dir, int cases) {
  fs::create_directories(workdir() / dir);
  save_u8(dir + "/a.npy", 64, 32, 0x38);
  const std::vector<float> d(64 * 64, 32.0f);
  write_npy((workdir() / dir / "d.npy").string(), "<f4", {64, 64}, d.data(), d.size() * 4);
  nlohmann::json m = {{"fp8sim_capture", 1}, {"cases", nlohmann::json::array()}};
  for (int i = 0; i < cases; ++i)
    m["cases"].push_back({{"name", fmt::format("case{}", i)}, {"a_format", "e4m3"},
                          {"b_format", "e4m3"}, {"model", "hopper-wgmma"}, {"M", 64}, {"N", 64},
                          {"K", 32}, {"a", "a.npy"}, {"b", "a.npy"}, {"d", "d.npy"}});
  std::ofstream(workdir() / dir / "manifest.json") << m.dump();
}

}  // namespace

TEST_CASE("bad values are rejected with one line, never clamped or read another way", "[unit]") {
  save_u8("A.npy", 4, 64, 0x38);
  save_u8("B.npy", 3, 64, 0x38);
  const std::string ab = "gemm --a A.npy --b B.npy ";
  bad(ab + "--threads -1", "--threads");
  bad(ab + "--threads ''", "--threads");
  save_u8("A256.npy", 256, 32, 0x38);  // 65536 outputs: one thread each was asked for
  bad("gemm --a A256.npy --b A256.npy --threads 200000", "at most 1024");
  bad(ab + "--promote-every ''", "--promote-every");
  bad(ab + "--block ''", "--block");
  bad(ab + "--promote-every -128", "--promote-every");
  bad("encode -f e4m3 --seed -1 -- 1", "--seed");
  bad("encode -f e4m3 --seed 99999999999999999999 -- 1", "out of range");
  bad("encode -f e4m3 --seed '' -- 1", "--seed");
  bad("decode -f e4m3 -- 010", "no octal");
  bad("encode -f e99m3 -- 1", "exponent bits must be 1..8");
  bad("encode -f e32m1 -- 1", "exponent bits must be 1..8");
  bad("encode -f e999m999 -- 1", "exponent bits must be 1..8");
  bad("replay --captures . --threads -1", "--threads");
  bad("replay --captures . --promote-every ''", "--promote-every");
  bad("encode -f e4m3 -- " + std::string(100000, '7') + "x", "not a number");
  // The good spellings still work: decimal, 0x hex, 0.
  CHECK(run_cli("decode -f e4m3 -- 56 0x38 0").out == "1\n1\n0\n");
  CHECK(run_cli(ab + "--threads 0x2 --out D2.npy").status == 0);
}

TEST_CASE("a FIFO given as input is refused at once", "[unit]") {
  fs::remove(workdir() / "fifo.npy");
  REQUIRE(mkfifo((workdir() / "fifo.npy").c_str(), 0600) == 0);
  save_u8("B.npy", 3, 64, 0x38);
  expect_bad_input(run_cli("gemm --a fifo.npy --b B.npy", "exec timeout 20 "), "gemm on a FIFO",
                   "not a regular file");
}

TEST_CASE("gemm never touches a user's D.npy.tmp", "[unit]") {
  save_u8("A.npy", 4, 64, 0x38);
  save_u8("B.npy", 3, 64, 0x38);
  std::ofstream(workdir() / "D.npy.tmp") << "mine";
  REQUIRE(run_cli("gemm --a A.npy --b B.npy --out D.npy").status == 0);
  CHECK(fp8sim::test::slurp(workdir() / "D.npy.tmp") == "mine");
  CHECK(read_npy((workdir() / "D.npy").string()).shape == std::vector<std::size_t>{4, 3});
  fs::remove(workdir() / "D.npy.tmp");
}

TEST_CASE("a failed write (full disk) exits non-zero and leaves no output file", "[unit]") {
  // gemm: D of 64 x 64 float32 (16 KB) over a 2 KB file size limit.
  save_u8("A64.npy", 64, 64, 0x38);
  for (const auto& f : files_like("Dfull")) fs::remove(f);
  Run r = run_cli("gemm --a A64.npy --b A64.npy --out Dfull.npy", kFullDisk);
  INFO("gemm stderr: " << r.err);
  CHECK(r.status == 2);
  CHECK(r.err.find("Dfull.npy: write failed") != std::string::npos);
  CHECK(files_like("Dfull").empty());

  // replay --json: 20 cases make a report of several KB.
  make_capture("cap", 20);
  REQUIRE(run_cli("replay --captures cap > /dev/null").status == 0);
  for (const auto& f : files_like("report")) fs::remove(f);
  r = run_cli("replay --captures cap --json report.json > /dev/null", kFullDisk);
  INFO("replay stderr: " << r.err);
  CHECK(r.status == 2);
  CHECK(r.err.find("report.json: write failed") != std::string::npos);
  CHECK(files_like("report").empty());

  // An experiment: its CSVs and manifest, all or none.
  const char* exp = std::getenv("FP8SIM_EXP");
  if (exp == nullptr) {
    WARN("waived: the experiments are not built (FP8SIM_BUILD_EXPERIMENTS=OFF)");
    return;
  }
  fs::remove_all(workdir() / "exp_out");
  r = run_program(exp, "--trials 1 --out exp_out > /dev/null", kFullDisk);
  INFO("experiment stderr: " << r.err);
  CHECK(r.status == 2);
  CHECK(r.err.find("write failed") != std::string::npos);
  CHECK((!fs::exists(workdir() / "exp_out") || fs::is_empty(workdir() / "exp_out")));
  // And without the limit all three files appear.
  REQUIRE(run_program(exp, "--trials 1 --out exp_out > /dev/null").status == 0);
  CHECK(std::distance(fs::directory_iterator(workdir() / "exp_out"), fs::directory_iterator()) == 3);
}

// 32768 prefixes at K = 2^20: one pass along K (a prefix at a time was quadratic, ~130 s).
// The 60 s bound only separates linear from quadratic; rates are for the benchmarks.
TEST_CASE("replay of many prefixes at large K is linear", "[unit]") {
  const std::size_t K = std::size_t{1} << 20, P = 32768;
  fs::create_directories(workdir() / "long");
  const std::vector<std::uint8_t> zeros(K, 0);
  write_npy((workdir() / "long/a.npy").string(), "|u1", {1, K}, zeros.data(), K);
  const float d = 0.0f;
  write_npy((workdir() / "long/d.npy").string(), "<f4", {1, 1}, &d, 4);
  const std::vector<float> dp(P, 0.0f);
  write_npy((workdir() / "long/dp.npy").string(), "<f4", {P, 1, 1}, dp.data(), P * 4);
  std::vector<int> ks(P);
  for (std::size_t p = 0; p < P; ++p) ks[p] = int((p + 1) * (K / P));
  nlohmann::json m = {{"fp8sim_capture", 1},
                      {"cases", {{{"name", "long"}, {"a_format", "e4m3"}, {"b_format", "e4m3"},
                                  {"model", "hopper-wgmma"}, {"promote_every", 128}, {"M", 1},
                                  {"N", 1}, {"K", K}, {"a", "a.npy"}, {"b", "a.npy"},
                                  {"d", "d.npy"}, {"prefix_k", ks}, {"d_prefix", "dp.npy"}}}}};
  std::ofstream(workdir() / "long/manifest.json") << m.dump();
  const Run r = run_cli("replay --captures long", "exec timeout 60 ");
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  CHECK(r.out.find("long: 1/1 match") != std::string::npos);
}
