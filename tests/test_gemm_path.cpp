// test_gemm_path: choose_gemm_path's choice of inner loop for each model and operand format
// (and, last, gemm()'s bands on the GPU: gemm_bands).
//
// Each row's expected path is worked out by hand in the comment beside it from the rule the
// engine needs for the path to be exact: float products are exact when the two significands
// fit 24 bits and the products' range fits fp32 (e4m3: lsb 2^-18, |p| < 2^18; e5m2: 2^-32,
// 2^32; fp16: 2^-48, 2^32; bf16's 2^-266 does not); a step of n products plus c needs
// bit_width(n + 1) carry bits above frac + 2 bits per term (int32: <= 31, int64: <= 62; a
// nearest-even cut also needs frac + 2 <= 22 in float, <= 51 in double); the exact model's
// 128-bit grid needs hi - lo + carry bits <= 120. An 8-bit-exponent IEEE output rounded rz or
// rne takes the bit-clearing output path (52 - mantissa bits dropped from a double).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "gemm/device_bands.hpp"
#include "gemm/gemm.hpp"
#include "gemm/gemm_device.hpp"
#include "gemm/gemm_path.hpp"
#include "gemm/resident_block_scales.hpp"
#include "scale_probes.hpp"

using namespace fp8sim;

namespace {

struct Row {
  const char* model;
  const char* a;
  const char* b;
  int step_products;
  StepPath step;
  int exact_grid;  // exact_int only
  OutPath out;
  int out_drop;    // e8 output paths only
  const char* why;
};

const char* name(StepPath p) {
  switch (p) {
    case StepPath::fmaf_chain: return "fmaf_chain";
    case StepPath::int32_float: return "int32_float";
    case StepPath::int64_double: return "int64_double";
    case StepPath::exact_int: return "exact_int";
    case StepPath::reference: return "reference";
  }
  return "?";
}

const char* name(OutPath p) {
  switch (p) {
    case OutPath::e8_rz: return "e8_rz";
    case OutPath::e8_rne: return "e8_rne";
    case OutPath::generic: return "generic";
  }
  return "?";
}

}  // namespace

