// test_sweep: the sweep engine, its input generators and its scaling helpers: thread-count
// independence (under the sanitizers, sanitized.hpp, at one thread count besides 1: build/
// checks three), correlation within sampling error, the exact model's +inf accumulation SNR,
// the fp32 model against a direct fmaf loop, and quantisation round trips.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "accumulator/accumulator.hpp"
#include "analysis/distributions.hpp"
#include "format/format.hpp"
#include "analysis/metrics.hpp"
#include "format/rounding.hpp"
#include "scaling/scaling.hpp"
#include "analysis/sweep.hpp"
#include "sanitized.hpp"
#include "test_seed.hpp"

using namespace fp8sim;

namespace {

std::string trial_line(const SweepResult& r, const TrialResult& t) {
  std::string s;
  for (const auto& [k, v] : config_columns(r, r.configs[t.config])) s += k + "=" + v + " ";
  return s + fmt::format("trial={}", t.trial);
}

}  // namespace

TEST_CASE("sweep results do not depend on the thread count", "[sweep]") {
  SweepSpec s;
  s.seed = test_seed();
  s.distributions = {distribution_by_name("gaussian"), distribution_by_name("t:nu=4"),
                     distribution_by_name("llm:channels=3,gain=40")};
  s.k = {128, 256};
  s.rho = {0.0, 0.9};
  s.formats = {format_by_name("e4m3"), format_by_name("e5m6")};
  s.scalings = {scaling_by_name("tensor"), scaling_by_name("block128:pow2"), scaling_by_name("mx")};
  s.promote_every = {32, 128};
  s.models = {accumulator_by_name("hopper-wgmma"), accumulator_by_name("fp32")};
  s.trials = 21;
  s.tensor_rows = 8;
  s.skip_invalid = true;  // mx needs promotion every 32
  s.threads = 1;
  const SweepResult one = run_sweep(s);
  REQUIRE(!one.skipped.empty());
  // 2, 3 and 7 threads; under the sanitizers (sanitized.hpp) 7 only (the same code, threads
  // splitting the trials unevenly; a sweep costs 2 CPU-s of ASan).
  for (int threads : test::kSanitized ? std::vector<int>{7} : std::vector<int>{2, 3, 7}) {
    s.threads = threads;
    const SweepResult many = run_sweep(s);
    REQUIRE(many.trials.size() == one.trials.size());
    for (std::size_t i = 0; i < one.trials.size(); ++i) {
      const TrialResult &x = one.trials[i], &y = many.trials[i];
      INFO(fmt::format("{} threads={} => got {:a} ref_q {:a} want {:a} ref_q {:a}",
                       trial_line(one, x), threads, y.got, y.ref_q, x.got, x.ref_q));
      REQUIRE(std::bit_cast<std::uint32_t>(x.got) == std::bit_cast<std::uint32_t>(y.got));
      REQUIRE(x.ref == y.ref);
      REQUIRE(x.ref_q == y.ref_q);
    }
    std::ostringstream a, b;
    write_summary_csv(a, one);
    write_summary_csv(b, many);
    REQUIRE(a.str() == b.str());
  }
  // Nor on the chunking of trials (chunks hold whole tensor and B-block row groups).
  s.threads = 2;
  s.chunk_elements = 1;  // one row group (lcm(8, 128) = 128 rows) per chunk
  s.trials = 300;        // 3 chunks, the last one partial
  s.k = {128};
  const SweepResult chunked = run_sweep(s);
  s.chunk_elements = std::size_t(1) << 30;
  const SweepResult whole = run_sweep(s);
  std::ostringstream x, y;
  write_trials_csv(x, chunked);
  write_trials_csv(y, whole);
  REQUIRE(x.str() == y.str());
  REQUIRE(chunked.saturated == whole.saturated);
}

