// test_plan_table_reliability: the cuBLASLt plan-table reader (kernel/plan_table.hpp) under
// hostile tables (issue 39, C1 and T1): every mutation of a built-in table that breaks what
// the lookup relies on is one std::invalid_argument line naming the table, never a crash, a
// hang or a runaway allocation; the files by path get the checks every input file gets
// (regular file, size limit), through the CLI too (exit 2, one line).
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "cli_runner.hpp"
#include "kernel/cublaslt_plan.hpp"
#include "kernel/plan_table.hpp"
#include "kernel/plan_tables.hpp"

using namespace fp8sim;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// (code, count) runs of little-endian uint16.
std::string runs(std::initializer_list<std::pair<int, int>> pairs) {
  std::string out;
  for (const auto& [code, count] : pairs)
    for (const int v : {code, count}) out += {char(v & 0xff), char((v >> 8) & 0xff)};
  return out;
}

// A small valid table: 2 variants x 2 x 1 x 2 points, two configurations.
json small_meta() {
  return json::parse(R"({"provenance": {"gpu": "test GPU"},
    "axes": {"m": [1, 64], "n": [64], "k": [128, 4096]},
    "variants": ["bf16 tensor fast0", "f32 tensor fast1"],
    "fields": ["algo_id", "tile", "stages", "split_k", "reduction", "cluster"],
    "configs": [[66, "64x8", "128xAUTO", 1, "NONE", "1x2x1"],
                [66, "32x64", "128xAUTO", 4, "COMPUTE_TYPE", "2x1x1"]],
    "none": 65535,
    "rules": [{"variant": "bf16 tensor fast0", "no_split_above_mn": 4096,
               "no_split_below_k": 256, "points": 4}],
    "bias_same_split": [{"variant": "bf16 tensor fast0"}]})");
}
const std::string kSmallBlob = runs({{0, 4}, {1, 3}, {65535, 1}});

}  // namespace

TEST_CASE("plan tables: the built-in tables and a small one pass every check", "[unit]") {
  for (const BuiltinPlanTable& b : builtin_plan_tables()) {
    INFO(b.gpu);
    const PlanTable t = parse_plan_table(b.gpu, b.meta, b.blob);
    CHECK(t.codes.size() == t.variants.size() * t.m.size() * t.n.size() * t.k.size());
  }
  CHECK(parse_plan_table("small", small_meta().dump(), kSmallBlob).codes.size() == 8);
}

TEST_CASE("plan tables: each broken part is one line naming the table (C1, T1)", "[unit]") {
  // (what, how the JSON is changed, the .bin, the words the error must hold)
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    std::string blob;
    const char* needle;
  };
  const auto none = [](json&) {};
  const std::vector<Case> cases = {
      {"empty axis m", [](json& j) { j["axes"]["m"] = json::array(); }, kSmallBlob, "axes.m"},
      {"empty axis n", [](json& j) { j["axes"]["n"] = json::array(); }, kSmallBlob, "axes.n"},
      {"empty axis k", [](json& j) { j["axes"]["k"] = json::array(); }, kSmallBlob, "axes.k"},
      {"unsorted axis", [](json& j) { j["axes"]["k"] = {4096, 128}; }, kSmallBlob, "increase"},
      {"repeated axis value", [](json& j) { j["axes"]["k"] = {128, 128}; }, kSmallBlob, "increase"},
      {"zero in an axis", [](json& j) { j["axes"]["m"] = {0, 64}; }, kSmallBlob, "axes.m"},
      {"negative in an axis", [](json& j) { j["axes"]["n"] = {-64}; }, runs({{0, 4}}), "axes.n"},
      {"float in an axis", [](json& j) { j["axes"]["n"] = {64.5}; }, kSmallBlob, "integer"},
      {"axis not a list", [](json& j) { j["axes"]["n"] = 64; }, kSmallBlob, "axes.n"},
      {"no axes", [](json& j) { j.erase("axes"); }, kSmallBlob, "axes"},
      {"no variants", [](json& j) { j["variants"] = json::array(); }, "", "variants"},
      {"variant twice", [](json& j) { j["variants"][1] = j["variants"][0]; }, kSmallBlob, "twice"},
      {"no provenance", [](json& j) { j.erase("provenance"); }, kSmallBlob, "provenance"},
      {"gpu not a string", [](json& j) { j["provenance"]["gpu"] = 7; }, kSmallBlob, "gpu"},
      {"field missing", [](json& j) { j["fields"][3] = "splits"; }, kSmallBlob, "split_k"},
      {"config too short", [](json& j) { j["configs"][1].erase(5); }, kSmallBlob, "configs[1]"},
      {"tile not a string", [](json& j) { j["configs"][0][1] = 64; }, kSmallBlob, "tile"},
      {"split_k a string", [](json& j) { j["configs"][0][3] = "4"; }, kSmallBlob, "split_k"},
      {"none a configuration", [](json& j) { j["none"] = 1; }, kSmallBlob, "none"},
      {"rule of wrong type", [](json& j) { j["rules"][0]["never_splits"] = "yes"; }, kSmallBlob,
       "never_splits"},
      {"rule k of wrong type", [](json& j) { j["rules"][0]["no_split_below_k"] = "5"; },
       kSmallBlob, "no_split_below_k"},
      {"bias list not a list", [](json& j) { j["bias_same_split"] = 3; }, kSmallBlob,
       "bias_same_split"},
      {"trailing data", none, kSmallBlob + runs({{0, 1}}), "more than"},
      {"short .bin", none, runs({{0, 7}}), "holds 7 points"},
      {"odd .bin size", none, kSmallBlob + "x", "whole"},
      {"a run of 0", none, runs({{0, 0}, {0, 8}}), "run of 0"},
      {"unknown configuration", none, runs({{2, 8}}), "configuration 2"},
      {"grid too large (a small .bin expands to GBs)",
       [](json& j) {
         j["axes"]["m"] = json::array();
         for (int i = 1; i <= 5000; ++i) j["axes"]["m"].push_back(i);
         j["axes"]["n"] = j["axes"]["m"];
       },
       runs({{0, 65535}}), "kMaxPlanPoints"},
      {"JSON nested too deep", [](json& j) {
         json deep = 1;
         for (int i = 0; i < 100; ++i) deep = json::array({deep});
         j["deep"] = deep;
       }, kSmallBlob, "kMaxJsonDepth"},
  };
  for (const Case& c : cases) {
    json meta = small_meta();
    c.edit(meta);
    const std::string e = error_of([&] { parse_plan_table("t.json", meta.dump(), c.blob); });
    INFO(c.what << " => " << e);
    CHECK(e.rfind("cuBLASLt plan table t.json: ", 0) == 0);
    CHECK(e.find(c.needle) != std::string::npos);
    CHECK(e.find('\n') == std::string::npos);
    CHECK(e.size() < 400);
  }
  // Text that is no JSON, and a key twice: named too.
  for (const auto& [text, needle] : {std::pair{std::string("{\"axes\": "), "not valid JSON"},
                                     {std::string("{\"axes\": 1, \"axes\": 2}"), "twice"},
                                     {std::string("[1, 2]"), "object"}}) {
    const std::string meta = text;  // (clang 14 cannot capture a structured binding)
    const std::string e = error_of([&] { parse_plan_table("t.json", meta, kSmallBlob); });
    INFO(text << " => " << e);
    CHECK(e.rfind("cuBLASLt plan table t.json: ", 0) == 0);
    CHECK(e.find(needle) != std::string::npos);
  }
}

