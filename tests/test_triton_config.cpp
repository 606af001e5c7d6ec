// test_triton_config: Triton launch configs (sim/kernel/triton_config.hpp): the configs vLLM
// and SGLang pick, checked against their own code (tests/data/triton_config_golden.json, made
// by tests/triton_config_golden.py from the released wheels) at every M from 1 to 8192; the
// lowering rule over every recorded config and against the instruction captured PTX shows;
// config strings, routing and refusals; the CLI's --triton-config and explain. Under the
// sanitizers (sanitized.hpp) the picks are checked at every M up to 256, at the ends of each
// run of one config and at every 61st M above: build/ checks every M.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "error_of.hpp"
#include "gemm/gemm.hpp"
#include "io/npy.hpp"
#include "kernel/gemm_inputs.hpp"
#include "kernel/kernel.hpp"
#include "accumulator/accumulator.hpp"
#include "kernel/triton_config.hpp"
#include "kernel/triton_config_files.hpp"
#include "sanitized.hpp"
#include "test_seed.hpp"

using namespace fp8sim;
using fp8sim::test::Run;
using fp8sim::test::run_cli;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The message of the std::invalid_argument a call throws ("" when it throws none).
constexpr auto invalid_argument_of = [](auto&& f) {
  return test::error_of<std::invalid_argument>(f);
};

fs::path test_data() {
  const char* d = std::getenv("FP8SIM_TEST_DATA");
  REQUIRE(d != nullptr);
  return d;
}

json read_json(const fs::path& p) {
  std::ifstream f(p);
  REQUIRE(f.good());
  return json::parse(f);
}

std::vector<int> fields(const TritonConfig& c) {
  return {c.block_m, c.block_n, c.block_k, c.group_m, c.num_warps, c.num_stages};
}

}  // namespace

TEST_CASE("vLLM's and SGLang's picks, as their own code makes them, at every M", "[unit][golden]") {
  const json g = read_json(test_data() / "triton_config_golden.json");
  std::size_t checked = 0, covered = 0, from_files = 0;
  for (const json& c : g["cases"]) {
    const std::string server = c["server"], gpu = c["gpu"];
    const int n = c["N"], k = c["K"];
    for (const json& run : c["runs"]) {
      const std::vector<int> want = run[4];
      const int lo = run[0], hi = run[1];
      covered += std::size_t(hi - lo + 1);
      for (int m = lo; m <= hi; ++m) {
        if (test::kSanitized && m > 256 && m != lo && m != hi && m % 61 != 0) continue;
        const TritonPlan p = triton_plan(server, m, n, k, gpu);
        if (fields(p.config) != want ||
            (run[2].is_null() != (p.config_source.find("no tuned file") != std::string::npos))) {
          FAIL(fmt::format("{} {} M={} N={} K={}: got {} ({}), want {} from {}", server, gpu, m, n,
                           k, to_string(p.config), p.config_source, run[4].dump(), run[2].dump()));
        }
        if (!run[2].is_null()) {
          const std::string file = run[2], entry = fmt::format("entry {} ", run[3].get<int>());
          if (p.config_source.find(file) == std::string::npos ||
              p.config_source.find(entry) == std::string::npos)
            FAIL(fmt::format("{} M={}: source '{}' does not name {} {}", file, m, p.config_source,
                             entry, file));
          ++from_files;
        }
        ++checked;
      }
    }
  }
  INFO(fmt::format("{} picks checked, {} from files", checked, from_files));
  CHECK(covered == g["cases"].size() * std::size_t(g["m_max"].get<int>()));  // runs tile 1..m_max
  if (!test::kSanitized) CHECK(checked == covered);
  CHECK(from_files > checked / 2);
}