TEST_CASE("correlated pairs hit rho within sampling error", "[sweep][distributions]") {
  const std::uint64_t seed = test_seed();
  const int K = 1 << 17;
  for (const char* name : {"gaussian", "uniform", "t:nu=9", "uniform:lo=0,hi=1"}) {
    const DistributionSpec d = distribution_by_name(name);
    for (double rho : {0.0, 0.1, 0.5, 0.9, 0.99}) {
      std::vector<double> a(K), b(K);
      generate_pairs(d, rho, seed, 1, K, a, b, 2);
      double ma = 0, mb = 0;
      for (int i = 0; i < K; ++i) ma += a[i], mb += b[i];
      ma /= K, mb /= K;
      double saa = 0, sbb = 0, sab = 0;
      for (int i = 0; i < K; ++i) {
        saa += (a[i] - ma) * (a[i] - ma);
        sbb += (b[i] - mb) * (b[i] - mb);
        sab += (a[i] - ma) * (b[i] - mb);
      }
      const double r = sab / std::sqrt(saa * sbb);
      // Standard error of a sample correlation ~ (1 - rho^2) / sqrt(n) for near-normal data;
      // 6 of them (the t(9) and uniform kurtosis widen it a little) and a floor of 1e-3.
      const double tol = std::max(6.0 * (1 - rho * rho) / std::sqrt(double(K)), 1e-3);
      INFO(fmt::format("generate_pairs {} rho={} seed={} K={} => got r={:.5f} want {} +- {:.4f}",
                       name, rho, seed, K, r, rho, tol));
      CHECK(std::fabs(r - rho) < tol);
      if (std::string_view(name).find("lo=0") == std::string_view::npos) {
        CHECK(saa / K == Approx(1.0).margin(0.03));  // unit variance
      }
    }
  }
  // The llm distribution multiplies a's outlier columns, and only those.
  const DistributionSpec llm = distribution_by_name("llm:channels=5,gain=100");
  const auto ch = outlier_channels(llm, seed, 512);
  REQUIRE(ch.size() == 5);
  std::vector<double> a(64 * 512), b(64 * 512), g(64 * 512), gb(64 * 512);
  generate_pairs(llm, 0.5, seed, 64, 512, a, b, 1);
  generate_pairs(distribution_by_name("gaussian"), 0.5, seed, 64, 512, g, gb, 1);
  for (int k = 0; k < 512; ++k) {
    const bool out = std::find(ch.begin(), ch.end(), k) != ch.end();
    INFO("column " << k);
    CHECK(a[7 * 512 + k] == g[7 * 512 + k] * (out ? 100.0 : 1.0));
    CHECK(b[7 * 512 + k] == gb[7 * 512 + k]);
  }
  // rowspread multiplies each row of a by one factor, leaving b alone.
  std::vector<double> r(64 * 512), rb(64 * 512);
  generate_pairs(distribution_by_name("llm:channels=5,gain=100,rowspread=3"), 0.5, seed, 64, 512, r, rb, 1);
  for (int t : {0, 9, 63}) {
    const double f = r[t * 512 + 1] / a[t * 512 + 1];
    INFO("row " << t << " factor " << f);
    CHECK(f != 1.0);
    CHECK(std::ilogb(f) > -40);
    for (int k = 0; k < 512; ++k) CHECK(r[t * 512 + k] == Approx(a[t * 512 + k] * f).epsilon(1e-15));
    for (int k = 0; k < 512; ++k) CHECK(rb[t * 512 + k] == b[t * 512 + k]);
  }
  CHECK_THROWS_AS(distribution_by_name("t:nu=2"), std::invalid_argument);
  CHECK_THROWS_AS(distribution_by_name("gaussian:rowspread=2"), std::invalid_argument);
  CHECK_THROWS_AS(distribution_by_name("cauchy"), std::invalid_argument);
  CHECK_THROWS_AS(distribution_by_name("gaussian:mu=1"), std::invalid_argument);
}