TEST_CASE("choose_gemm_path: which models take which path") {
  using S = StepPath;
  using O = OutPath;
  const Row rows[] = {
      {"hopper-wgmma", "e4m3", "e4m3", 32, S::int32_float, 0, O::e8_rz, 39, "13+2+6 = 21 <= 31; e8m13 rz"},
      {"hopper-wgmma", "e5m2", "e5m2", 32, S::int32_float, 0, O::e8_rz, 39, "e5m2 products exact in float"},
      {"hopper-wgmma", "e4m3", "e5m2", 32, S::int32_float, 0, O::e8_rz, 39, "mixed formats"},
      {"hopper-wgmma", "fp16", "fp16", 32, S::int32_float, 0, O::e8_rz, 39, "fp16 products: 22 bits, 2^-48"},
      {"hopper-wgmma", "bf16", "bf16", 32, S::int64_double, 0, O::e8_rz, 39, "bf16 products leave fp32's range"},
      {"hopper-wgmma-f16", "e4m3", "e4m3", 32, S::int32_float, 0, O::generic, 0, "fp16 output: generic"},
      {"ada-fp8", "e4m3", "e4m3", 16, S::int32_float, 0, O::e8_rz, 39, "13+2+5 = 20"},
      {"blackwell-fp8", "e4m3", "e4m3", 32, S::int64_double, 0, O::e8_rz, 29, "25+2+6 = 33 > 31"},
      {"hopper-mma-sync", "e4m3", "e4m3", 16, S::int64_double, 0, O::e8_rz, 29, "25+2+5 = 32 > 31"},
      {"fp32", "e4m3", "e4m3", 1, S::fmaf_chain, 0, O::e8_rne, 29, "exact, group 1, fp32 rne"},
      {"fp32", "bf16", "bf16", 1, S::reference, 0, O::e8_rne, 29, "bf16: 256 + 266 + 1 > 120"},
      {"exact", "e4m3", "e4m3", 4096, S::exact_int, -18, O::e8_rne, 29, "18 + 18 + 13 = 49"},
      {"exact", "e5m2", "e5m2", 4096, S::exact_int, -32, O::e8_rne, 29, "32 + 32 + 13 = 77"},
      {"exact", "fp16", "fp16", 4096, S::exact_int, -48, O::e8_rne, 29, "32 + 48 + 13 = 93"},
      {"exact", "bf16", "bf16", 4096, S::reference, 0, O::e8_rne, 29, "beyond 128 bits"},
      {"custom:group=32,frac=13,out=14,cut=rz,c=exact", "e4m3", "e4m3", 32, S::reference, 0, O::e8_rz, 39,
       "c entering exactly has no fast path"},
      {"custom:group=32,frac=13,out=24,cut=rne,outround=rne", "e4m3", "e4m3", 32, S::int32_float, 0, O::e8_rne, 29,
       "rne cut: 13+2 = 15 <= 22"},
      {"custom:group=4,frac=21,out=24,cut=rne", "e4m3", "e4m3", 4, S::int64_double, 0, O::e8_rz, 29,
       "21+2+3 = 26 fits int32, but an rne cut needs 23 <= 22 in float"},
      {"custom:group=4,frac=29,out=24,cut=rz", "e4m3", "e4m3", 4, S::int64_double, 0, O::e8_rz, 29, "29+2+3 = 34"},
      {"custom:group=32,frac=55,out=24,cut=rz", "e4m3", "e4m3", 32, S::reference, 0, O::e8_rz, 29, "55+2+6 = 63 > 62"},
      {"custom:group=32,frac=50,out=24,cut=rne", "e4m3", "e4m3", 32, S::reference, 0, O::e8_rz, 29,
       "50+2+6 = 58 fits, but an rne cut needs 52 <= 51 in double"},
      {"custom:group=32,frac=13,out=8,cut=rz,outround=rne", "e4m3", "e4m3", 32, S::int32_float, 0, O::e8_rne, 45,
       "bf16-wide output (e8m7) rne"},
      {"custom:group=32,frac=13,out=14,cut=rz,outround=rna", "e4m3", "e4m3", 32, S::int32_float, 0, O::generic, 0,
       "rna output: generic"},
  };
  for (const Row& r : rows) {
    const AccumulatorSpec m = accumulator_by_name(r.model);
    const GemmPath p = choose_gemm_path(m, format_by_name(r.a), format_by_name(r.b), r.step_products);
    INFO(fmt::format("{} {}x{} n={} ({}) => got {} {} grid={} drop={} want {} {} grid={} drop={}", r.model, r.a,
                     r.b, r.step_products, r.why, name(p.step), name(p.out), p.exact_grid, p.out_drop,
                     name(r.step), name(r.out), r.exact_grid, r.out_drop));
    CHECK(p.step == r.step);
    CHECK(p.out == r.out);
    if (r.step == S::exact_int) CHECK(p.exact_grid == r.exact_grid);
    if (r.out != O::generic) CHECK(p.out_drop == r.out_drop);
  }
}