TEST_CASE("plan tables by path: FIFO, folder, size, and the CLI's one line", "[unit]") {
  using fp8sim::test::run_cli;
  using fp8sim::test::workdir;
  const fs::path dir = workdir("plan-table") / "tables";
  fs::create_directories(dir);
  const auto write = [&](const std::string& stem, const std::string& meta, const std::string& bin) {
    std::ofstream(dir / (stem + ".json"), std::ios::binary) << meta;
    std::ofstream(dir / (stem + ".bin"), std::ios::binary) << bin;
    return (dir / (stem + ".json")).string();
  };
  json empty_m = small_meta();
  empty_m["axes"]["m"] = json::array();
  const std::string good = write("good", small_meta().dump(), kSmallBlob);
  const std::string empty = write("empty", empty_m.dump(), kSmallBlob);
  const std::string bad_json = write("bad", "{\"axes\": [", kSmallBlob);
  // A FIFO as the .json (with a good .bin) and as the .bin: refused at once, never read.
  const std::string fifo = (dir / "fifo.json").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::ofstream(dir / "fifo.bin", std::ios::binary) << kSmallBlob;
  std::ofstream(dir / "fifobin.json") << small_meta().dump();
  REQUIRE(::mkfifo((dir / "fifobin.bin").c_str(), 0600) == 0);
  fs::create_directories(dir / "folder.json");
  // A .bin over the size limit (sparse: no disk used).
  std::ofstream(dir / "huge.json") << small_meta().dump();
  fs::resize_file(fs::path(write("huge", small_meta().dump(), "")).replace_extension(".bin"),
                  (std::uintmax_t{1} << 26) + 4);

  ScaledMmCall call;
  call.m = 64;
  call.n = 64;
  call.k = 4096;
  CHECK(cublaslt_plan(good, call).split_k == 1);  // the small table's point (configuration 0)
  const std::vector<std::pair<std::string, std::string>> refused = {
      {empty, "axes.m"},
      {bad_json, "not valid JSON"},
      {fifo, "not a regular file"},
      {(dir / "fifobin.json").string(), "not a regular file"},
      {(dir / "folder.json").string(), "folder"},
      {(dir / "huge.json").string(), "kMaxManifestBytes"},
      {(dir / "missing.json").string(), "cannot open"},
  };
  for (const auto& [path, needle] : refused) {
    const std::string table = path;  // (clang 14 cannot capture a structured binding)
    const std::string e = error_of([&] { cublaslt_plan(table, call); });
    INFO(path << " => " << e);
    CHECK(e.find(needle) != std::string::npos);
    CHECK(e.find(path.substr(0, path.size() - 5)) != std::string::npos);  // the file is named
    // The CLI (explain, and gemm's --gpu): exit 2, one line, at once (a FIFO never blocks).
    const auto r = run_cli(fmt::format("explain --m 64 --n 64 --k 4096 --gpu '{}'", path),
                           "exec timeout 60 ");
    INFO(r.err);
    CHECK(r.status == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find(needle) != std::string::npos);
  }
}