TEST_CASE("the exact model has no accumulation error: snr_accum_db = +inf", "[sweep]") {
  SweepSpec s;
  s.seed = test_seed();
  s.distributions = {distribution_by_name("gaussian"), distribution_by_name("llm")};
  s.k = {64, 1024};
  s.formats = {format_by_name("e4m3"), format_by_name("e5m2"), format_by_name("e5m6")};
  // Power-of-two scales multiply exactly, so even a scaled exact result is the fp32-rounded
  // exact sum; per-row fp32 scales are not (sa * sb rounds), and are checked to be finite.
  s.scalings = {scaling_by_name("none"), scaling_by_name("tensor:pow2"), scaling_by_name("row")};
  s.promote_every = {0};
  s.models = {accumulator_by_name("exact")};
  s.trials = 16;
  const SweepResult r = run_sweep(s);
  int fp32_scaled_finite = 0;
  for (const TrialResult& t : r.trials) {
    const SweepConfig& c = r.configs[t.config];
    INFO(fmt::format("{} => got {:a} want {:a}", trial_line(r, t), t.got, t.ref_q32));
    if (s.scalings[c.scaling].name == "row") {
      fp32_scaled_finite += std::isfinite(t.snr_accum_db);
      continue;
    }
    CHECK(t.snr_accum_db == std::numeric_limits<double>::infinity());
    CHECK(t.ulp_err_accum == 0.0);
    CHECK(std::isfinite(t.snr_db));  // quantisation error remains
  }
  CHECK(fp32_scaled_finite > 0);
}

TEST_CASE("a sweep with the fp32 model matches a direct fmaf loop in double", "[sweep][differential]") {
  SweepSpec s;
  s.seed = test_seed();
  s.k = {96, 2048};
  s.rho = {0.0, 0.99};
  s.formats = {format_by_name("e4m3")};
  s.scalings = {scaling_by_name("none")};
  s.promote_every = {0, 32};
  s.models = {accumulator_by_name("fp32")};
  s.trials = 12;
  const SweepResult r = run_sweep(s);
  const FormatSpec e4m3 = format_by_name("e4m3");
  for (const SweepConfig& c : r.configs) {
    const int K = s.k[c.k], P = s.promote_every[c.promote];
    std::vector<double> a(std::size_t(s.trials) * K), b(a.size());
    generate_pairs(s.distributions[0], s.rho[c.rho], s.seed, s.trials, K, a, b, 1);
    const std::size_t ci = &c - r.configs.data();
    for (int t = 0; t < s.trials; ++t) {
      // Direct: quantise each element, fmaf along K (products of e4m3 are exact in fp32),
      // chunks of P added to a float main accumulator; reference in long double.
      float main = 0.0f, chunk = 0.0f;
      long double ref = 0;
      for (int k = 0; k < K; ++k) {
        const double x = a[std::size_t(t) * K + k], y = b[std::size_t(t) * K + k];
        ref += static_cast<long double>(x) * y;
        chunk = std::fmaf(float(quantize(x, e4m3)), float(quantize(y, e4m3)), chunk);
        if (P > 0 && (k + 1) % P == 0) main += chunk, chunk = 0.0f;
      }
      if (P == 0) main = chunk;
      const TrialResult& tr = r.trials[ci * s.trials + t];
      const double want_snr = 20.0 * std::log10(std::fabs(double(ref) / (double(main) - double(ref))));
      INFO(fmt::format("{} => got {:a} want {:a}", trial_line(r, tr), tr.got, main));
      CHECK(std::bit_cast<std::uint32_t>(tr.got) == std::bit_cast<std::uint32_t>(main));
      CHECK(tr.snr_db == Approx(want_snr).margin(1e-6));
      CHECK(tr.ref == Approx(double(ref)).epsilon(1e-14));
    }
  }
}

