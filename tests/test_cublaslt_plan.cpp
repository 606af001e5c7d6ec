// test_cublaslt_plan: the recorded cuBLASLt plans (sim/kernel/cublaslt_plan.hpp) against what
// cuBLASLt's own trace said torch._scaled_mm ran on the GPU, for calls kept out of the tables
// (tests/data/cublaslt_heldout_<gpu>.json, cuda/capture/record_cublaslt_plans.py --traced) and at
// grid points (cublaslt_gridcheck_<gpu>.json): every call exact or refused, never wrong.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "kernel/cublaslt_plan.hpp"

using namespace fp8sim;
using nlohmann::json;

namespace {

json read_json(const std::string& name) {
  const char* data = std::getenv("FP8SIM_TEST_DATA");
  const std::string path = std::string(data ? data : "tests/data") + "/" + name;
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read " + path);
  return json::parse(f);
}

struct Tally {
  long calls = 0, exact = 0, refused = 0, wrong = 0;
  long bias_calls = 0, bias_exact = 0;  // of them, calls with a bias
};

// Every traced call without a torch error through the plan of `gpu`.
Tally check(const std::string& gpu, const json& traced) {
  const auto fields = traced.at("fields").get<std::vector<std::string>>();
  auto at = [&](const json& row, const char* name) -> const json& {
    return row.at(std::find(fields.begin(), fields.end(), name) - fields.begin());
  };
  Tally t;
  for (const json& row : traced.at("cases")) {
    if (!at(row, "error").is_null()) continue;  // torch refused the call itself
    ScaledMmCall c;
    c.m = at(row, "m").get<int>();
    c.n = at(row, "n").get<int>();
    c.k = at(row, "k").get<int>();
    c.out = at(row, "out").get<std::string>();
    c.scale = at(row, "scale").get<std::string>();
    c.fast = at(row, "fast").get<bool>();
    c.bias = !at(row, "bias").is_null();
    ++t.calls;
    t.bias_calls += c.bias;
    const int want = std::max(1, at(row, "split_k").get<int>());
    try {
      const CublasltPlan p = cublaslt_plan(gpu, c);
      if (p.split_k == want) {
        ++t.exact;
        t.bias_exact += c.bias;
      } else if (t.wrong++ < 5) {
        FAIL_CHECK(fmt::format("{} {}x{}x{} {} {} fast{}: plan split {} ({}), cuBLASLt ran {}",
                               gpu, c.m, c.n, c.k, c.out, c.scale, int(c.fast), p.split_k,
                               p.source, want));
      }
    } catch (const std::invalid_argument&) {
      ++t.refused;
    }
  }
  return t;
}

}  // namespace

TEST_CASE("recorded plans: held-out and grid calls exact or refused, never wrong", "[golden]") {
  for (const std::string gpu : {"h100", "h200"}) {
    for (const char* set : {"heldout", "gridcheck"}) {
      const Tally t = check(gpu, read_json(fmt::format("cublaslt_{}_{}.json", set, gpu)));
      fmt::print("{} {}: {} calls, {} exact, {} refused, {} wrong ({} calls with a bias, {} exact)\n",
                 gpu, set, t.calls, t.exact, t.refused, t.wrong, t.bias_calls, t.bias_exact);
      CHECK(t.calls >= 100);
      CHECK(t.wrong == 0);
      CHECK(t.exact + t.refused == t.calls);
    }
  }
}

TEST_CASE("recorded plans: refusals name the shape, the GPU and both ways out", "[unit]") {
  ScaledMmCall c;
  c.m = 87, c.n = 1024, c.k = 9728;  // inside the split zone, between recorded M
  CHECK_THROWS_WITH(cublaslt_plan("h100", c),
                    Catch::Contains("87x1024x9728") && Catch::Contains("h100") &&
                        Catch::Contains("run it on that GPU") && Catch::Contains("split_k"));
  CHECK_THROWS_WITH(cublaslt_plan("a100", c), Catch::Contains("no recorded cuBLASLt plans"));
  c.out = "f8";
  CHECK_THROWS_WITH(cublaslt_plan("h100", c), Catch::Contains("out 'f8'"));
  CHECK(recorded_gpus() == std::vector<std::string>{"h100", "h200"});
}
