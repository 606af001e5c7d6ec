// test_analyze: sim/analyze's SQNR, stage attribution, correlation and input reading against
// independent computations (plain loops, Boost's exact_dot, the scaling quantiser's results
// dequantised here), determinism under threads, the recipe table, and `fp8sim analyze`'s
// outputs and one-line errors.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "analysis/analyze.hpp"
#include "cli_runner.hpp"
#include "accumulator/exact.hpp"
#include "io/npy.hpp"
#include "base/rng.hpp"
#include "test_seed.hpp"

using namespace fp8sim;
using fp8sim::test::Run;
using fp8sim::test::run_cli;
using fp8sim::test::slurp;
using fp8sim::test::workdir;
namespace fs = std::filesystem;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

// Seeded values: gaussian-ish (sum of uniforms) times `scale`, rounded to fp32.
InputMatrix random_matrix(int rows, int cols, std::uint64_t stream, double scale) {
  InputMatrix m{rows, cols, "f32", std::vector<double>(std::size_t(rows) * cols)};
  for (std::size_t i = 0; i < m.values.size(); ++i) {
    double u = 0;
    for (int j = 0; j < 4; ++j) u += to_unit_double(random_u64(test_seed(), stream, 4 * i + j)) - 0.5;
    m.values[i] = float(u * scale);
  }
  return m;
}

Recipe recipe(const char* format, const char* scaling, const char* model, int promote,
              const char* out = "fp32") {
  return grid_recipe(format_by_name(format), scaling_by_name(scaling), accumulator_by_name(model),
                     promote, format_by_name(out));
}

// 10 log10(signal / error) over all outputs from plain loops: ref[i], got[i].
double sqnr_db_loops(const std::vector<double>& ref, const std::vector<double>& got) {
  double s = 0, e = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    s += ref[i] * ref[i];
    e += (got[i] - ref[i]) * (got[i] - ref[i]);
  }
  return e == 0 ? kInf : 10 * std::log10(s / e);
}

// Exact products by Boost's ExactSum (exact_dot), rounded to double (R) and to fp32.
std::vector<double> exact_products(const std::vector<double>& a, const std::vector<double>& b,
                                   int M, int N, int K, bool to_fp32) {
  std::vector<double> out(std::size_t(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      const ExactSum e = exact_dot(std::span<const double>(a.data() + std::size_t(m) * K, K),
                                   std::span<const double>(b.data() + std::size_t(n) * K, K));
      out[std::size_t(m) * N + n] = to_fp32 ? double(float(e.to_double())) : e.to_double();
    }
  return out;
}

}  // namespace

TEST_CASE("analyze: exact model on inputs the format holds gives no error at all", "[unit]") {
  // Small integers are E4M3 values and their sums are exact in fp32: every stage is exact.
  const int M = 5, N = 7, K = 64;
  InputMatrix A{M, K, "f32", {}}, B{N, K, "f32", {}};
  for (int i = 0; i < M * K; ++i) A.values.push_back(double(int(random_u64(test_seed(), 1, i) % 9) - 4));
  for (int i = 0; i < N * K; ++i) B.values.push_back(double(int(random_u64(test_seed(), 2, i) % 9) - 4));
  AnalyzeSpec s;
  s.recipes = {recipe("e4m3", "none", "exact", 0)};
  const AnalyzeResult r = analyze(s, A, B);
  const RecipeResult& x = r.recipes[0];
  CHECK(x.error_energy == 0);
  CHECK(x.sqnr_db == kInf);
  CHECK(x.row_quantiles.min == kInf);
  CHECK(x.col_quantiles.max == kInf);
  CHECK(x.saturated_a + x.saturated_b == 0);
  for (const StageResult& st : x.stages) {
    CHECK(st.error_energy == 0);
    CHECK(st.share == 0);
  }
  CHECK(x.gemms == 3);  // full, quant_a, quant_b: scales fp32-free and the model exact
}

