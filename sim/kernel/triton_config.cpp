// triton_config: Triton launch configs, the servers' selection of them, and Triton's lowering.
#include "kernel/triton_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "base/limits.hpp"
#include "kernel/kernel.hpp"
#include "kernel/triton_config_files.hpp"

namespace fp8sim {

namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::string_view kBlockKernel = "triton-w8a8-block-fp8";
constexpr std::string_view kMmaF16Suffix = "-mma-f16";
constexpr int kScaleBlock = 128;  // the block kernel's scale block (block_shape [128, 128])

// The GPUs whose files are recorded: the short name and the device name the servers read
// (torch.cuda.get_device_name / NVML on that GPU). Both are sm_90.
struct Gpu {
  std::string_view name, device;
};
constexpr Gpu kGpus[] = {{"h100", "NVIDIA H100 80GB HBM3"}, {"h200", "NVIDIA H200"}};

const Gpu* gpu_by_name(std::string_view g) {
  for (const Gpu& x : kGpus)
    if (g == x.name || g == x.device) return &x;
  return nullptr;
}

// A server: how its wrapper names the tuned file, and the config it launches without one.
// vLLM 0.33.0 vllm/model_executor/layers/quantization/utils/fp8_utils.py
// get_w8a8_block_fp8_configs / w8a8_triton_block_scaled_mm; SGLang 0.5.23
// sglang/kernels/ops/gemm/fp8_kernel.py get_w8a8_block_fp8_configs /
// w8a8_block_fp8_matmul_triton (provenance.json in each data folder).
struct Server {
  std::string_view name, title, wrapper;
  TritonConfig fallback;  // the wrapper's default config (block_size [128, 128])
};
constexpr Server kServers[] = {
    {"vllm", "vLLM", "w8a8_triton_block_scaled_mm", {64, 128, 128, 32, 4, 2}},
    {"sglang", "SGLang", "w8a8_block_fp8_matmul_triton", {64, 128, 128, 32, 4, 3}},
};

// The file name the server opens. vLLM: device name with each run of whitespace or '/' as
// '_' (vllm/utils/platform_utils.py get_device_name_as_file_name), "block_shape=[128,128]";
// SGLang: each space as '_', "block_shape=[128, 128]".
std::string file_name(const Server& srv, int n, int k, std::string_view device) {
  std::string dev;
  const bool vllm = srv.name == "vllm";
  bool in_run = false;
  for (const char ch : device) {
    const bool sep = vllm ? (ch == ' ' || (ch >= '\t' && ch <= '\r') || ch == '/') : ch == ' ';
    if (sep && (!vllm || !in_run)) dev += '_';
    if (!sep) dev += ch;
    in_run = sep;
  }
  return fmt::format("N={},K={},device_name={},dtype=fp8_w8a8,block_shape=[{},{}{}].json", n, k,
                     dev, kScaleBlock, vllm ? "" : " ", kScaleBlock);
}

// The recorded file `name` of `server`, parsed with its keys in file order (the order
// Python's dict keeps, which min() walks), or null.
const ordered_json* recorded_file(std::string_view server, const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, ordered_json> cache;
  const std::lock_guard<std::mutex> lock(mu);
  const std::string key = std::string(server) + "/" + name;
  if (const auto it = cache.find(key); it != cache.end()) return &it->second;
  for (const TritonConfigFile& f : builtin_triton_config_files())
    if (f.server == server && f.name == name)
      return &cache.emplace(key, ordered_json::parse(f.text)).first->second;
  return nullptr;
}

// The package version recorded for `server` (its provenance.json), e.g. "0.33.0".
std::string recorded_version(std::string_view server) {
  const ordered_json* p = recorded_file(server, "provenance.json");
  return p && p->contains("version") ? (*p)["version"].get<std::string>() : "?";
}

bool power_of_two(int v) { return v > 0 && (v & (v - 1)) == 0; }

void check_config(const TritonConfig& c, std::string_view text) {
  auto bad = [&](const std::string& why) {
    throw std::invalid_argument(
        fmt::format("triton config '{}': {}", limits::quoted(std::string(text)), why));
  };
  const struct {
    const char* name;
    int v, lo, hi;
  } fields[] = {{"BLOCK_SIZE_M", c.block_m, 16, 256}, {"BLOCK_SIZE_N", c.block_n, 16, 256},
                {"BLOCK_SIZE_K", c.block_k, 16, 256}, {"num_warps", c.num_warps, 1, 16}};
  for (const auto& f : fields)
    if (!power_of_two(f.v) || f.v < f.lo || f.v > f.hi)
      bad(fmt::format("{} {} is not a power of two in {}..{}", f.name, f.v, f.lo, f.hi));
  if (c.num_stages < 1 || c.num_stages > 8)
    bad(fmt::format("num_stages {} is not in 1..8", c.num_stages));
  if (c.group_m < 0 || c.group_m > 1024)
    bad(fmt::format("GROUP_SIZE_M {} is not in 1..1024", c.group_m));
}

// A config entry of a server's file; keys other than the six (SGLang's SWAP_AB and
// SPLIT_K, which run its Hopper variant with split partials) are not modelled.
TritonConfig config_of_entry(const ordered_json& e, const std::string& where) {
  TritonConfig c;
  for (const auto& [key, v] : e.items()) {
    int* field = key == "BLOCK_SIZE_M"   ? &c.block_m
                 : key == "BLOCK_SIZE_N" ? &c.block_n
                 : key == "BLOCK_SIZE_K" ? &c.block_k
                 : key == "GROUP_SIZE_M" ? &c.group_m
                 : key == "num_warps"    ? &c.num_warps
                 : key == "num_stages"   ? &c.num_stages
                                         : nullptr;
    if (!field || !v.is_number_integer())
      throw std::invalid_argument(
          fmt::format("{}: key {} is not modelled (fp8sim models the six tile keys)", where, key));
    *field = v.get<int>();
  }
  return c;
}

// The server's pick for M x N x K on `gpu`, as its wrapper does it.
TritonPlan server_plan(const Server& srv, int m, int n, int k, std::string_view gpu) {
  const Gpu* g = gpu_by_name(gpu);
  if (!g) {
    throw std::invalid_argument(fmt::format(
        "gpu '{}': no recorded {} config files (recorded: h100, h200); give the config "
        "itself (--triton-config BM,BN,BK,WARPS,STAGES)",
        limits::quoted(std::string(gpu)), srv.title));
  }
  const std::string name = file_name(srv, n, k, g->device);
  const std::string version = recorded_version(srv.name);
  TritonPlan p;
  const ordered_json* file = recorded_file(srv.name, name);
  if (!file) {
    p.config = srv.fallback;
    p.config_source = fmt::format(
        "{} {} {}: no tuned file {} for this GPU, so its default config{}", srv.title, version,
        srv.wrapper, name,
        srv.name == "vllm" ? " (the one VLLM_BATCH_INVARIANT=1 always takes)" : "");
    return p;
  }
  // min(configs.keys(), key=lambda x: abs(x - M)): the first key, in file order, at the
  // least distance (every recorded file lists its keys ascending: a tie goes to the smaller).
  if (!file->is_object() || file->empty())
    throw std::invalid_argument(fmt::format("{}: no batch-size entries", name));
  std::string best_key;
  long long best_distance = -1;
  for (const auto& [key, entry] : file->items()) {
    const long long d = std::llabs(std::stoll(key) - m);
    if (best_distance < 0 || d < best_distance) best_key = key, best_distance = d;
  }
  p.config = config_of_entry((*file)[best_key], fmt::format("{} entry {}", name, best_key));
  std::string clamp;
  // SGLang raises a BLOCK_SIZE_K below block_k that does not divide it (on CUDA) to block_k.
  if (srv.name == "sglang" && p.config.block_k < kScaleBlock && kScaleBlock % p.config.block_k) {
    clamp = fmt::format(" (BLOCK_SIZE_K {} raised to {}, as SGLang does)", p.config.block_k,
                        kScaleBlock);
    p.config.block_k = kScaleBlock;
  }
  p.config_source = fmt::format("{} {} {}: file {}, entry {} (the key nearest to M = {}){}",
                                srv.title, version, srv.wrapper, name, best_key, m, clamp);
  return p;
}

}  // namespace