TEST_CASE("every recorded file is one the servers read, and only those", "[unit][golden]") {
  // The golden file lists, per server and GPU, every file the server's code opened: the
  // built-in files must be exactly those (nothing missing, nothing extra).
  const json g = read_json(test_data() / "triton_config_golden.json");
  std::set<std::string> opened, built_in;
  for (const json& c : g["cases"])
    for (const json& run : c["runs"])
      if (!run[2].is_null())
        opened.insert(c["server"].get<std::string>() + "/" + run[2].get<std::string>());
  for (const TritonConfigFile& f : builtin_triton_config_files())
    if (f.name != "provenance.json")
      built_in.insert(std::string(f.server) + "/" + std::string(f.name));
  CHECK(opened == built_in);
  CHECK(built_in.size() == 84);
}

TEST_CASE("the lowering rule over every recorded config", "[unit]") {
  // Triton 3.6 supportMMA(op, 3) on sm_90 for e4m3 -> fp32: M % 64, N % 8, K >= 32, warps % 4.
  int wgmma = 0, hmma = 0;
  for (const TritonConfigFile& f : builtin_triton_config_files()) {
    if (f.name == "provenance.json") continue;
    const json file = json::parse(f.text);
    for (const auto& [key, e] : file.items()) {
      const std::string text = fmt::format(
          "BLOCK_SIZE_M={},BLOCK_SIZE_N={},BLOCK_SIZE_K={},num_warps={},num_stages={},"
          "GROUP_SIZE_M={}",
          e["BLOCK_SIZE_M"].get<int>(), e["BLOCK_SIZE_N"].get<int>(), e["BLOCK_SIZE_K"].get<int>(),
          e["num_warps"].get<int>(), e["num_stages"].get<int>(), e["GROUP_SIZE_M"].get<int>());
      const TritonConfig c = parse_triton_config(text);
      const bool v3 =
          c.block_m % 64 == 0 && c.block_n % 8 == 0 && c.block_k >= 32 && c.num_warps % 4 == 0;
      const auto [instruction, why] = triton_lowering(c);
      INFO(f.server << "/" << f.name << " entry " << key << ": " << why);
      CHECK(instruction == (v3 ? "wgmma" : "mma.sync.f16"));
      (v3 ? wgmma : hmma)++;
      // Below 32 imprecise accumulations an FP8 dot never takes wgmma.
      CHECK(triton_lowering(c, 16).first == "mma.sync.f16");
    }
  }
  CHECK(wgmma > 0);
  CHECK(hmma > 100);  // BLOCK_SIZE_M 16 and 32 are common decode choices (issue 36)
}