TEST_CASE("analyze: accumulation is the error when quantisation is exact", "[unit]") {
  // Inputs E4M3 values over a wide exponent range: hopper-wgmma's 13-bit alignment cut loses
  // bits, quantisation loses none. Making accumulation exact leaves only the fp32 rounding of
  // the exact sum (computed here with Boost's exact_dot).
  const int M = 6, N = 5, K = 256;
  InputMatrix A{M, K, "f32", {}}, B{N, K, "f32", {}};
  const FormatSpec e4m3 = format_by_name("e4m3");
  for (int i = 0; i < M * K; ++i)
    A.values.push_back(decode(e4m3, std::uint32_t(random_u64(test_seed(), 3, i) % 126)) *
                       (i % 3 ? 1 : -1));
  for (int i = 0; i < N * K; ++i)
    B.values.push_back(decode(e4m3, std::uint32_t(random_u64(test_seed(), 4, i) % 126)));
  AnalyzeSpec s;
  s.recipes = {recipe("e4m3", "none", "hopper-wgmma", 0)};
  const AnalyzeResult r = analyze(s, A, B);
  const RecipeResult& x = r.recipes[0];
  REQUIRE(x.error_energy > 0);
  CHECK(x.stages[0].share == 0);  // quant_a: already exact, same pipeline
  CHECK(x.stages[1].share == 0);
  CHECK_FALSE(x.stages[2].ran);   // no scales
  CHECK(x.stages[3].ran);
  const std::vector<double> R = exact_products(A.values, B.values, M, N, K, false);
  const std::vector<double> R32 = exact_products(A.values, B.values, M, N, K, true);
  INFO("seed " << test_seed());
  CHECK(x.stages[3].sqnr_db == Approx(sqnr_db_loops(R, R32)).epsilon(1e-9));
  CHECK(x.stages[3].share > 0.99);
  CHECK_FALSE(x.stages[4].ran);   // fp32 output
  // The time inside the engine's GEMMs is part of the recipe's; no CUDA kernel ran.
  CHECK(x.gemm_seconds > 0);
  CHECK(x.gemm_seconds <= x.seconds);
  CHECK(x.kernel_seconds == 0);
}

TEST_CASE("analyze: an fp32 recipe against a double reference from plain loops", "[differential]") {
  // fp32 elements, no scales, the fp32 model (one fmaf per product): D[m][n] is the fmaf chain,
  // computed here; the reference is the plain double sum (products exact, the sum's rounding
  // ~1e-16 relative, far below fp32's errors).
  const int M = 9, N = 11, K = 300;
  const InputMatrix A = random_matrix(M, K, 5, 3.0), B = random_matrix(N, K, 6, 0.5);
  AnalyzeSpec s;
  s.recipes = {recipe("fp32", "none", "fp32", 0)};
  s.pairs = 0;
  const AnalyzeResult r = analyze(s, A, B);
  std::vector<double> ref(M * N), got(M * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double d = 0;
      float f = 0;
      for (int k = 0; k < K; ++k) {
        d += A.values[m * K + k] * B.values[n * K + k];
        f = std::fmaf(float(A.values[m * K + k]), float(B.values[n * K + k]), f);
      }
      ref[m * N + n] = d;
      got[m * N + n] = f;
    }
  const RecipeResult& x = r.recipes[0];
  INFO(fmt::format("seed={} sqnr analyze={} loops={}", test_seed(), x.sqnr_db, sqnr_db_loops(ref, got)));
  REQUIRE(std::isfinite(x.sqnr_db));
  CHECK(x.sqnr_db == Approx(sqnr_db_loops(ref, got)).epsilon(1e-6));
  // Row 3's SQNR the same way.
  const std::vector<double> ref3(ref.begin() + 3 * N, ref.begin() + 4 * N),
      got3(got.begin() + 3 * N, got.begin() + 4 * N);
  CHECK(x.row_sqnr_db[3] == Approx(sqnr_db_loops(ref3, got3)).epsilon(1e-6));
}

