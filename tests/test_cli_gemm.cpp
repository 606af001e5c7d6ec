// test_cli_gemm: the `fp8sim gemm` and `fp8sim models` contract, including every error.
//
// Runs the real binary (FP8SIM_CLI) on .npy files written here; the expected D comes from the
// library's gemm() on the same codes (the CLI must add nothing), and for the exact model from
// the Boost exact reference.
#include <catch2/catch.hpp>

#include "cli_runner.hpp"
#include <fmt/format.h>

#include <bit>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "accumulator/exact.hpp"
#include "gemm/gemm.hpp"
#include "io/npy.hpp"
#include "base/rng.hpp"

using namespace fp8sim;
namespace fs = std::filesystem;

namespace {

using fp8sim::test::Run;
using fp8sim::test::run_cli;
using fp8sim::test::slurp;
using fp8sim::test::workdir;

std::vector<std::uint8_t> random_e4m3(std::size_t n, std::uint64_t stream) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = static_cast<std::uint8_t>(random_u64(7, stream, i));
    if ((v[i] & 0x7f) == 0x7f) v[i] = 0;  // no NaN
  }
  return v;
}

void save_u8(const std::string& name, std::size_t r, std::size_t c, const std::vector<std::uint8_t>& v) {
  write_npy((workdir() / name).string(), "|u1", {r, c}, v.data(), v.size());
}
void save_f32(const std::string& name, std::vector<std::size_t> shape, const std::vector<float>& v) {
  write_npy((workdir() / name).string(), "<f4", shape, v.data(), v.size() * 4);
}
std::vector<float> load_f32(const std::string& name) {
  return read_npy_checked((workdir() / name).string(), "<f4", {0, 0}).as<float>();
}

// A failing command: non-zero exit, one line on stderr naming the problem, no stdout, no D.
void expect_error(const std::string& args, const std::string& needle) {
  fs::remove(workdir() / "D.npy");
  const Run r = run_cli(args);
  INFO("fp8sim " << args << " => rc " << r.status << " stderr: " << r.err);
  CHECK(r.status != 0);
  CHECK(r.out.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.rfind("fp8sim: error: ", 0) == 0);
  CHECK(r.err.find(needle) != std::string::npos);
  CHECK_FALSE(fs::exists(workdir() / "D.npy"));
}

}  // namespace