TEST_CASE("the lowering rule agrees with the instruction in every captured kernel's PTX",
          "[unit][golden]") {
  // cuda/capture/capture_triton.py records the PTX's arithmetic per launch ("ptx_summary",
  // keyed <tag>_<out>: wgmma.mma_async and mma.sync counts) and, since issue 36, per case
  // ("instruction"), next to the config launched ("launch_config"; the fp8 dot's in the
  // manifest) and max_num_imprecise_acc (the dot's tag imp<V>).
  auto config_of = [](const json& lc) {
    const bool block = lc.contains("BLOCK_SIZE_M");
    return parse_triton_config(
        fmt::format("{},{},{},{},{}", lc[block ? "BLOCK_SIZE_M" : "BLOCK_M"].get<int>(),
                    lc[block ? "BLOCK_SIZE_N" : "BLOCK_N"].get<int>(),
                    lc[block ? "BLOCK_SIZE_K" : "BLOCK_K"].get<int>(), lc["num_warps"].get<int>(),
                    lc["num_stages"].get<int>()));
  };
  int checked = 0, hmma = 0;
  for (const auto& dir : fs::directory_iterator(test_data() / "hw" / "kernels")) {
    if (!fs::exists(dir.path() / "manifest.json")) continue;
    const json m = read_json(dir.path() / "manifest.json");
    const json summary = m.value("ptx_summary", json::object());
    for (const auto& [key, counts] : summary.items()) {
      if (!counts.is_object()) continue;
      const std::string tag = key.substr(0, key.rfind('_'));
      const json* lc = m.contains("launch_config") ? &m["launch_config"] : nullptr;
      for (const json& c : m["cases"])
        if (!lc && c["name"].get<std::string>().starts_with(tag + "_")) lc = &c["launch_config"];
      REQUIRE(lc != nullptr);
      int imprecise = 1 << 30;
      if (tag.starts_with("imp") && tag.substr(3, 4) != "none")
        imprecise = std::stoi(tag.substr(3));
      const std::string want = counts.value("wgmma.mma_async", 0) > 0 ? "wgmma"
                               : counts.value("mma.sync", 0) > 0      ? "mma.sync.f16"
                                                                      : "";
      INFO(dir.path().filename().string() << " " << key);
      REQUIRE(!want.empty());
      CHECK(triton_lowering(config_of(*lc), imprecise).first == want);
      ++checked;
      hmma += want != "wgmma";
    }
    for (const json& c : m["cases"]) {
      if (!c.contains("instruction") || c["instruction"] == "unknown") continue;
      const int imprecise = c.value("max_num_imprecise_acc", json()).is_number()
                                ? c["max_num_imprecise_acc"].get<int>()
                                : 1 << 30;
      INFO(dir.path().filename().string() << " " << c["name"].get<std::string>());
      CHECK(triton_lowering(config_of(c["launch_config"]), imprecise).first ==
            (c["instruction"] == "wgmma" ? "wgmma" : "mma.sync.f16"));
      ++checked;
      hmma += c["instruction"] != "wgmma";
    }
  }
  CHECK(checked > 0);
  CHECK(hmma > 0);  // max_num_imprecise_acc 0: mma.sync m16n8k16 f16 in the fp8 dot's PTX
}

TEST_CASE("config strings: both forms, and one line for anything else", "[unit]") {
  const TritonConfig a = parse_triton_config("16,64,128,4,3");
  CHECK(fields(a) == std::vector<int>{16, 64, 128, 0, 4, 3});
  CHECK(to_string(a) == "16,64,128,4,3");
  CHECK(fields(parse_triton_config("16,64,128,4,3,8")) == std::vector<int>{16, 64, 128, 8, 4, 3});
  CHECK(fields(parse_triton_config(
            "num_stages=3,BLOCK_SIZE_N=64,BLOCK_SIZE_M=16,num_warps=4,BLOCK_SIZE_K=128")) ==
        std::vector<int>{16, 64, 128, 0, 4, 3});
  const struct {
    const char* text;
    const char* says;
  } bad[] = {{"", "1 value given"},
             {"16,64,128,4", "4 values given"},
             {"16,64,128,4,3,1,2", "7 values given"},
             {"16,64,x,4,3", "BLOCK_SIZE_K 'x' is not an integer"},
             {"16,64,-128,4,3", "is not an integer"},
             {"16,64,99999,4,3", "is not an integer"},
             {"24,64,128,4,3", "BLOCK_SIZE_M 24 is not a power of two"},
             {"8,64,128,4,3", "BLOCK_SIZE_M 8 is not a power of two in 16..256"},
             {"16,512,128,4,3", "BLOCK_SIZE_N 512"},
             {"16,64,128,3,3", "num_warps 3"},
             {"16,64,128,4,0", "num_stages 0"},
             {"16,64,128,4,3,0", "GROUP_SIZE_M 0"},
             {"BLOCK_SIZE_M=16,num_warps=4", "BLOCK_SIZE_N is missing"},
             {"BLOCK_SIZE_M=16,BLOCK_SIZE_M=16", "given twice"},
             {"BLOCK_SIZE_M=16,BLOCK_SIZE_N=64,BLOCK_SIZE_K=128,num_warps=4,num_stages=3,SPLIT_K=2",
              "unknown key 'SPLIT_K'"},
             {"16,64,128,4,num_stages=3", "mixes values and named keys"},
             {"vllm2", "1 value given"}};
  for (const auto& b : bad) {
    const std::string e = invalid_argument_of([&] { parse_triton_config(b.text); });
    INFO(b.text << " -> " << e);
    CHECK(e.find(b.says) != std::string::npos);
    CHECK(e.find('\n') == std::string::npos);
  }
  // triton_plan's own refusals.
  CHECK(invalid_argument_of([] {
          triton_plan("vllm", 1, 7168, 1024, "a100");
        }).find("gpu 'a100': no recorded vLLM config files") != std::string::npos);
  CHECK(invalid_argument_of([] { triton_plan("vllm", 1, 7168, 1024, ""); }).find("give --gpu") !=
        std::string::npos);
  CHECK(invalid_argument_of([] {
          triton_plan("16,64,128,4,3", 1, 7168, 1024, "b200");
        }).find("sm_90 only") != std::string::npos);
  CHECK(invalid_argument_of([] {
          triton_plan("sglang", 1, 7168, 1024, "h100", "triton-fp8-dot");
        }).find("not of triton-fp8-dot") != std::string::npos);
  CHECK(invalid_argument_of([] {
          triton_plan("", 1, 1, 1, "h100", "cublaslt");
        }).find("not a Triton kernel") != std::string::npos);
  // The device name spelled out is the same GPU.
  CHECK(fields(triton_plan("vllm", 1, 7168, 1024, "NVIDIA H100 80GB HBM3").config) ==
        fields(triton_plan("vllm", 1, 7168, 1024, "h100").config));
}