TEST_CASE("block-scaled MMAs in a sweep match the reference step chained along K", "[sweep][differential]") {
  // MXFP8, MXFP4 and NVFP4 with their scales inside the MMA: each trial's result is
  // chained_dot (the plain reference step) on the quantised elements and their block
  // scales, times fl32(g_a g_b) for NVFP4's tensor scales.
  SweepSpec s;
  s.seed = test_seed();
  s.k = {64, 512};
  s.rho = {0.0, 0.9};
  s.formats = {format_by_name("e4m3"), format_by_name("e2m1")};
  s.scalings = {scaling_by_name("mx"), scaling_by_name("nvfp4")};
  s.models = {accumulator_by_name("mxf8f6f4"), accumulator_by_name("mxf4"),
              accumulator_by_name("nvfp4")};
  s.trials = 40;
  s.tensor_rows = 16;
  s.skip_invalid = true;  // each model takes one scaling
  const SweepResult r = run_sweep(s);
  REQUIRE(r.configs.size() == 2 * 2 * 2 * 3);  // per K, rho, format: mx x {mxf8f6f4, mxf4}, nvfp4 x nvfp4
  for (const SweepConfig& c : r.configs) {
    const int K = s.k[c.k];
    const ScalingSpec& sc = s.scalings[c.scaling];
    const FormatSpec& f = s.formats[c.format];
    const AccumulatorSpec& m = s.models[c.model];
    std::vector<double> a(std::size_t(s.trials) * K), b(a.size());
    generate_pairs(s.distributions[0], s.rho[c.rho], s.seed, s.trials, K, a, b, 1);
    const QuantisedOperand qa = quantise_operand(sc, OperandRole::a, f, s.trials, K, a, s.tensor_rows, 1);
    const QuantisedOperand qb = quantise_operand(sc, OperandRole::b, f, s.trials, K, b, s.tensor_rows, 1);
    const std::size_t ci = &c - r.configs.data();
    for (int t = 0; t < s.trials; ++t) {
      std::vector<double> xa(K), xb(K), za(K), zb(K);
      for (int k = 0; k < K; ++k) {
        xa[k] = qa.operand.value[std::size_t(t) * K + k];
        xb[k] = qb.operand.value[std::size_t(t) * K + k];
        za[k] = qa.scales[std::size_t(t) * (K / sc.nc) + k / sc.nc];
        zb[k] = qb.scales[std::size_t(t) * (K / sc.nc) + k / sc.nc];
      }
      float want = static_cast<float>(chained_dot(m, f, xa.data(), f, xb.data(), K, 0.0, za.data(), zb.data()));
      if (!qa.tensor_scales.empty()) want = tensor_scaled(want, qa.tensor_scales[t], qb.tensor_scales[t]);
      const TrialResult& tr = r.trials[ci * s.trials + t];
      INFO(fmt::format("{} => got {:a} want {:a}", trial_line(r, tr), tr.got, want));
      CHECK(std::bit_cast<std::uint32_t>(tr.got) == std::bit_cast<std::uint32_t>(want));
    }
  }
}