// The CUDA engine's step (DeviceStep), decided by choose_gemm_path and handed to the engine in
// DeviceGemm::fast_step. Expected values from the float / double sum rule worked out beside
// each row: f32 needs float products and frac + 2 + bit_width(n + 1) <= 24 with frac <= 20;
// f64 needs frac + 2 + bit_width(n + 1) <= 53 with frac <= 49; both only on the CPU's integer
// paths, without chained blocks or renormalised products.
TEST_CASE("choose_gemm_path: the CUDA engine's step", "[gemm][device]") {
  struct DeviceRow {
    const char* model;
    const char* a;
    const char* b;
    DeviceStep want;
    const char* why;
  };
  using D = DeviceStep;
  const DeviceRow rows[] = {
      {"hopper-wgmma", "e4m3", "e4m3", D::f32, "13+2+6 = 21 <= 24, 13 <= 20"},
      {"hopper-wgmma", "e5m2", "e4m3", D::f32, "e5m2 x e4m3 products exact in float"},
      {"hopper-wgmma", "bf16", "bf16", D::f64, "bf16 products leave fp32's range: double"},
      {"ada-fp8", "e4m3", "e4m3", D::f32, "13+2+5 = 20"},
      {"blackwell-fp8", "e4m3", "e4m3", D::f64, "25+2+6 = 33 > 24, <= 53"},
      {"hopper-mma-sync", "e4m3", "e4m3", D::none, "chained blocks of two steps"},
      {"exact", "e4m3", "e4m3", D::none, "the exact model: exact_int on the CPU"},
      {"custom:group=32,frac=17,out=24,cut=rz", "e4m3", "e4m3", D::f64,
       "17+2+6 = 25 > 24 (int32_float on the CPU: <= 31)"},
      {"custom:group=16,frac=17,out=24,cut=rz", "e4m3", "e4m3", D::f32, "17+2+5 = 24"},
      {"custom:group=4,frac=21,out=24,cut=rz", "e4m3", "e4m3", D::f64, "21+2+3 = 26 > 24 (int32_float on the CPU)"},
      {"custom:group=32,frac=13,out=24,cut=rne,outround=rne", "e4m3", "e4m3", D::f32, "rne cut"},
      {"custom:group=32,frac=48,out=24,cut=rz", "e4m3", "e4m3", D::none,
       "48+2+6 = 56 > 53 (int64_double on the CPU: <= 62)"},
      {"custom:group=32,frac=13,out=14,cut=rz,c=exact", "e4m3", "e4m3", D::none, "reference on the CPU"},
      {"custom:group=32,frac=13,out=14,cut=rz,renorm=1", "e4m3", "e4m3", D::none,
       "renormalised products"},
  };
  for (const DeviceRow& r : rows) {
    const AccumulatorSpec m = accumulator_by_name(r.model);
    const GemmPath p =
        choose_gemm_path(m, format_by_name(r.a), format_by_name(r.b), step_products(m));
    INFO(fmt::format("{} {}x{} ({}) => got device {} want {}", r.model, r.a, r.b, r.why,
                     int(p.device), int(r.want)));
    CHECK(p.device == r.want);
  }
}

// Block scales inside the MMA are applied only by the engines' entries that know them (folded
// operands, the group-sum step, and resident codes, on group sums or folded as the kernels
// read them; gemm_resident sends the others through the host): the CUDA engine's plain
// entries refuse it with one line before any device work, also where its group sums fit (they
// would drop the scales).
TEST_CASE("the CUDA engine's plain entries refuse block-scaled models", "[gemm][device]") {
  for (const char* name : {"nvfp4", "mxf4", "mxf8f6f4"}) {
    GemmSpec s;
    s.model = accumulator_by_name(name);
    use_model_block_scales(s);
    const FormatSpec e2m1 = format_by_name("e2m1");
    s.a_format = s.b_format = e2m1;
    s.out_type = format_by_name("fp32");
    if (s.model.group_sum > 1) CHECK(group_sums_fit(s.model, e2m1, e2m1));
    const int M = 2, N = 2, K = 64;
    const std::vector<std::uint32_t> zeros(std::size_t(M) * K, 0);
    const Operand A = decode_operand(e2m1, M, K, std::span<const std::uint32_t>(zeros));
    const std::vector<float> scales(std::size_t(M) * K / s.mx_block, 1.0f);
    std::vector<float> D(std::size_t(M) * N);
    INFO(name);
    CHECK_THROWS_WITH(gemm_on_device(s, A, A, {}, scales, scales, D),
                      Catch::Contains("runs on the CPU engine only"));
    CHECK_THROWS_WITH(batched_dot_on_device(s, A, A, {}, scales, scales, D),
                      Catch::Contains("runs on the CPU engine only"));
  }
}

