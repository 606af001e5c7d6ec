// test_probe: probe() recovers the accumulator parameters of simulated kernels.
//
// The kernel under test is the simulator itself (model_kernel: the GEMM engine) for every
// non-exact preset, a grid of custom models and promotion intervals; the expected parameters
// are the model's own fields, never the probe's output. Every report is also checked by
// behaviour: its as_model() must give the same bits as the true model on random dot products.
// The custom grid is checked field by field against the parameters it was written with (every
// 5th of its models under the sanitizers, sanitized.hpp);
// the presets through disagreements() (sim/analysis/probe.hpp). Seed: test_seed.hpp.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <string>

#include "accumulator/accumulator.hpp"
#include "analysis/probe.hpp"
#include "base/rng.hpp"
#include "sanitized.hpp"
#include "test_seed.hpp"

using namespace fp8sim;

namespace {

// A reference kernel independent of the engine: the plain fused step chained along K
// (accumulator.hpp's chained_dot), promotion into an fp32 main accumulator by hand.
DotKernel reference_kernel(const AccumulatorSpec& m, int promote_every) {
  return [m, promote_every](const DotBatch& b) {
    std::vector<float> out(b.T);
    for (int t = 0; t < b.T; ++t) {
      std::vector<double> a(b.K), w(b.K);
      for (int k = 0; k < b.K; ++k) {
        a[k] = decode(b.a_format, b.a[std::size_t(t) * b.K + k]);
        w[k] = decode(b.b_format, b.b[std::size_t(t) * b.K + k]);
      }
      const int chunk = promote_every == 0 ? b.K : promote_every;
      float main = 0.0f;
      for (int k0 = 0; k0 < b.K; k0 += chunk) {
        const double c = k0 == 0 && !b.c.empty() ? b.c[t] : 0.0;
        const int n = std::min(chunk, b.K - k0);
        main += static_cast<float>(
            chained_dot(m, b.a_format, a.data() + k0, b.b_format, w.data() + k0, n, c));
      }
      out[t] = main;
    }
    return out;
  };
}

// Random finite dot products with a wide exponent spread and c of the same size; the two
// models must agree bit for bit (+0 and -0 differ). Returns "" or one failure line.
std::string compare_behaviour(const AccumulatorSpec& truth, const AccumulatorSpec& probed,
                              int promote_every, int rows = 128) {
  const FormatSpec f = format_by_name("e4m3");
  const int g = std::max(truth.group, 1);
  DotBatch b;
  b.a_format = b.b_format = f;
  b.T = rows;
  b.K = std::max(4 * g, 64);
  const std::uint64_t stream = stream_of(truth.name);
  std::uint64_t i = 0;
  auto draw = [&] { return random_u64(test_seed(), stream, i++); };
  auto code = [&] {
    for (;;) {
      const auto c = static_cast<std::uint8_t>(draw());
      if (classify(f, c) != ValueClass::nan) return c;
    }
  };
  for (int t = 0; t < b.T; ++t) {
    // Rows alternate between all-random codes and a few large terms among small ones.
    for (int k = 0; k < b.K; ++k) {
      std::uint8_t ca = code(), cb = code();
      if (t % 2 == 1 && draw() % 8 != 0) ca &= 0x9f, cb &= 0x9f;  // mostly small exponents
      b.a.push_back(ca);
      b.b.push_back(cb);
    }
    const double c = t % 3 == 0 ? 0.0 : std::ldexp(to_unit_double(draw()) - 0.5, int(draw() % 24) - 4);
    b.c.push_back(static_cast<float>(c));
  }
  const auto want = model_kernel(truth, promote_every)(b);
  const auto got = model_kernel(probed, promote_every)(b);
  for (int t = 0; t < b.T; ++t) {
    const auto gw = std::bit_cast<std::uint32_t>(got[t]), ww = std::bit_cast<std::uint32_t>(want[t]);
    const bool both_nan = std::isnan(got[t]) && std::isnan(want[t]);
    if (gw != ww && !both_nan)
      return fmt::format("{} vs probed {}: seed {} row {} c={:#010x} => got {:#010x} want {:#010x}",
                         truth.name, probed.name, test_seed(), t,
                         std::bit_cast<std::uint32_t>(b.c[t]), gw, ww);
  }
  return "";
}

// Checks every identified field against the true model; returns "" or one failure line.
std::string compare_fields(const AccumulatorSpec& m, int promote_every, const ProbeReport& r) {
  const std::string bad = disagreements(r, m, promote_every);
  if (bad.empty()) return "";
  return fmt::format("probe {} promote {} => got [{}] want [{} promote_every={}] ({} wrong)",
                     m.name, promote_every, r.describe(), describe(m), promote_every, bad);
}

// The parameters a custom grid model was written with.
struct GridModel {
  int group, frac;
  Rounding cut;
  int out_bits;
  Rounding outround;
  bool c_joins, renorm;
};

// The report's fields against the parameters the grid wrote into the model, field by field
// (independent of disagreements()); "" or one failure line. An output width or rounding the
// probe marks unidentified is held only to its bound (at least the true width, or 24).
std::string grid_mismatch(const std::string& name, const ProbeReport& r, const GridModel& g) {
  std::string bad;
  auto want = [&](bool ok, const char* what) {
    if (!ok) bad += std::string(bad.empty() ? "" : ", ") + what;
  };
  want(r.group == g.group, "group");
  want(r.block == 0 && !r.interleave, "block");
  want(r.unpack.empty(), "unpack");
  want(r.frac_bits == g.frac, "frac");
  want(r.term_cut == g.cut, "cut");
  want(r.renormalise == g.renorm, "renorm");
  want(r.c_joins == g.c_joins && !r.c_added_after, "c");
  want(r.out_bits_identified ? r.out_bits == g.out_bits : r.out_bits >= g.out_bits || r.out_bits == 24,
       "out bits");
  want(!r.output_rounding_identified || r.output_rounding == g.outround, "outround");
  want(r.out_max_exponent == 127, "out range");
  want(r.promote_every == 0, "promote_every");
  if (bad.empty()) return "";
  return fmt::format("probe {} => got [{}] ({} wrong)", name, r.describe(), bad);
}

void check_model(const AccumulatorSpec& m, int promote_every, bool behaviour = true,
                 const ProbeOptions& o = {}) {
  const ProbeReport r = probe(model_kernel(m, promote_every), o);
  const std::string fields = compare_fields(m, promote_every, r);
  INFO(fmt::format("evidence:\n  {}", fmt::join(r.evidence, "\n  ")));
  if (!fields.empty()) FAIL(fields);
  if (behaviour) {
    const std::string b = compare_behaviour(m, r.as_model(), promote_every);
    if (!b.empty()) FAIL(b);
  }
}

}  // namespace