TEST_CASE("scaling: quantisation round trips and scale encodings", "[sweep][scaling]") {
  const std::uint64_t seed = test_seed();
  const int T = 256, K = 256;
  std::vector<double> x(T * K), y(T * K);
  generate_pairs(distribution_by_name("llm:channels=4,gain=50,sigma=0.01"), 0.0, seed, T, K, x, y, 2);
  for (const char* fname : {"e4m3", "e5m2", "e5m6", "e2m1"}) {
    const FormatSpec f = format_by_name(fname);
    const double fmax = max_finite(f);
    for (const char* sname : {"none", "tensor", "row", "tile32", "block128", "mx", "tensor:pow2",
                              "block64:e8m0", "tile128:pow2", "mx16", "nvfp4"}) {
      const ScalingSpec sc = scaling_by_name(sname);
      for (OperandRole role : {OperandRole::a, OperandRole::b}) {
        const QuantisedOperand q = quantise_operand(sc, role, f, T, K, x, 64, 2);
        // 1. Each element is within half a step of f (or saturated) after dividing by its
        //    scale; each block's largest element lands where its encoding says.
        for (int t = 0; t < T; ++t)
          for (int k = 0; k < K; ++k) {
            const double sv = (q.tensor_scales.empty() ? 1.0 : q.tensor_scales[t]) *
                              (q.scale_cols == 0 ? 1.0
                              : q.scales[t * q.scale_cols + (q.scale_cols == 1 ? 0 : k / sc.nc)]);
            const double v = x[t * K + k] / sv;
            const double want = quantize(v, f);
            if (q.operand.value[t * K + k] != want) {
              FAIL(fmt::format("quantise {} {} role={} t={} k={} x={:a} scale={:a} => got {:a} want {:a}",
                               fname, sname, int(role), t, k, x[t * K + k], sv,
                               q.operand.value[t * K + k], want));
            }
            if ((sc.encoding == ScaleEncoding::pow2 || sc.encoding == ScaleEncoding::e8m0) &&
                std::ilogb(sv) != std::log2(sv))
              FAIL(fmt::format("scale {} {} t={} k={} => got {:a}, not a power of two", fname, sname, t, k, sv));
          }
        // Power-of-two scales are rounded up, so nothing saturates (fp32 scales can round
        // down by half an fp32 ulp and e8m0 scales are rounded down by design).
        if (sc.encoding == ScaleEncoding::pow2) CHECK(q.saturated == 0);
        // 2. Idempotence of power-of-two scales: requantising the dequantised values gives
        //    the same values (the scale may halve when a block's amax rounded down to
        //    exactly fmax / 2, with every element doubling).
        if ((sc.encoding == ScaleEncoding::pow2 || sc.encoding == ScaleEncoding::e8m0) &&
            sc.granularity != ScaleGranularity::none) {
          std::vector<double> back(T * K);
          for (int t = 0; t < T; ++t)
            for (int k = 0; k < K; ++k) back[t * K + k] = dequantised(q, K, t, k, sc.nc);
          const QuantisedOperand q2 = quantise_operand(sc, role, f, T, K, back, 64, 1);
          INFO(fmt::format("requantise {} {} role={}", fname, sname, int(role)));
          std::size_t differ = 0;
          for (int t = 0; t < T; ++t)
            for (int k = 0; k < K; ++k)
              differ += dequantised(q2, K, t, k, sc.nc) != back[t * K + k];
          CHECK(differ == 0);
        }
        // 3. fp32 scales put each block's amax at fmax (up to fp32 rounding of the scale).
        if (sc.encoding == ScaleEncoding::fp32 && sc.granularity == ScaleGranularity::row) {
          for (int t = 0; t < T; ++t) {
            double m = 0;
            for (int k = 0; k < K; ++k) m = std::max(m, std::fabs(double(q.operand.value[t * K + k])));
            INFO(fmt::format("row amax {} {} t={} => got {} want {}", fname, sname, t, m, fmax));
            CHECK(m == Approx(fmax).epsilon(std::ldexp(1.0, -f.mantissa_bits)));
          }
        }
      }
    }
  }
  // B's block128 scales are shared by 128 rows; A's are per row.
  const ScalingSpec blk = scaling_by_name("block128");
  const FormatSpec e4m3 = format_by_name("e4m3");
  const QuantisedOperand qa = quantise_operand(blk, OperandRole::a, e4m3, T, K, x, 64, 1);
  const QuantisedOperand qb = quantise_operand(blk, OperandRole::b, e4m3, T, K, x, 64, 1);
  CHECK(qb.scales[0] == qb.scales[127 * 2]);
  CHECK(qb.scales[0] != qb.scales[128 * 2]);
  CHECK(qa.scales[0] != qa.scales[1 * 2]);
  // Encodings by hand: amax 3 into e4m3 (max 448 = 1.75 * 2^8).
  CHECK(scale_for_amax(3.0, e4m3, ScaleEncoding::fp32) == double(float(3.0 / 448.0)));
  CHECK(scale_for_amax(3.0, e4m3, ScaleEncoding::pow2) == 0x1p-7);   // 3/448 in (2^-8, 2^-7]
  CHECK(scale_for_amax(3.0, e4m3, ScaleEncoding::e8m0) == 0x1p-7);   // 2^(1 - 8)
  CHECK(scale_for_amax(448.0, e4m3, ScaleEncoding::pow2) == 1.0);
  CHECK(scale_for_amax(0.0, e4m3, ScaleEncoding::fp32) == 1.0);
  // fp32 scales stay in fp32's normal range: a block whose amax / fmax underflows (or
  // overflows) fp32 must not get a zero (infinite) scale, which would turn its zeros into
  // NaN and every other element into +-fmax.
  CHECK(scale_for_amax(1e-44, e4m3, ScaleEncoding::fp32) == double(std::numeric_limits<float>::min()));
  CHECK(scale_for_amax(1e300, e4m3, ScaleEncoding::fp32) == double(std::numeric_limits<float>::max()));
  {
    const std::vector<double> tiny{1e-44, 0.0, -1e-44, 1e-40};
    const QuantisedOperand q = quantise_operand(scaling_by_name("row"), OperandRole::a, e4m3, 1, 4, tiny, 1, 1);
    for (int k = 0; k < 4; ++k) {
      const double want = quantize(tiny[k] / q.scales[0], e4m3);  // round-to-nearest of x / s
      INFO(fmt::format("tiny row k={} x={:a} scale={:a} => got {:a} want {:a}", k, tiny[k],
                       q.scales[0], q.operand.value[k], want));
      CHECK(q.operand.value[k] == want);
    }
    CHECK(q.saturated == 0);
  }
  // Names: mx blocks and their encodings.
  CHECK(scaling_by_name("mx16").name == "mx16");
  CHECK(scaling_by_name("mx16:ue4m3").name == "nvfp4");
  CHECK(scaling_by_name("mx32:e8m0").name == "mx");
  CHECK(scaling_by_name("nvfp4").nc == 16);
  CHECK_THROWS_AS(scaling_by_name("tensor:ue4m3"), std::invalid_argument);
  CHECK_THROWS_AS(scaling_by_name("nvfp4:e8m0"), std::invalid_argument);
  CHECK_THROWS_AS(scaling_by_name("mx0"), std::invalid_argument);
  // Two-level (NVFP4) scales: g = fl32(tamax / (6 * 448)) per tensor_rows rows; block
  // scales UE4M3 values of at least 2^-6.
  {
    const FormatSpec e2m1 = format_by_name("e2m1"), ue4m3 = format_by_name("ue4m3");
    const QuantisedOperand q = quantise_operand(scaling_by_name("nvfp4"), OperandRole::a, e2m1, T, K, x, 64, 2);
    for (int t = 0; t < T; ++t) {
      double tamax = 0;
      for (int r = t / 64 * 64; r < t / 64 * 64 + 64; ++r)
        for (int k = 0; k < K; ++k) tamax = std::max(tamax, std::fabs(x[r * K + k]));
      INFO(fmt::format("nvfp4 tensor scale t={} => got {:a} want {:a}", t, q.tensor_scales[t],
                       float(tamax / (6.0 * 448.0))));
      CHECK(q.tensor_scales[t] == float(tamax / (6.0 * 448.0)));
      for (int c = 0; c < K / 16; ++c) {
        const float u = q.scales[t * (K / 16) + c];
        INFO(fmt::format("nvfp4 block scale t={} c={} => got {:a}", t, c, u));
        CHECK(u >= 0x1p-6f);
        CHECK(decode(ue4m3, encode(u, ue4m3)) == u);
      }
    }
  }
  CHECK_THROWS_AS(scaling_by_name("block"), std::invalid_argument);
  CHECK_THROWS_AS(scaling_by_name("mx:fp32"), std::invalid_argument);
  CHECK_THROWS_AS(scaling_by_name("tensor:bf16"), std::invalid_argument);
}

TEST_CASE("sweep input errors name the problem", "[sweep]") {
  SweepSpec s;
  s.k = {100};  // not a multiple of hopper-wgmma's group of 32
  CHECK_THROWS_WITH(run_sweep(s), Catch::Contains("group of 32"));
  s.k = {128};
  s.rho = {1.5};
  CHECK_THROWS_WITH(run_sweep(s), Catch::Contains("rho"));
  s.rho = {0};
  s.formats = {format_by_name("fp32")};
  CHECK_THROWS_WITH(run_sweep(s), Catch::Contains("at most 16 bits"));
}