// A block-scaled model's scales must be values of its scale format: gemm() accepts a scale
// exactly where encoding it into the format (nearest, no saturation) and decoding it gives it
// back (the independent oracle), over every value of the format, its float neighbours, its
// negations, zeros, infinities and NaN.
TEST_CASE("block scales are checked against the scale format's values", "[gemm]") {
  for (const char* name : {"nvfp4", "mxf4", "mxf8f6f4"}) {
    GemmSpec s;
    s.model = accumulator_by_name(name);
    use_model_block_scales(s);
    const FormatSpec e2m1 = format_by_name("e2m1"), sf = s.model.block_scale->format;
    s.a_format = s.b_format = e2m1;
    s.out_type = format_by_name("fp32");
    const int K = s.model.group > 0 ? s.model.group : 64;
    const std::vector<std::uint8_t> codes(K, 2);  // 1.0
    const std::vector<float> probes = test::scale_probes(sf);
    const RoundingSpec exact{Rounding::rne, Overflow::nonsat, 32};
    std::size_t accepted = 0;
    for (const float x : probes) {
      const double back = decode(sf, encode(x, sf, exact));
      const bool want = back == x || (std::isnan(back) && std::isnan(x));
      const std::vector<float> sc(std::size_t(K) / s.mx_block, x);
      std::vector<float> D(1);
      bool got = true;
      try {
        gemm(s, 1, 1, K, codes, codes, {}, sc, sc, D);
      } catch (const std::invalid_argument& e) {
        got = std::string(e.what()).find("applies its scales inside the MMA") == std::string::npos;
      }
      INFO(fmt::format("{} scale {} ({:#x})", name, x, std::bit_cast<std::uint32_t>(x)));
      CHECK(got == want);
      accepted += want;
    }
    CHECK(accepted >= code_count(sf) / 2);  // the probes reach the accepted side too
  }
}

// gemm() on host codes with device cuda cuts large GEMMs into bands (gemm/device_bands.hpp):
// over shapes from decode to 16384^3 and GPUs of 78 to 144 SMs, the bands cover D exactly in
// whole 64-row (column) tiles, column bands hold whole blocks of B's block scales, every row
// band but the last fills the GPU twice with 64 x 64 tiles at three blocks an SM, every column
// band but the last holds 4 MiB of B's codes, and columns are cut only where rows cannot be.
TEST_CASE("gemm()'s bands on the GPU cover D in whole tiles and fill the GPU", "[bands]") {
  const int extents[] = {1, 16, 64, 100, 1000, 2048, 4096, 7168, 8192, 12288, 16384};
  std::size_t banded = 0, rows = 0;
  for (const Scaling scaling : {Scaling::none, Scaling::block})
    for (const int block : {128, 96})
      for (const int sms : {78, 114, 132, 144})
        for (const int M : extents)
          for (const int N : extents)
            for (const int K : {128, 4096, 16384}) {
              GemmSpec s;
              s.scaling = scaling;
              s.block = block;
              const GemmBands b = gemm_bands(s, M, N, K, sms);
              INFO(fmt::format("M={} N={} K={} sms={} scaling block {}: {} bands of {} {}", M, N,
                               K, sms, block, b.count, b.size, b.rows ? "rows" : "columns"));
              if (b.count < 2) continue;
              ++banded;
              rows += b.rows;
              const long long extent = b.rows ? M : N, size = b.size;
              CHECK(size % 64 == 0);
              CHECK(size * (b.count - 1) < extent);
              CHECK(size * b.count >= extent);
              CHECK(b.count <= (b.rows ? 16 : 8));
              const long long waves2 = 2LL * 3 * sms;
              const long long tiles = size / 64 * ((N + 63) / 64);
              if (b.rows) {
                CHECK(tiles >= waves2);
              } else {
                CHECK(size * K >= (4LL << 20));
                CHECK((scaling != Scaling::block || size % block == 0));
                // rows could not be cut: two bands of rows would not each fill the GPU twice
                CHECK(2 * 64 * ((waves2 + (N + 63) / 64 - 1) / ((N + 63) / 64)) > M);
              }
            }
  CHECK(banded > 100);
  CHECK(rows > 20);
  CHECK(rows < banded);
  GemmSpec s;
  CHECK(gemm_bands(s, 8192, 8192, 8192, 132).rows);     // the benchmark's large GEMM
  CHECK(gemm_bands(s, 8192, 8192, 8192, 132).count >= 2);
  CHECK(!gemm_bands(s, 16, 4096, 7168, 132).rows);      // decode: B's copy is the time
  CHECK(gemm_bands(s, 16, 4096, 7168, 132).count >= 2);
  CHECK(gemm_bands(s, 64, 64, 64, 132).count < 2);      // too small to pay
}