TEST_CASE("analyze: quantisation stages against the quantiser's results dequantised here", "[differential]") {
  // No scales and the exact model with no promotion: the full run is fl32(sum qa qb) and
  // quant_a-exact is fl32(sum a qb); both computed here with Boost's exact_dot from
  // quantise_operand's codes, and their error energies compared with analyze's.
  const int M = 7, N = 6, K = 96;
  const InputMatrix A = random_matrix(M, K, 7, 40.0), B = random_matrix(N, K, 8, 20.0);
  AnalyzeSpec s;
  s.recipes = {recipe("e4m3", "none", "exact", 0)};
  const AnalyzeResult r = analyze(s, A, B);
  const RecipeResult& x = r.recipes[0];
  const FormatSpec e4m3 = format_by_name("e4m3");
  const ScalingSpec none = scaling_by_name("none");
  const QuantisedOperand qa = quantise_operand(none, OperandRole::a, e4m3, M, K, A.values, M);
  const QuantisedOperand qb = quantise_operand(none, OperandRole::b, e4m3, N, K, B.values, N);
  const std::vector<double> qav(qa.operand.value.begin(), qa.operand.value.end()),
      qbv(qb.operand.value.begin(), qb.operand.value.end());
  const std::vector<double> R = exact_products(A.values, B.values, M, N, K, false);
  const std::vector<double> full = exact_products(qav, qbv, M, N, K, true);
  const std::vector<double> a_exact = exact_products(A.values, qbv, M, N, K, true);
  const std::vector<double> b_exact = exact_products(qav, B.values, M, N, K, true);
  INFO("seed " << test_seed());
  CHECK(x.sqnr_db == Approx(sqnr_db_loops(R, full)).epsilon(1e-9));
  CHECK(x.stages[0].sqnr_db == Approx(sqnr_db_loops(R, a_exact)).epsilon(1e-9));
  CHECK(x.stages[1].sqnr_db == Approx(sqnr_db_loops(R, b_exact)).epsilon(1e-9));
  CHECK(x.stages[0].share > 0.2);  // each operand's quantisation is a good part of the error
  CHECK(x.stages[1].share > 0.2);
}

TEST_CASE("analyze: scaled recipes against the chunked sum computed here", "[differential]") {
  // The exact model with promotion: each chunk's exact sum of the quantiser's element values,
  // rounded to fp32, then main = fmaf(sa * sb, chunk, main) with the chunk's scales (DeepGEMM
  // order), read per row of A and per row of B from quantise_operand's results.
  const int M = 5, N = 131, K = 256;
  const InputMatrix A = random_matrix(M, K, 14, 2.0), B = random_matrix(N, K, 15, 0.05);
  const std::vector<double> R = exact_products(A.values, B.values, M, N, K, false);
  struct Case { const char* scaling; int promote; };
  for (const Case c : {Case{"tensor", 0}, Case{"row", 64}, Case{"block128", 128}, Case{"mx", 32}}) {
    AnalyzeSpec s;
    s.recipes = {recipe("e4m3", c.scaling, "exact", c.promote)};
    s.stages = false;
    const AnalyzeResult r = analyze(s, A, B);
    const ScalingSpec sc = scaling_by_name(c.scaling);
    const FormatSpec e4m3 = format_by_name("e4m3");
    const QuantisedOperand qa = quantise_operand(sc, OperandRole::a, e4m3, M, K, A.values, M);
    const QuantisedOperand qb = quantise_operand(sc, OperandRole::b, e4m3, N, K, B.values, N);
    const int chunk = c.promote == 0 ? K : c.promote;
    std::vector<double> got(std::size_t(M) * N);
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        float main = 0;
        for (int k0 = 0; k0 < K; k0 += chunk) {
          std::vector<double> x, y;
          for (int k = k0; k < k0 + chunk; ++k) {
            x.push_back(qa.operand.value[m * K + k]);
            y.push_back(qb.operand.value[n * K + k]);
          }
          const float part = float(exact_dot(x, y).to_double());  // no double rounding: < 2^53
          const int col = qa.scale_cols == 1 ? 0 : k0 / sc.nc;
          const float sa = qa.scales[m * qa.scale_cols + col], sb = qb.scales[n * qb.scale_cols + col];
          main = std::fmaf(sa * sb, part, main);
        }
        got[std::size_t(m) * N + n] = main;
      }
    INFO(fmt::format("seed={} scaling={}", test_seed(), c.scaling));
    CHECK(r.recipes[0].sqnr_db == Approx(sqnr_db_loops(R, got)).epsilon(1e-9));
  }
}