TEST_CASE("a config routes to the preset of its instruction, or is refused", "[unit]") {
  const TritonPlan hmma = triton_plan("16,64,128,4,3", 1, 7168, 1024, "h100");
  const TritonPlan wg64 = triton_plan("64,128,64,4,3", 1, 7168, 1024, "h100");
  CHECK(hmma.instruction == "mma.sync.f16");
  CHECK(wg64.instruction == "wgmma");
  CHECK(triton_kernel_for("triton-w8a8-block-fp8", hmma) == "triton-w8a8-block-fp8-mma-f16");
  CHECK(triton_kernel_for("triton-w8a8-block-fp8-mma-f16", wg64) == "triton-w8a8-block-fp8");
  CHECK(triton_kernel_for("triton-fp8-dot-imprecise-acc-64", hmma) == "triton-fp8-dot-mma-f16");
  CHECK(triton_kernel_for("triton-fp8-dot-imprecise-acc-64", wg64) ==
        "triton-fp8-dot-imprecise-acc-64");

  GemmSpec s;
  s.scaling = Scaling::block;
  apply_kernel(s, kernel_by_name("triton-w8a8-block-fp8"));
  apply_triton_plan(s, "triton-w8a8-block-fp8", wg64);
  CHECK(s.promote_every == 64);
  CHECK(s.k_tile == 64);
  // A config that lowers to FP16 mma.sync routes to the -mma-f16 preset and its model.
  GemmSpec h;
  h.scaling = Scaling::block;
  apply_kernel(h, kernel_by_name("triton-w8a8-block-fp8"));
  apply_triton_plan(h, "triton-w8a8-block-fp8", hmma);
  CHECK(h.model.name == accumulator_by_name("triton-mma-f16").name);
  CHECK(h.promote_every == 128);
  CHECK(invalid_argument_of([&] {
          apply_triton_plan(s, "triton-w8a8-block-fp8", triton_plan("64,128,256,4,3", 1, 1, 1, ""));
        }).find("does not divide the 128-wide scale block") != std::string::npos);
  GemmSpec d;
  CHECK(invalid_argument_of([&] {
          apply_triton_plan(d, "triton-fp8-dot-imprecise-acc-128",
                            triton_plan("64,128,64,4,3", 1, 1, 1, "", "triton-fp8-dot"));
        }).find("promotes every 128 K elements, more than BLOCK_SIZE_K 64") != std::string::npos);
}