// Which GEMMs on host codes gemm() runs in bands (gemm_bands_fit): codes of up to 8 bits (FP4
// and FP6 ones checked on the device as they arrive), no library GEMM around the chain, and
// block scales inside the MMA only on gemm_resident's device routes (group sums on finite
// formats, or folded), in scale formats the device checks by their high 16 bits.
TEST_CASE("gemm()'s bands take block-scaled models where the device checks their scales",
          "[bands]") {
  auto spec = [](const char* model, const char* a, const char* b) {
    GemmSpec s;
    s.model = accumulator_by_name(model);
    use_model_block_scales(s);
    s.a_format = format_by_name(a);
    s.b_format = format_by_name(b);
    return s;
  };
  CHECK(gemm_bands_fit(spec("hopper-wgmma", "e4m3", "e5m2"), 4096, false));
  CHECK(gemm_bands_fit(spec("hopper-wgmma", "e2m1", "e3m2"), 4096, false));
  CHECK(!gemm_bands_fit(spec("hopper-wgmma", "e4m3", "e4m3"), 4096, true));  // a bias
  CHECK(!gemm_bands_fit(spec("hopper-wgmma", "bf16", "e4m3"), 4096, false));
  for (const char* model : {"nvfp4", "mxf4"}) {
    CHECK(gemm_bands_fit(spec(model, "e2m1", "e2m1"), 4096, false));
    CHECK(!gemm_bands_fit(spec(model, "e2m1", "e2m1"), 4096, true));
    CHECK(!gemm_bands_fit(spec(model, "e5m2", "e2m1"), 4096, false));  // Inf: not group sums
    GemmSpec split = spec(model, "e2m1", "e2m1");
    split.split_k = 2;
    CHECK(!gemm_bands_fit(split, 4096, false));
  }
  for (const auto& [a, b] : {std::pair{"e4m3", "e4m3"}, std::pair{"e5m2", "e2m1"},
                             std::pair{"e3m2", "e2m3"}})
    CHECK(gemm_bands_fit(spec("mxf8f6f4", a, b), 4096, false));
  // fp16 scales on group sums: a device route, but values of 10 fraction bits, which the
  // host looks up (no bands).
  const GemmSpec fp16_scales =
      spec("custom:group=64,frac=35,out=24,zero=-139,groupsum=16,scale=fp16:16", "e2m1", "e2m1");
  CHECK(block_route(fp16_scales, 4096, false) == BlockRoute::group_sums);
  CHECK(!gemm_bands_fit(fp16_scales, 4096, false));
  CHECK(gemm_bands_fit(spec("custom:group=32,frac=25,out=24,zero=-133,scale=ue8m0:32", "e4m3",
                            "e4m3"), 4096, false));
}