TEST_CASE("probe recovers every non-exact preset", "[unit]") {
  for (const char* name :
       {"hopper-wgmma", "hopper-wgmma-f16", "ada-fp8", "ada-fp8-f16", "blackwell-fp8",
        "hopper-mma-sync", "hopper-mma-sync-f16", "fp32"}) {
    SECTION(name) { check_model(accumulator_by_name(name), 0); }
  }
  ProbeOptions e5m2;
  e5m2.format = format_by_name("e5m2");
  for (const char* name :
       {"hopper-wgmma", "hopper-wgmma-f16", "blackwell-fp8", "hopper-mma-sync", "fp32"}) {
    SECTION(fmt::format("{} with e5m2 operands", name)) {
      check_model(accumulator_by_name(name), 0, true, e5m2);
    }
  }
}

TEST_CASE("probe reads unpacking from mixed e5m2 x e4m3 operands", "[unit]") {
  ProbeOptions mixed;
  mixed.format = format_by_name("e5m2");
  mixed.b_format = format_by_name("e4m3");
  for (const char* name : {"hopper-mma-sync", "hopper-mma-sync-f16", "hopper-wgmma", "ada-fp8"}) {
    SECTION(name) {
      const AccumulatorSpec m = accumulator_by_name(name);
      const ProbeReport r = probe(model_kernel(m, 0), mixed);
      INFO(fmt::format("evidence:\n  {}", fmt::join(r.evidence, "\n  ")));
      CHECK(r.unpack_identified);
      CHECK(compare_fields(m, 0, r) == "");
    }
  }
  // With e4m3 alone a 25-bit step hides it (the telling term is below every product), a
  // 13-bit one shows it.
  CHECK_FALSE(probe(model_kernel(accumulator_by_name("hopper-mma-sync"), 0)).unpack_identified);
  const AccumulatorSpec unpacked =
      accumulator_by_name("custom:group=32,frac=13,cut=rz,out=14,unpack=fp16");
  const ProbeReport r = probe(model_kernel(unpacked, 0));
  CHECK(r.unpack == "fp16");
  CHECK(compare_fields(unpacked, 0, r) == "");
}

TEST_CASE("probe agrees on the engine-independent reference kernel", "[unit]") {
  for (const char* name : {"hopper-wgmma", "blackwell-fp8"}) {
    const AccumulatorSpec m = accumulator_by_name(name);
    ProbeOptions o;
    o.max_k = 512;
    const ProbeReport r = probe(reference_kernel(m, 128), o);
    INFO(fmt::format("evidence:\n  {}", fmt::join(r.evidence, "\n  ")));
    const std::string bad = compare_fields(m, m.name == "hopper-wgmma" ? 128 : 0, r);
    if (!bad.empty()) FAIL(bad);
  }
}