TEST_CASE("analyze: scale encoding stage is the fp32-scale run", "[unit]") {
  // E8M0 scales on 128x128 blocks versus the same blocks with fp32 scales (a recipe run here).
  const int M = 8, N = 130, K = 256;
  const InputMatrix A = random_matrix(M, K, 9, 3.0), B = random_matrix(N, K, 10, 0.01);
  AnalyzeSpec s;
  s.recipes = {recipe("e4m3", "block128:e8m0", "hopper-wgmma", 128),
               recipe("e4m3", "block128", "hopper-wgmma", 128)};
  const AnalyzeResult r = analyze(s, A, B);
  REQUIRE(r.recipes[0].stages[2].ran);
  CHECK(r.recipes[0].gemms == 5);
  CHECK(r.recipes[0].stages[2].error_energy == r.recipes[1].error_energy);
  CHECK_FALSE(r.recipes[1].stages[2].ran);
  CHECK(r.recipes[1].gemms == 4);
}

TEST_CASE("analyze: correlation of the sampled pairs", "[unit]") {
  // B's row n is A's row n times 2 plus 1 (in fp32): cosine below 1, Pearson 1 up to fp32 rounding.
  const int M = 4, K = 32;
  const InputMatrix A = random_matrix(M, K, 11, 1.0);
  InputMatrix B = A;
  for (double& v : B.values) v = float(2 * v + 1);
  AnalyzeSpec s;
  s.recipes = {recipe("e4m3", "tensor", "hopper-wgmma", 0)};
  s.pairs = 1000;  // >= M * N: every pair, in order
  const AnalyzeResult r = analyze(s, A, B);
  REQUIRE(r.pair_m.size() == std::size_t(M * M));
  for (std::size_t p = 0; p < r.pair_m.size(); ++p) {
    if (r.pair_m[p] != r.pair_n[p]) continue;
    CHECK(r.pair_pearson[p] == Approx(1.0).epsilon(1e-6));
    CHECK(r.pair_cosine[p] < 1.0);
  }
  s.pairs = 5;
  CHECK(analyze(s, A, B).pair_m.size() == 5);
}

TEST_CASE("analyze: results do not depend on the thread count", "[unit]") {
  const InputMatrix A = random_matrix(33, 256, 12, 2.0), B = random_matrix(17, 256, 13, 1.0);
  AnalyzeSpec s;
  for (const char* name : {"deepseek-v3", "te-tensorwise", "mxfp8", "fast-accum"})
    s.recipes.push_back(recipe_by_name(name));
  s.pairs = 50;
  std::string csv[3];
  const int threads[3] = {1, 2, 5};
  for (int i = 0; i < 3; ++i) {
    s.threads = threads[i];
    const AnalyzeResult r = analyze(s, A, B);
    std::ostringstream o;
    write_analyze_csv(o, r);
    write_analyze_rows_csv(o, r);
    write_analyze_pairs_csv(o, r);
    csv[i] = o.str();
  }
  CHECK(csv[0] == csv[1]);
  CHECK(csv[0] == csv[2]);
}