TritonConfig parse_triton_config(std::string_view text) {
  auto bad = [&](const std::string& why) {
    throw std::invalid_argument(fmt::format(
        "triton config '{}': {} (expected BM,BN,BK,WARPS,STAGES[,GROUP_M], or named keys "
        "BLOCK_SIZE_M=..,BLOCK_SIZE_N=..,BLOCK_SIZE_K=..,num_warps=..,num_stages=.."
        "[,GROUP_SIZE_M=..], or vllm or sglang)",
        limits::quoted(std::string(text)), why));
  };
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    parts.emplace_back(text.substr(start, comma - start));
    if (comma == text.size()) break;
    start = comma + 1;
  }
  constexpr const char* kNames[] = {"BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K",
                                    "num_warps", "num_stages", "GROUP_SIZE_M"};
  int values[6] = {0, 0, 0, 0, 0, 0};
  bool given[6] = {};
  auto number = [&](const std::string& name, const std::string& v) {
    if (v.empty() || v.size() > 4 || !std::all_of(v.begin(), v.end(), [](char ch) {
          return ch >= '0' && ch <= '9';
        }))
      bad(fmt::format("{} '{}' is not an integer", name, limits::quoted(v)));
    return std::stoi(v);
  };
  const auto named = std::count_if(parts.begin(), parts.end(), [](const std::string& p) {
    return p.find('=') != std::string::npos;
  });
  if (named > 0 && named < std::ptrdiff_t(parts.size()))
    bad("it mixes values and named keys");
  if (named > 0) {
    for (const std::string& p : parts) {
      const std::string key = p.substr(0, p.find('=')), v = p.substr(p.find('=') + 1);
      const auto it = std::find(std::begin(kNames), std::end(kNames), key);
      if (it == std::end(kNames)) bad(fmt::format("unknown key '{}'", limits::quoted(key)));
      const auto i = it - std::begin(kNames);
      if (given[i]) bad(fmt::format("{} is given twice", key));
      given[i] = true;
      values[i] = number(key, v);
    }
    for (int i = 0; i < 5; ++i)
      if (!given[i]) bad(fmt::format("{} is missing", kNames[i]));
  } else {
    if (parts.size() != 5 && parts.size() != 6)
      bad(fmt::format("{} value{} given, not 5 or 6", parts.size(), parts.size() == 1 ? "" : "s"));
    for (std::size_t i = 0; i < parts.size(); ++i) values[i] = number(kNames[i], parts[i]);
    given[5] = parts.size() == 6;
  }
  const TritonConfig c{values[0], values[1], values[2], values[5], values[3], values[4]};
  if (given[5] && c.group_m < 1) bad("GROUP_SIZE_M 0 is not in 1..1024");
  check_config(c, text);
  return c;
}