TEST_CASE("fp8sim gemm writes the engine's D for every option", "[unit]") {
  const int M = 5, N = 3, K = 256;
  const auto a = random_e4m3(M * K, 1), b = random_e4m3(N * K, 2);
  save_u8("A.npy", M, K, a);
  save_u8("B.npy", N, K, b);
  std::vector<float> C(M * N);
  for (int i = 0; i < M * N; ++i) C[i] = float(i) - 7.25f;
  save_f32("C.npy", {std::size_t(M), std::size_t(N)}, C);
  std::vector<float> sa(M * 2), sb(1 * 2);  // block g=128: A 5 x 2, B ceil(3/128)=1 x 2
  for (std::size_t i = 0; i < sa.size(); ++i) sa[i] = 0.5f + float(i);
  for (std::size_t i = 0; i < sb.size(); ++i) sb[i] = 0.25f * float(i + 1);
  save_f32("SA.npy", {std::size_t(M), 2}, sa);
  save_f32("SB.npy", {1, 2}, sb);

  struct Variant {
    std::string args;
    GemmSpec spec;
    bool with_c, with_scales;
  };
  GemmSpec base;
  base.a_format = base.b_format = format_by_name("e4m3");
  base.model = accumulator_by_name("hopper-wgmma");
  base.out_type = format_by_name("fp32");
  std::vector<Variant> variants;
  variants.push_back({"", base, false, false});
  GemmSpec v = base;
  v.promote_every = 128;
  variants.push_back({"--c C.npy --promote-every 128", v, true, false});
  v.scaling = Scaling::block;
  variants.push_back({"--promote-every 128 --a-scales SA.npy --b-scales SB.npy --scaling block", v, false, true});
  v.order = ScaleOrder::cublaslt;
  v.out_type = format_by_name("bf16");
  variants.push_back({"--promote-every 128 --a-scales SA.npy --b-scales SB.npy --scaling block "
                      "--scale-order cublaslt --out-type bf16", v, false, true});
  GemmSpec w = base;
  w.model = accumulator_by_name("custom:group=16,frac=20,out=12,cut=rne");
  w.b_format = format_by_name("e5m2");
  w.out_type = format_by_name("fp16");
  variants.push_back({"--model custom:group=16,frac=20,out=12,cut=rne --b-format e5m2 --out-type f16", w, false, false});

  for (const auto& var : variants) {
    fs::remove(workdir() / "D.npy");
    const Run r = run_cli("gemm --a A.npy --b B.npy " + var.args);
    INFO("fp8sim gemm " << var.args << " => " << r.err);
    REQUIRE(r.status == 0);
    const auto got = load_f32("D.npy");
    std::vector<float> want(M * N);
    gemm(var.spec, M, N, K, a, b, var.with_c ? C : std::vector<float>{},
         var.with_scales ? sa : std::vector<float>{}, var.with_scales ? sb : std::vector<float>{}, want);
    for (int i = 0; i < M * N; ++i)
      CHECK(std::bit_cast<std::uint32_t>(got[i]) == std::bit_cast<std::uint32_t>(want[i]));
  }

  // The exact model through the CLI equals the Boost reference rounded once to fp32.
  REQUIRE(run_cli("gemm --a A.npy --b B.npy --c C.npy --model exact --out E.npy").status == 0);
  const auto got = load_f32("E.npy");
  std::vector<double> av, bv;
  for (auto c : a) av.push_back(decode(base.a_format, c));
  for (auto c : b) bv.push_back(decode(base.b_format, c));
  const auto want = exact_gemm(M, N, K, av, bv, std::vector<double>(C.begin(), C.end()),
                               format_by_name("fp32"));
  for (int i = 0; i < M * N; ++i) CHECK(double(got[i]) == want[i]);
}

TEST_CASE("fp8sim models lists every preset", "[unit]") {
  const Run r = run_cli("models");
  REQUIRE(r.status == 0);
  for (const auto& m : accumulator_presets()) {
    CHECK(r.out.find(m.name + " ") != std::string::npos);
    CHECK(r.out.find(describe(m)) != std::string::npos);
  }
}