TEST_CASE("analyze: the named-recipe table", "[unit]") {
  for (const NamedRecipe& n : named_recipes()) {
    INFO(n.name);
    const Recipe r = recipe_by_name(n.name);
    CHECK(r.name == n.name);
    CHECK(r.model.name == n.model);
    CHECK(r.promote_every == n.promote_every);
  }
  const Recipe d = recipe_by_name("deepseek-v3");
  CHECK(d.scaling.granularity == ScaleGranularity::block);
  CHECK(d.scaling.nc == 128);
  CHECK(recipe_by_name("mxfp8").scaling.encoding == ScaleEncoding::e8m0);
  CHECK(recipe_by_name("fast-accum").promote_every == 0);
  // Transformer Engine: Fprop with fast accumulation, E5M2 gradients with the split
  // accumulator in Dgrad and Wgrad; a recipe without gradient settings is the same in all.
  for (const GemmRole g : {GemmRole::dgrad, GemmRole::wgrad}) {
    const Recipe te = recipe_by_name("te-tensorwise", g);
    CHECK(te.a_format.name == "e5m2");
    CHECK(te.b_format.name == "e4m3");
    CHECK(te.promote_every == 128);
    CHECK(recipe_by_name("deepseek-v3", g).a_format.name == "e4m3");
  }
  CHECK(recipe_by_name("te-tensorwise").promote_every == 0);
  CHECK_THROWS_WITH(recipe_by_name("fp7"), Catch::Contains("unknown recipe 'fp7'"));
  CHECK_THROWS_WITH(recipe("e4m3", "tile64", "exact", 0), Catch::Contains("block64 or mx"));
}

TEST_CASE("read_input_npy: float32, float16 and bfloat16 files", "[unit]") {
  const fs::path dir = workdir("analyze");
  const FormatSpec bf16 = format_by_name("bf16"), f16 = format_by_name("fp16");
  // Every bf16 / fp16 code that is finite, decoded by the library's format table.
  std::vector<std::uint16_t> codes;
  for (std::uint32_t c = 0; c < 65536; ++c)
    if (std::isfinite(decode(bf16, c)) && std::isfinite(decode(f16, c))) codes.push_back(std::uint16_t(c));
  const std::size_t n = codes.size();
  write_npy((dir / "bf16.npy").string(), "<V2", {n / 4, 4}, codes.data(), (n / 4) * 4 * 2);
  write_npy((dir / "u16.npy").string(), "<u2", {n / 4, 4}, codes.data(), (n / 4) * 4 * 2);
  write_npy((dir / "f16.npy").string(), "<f2", {n / 4, 4}, codes.data(), (n / 4) * 4 * 2);
  const InputMatrix b = read_input_npy((dir / "bf16.npy").string(), InputDtype::automatic);
  const InputMatrix u = read_input_npy((dir / "u16.npy").string(), InputDtype::bf16);
  const InputMatrix h = read_input_npy((dir / "f16.npy").string(), InputDtype::automatic);
  CHECK(b.dtype == "bf16");
  CHECK(h.dtype == "f16");
  for (std::size_t i = 0; i < (n / 4) * 4; ++i) {
    // bf16 is the top half of fp32; fp16 by IEEE 754's binary16 formula in plain scalar code
    // (sign, 5 exponent bits with bias 15, 10 fraction bits; exponent 0 is subnormal).
    std::uint32_t w = std::uint32_t(codes[i]) << 16;
    float f;
    std::memcpy(&f, &w, 4);
    const int e = (codes[i] >> 10) & 0x1f, m = codes[i] & 0x3ff;
    const double hv = (codes[i] & 0x8000 ? -1.0 : 1.0) *
                      (e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25));
    INFO(fmt::format("code {:#06x}", codes[i]));
    REQUIRE(b.values[i] == double(f));
    REQUIRE(u.values[i] == double(f));
    REQUIRE(h.values[i] == hv);
  }
  CHECK_THROWS_WITH(read_input_npy((dir / "u16.npy").string(), InputDtype::automatic),
                    Catch::Contains("--dtype bf16"));
  CHECK_THROWS_WITH(read_input_npy((dir / "f16.npy").string(), InputDtype::f32),
                    Catch::Contains("is not f32 as asked"));
}

namespace {

void save_f32(const std::string& name, std::vector<std::size_t> shape, const std::vector<float>& v) {
  write_npy((workdir() / name).string(), "<f4", shape, v.data(), v.size() * 4);
}

// A failing command: exit 2, one line on stderr naming the problem, nothing written.
void expect_error(const std::string& args, const std::string& needle) {
  fs::remove_all(workdir() / "bad");
  const Run r = run_cli(args + " --out bad");
  INFO("fp8sim " << args << " => rc " << r.status << " stderr: " << r.err);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.rfind("fp8sim: error: ", 0) == 0);
  CHECK(r.err.find(needle) != std::string::npos);
  CHECK_FALSE(fs::exists(workdir() / "bad" / "analyze.csv"));
}

}  // namespace