std::string to_string(const TritonConfig& c) {
  return fmt::format("{},{},{},{},{}", c.block_m, c.block_n, c.block_k, c.num_warps,
                     c.num_stages);
}

std::pair<std::string, std::string> triton_lowering(const TritonConfig& c,
                                                    int max_num_imprecise_acc) {
  // Triton 3.6 (the version torch 2.11 pins), sm_90, e4m3 x e4m3 -> fp32:
  // lib/Dialect/TritonGPU/Transforms/AccelerateMatmul.cpp getMMAVersionSafe tries MMAv3 then
  // MMAv2 on compute capability 9.x; lib/Analysis/Utility.cpp supportMMA(op, 3) accepts a
  // rank-2 dot only when K >= 256 / 8 bits (one k32 wgmma), numWarps % 4 == 0, the CTA's
  // result shape has M % 64 == 0 and N % 8 == 0 (one CTA a CGA: the config's BLOCK_SIZE_M
  // and BLOCK_SIZE_N), and, for FP8 operands with an fp32 result, max_num_imprecise_acc >= 32.
  // (Some Triton versions ask N % 16: every BLOCK_SIZE_N taken here, a power of two >= 16,
  // passes both.)
  // Otherwise MMAv2 (supportMMA(op, 2) takes FP8 "promoted to fp16"), and
  // decomposeMixedModeDotOp converts both operands to f16 (FpToFpOp) because
  // mmav2SupportsFp8Operands is true only for sm_89 and sm_12x: mma.sync.m16n8k16 f32.f16.
  std::vector<std::string> fails;
  auto fail_if = [&](bool failed, std::string why) {
    if (failed) fails.push_back(std::move(why));
  };
  fail_if(c.block_m % 64, fmt::format("BLOCK_SIZE_M {} is not a multiple of 64", c.block_m));
  fail_if(c.block_n % 8, fmt::format("BLOCK_SIZE_N {} is not a multiple of 8", c.block_n));
  fail_if(c.block_k < 32, fmt::format("BLOCK_SIZE_K {} is below 32", c.block_k));
  fail_if(c.num_warps % 4, fmt::format("num_warps {} is not a multiple of 4", c.num_warps));
  if (max_num_imprecise_acc < 32)
    fails.push_back(fmt::format("max_num_imprecise_acc {} is below 32", max_num_imprecise_acc));
  if (fails.empty())
    return {"wgmma",
            fmt::format("BLOCK_SIZE_M {} a multiple of 64, BLOCK_SIZE_N {} of 8, BLOCK_SIZE_K {} "
                        ">= 32, num_warps {} a multiple of 4: Triton 3.6 supportMMA "
                        "(lib/Analysis/Utility.cpp) takes MMAv3, wgmma k32 steps chained over "
                        "each BLOCK_SIZE_K",
                        c.block_m, c.block_n, c.block_k, c.num_warps)};
  std::string reasons;
  for (const std::string& f : fails) reasons += (reasons.empty() ? "" : ", ") + f;
  return {"mma.sync.f16",
          fmt::format("{}: Triton 3.6 supportMMA (lib/Analysis/Utility.cpp) refuses MMAv3, and "
                      "MMAv2 on sm_90 upcasts e4m3 to fp16 (AccelerateMatmul.cpp "
                      "decomposeMixedModeDotOp; mmav2SupportsFp8Operands is false for sm_90): "
                      "mma.sync m16n8k16 on FP16 operands",
                      reasons)};
}

