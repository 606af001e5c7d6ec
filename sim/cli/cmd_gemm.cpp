// cmd_gemm: `fp8sim gemm` (the GEMM engine on .npy files) and `fp8sim models`.
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "accumulator.hpp"
#include "commands.hpp"
#include "cli/options.hpp"
#include "gemm.hpp"
#include "npy.hpp"

namespace fp8sim::cli {
namespace {

struct GemmArgs {
  std::string a, b, c, a_scales, b_scales;
  std::string a_format = "e4m3", b_format = "e4m3";
  std::string model = "hopper-wgmma";
  int promote_every = 0;
  std::string scaling;  // empty: none, or tensor when scale files are given without it
  int block = 128;
  std::string scale_order = "deepgemm";
  std::string out_type = "f32";
  std::string out = "D.npy";
  int threads = 0;
  std::string device = "cpu";
};

FormatSpec output_type(const std::string& name) {
  if (name == "f32" || name == "fp32") return format_by_name("fp32");
  if (name == "bf16") return format_by_name("bf16");
  if (name == "f16" || name == "fp16") return format_by_name("fp16");
  throw std::invalid_argument(fmt::format("unknown --out-type '{}' (f32, bf16, f16)", name));
}

// Scale values from a .npy: float32 values, or for MX uint8 E8M0 codes (decoded here).
// Shape (rows, cols); also (rows,) when cols is 1 and () when there is one scale.
std::vector<float> read_scales(const std::string& path, Scaling scaling, std::size_t rows,
                               std::size_t cols) {
  const NpyArray a = read_npy(path);
  const bool codes = scaling == Scaling::mx && (a.descr == "|u1" || a.descr == "<u1");
  if (!codes && a.descr != "<f4")
    throw std::runtime_error(fmt::format("{}: expected dtype <f4{}, got {}", path,
                                         scaling == Scaling::mx ? " or |u1" : "", a.descr));
  const bool shape_ok = (a.shape == std::vector<std::size_t>{rows, cols}) ||
                        (cols == 1 && a.shape == std::vector<std::size_t>{rows}) ||
                        (rows * cols == 1 && a.shape.empty());
  if (!shape_ok)
    throw std::runtime_error(fmt::format("{}: expected {} x {} scales for {} scaling, got {} values",
                                         path, rows, cols, to_string(scaling), a.size()));
  std::vector<float> v;
  if (codes) {
    const FormatSpec e8m0 = format_by_name("ue8m0");
    for (std::uint8_t code : a.as<std::uint8_t>()) v.push_back(float(decode(e8m0, code)));
  } else {
    v = a.as<float>();
  }
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      throw std::runtime_error(fmt::format("{}: scale at index {} is {}", path, i, v[i]));
  return v;
}

void run_gemm(const GemmArgs& g) {
  GemmSpec s;
  s.a_format = format_by_name(g.a_format);
  s.b_format = format_by_name(g.b_format);
  s.model = accumulator_by_name(g.model);
  s.promote_every = g.promote_every;
  s.block = g.block;
  s.order = parse_scale_order(g.scale_order);
  s.out_type = output_type(g.out_type);
  s.threads = g.threads;
  s.device = parse_device(g.device);
  const bool have_scales = !g.a_scales.empty() || !g.b_scales.empty();
  if (have_scales && (g.a_scales.empty() || g.b_scales.empty()))
    throw std::invalid_argument("--a-scales and --b-scales go together");
  s.scaling = g.scaling.empty() ? (have_scales ? Scaling::tensor : Scaling::none)
                                : parse_scaling(g.scaling);
  if (s.scaling != Scaling::none && !have_scales)
    throw std::invalid_argument(fmt::format("--scaling {} needs --a-scales and --b-scales",
                                            to_string(s.scaling)));
  if (s.scaling == Scaling::none && have_scales)
    throw std::invalid_argument("scale files given with --scaling none");

  const NpyArray a = read_npy_checked(g.a, "|u1", {0, 0});
  const NpyArray b = read_npy_checked(g.b, "|u1", {0, 0});
  const std::size_t M = a.shape[0], K = a.shape[1], N = b.shape[0];
  if (b.shape[1] != K)
    throw std::runtime_error(fmt::format("{}: B is {} x {} but A is {} x {}: K differs", g.b,
                                         N, b.shape[1], M, K));
  if (M == 0 || N == 0 || K == 0)
    throw std::runtime_error(fmt::format("{}: empty operand ({} x {} times {} x {})", g.a, M, K,
                                         N, K));
  if (M > std::size_t(limits::kMaxDim) || N > std::size_t(limits::kMaxDim) ||
      K > std::size_t(limits::kMaxDim))
    throw std::runtime_error(fmt::format("{}: problem {} x {} x {} is too large {}", g.a, M, N, K,
                                         limits::named("kMaxDim", limits::kMaxDim)));
  if (M * N > std::size_t(limits::kMaxOutputElements))
    throw std::runtime_error(fmt::format("{}: D of {} x {} is too large {}", g.a, M, N,
                                         limits::named("kMaxOutputElements", limits::kMaxOutputElements)));
  validate(s, int(M), int(N), int(K));

  std::vector<float> C;
  if (!g.c.empty()) {
    C = read_npy_checked(g.c, "<f4", {M, N}).as<float>();
  }
  std::vector<float> sa, sb;
  if (s.scaling != Scaling::none) {
    const ScaleShapes sh = scale_shapes(s, int(M), int(N), int(K));
    sa = read_scales(g.a_scales, s.scaling, sh.a_rows, sh.a_cols);
    sb = read_scales(g.b_scales, s.scaling, sh.b_rows, sh.b_cols);
  }
  std::vector<float> D(M * N);
  gemm(s, int(M), int(N), int(K), a.as<std::uint8_t>(), b.as<std::uint8_t>(), C, sa, sb, D);
  write_npy(g.out, "<f4", {M, N}, D.data(), D.size() * sizeof(float));
}

}  // namespace

void add_gemm_commands(CLI::App& app) {
  auto g = std::make_shared<GemmArgs>();
  auto* cmd = app.add_subcommand(
      "gemm", "D = A * B^T through a tensor-core accumulator model (A: M x K, B: N x K codes)");
  cmd->add_option("--a", g->a, "A.npy: uint8 codes, shape (M, K), C order")->required();
  cmd->add_option("--b", g->b, "B.npy: uint8 codes, shape (N, K) (cuBLASLt TN)")->required();
  cmd->add_option("--c", g->c, "C.npy: float32 (M, N), enters the first K chunk");
  cmd->add_option("--a-format", g->a_format, "Format of A's codes")->capture_default_str();
  cmd->add_option("--b-format", g->b_format, "Format of B's codes")->capture_default_str();
  cmd->add_option("--model", g->model, "Accumulator model (see `fp8sim models`)")
      ->capture_default_str();
  add_integer_option(cmd, "--promote-every", g->promote_every,
                     "K elements per chunk promoted to FP32 (0 = never)", 0, limits::kMaxDim);
  cmd->add_option("--a-scales", g->a_scales, "SA.npy: float32 scales (MX: uint8 E8M0 codes)");
  cmd->add_option("--b-scales", g->b_scales, "SB.npy: float32 scales (MX: uint8 E8M0 codes)");
  cmd->add_option("--scaling", g->scaling, "none|tensor|row|block|mx (default: tensor when "
                                           "scales are given, else none)");
  add_integer_option(cmd, "--block", g->block,
                     "Block size g for --scaling block (A 1 x g, B g x g)", 1, limits::kMaxDim);
  cmd->add_option("--scale-order", g->scale_order, "deepgemm|cublaslt")->capture_default_str();
  cmd->add_option("--out-type", g->out_type, "f32|bf16|f16")->capture_default_str();
  cmd->add_option("--out", g->out, "Output D.npy (float32 (M, N))")->capture_default_str();
  add_threads_option(cmd, g->threads);
  cmd->add_option("--device", g->device, "cpu|cuda: where the engine runs (same bits)")
      ->capture_default_str();
  cmd->callback([g] { run_gemm(*g); });

  auto* models = app.add_subcommand("models", "List the accumulator model presets");
  models->callback([] {
    for (const auto& m : accumulator_presets())
      fmt::print("{:<20} {}\n{:<20} evidence: {}\n", m.name, describe(m), "", m.evidence);
  });
}

}  // namespace fp8sim::cli