TEST_CASE("fp8sim analyze writes its CSVs and manifest, and rejects bad input", "[unit]") {
  std::vector<float> a(16 * 128), b(8 * 128), b2(8 * 32);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(std::sin(double(i)));
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = float(std::cos(0.3 * double(i)));
  save_f32("A.npy", {16, 128}, a);
  save_f32("B.npy", {8, 128}, b);
  save_f32("B2.npy", {8, 32}, b2);
  save_f32("V.npy", {128}, std::vector<float>(a.begin(), a.begin() + 128));
  const std::vector<std::int32_t> ints(16 * 128, 1);
  write_npy((workdir() / "I.npy").string(), "<i4", {16, 128}, ints.data(), ints.size() * 4);
  std::vector<float> nan_a = a;
  nan_a[70] = std::nanf("");
  save_f32("N.npy", {16, 128}, nan_a);

  const Run r = run_cli("analyze --a A.npy --b B.npy --quiet --threads 2 --out out "
                        "--recipes deepseek-v3 --formats e4m3,e5m2 --scalings tensor,mx "
                        "--promote-every 32");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::string csv = slurp(workdir() / "out" / "analyze.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 1 + 4);  // header, deepseek-v3, grid
  CHECK(csv.find("e5m2/mx/hopper-wgmma/p32,") != std::string::npos);
  const std::string json = slurp(workdir() / "out" / "analyze.json");
  CHECK(json.find("\"sha256\"") != std::string::npos);
  CHECK(json.find("\"git_revision\"") != std::string::npos);
  CHECK(fs::exists(workdir() / "out" / "analyze_rows.csv"));
  CHECK(fs::exists(workdir() / "out" / "analyze_pairs.csv"));
  CHECK_FALSE(fs::exists(workdir() / "out" / "analyze.csv.tmp"));

  expect_error("analyze --a A.npy --b B2.npy", "K differs");
  expect_error("analyze --a A.npy --b I.npy", "dtype <i4 is not float32");
  expect_error("analyze --a V.npy --b B.npy", "expected a 2-D array");
  expect_error("analyze --a N.npy --b B.npy", "element (0, 70) is nan");
  // Integer options are read strictly, as everywhere in fp8sim (cli/options.hpp).
  expect_error("analyze --a A.npy --b B.npy --threads -1", "--threads: bad value '-1'");
  expect_error("analyze --a A.npy --b B.npy --pairs 010", "--pairs: bad value '010'");
  expect_error("analyze --a A.npy --b B.npy --seed ''", "--seed: bad value ''");
  expect_error("analyze --a A.npy --b B.npy --dtype bf17", "unknown input dtype 'bf17'");
  expect_error("analyze --a A.npy --b B.npy --dtype f16", "is not f16 as asked");
  expect_error("analyze --a A.npy --b B.npy --recipes deepseek-v4", "unknown recipe 'deepseek-v4'");
  expect_error("analyze --a A.npy --b B.npy --scalings block48", "recipe e4m3/block48");
  expect_error("analyze --a missing.npy --b B.npy", "missing.npy");
  expect_error("analyze --a A.npy --b B.npy --scalings block256 --skip-invalid", "no recipe can run");
  const Run skip = run_cli("analyze --a A.npy --b B.npy --quiet --out skip --skip-invalid "
                           "--scalings tensor,block64 --promote-every 0,128");
  INFO(skip.err);
  REQUIRE(skip.status == 0);
  CHECK(skip.out.find("skipped recipe e4m3/block64/hopper-wgmma/p0: block scaling") != std::string::npos);
  const std::string skip_csv = slurp(workdir() / "skip" / "analyze.csv");
  CHECK(std::count(skip_csv.begin(), skip_csv.end(), '\n') == 1 + 2);
}