bool is_triton_kernel(std::string_view kernel) { return kernel.starts_with("triton-"); }

TritonPlan triton_plan(std::string_view spec, int m, int n, int k, std::string_view gpu,
                       std::string_view kernel) {
  if (!is_triton_kernel(kernel))
    throw std::invalid_argument(fmt::format(
        "kernel {} is not a Triton kernel: a Triton config goes with triton-w8a8-block-fp8 or "
        "triton-fp8-dot",
        kernel));
  const bool server = spec == "vllm" || spec == "sglang";
  if (!server && !gpu.empty() && !gpu_by_name(gpu))
    throw std::invalid_argument(fmt::format(
        "gpu '{}': Triton's lowering is recorded for sm_90 only (h100, h200)",
        limits::quoted(std::string(gpu))));
  const bool block_kernel = kernel.starts_with(kBlockKernel);
  const std::string_view base =
      kernel.ends_with(kMmaF16Suffix) ? kernel.substr(0, kernel.size() - kMmaF16Suffix.size())
                                      : kernel;
  int imprecise = 1 << 30;  // tl.dot's default on sm_90 (third_party/nvidia/backend/compiler.py)
  if (const auto at = base.rfind("-imprecise-acc-"); at != std::string_view::npos)
    imprecise = std::atoi(std::string(base.substr(at + 15)).c_str());
  TritonPlan p;
  if (server) {
    if (!block_kernel)
      throw std::invalid_argument(fmt::format(
          "--triton-config {} picks the config of vLLM's and SGLang's block-FP8 kernel "
          "(triton-w8a8-block-fp8), not of {}: give the config itself",
          spec, kernel));
    if (gpu.empty())
      throw std::invalid_argument(fmt::format(
          "--triton-config {} looks the config up per GPU: give --gpu h100 or h200", spec));
    p = server_plan(spec == "vllm" ? kServers[0] : kServers[1], m, n, k, gpu);
  } else if (spec.empty()) {
    if (block_kernel) {
      p.config = kServers[0].fallback;
      p.config_source =
          "the kernel's default config (vLLM's w8a8_triton_block_scaled_mm without a tuned "
          "file; SGLang's is the same with 3 stages)";
    } else {
      p.config = {64, 128, 128, 0, 4, 3};
      p.config_source = "the kernel's default config (cuda/capture/capture_triton.py DOT_CONFIG)";
    }
  } else {
    p.config = parse_triton_config(spec);
    p.config_source = "given";
  }
  std::tie(p.instruction, p.why) = triton_lowering(p.config, imprecise);
  return p;
}

