// test_kernel: the kernel-preset table (sim/kernel/kernel.hpp), what a preset does to a GEMM (scale
// order at promotion, masked K tails), and the captured real kernels replayed through their
// presets (tests/data/hw/kernels/<kernel>/: one capture folder a kernel, cuda/capture_*).
// Under the sanitizers (sanitized.hpp) each folder replays every 8th of its cases (every
// n/16th where it has more than 128), each case whole: build/ replays every case.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "accumulator/accumulator.hpp"
#include "io/capture.hpp"
#include "gemm/gemm.hpp"
#include "kernel/gemm_inputs.hpp"
#include "kernel/kernel.hpp"
#include "io/replay.hpp"
#include "sanitized.hpp"
#include "test_seed.hpp"

using namespace fp8sim;
namespace fs = std::filesystem;

namespace {

// Finite E4M3 codes (0x7f and 0xff are NaN).
std::vector<std::uint8_t> codes(std::mt19937_64& rng, std::size_t n) {
  std::vector<std::uint8_t> v(n);
  for (auto& c : v) {
    do c = static_cast<std::uint8_t>(rng() & 0xff);
    while ((c & 0x7f) == 0x7f);
  }
  return v;
}

std::vector<float> scales(std::mt19937_64& rng, std::size_t n) {
  std::uniform_real_distribution<float> u(0.01f, 3.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

// E4M3 operands through hopper-wgmma, fp32 out, never promoted, unscaled.
GemmSpec e4m3_spec() {
  GemmSpec s;
  s.a_format = s.b_format = format_by_name("e4m3");
  s.model = accumulator_by_name("hopper-wgmma");
  s.out_type = format_by_name("fp32");
  return s;
}

}  // namespace

TEST_CASE("kernel presets: every row names real parts and sets the spec", "[unit]") {
  REQUIRE(kernel_presets().size() >= 2);
  for (const KernelSpec& k : kernel_presets()) {
    INFO(k.name);
    CHECK(!k.description.empty());
    CHECK(!k.upstream.empty());
    CHECK(!k.evidence.empty());
    CHECK(&kernel_by_name(k.name) == &k);
    REQUIRE(!k.scalings.empty());
    for (const Scaling sc : k.scalings) {
      GemmSpec s = e4m3_spec();
      s.scaling = sc;
      apply_kernel(s, k);
      CHECK(s.model.name == accumulator_by_name(k.model).name);
      CHECK(s.promote_every == k.promote_every);
      CHECK(s.order == k.order);
      CHECK(s.k_tile == k.k_tile);
      validate(s, 2, 3, k.k_tile > 0 ? k.k_tile : 256);
    }
    // A scaling the kernel does not take is refused, naming the kernel.
    for (const Scaling sc : {Scaling::none, Scaling::tensor, Scaling::row, Scaling::block, Scaling::mx}) {
      if (std::find(k.scalings.begin(), k.scalings.end(), sc) != k.scalings.end()) continue;
      GemmSpec s;
      s.scaling = sc;
      CHECK_THROWS_WITH(apply_kernel(s, k), Catch::Contains(k.name) && Catch::Contains("does not take"));
    }
  }
  CHECK_THROWS_WITH(kernel_by_name("no-such-kernel"),
                    Catch::Contains("unknown kernel") && Catch::Contains("cublaslt"));
}

TEST_CASE("kernel presets replace the loose options they set", "[unit]") {
  GemmOptions o;
  o.kernel = "cublaslt";
  const GemmSpec s = gemm_spec(o, true, true);
  CHECK(s.order == ScaleOrder::cublaslt);
  CHECK(s.promote_every == 128);
  for (auto set : {+[](GemmOptions& x) { x.promote_every = 128; },
                   +[](GemmOptions& x) { x.model = "exact"; },
                   +[](GemmOptions& x) { x.scale_order = "cublaslt"; },
                   +[](GemmOptions& x) { x.split_k_align = 512; }}) {
    GemmOptions bad = o;
    set(bad);
    CHECK_THROWS_WITH(gemm_spec(bad, true, true), Catch::Contains("kernel cublaslt sets"));
  }
}

// The scale step at promotion, against plain scalar code: each 128-column chunk's partial
// result is the never-promoted, unscaled GEMM of that chunk alone; the chunks then enter the
// fp32 main accumulator as each scale order says.
TEST_CASE("scale orders at promotion: deepgemm fmaf(sa*sb, p, acc), triton fmaf(p*sa, sb, acc)",
          "[unit][differential]") {
  const std::uint64_t seed = test_seed();
  std::mt19937_64 rng(seed);
  const int M = 5, N = 130, K = 512, g = 128, kb = K / g, nb = (N + g - 1) / g;
  const auto A = codes(rng, std::size_t(M) * K), B = codes(rng, std::size_t(N) * K);
  const auto sa = scales(rng, std::size_t(M) * kb), sb = scales(rng, std::size_t(nb) * kb);
  // Partials: chunk j of every output, from the engine with no scales and no promotion.
  std::vector<std::vector<float>> part(kb, std::vector<float>(std::size_t(M) * N));
  const GemmSpec plain = e4m3_spec();
  for (int j = 0; j < kb; ++j) {
    std::vector<std::uint8_t> a(std::size_t(M) * g), b(std::size_t(N) * g);
    for (int r = 0; r < M; ++r) std::copy_n(&A[std::size_t(r) * K + j * g], g, &a[std::size_t(r) * g]);
    for (int r = 0; r < N; ++r) std::copy_n(&B[std::size_t(r) * K + j * g], g, &b[std::size_t(r) * g]);
    gemm(plain, M, N, g, a, b, {}, {}, {}, part[j]);
  }
  for (const ScaleOrder order : {ScaleOrder::deepgemm, ScaleOrder::triton}) {
    GemmSpec s = plain;
    s.promote_every = g;
    s.scaling = Scaling::block;
    s.block = g;
    s.order = order;
    std::vector<float> D(std::size_t(M) * N);
    gemm(s, M, N, K, A, B, {}, sa, sb, D);
    long differ = 0;
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        float acc = 0.0f;
        for (int j = 0; j < kb; ++j) {
          const float p = part[j][std::size_t(m) * N + n];
          const float xa = sa[std::size_t(m) * kb + j], xb = sb[std::size_t(n / g) * kb + j];
          acc = order == ScaleOrder::triton ? std::fmaf(p * xa, xb, acc) : std::fmaf(xa * xb, p, acc);
        }
        const float got = D[std::size_t(m) * N + n];
        if (bits(got) != bits(acc) && differ++ == 0)
          FAIL_CHECK(fmt::format("seed={} order={} (m,n)=({},{}) => got {:#010x} want {:#010x}",
                                 seed, to_string(order), m, n, bits(got), bits(acc)));
      }
    CHECK(differ == 0);
  }
}

// A masked K tail (a kernel's K tile): the GEMM on K columns is the GEMM on the codes with
// +0 columns appended up to the tile, and without a tile such a K is refused.
TEST_CASE("K tile: a masked tail is the GEMM on zero-padded operands", "[unit]") {
  const std::uint64_t seed = test_seed();
  std::mt19937_64 rng(seed);
  const int M = 3, N = 4, tile = 128;
  for (const int K : {1, 100, 200, 383}) {
    INFO(fmt::format("seed={} K={}", seed, K));
    const int Kp = (K + tile - 1) / tile * tile, kb = Kp / tile;
    const auto A = codes(rng, std::size_t(M) * K), B = codes(rng, std::size_t(N) * K);
    std::vector<std::uint8_t> Ap(std::size_t(M) * Kp, 0), Bp(std::size_t(N) * Kp, 0);
    for (int r = 0; r < M; ++r) std::copy_n(&A[std::size_t(r) * K], K, &Ap[std::size_t(r) * Kp]);
    for (int r = 0; r < N; ++r) std::copy_n(&B[std::size_t(r) * K], K, &Bp[std::size_t(r) * Kp]);
    const auto sa = scales(rng, std::size_t(M) * kb), sb = scales(rng, std::size_t(kb));
    GemmSpec s = e4m3_spec();
    s.promote_every = tile;
    s.scaling = Scaling::block;
    s.order = ScaleOrder::triton;
    std::vector<float> want(std::size_t(M) * N), got(want.size());
    gemm(s, M, N, Kp, Ap, Bp, {}, sa, sb, want);
    if (K % 32 != 0) CHECK_THROWS_WITH(validate(s, M, N, K), Catch::Contains("not a multiple"));
    s.k_tile = tile;
    gemm(s, M, N, K, A, B, {}, sa, sb, got);
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(bits(got[i]) == bits(want[i]));
  }
}

// The real kernels, captured on a GPU (tests/data/hw/kernels/<kernel>/manifest.json, each
// case naming its "kernel_preset"): every output through the preset, bit for bit.
TEST_CASE("captured kernels replay bit for bit through their kernel presets", "[golden][hw]") {
  const char* data = std::getenv("FP8SIM_TEST_DATA");
  const fs::path root = fs::path(data ? data : "tests/data") / "hw" / "kernels";
  if (!fs::exists(root)) FAIL("no kernel captures in " << root);
  long sets = 0, cases = 0, outputs = 0, bad = 0;
  for (const auto& e : fs::directory_iterator(root)) {
    if (!fs::exists(e.path() / "manifest.json")) continue;
    ++sets;
    const Capture cap = read_capture(e.path().string());
    for (const CaptureCase& c : cap.cases) CHECK(!c.kernel_preset.empty());
    std::vector<ReplayCase> replayed;
    if (!test::kSanitized) {
      replayed = replay(e.path().string()).cases;
    } else {
      const std::size_t stride = std::max<std::size_t>(8, cap.cases.size() / 16);
      for (std::size_t i = 0; i < cap.cases.size(); i += stride) {
        ReplayOptions one;
        one.case_name = cap.cases[i].name;
        for (ReplayCase& c : replay(e.path().string(), one).cases) replayed.push_back(c);
      }
      CHECK(replayed.size() == (cap.cases.size() + stride - 1) / stride);
    }
    for (const ReplayCase& c : replayed) {
      ++cases;
      outputs += long(c.total);
      if (!c.ok()) ++bad, fmt::print("{}/{}\n", e.path().filename().string(), format_case(c));
    }
  }
  INFO(fmt::format("{} kernels, {} cases, {} outputs, {} cases differ", sets, cases, outputs, bad));
  CHECK(sets >= 1);
  CHECK(bad == 0);
}