TEST_CASE("fp8sim gemm rejects bad input with one line", "[unit]") {
  const std::vector<std::uint8_t> a(4 * 64, 0x38), b(3 * 64, 0x38), odd(4 * 40, 0x38);
  save_u8("A.npy", 4, 64, a);
  save_u8("B.npy", 3, 64, b);
  save_u8("B5.npy", 3, 40, std::vector<std::uint8_t>(3 * 40, 0x38));
  save_u8("A40.npy", 4, 40, odd);
  save_f32("F.npy", {4, 64}, std::vector<float>(4 * 64));
  save_f32("C43.npy", {4, 3}, std::vector<float>(12));
  save_f32("C44.npy", {4, 4}, std::vector<float>(16));
  std::ofstream(workdir() / "junk.npy") << "\x93NUMPY\x01\x00garbage";
  std::ofstream(workdir() / "short.npy") << "\x93NU";
  {  // a valid header with a truncated data section
    const std::string full = slurp(workdir() / "A.npy");
    std::ofstream(workdir() / "trunc.npy") << full.substr(0, full.size() - 10);
  }

  expect_error("gemm --a missing.npy --b B.npy", "missing.npy");
  expect_error("gemm --a junk.npy --b B.npy", "junk.npy");
  expect_error("gemm --a short.npy --b B.npy", "short.npy");
  expect_error("gemm --a trunc.npy --b B.npy", "trunc.npy");
  expect_error("gemm --a F.npy --b B.npy", "expected dtype |u1");
  expect_error("gemm --a A.npy --b B5.npy", "K differs");
  expect_error("gemm --a A.npy --b B.npy --c C44.npy", "expected shape (4, 3)");
  expect_error("gemm --a A40.npy --b B5.npy", "not a multiple");
  expect_error("gemm --a A.npy --b B.npy --model nope", "unknown model 'nope'");
  expect_error("gemm --a A.npy --b B.npy --model custom:group=32,frac=99", "frac bits 99");
  expect_error("gemm --a A.npy --b B.npy --a-format e9m9", "e9m9");
  expect_error("gemm --a A.npy --b B.npy --promote-every 48", "promote_every = 48");
  expect_error("gemm --a A.npy --b B.npy --scaling block", "needs --a-scales");
  expect_error("gemm --a A.npy --b B.npy --a-scales C43.npy --b-scales C43.npy --scaling row",
               "C43.npy: expected 4 x 1 scales");
  expect_error("gemm --a A.npy --b B.npy --out-type f64", "unknown --out-type 'f64'");
  expect_error("gemm --a A.npy --b B.npy --bias C43.npy", "C43.npy: expected shape (3)");
  expect_error("gemm --a A.npy --b B.npy --split-k 0", "--split-k: bad value '0'");
  expect_error("gemm --a A.npy --b B.npy --split-k-align 0", "--split-k-align: bad value '0'");
  expect_error("gemm --a A.npy --b B.npy --bogus", "--bogus");
  expect_error("gemm --b B.npy", "--a");
  // Group sums of 16 e5m2 products spanning 2^-32 .. 2^31 do not fit a double: one line, no
  // abort (the error is raised inside the engine's parallel loop).
  std::vector<std::uint8_t> wide(4 * 64, 0x3c);
  wide[0] = 0x7b;  // 57344
  wide[1] = 0x01;  // 2^-16
  save_u8("W.npy", 4, 64, wide);
  save_u8("WS.npy", 4, 4, std::vector<std::uint8_t>(16, 0x38));
  expect_error("gemm --a W.npy --b W.npy --a-format e5m2 --b-format e5m2 --model nvfp4 "
               "--scaling mx --a-scales WS.npy --b-scales WS.npy",
               "not exact in a double");
}

TEST_CASE("--device cuda: the CPU engine's bits on a GPU, else one line naming why", "[unit]") {
  // Without a GPU (CI) or without CUDA in the build, asking for cuda is bad input: exit 2,
  // one line saying which, no output. With a GPU the CUDA engine writes the CPU engine's D.
  const int M = 4, N = 3, K = 128;
  const auto a = random_e4m3(M * K, 11), b = random_e4m3(N * K, 12);
  save_u8("A.npy", M, K, a);
  save_u8("B.npy", N, K, b);
  fs::remove(workdir() / "D.npy");
  const Run r = run_cli("gemm --a A.npy --b B.npy --promote-every 32 --device cuda --out D.npy");
  INFO("rc " << r.status << " stderr: " << r.err);
  if (r.status == 0) {
    GemmSpec s;
    s.a_format = s.b_format = format_by_name("e4m3");
    s.model = accumulator_by_name("hopper-wgmma");
    s.promote_every = 32;
    s.out_type = format_by_name("fp32");
    std::vector<float> want(M * N);
    gemm(s, M, N, K, a, b, {}, {}, {}, want);
    const auto got = load_f32("D.npy");
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i)
      CHECK(std::bit_cast<std::uint32_t>(got[i]) == std::bit_cast<std::uint32_t>(want[i]));
  } else {
    CHECK(r.status == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    const bool no_gpu = r.err == "fp8sim: error: device cuda: no CUDA device\n";
    const bool no_cuda = r.err == "fp8sim: error: device cuda: fp8sim was built without CUDA\n";
    CHECK((no_gpu || no_cuda));
    CHECK_FALSE(fs::exists(workdir() / "D.npy"));
  }
  // replay takes the same option; a bad device name is one line too.
  const Run bad = run_cli("replay --captures . --device tpu");
  CHECK(bad.status == 2);
  CHECK(bad.err.find("unknown device 'tpu' (known: cpu, cuda)") != std::string::npos);
}