std::string triton_kernel_for(std::string_view kernel, const TritonPlan& p) {
  std::string base(kernel.ends_with(kMmaF16Suffix)
                       ? kernel.substr(0, kernel.size() - kMmaF16Suffix.size())
                       : kernel);
  if (p.instruction == "wgmma") return base;
  // mma.sync has no imprecise accumulation: every triton-fp8-dot variant is one HMMA kernel.
  if (base.starts_with("triton-fp8-dot")) base = "triton-fp8-dot";
  return base + std::string(kMmaF16Suffix);
}

void apply_triton_plan(GemmSpec& s, std::string_view kernel, const TritonPlan& p) {
  const TritonConfig& c = p.config;
  const std::string routed = triton_kernel_for(kernel, p);
  const auto& presets = kernel_presets();
  const auto it = std::find_if(presets.begin(), presets.end(),
                               [&](const KernelSpec& x) { return x.name == routed; });
  if (it == presets.end())
    throw std::invalid_argument(fmt::format(
        "config {} lowers to FP16 mma.sync on sm_90 ({}), whose numerics (kernel {}) are not "
        "yet modelled",
        to_string(c), p.why.substr(0, p.why.find(':')), routed));
  apply_kernel(s, *it);
  const int scale_block = s.scaling == Scaling::block ? s.block : kScaleBlock;
  if (routed.starts_with(kBlockKernel)) {
    // acc += tl.dot(a, b) * a_s * b_s: each BLOCK_SIZE_K tile's dot starts from zero and
    // joins the accumulator with its block's scales; the scales step every 128 / BK tiles.
    if (scale_block % c.block_k)
      throw std::invalid_argument(fmt::format(
          "config {}: BLOCK_SIZE_K {} does not divide the {}-wide scale block, which the "
          "kernel's scale stepping assumes: not modelled",
          to_string(c), c.block_k, scale_block));
    s.promote_every = c.block_k;
  } else if (it->promote_every > c.block_k) {
    throw std::invalid_argument(fmt::format(
        "config {}: kernel {} promotes every {} K elements, more than BLOCK_SIZE_K {} (one "
        "tl.dot): not measured",
        to_string(c), routed, it->promote_every, c.block_k));
  }
  s.k_tile = c.block_k;  // masked loads pad K to a multiple of BLOCK_SIZE_K
}

std::string describe(const TritonPlan& p, std::string_view kernel) {
  const TritonConfig& c = p.config;
  const std::string routed = triton_kernel_for(kernel, p);
  const auto& presets = kernel_presets();
  const bool modelled = std::any_of(presets.begin(), presets.end(),
                                    [&](const KernelSpec& x) { return x.name == routed; });
  return fmt::format(
      "config: BLOCK_SIZE_M {}, BLOCK_SIZE_N {}, BLOCK_SIZE_K {}, {}num_warps {}, num_stages "
      "{} ({})\n"
      "from: {}\n"
      "instruction: {} ({})\n"
      "kernel: {}{}",
      c.block_m, c.block_n, c.block_k,
      c.group_m > 0 ? fmt::format("GROUP_SIZE_M {}, ", c.group_m) : std::string(), c.num_warps,
      c.num_stages, to_string(c), p.config_source, p.instruction, p.why, routed,
      modelled ? "" : " (not modelled yet: fp8sim gemm refuses this config)");
}

}  // namespace fp8sim