TEST_CASE("probe finds the promotion interval", "[unit]") {
  for (int n : {32, 128, 512, 0})
    for (const char* name : {"hopper-wgmma", "ada-fp8"}) {
      SECTION(fmt::format("{} promote every {}", name, n)) {
        check_model(accumulator_by_name(name), n);
      }
    }
}

TEST_CASE("probe recovers a grid of custom models", "[unit]") {
  // 640 models; under the sanitizers (sanitized.hpp) every 5th of them (128, with every pair of
  // two fields' values; each costs 0.15 CPU-s of ASan): build/ probes all 640.
  int point = 0, done = 0;
  for (int group : {8, 16, 32, 64})
    for (int frac : {10, 13, 17, 23, 30})
      for (const char* cut : {"rz", "rne"})
        for (int out : {12, 14, 19, 24})
          for (const char* c : {"join", "exact"})
            for (int renorm : {0, 1}) {
              if (test::kSanitized && point++ % 5 != 0) continue;
              // Output rounding alternates so both directions are covered across the grid.
              const char* outround = (group + frac + out + renorm) % 2 ? "rne" : "rz";
              const std::string name = fmt::format(
                  "custom:group={},frac={},cut={},out={},outround={},c={},renorm={}", group,
                  frac, cut, out, outround, c, renorm);
              const AccumulatorSpec m = accumulator_by_name(name);
              const ProbeReport r = probe(model_kernel(m, 0));
              const std::string fields = grid_mismatch(
                  name, r, {group, frac, cut == std::string("rz") ? Rounding::rz : Rounding::rne, out,
                            outround == std::string("rz") ? Rounding::rz : Rounding::rne,
                            c == std::string("join"), renorm == 1});
              INFO(fmt::format("evidence:\n  {}", fmt::join(r.evidence, "\n  ")));
              if (!fields.empty()) FAIL(fields);
              if ((++done) % 4 == 0) {  // behaviour on every fourth model keeps the test short
                const std::string b = compare_behaviour(m, r.as_model(), 0, 64);
                if (!b.empty()) FAIL(b);
              }
            }
  CHECK(done == (test::kSanitized ? 128 : 640));
}

TEST_CASE("probe reports a broken kernel in one line", "[unit]") {
  const DotKernel short_kernel = [](const DotBatch& b) {
    return std::vector<float>(std::max(b.T - 1, 0), 0.0f);
  };
  CHECK_THROWS_WITH(probe(short_kernel), Catch::Contains("kernel returned"));
  const DotKernel nan_kernel = [](const DotBatch& b) {
    return std::vector<float>(b.T, std::nanf(""));
  };
  CHECK_THROWS_WITH(probe(nan_kernel), Catch::Contains("neither 0 nor s"));
  const DotKernel zero_kernel = [](const DotBatch& b) { return std::vector<float>(b.T, 0.0f); };
  CHECK_THROWS_WITH(probe(zero_kernel), Catch::Contains("no step boundary"));
}

TEST_CASE("probe pads K for kernels with a K granule", "[unit]") {
  ProbeOptions o;
  o.k_multiple = 32;
  const AccumulatorSpec m = accumulator_by_name("hopper-wgmma");
  const DotKernel strict = [&](const DotBatch& b) {
    if (b.K % 32 != 0) throw std::runtime_error("K not a multiple of 32");
    return model_kernel(m, 128)(b);
  };
  const ProbeReport r = probe(strict, o);
  CHECK(compare_fields(m, 128, r) == "");
}

TEST_CASE("probe tells a library epilogue's fp32 c from the accumulator's", "[unit]") {
  // D = fp32(acc(products)) + c, as cuBLASLt's beta = 1 epilogue: products round to 14 bits,
  // c + product keeps 24.
  const AccumulatorSpec m = accumulator_by_name("hopper-wgmma");
  const DotKernel epilogue = [&](const DotBatch& b) {
    DotBatch no_c = b;
    no_c.c.clear();
    auto d = model_kernel(m, 0)(no_c);
    for (int t = 0; t < b.T && !b.c.empty(); ++t) d[t] = d[t] + b.c[t];
    return d;
  };
  const ProbeReport r = probe(epilogue);
  INFO(fmt::format("evidence:\n  {}", fmt::join(r.evidence, "\n  ")));
  CHECK(r.group == 32);
  CHECK(r.frac_bits == 13);
  CHECK(r.out_bits == 14);
  CHECK(r.output_rounding == Rounding::rz);
  CHECK(r.c_added_after);
  CHECK(r.c_adder_bits == 24);
}