TEST_CASE("the default config and every recorded wgmma config of BLOCK_SIZE_K 128 are the preset",
          "[unit]") {
  // The preset was captured under the default config (tests/data/hw/kernels/
  // triton_w8a8_block_fp8): the configs that lower the same way, with the same K tile, must
  // give its bits; BLOCK_SIZE_K 64 promotes twice as often and must differ somewhere.
  std::mt19937_64 rng(test_seed() ^ 0x36);
  const int M = 5, N = 70, K = 1000;
  std::vector<std::uint8_t> A(M * K), B(N * K);
  for (auto* v : {&A, &B})
    for (auto& c : *v) do
        c = std::uint8_t(rng());
      while ((c & 0x7f) == 0x7f);
  std::uniform_real_distribution<float> u(0.05f, 3.0f);
  std::vector<float> sa(M * 8), sb(1 * 8);
  for (auto& x : sa) x = u(rng);
  for (auto& x : sb) x = u(rng);
  auto run = [&](const std::string& config) {
    GemmOptions o;
    o.kernel = "triton-w8a8-block-fp8";
    o.scaling = "block";
    o.triton_config = config;
    GemmSpec s = gemm_spec(o, true, true);
    apply_triton_config(s, o, M, N, K);
    std::vector<float> D(M * N);
    gemm(s, M, N, K, A, B, {}, sa, sb, D);
    return D;
  };
  const std::vector<float> preset = run("");
  for (const char* c :
       {"64,128,128,4,2", "64,64,128,4,5", "128,64,128,4,2", "64,256,128,8,3", "256,64,128,8,5",
        "BLOCK_SIZE_M=64,BLOCK_SIZE_N=32,BLOCK_SIZE_K=128,"
        "num_warps=4,num_stages=4"})
    CHECK(run(c) == preset);
  CHECK(run("64,128,64,4,3") != preset);
}

TEST_CASE("fp8sim explain and gemm with --triton-config", "[unit]") {
  Run r = run_cli(
      "explain --kernel triton-w8a8-block-fp8 --triton-config vllm --m 1 --n 7168 --k 1024");
  REQUIRE(r.status == 0);
  CHECK(
      r.out.starts_with("triton-w8a8-block-fp8 1x7168x1024 on h100\nconfig: BLOCK_SIZE_M 16, "
                        "BLOCK_SIZE_N 64, BLOCK_SIZE_K 128, GROUP_SIZE_M 1, num_warps 4, "
                        "num_stages 3 (16,64,128,4,3)\nfrom: vLLM 0.33.0"));
  CHECK(r.out.find("\ninstruction: mma.sync.f16 (BLOCK_SIZE_M 16 is not a multiple of 64") !=
        std::string::npos);
  r = run_cli(
      "explain --kernel triton-w8a8-block-fp8 --triton-config sglang --m 2 --n 7168 --k 1024 --gpu "
      "h200");
  REQUIRE(r.status == 0);
  CHECK(r.out.find("\ninstruction: wgmma (") != std::string::npos);
  CHECK(r.out.ends_with("\nkernel: triton-w8a8-block-fp8\n"));
  for (const char* args :
       {"explain --kernel triton-w8a8-block-fp8 --triton-config 16,64 --m 1 --n 8 --k 8",
        "explain --kernel triton-w8a8-block-fp8 --triton-config vllm --m 1 --n 8 --k 8 --gpu a100",
        "explain --kernel triton-w8a8-block-fp8 --fast-accum --m 1 --n 8 --k 8",
        "explain --kernel deepgemm-sm90-1d2d --m 1 --n 8 --k 8",
        "explain --triton-config vllm --m 1 --n 8 --k 8",
        "explain --kernel triton-nope --m 1 --n 8 --k 8"}) {
    r = run_cli(args);
    INFO(args << " -> " << r.err);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err.starts_with("fp8sim: error: "));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  // gemm: a served config that lowers to wgmma runs (its plan on stderr); one that lowers to
  // mma.sync, a bad string, a config without a Triton kernel are one line and exit 2.
  const fs::path dir = fp8sim::test::workdir();
  std::mt19937_64 rng(test_seed());
  std::vector<std::uint8_t> a(2 * 256), b(8 * 256);
  for (auto& c : a) c = std::uint8_t(rng() & 0x77);
  for (auto& c : b) c = std::uint8_t(rng() & 0x77);
  std::vector<float> sa(2 * 2, 1.5f), sb(1 * 2, 0.5f);
  write_npy((dir / "TA.npy").string(), "|u1", {2, 256}, a.data(), a.size());
  write_npy((dir / "TB.npy").string(), "|u1", {8, 256}, b.data(), b.size());
  write_npy((dir / "TSA.npy").string(), "<f4", {2, 2}, sa.data(), sa.size() * 4);
  write_npy((dir / "TSB.npy").string(), "<f4", {1, 2}, sb.data(), sb.size() * 4);
  const std::string base =
      "gemm --a TA.npy --b TB.npy --a-scales TSA.npy --b-scales TSB.npy "
      "--scaling block --kernel triton-w8a8-block-fp8 --out TD.npy ";
  r = run_cli(base + "--triton-config 64,64,128,4,4");
  CHECK(r.status == 0);
  CHECK(r.err == "fp8sim: triton config 64,64,128,4,4, wgmma (given)\n");
  r = run_cli(base + "--triton-config 16,64,128,4,3");  // FP16 mma.sync: its own preset
  CHECK(r.status == 0);
  CHECK(r.err == "fp8sim: triton config 16,64,128,4,3, mma.sync.f16 (given)\n");
  for (const std::string extra :
       {"--triton-config 16,64,128",
        "--triton-config 64,64,128,4,4 --gpu h100",
        "--triton-config 64,64,128,4,4 --promote-every 64", "--triton-config vllm --gpu h300"}) {
    r = run_cli(base + extra);
    INFO(extra << " -> " << r.err);
    CHECK(r.status == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  r = run_cli("gemm --a TA.npy --b TB.npy --triton-config vllm --out TD.npy");
  CHECK(r.status == 2);
  CHECK(r.err ==
        "fp8sim: error: a Triton config goes with a Triton kernel preset (--kernel "
        "triton-w8a8-block-fp8 or triton-fp8-dot)\n");
}

// The served capture (tests/data/hw/kernels/triton_w8a8_block_fp8_served_h100: vLLM's and
// SGLang's own kernels launched with the config each server picks for DeepSeek-V3's and
// Qwen3-8B's weight shapes at M = 1..1024 on an H100) was launched with the config in each
// case's "triton_config", which replay runs (test_kernel). Here that config is the one
// fp8sim picks from the shape alone (`--triton-config vllm` / `sglang`), and Triton's
// instruction the one the lowering rule names: every output is then reproduced from shapes.
TEST_CASE("the served capture's configs are the servers' picks from the shape alone",
          "[unit][golden]") {
  const json m =
      read_json(test_data() / "hw" / "kernels" / "triton_w8a8_block_fp8_served_h100" / "manifest.json");
  int cases = 0, hmma = 0;
  for (const json& c : m["cases"]) {
    const auto shape = c["shape"].get<std::vector<int>>();
    const std::string server = c["upstream"].get<std::string>();
    const TritonPlan p = triton_plan(server, shape[0], shape[1], shape[2], "h100");
    INFO(c["name"].get<std::string>());
    CHECK(to_string(p.config) == c["triton_config"].get<std::string>());
    CHECK(p.instruction == (c["instruction"] == "mma.sync" ? "mma.sync.f16" : "wgmma"));
    CHECK(triton_kernel_for("triton-w8a8-block-fp8", p) == c["kernel_preset"].get<std::string>());
    ++cases;
    hmma += p.instruction != "wgmma";
  }
  CHECK(cases == 900);
  CHECK(hmma >= 100);
}
