// cmd_invariance: `fp8sim invariance` (which batch sizes change one row's bits under a kernel;
// sim/analysis/invariance.hpp), for one N x K or every layer of a model.
#include <fmt/format.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "analysis/analyze.hpp"
#include "analysis/invariance.hpp"
#include "cli/options.hpp"
#include "commands.hpp"
#include "io/output_file.hpp"

namespace fp8sim::cli {
namespace {

struct InvarianceArgs {
  InvarianceSpec spec;
  std::string m, model, a_row, b, csv, points_csv, json;
  int row = 0;
  bool fast_accum = false, no_rows = false, n_given = false, k_given = false;
};

// Row `row` of a 2-D float .npy (f32, bf16 or f16 values) as K doubles.
std::vector<double> read_row(const std::string& path, int row, int k) {
  const InputMatrix a = read_input_npy(path, InputDtype::automatic);
  if (row >= a.rows)
    throw std::invalid_argument(
        fmt::format("{}: row {} asked, the file has {} rows", path, row, a.rows));
  if (a.cols != k)
    throw std::invalid_argument(fmt::format("{}: {} columns, but K = {}", path, a.cols, k));
  return {a.values.begin() + std::size_t(row) * a.cols,
          a.values.begin() + std::size_t(row + 1) * a.cols};
}

void run_invariance(InvarianceArgs& g) {
  InvarianceSpec& s = g.spec;
  if (s.kernel == "none") s.kernel.clear();
  if (g.fast_accum) {
    if (s.kernel != "cublaslt")
      throw std::invalid_argument(
          "--fast-accum is cuBLASLt's: give --kernel cublaslt (or --kernel cublaslt-fast-accum)");
    s.kernel = "cublaslt-fast-accum";
  }
  if (s.out_type == "fp32") s.out_type = "f32";
  if (s.out_type == "fp16") s.out_type = "f16";
  if (s.gpu == "cuda" || s.gpu.rfind("cuda:", 0) == 0)
    throw std::invalid_argument(
        "--gpu " + s.gpu + ": the CLI reads recorded plans only; to ask cuBLASLt on this "
        "machine's GPU use fp8sim.invariance(..., gpu='cuda') from Python (docs/invariance.md)");
  s.m = parse_m_list(g.m);
  s.rows = !g.no_rows;
  if (!g.model.empty()) {
    if (g.n_given || g.k_given)
      throw std::invalid_argument("--model gives each layer's N and K: drop --n and --k");
    if (!g.b.empty())
      throw std::invalid_argument("--b: the model view draws each layer's weights (drop --b)");
    const ModelLayers m = model_layers(g.model);
    if (!g.a_row.empty()) {
      for (const ModelLayer& l : m.layers)
        if (l.k != m.layers.front().k)
          throw std::invalid_argument(
              "--a-row: the model's layers have different K (drop --a-row)");
      s.a_row = read_row(g.a_row, g.row, m.layers.front().k);
    }
    const std::vector<LayerInvariance> v = model_invariance(s, m);
    std::vector<std::pair<std::string, std::string>> files;
    if (!g.csv.empty()) {
      std::string text;
      for (std::size_t i = 0; i < v.size(); ++i)
        text += regions_csv(v[i].report, v[i].layer.name, i == 0);
      files.emplace_back(g.csv, text);
    }
    if (!g.points_csv.empty()) {
      std::string text;
      for (std::size_t i = 0; i < v.size(); ++i)
        text += points_csv(v[i].report, v[i].layer.name, i == 0);
      files.emplace_back(g.points_csv, text);
    }
    if (!g.json.empty()) {
      std::string text = "[\n";
      for (std::size_t i = 0; i < v.size(); ++i)
        text += fmt::format("{{\"layer\": \"{}\", \"report\": {}}}{}", v[i].layer.name,
                            report_json(v[i].report), i + 1 < v.size() ? ",\n" : "\n");
      files.emplace_back(g.json, text + "]\n");
    }
    if (!files.empty()) write_files(files);
    fmt::print("{}", format_model_table(m, v));
    return;
  }
  if (!g.n_given || !g.k_given) throw std::invalid_argument("give --n and --k (or --model)");
  if (!g.a_row.empty()) s.a_row = read_row(g.a_row, g.row, s.k);
  if (!g.b.empty()) {
    const InputMatrix b = read_input_npy(g.b, InputDtype::automatic);
    if (b.rows != s.n || b.cols != s.k)
      throw std::invalid_argument(
          fmt::format("{}: {} x {}, but N x K = {} x {}", g.b, b.rows, b.cols, s.n, s.k));
    s.b = b.values;
  }
  const InvarianceReport r = invariance_report(s);
  std::vector<std::pair<std::string, std::string>> files;
  if (!g.csv.empty()) files.emplace_back(g.csv, regions_csv(r));
  if (!g.points_csv.empty()) files.emplace_back(g.points_csv, points_csv(r));
  if (!g.json.empty()) files.emplace_back(g.json, report_json(r));
  if (!files.empty()) write_files(files);
  fmt::print("{}", format_report(r));
}

}  // namespace

void add_invariance_command(CLI::App& app) {
  auto g = std::make_shared<InvarianceArgs>();
  auto* cmd = app.add_subcommand(
      "invariance",
      "Which batch sizes change one row's bits: the plan a kernel runs at each M, its ranges, "
      "how far one fixed row's output moves at each change, and the setting that removes it");
  cmd->add_option("--kernel", g->spec.kernel,
                  "A kernel preset (cublaslt, cublaslt-fast-accum, deepgemm-sm90-1d2d, "
                  "cutlass-sm90-blockwise, triton-w8a8-block-fp8, ...; `fp8sim kernels`), or "
                  "none: a loose recipe (--mma-model, --promote-every, --scale-order, --split-k)")
      ->capture_default_str();
  cmd->add_option("--gpu", g->spec.gpu, "cuBLASLt: a recorded GPU (h100, h200) or a table's .json")
      ->capture_default_str();
  cmd->add_option("--out-type", g->spec.out_type, "f32|bf16|f16")->capture_default_str();
  cmd->add_option("--scaling", g->spec.scaling,
                  "none|tensor|row|block (default: the kernel's first: cuBLASLt tensor, the "
                  "block-FP8 kernels block)");
  cmd->add_flag("--fast-accum", g->fast_accum, "cuBLASLt: use_fast_accum=True");
  cmd->add_flag("--bias", g->spec.bias, "A bias in the call (bf16 / f16 outputs)");
  cmd->add_option("--triton-config", g->spec.triton_config,
                  "triton-w8a8-block-fp8: the launch config (a server's name or a config JSON)");
  add_integer_option(cmd, "--n", g->spec.n, "Output columns (the weight's rows)", 1,
                     limits::kMaxDim)
      ->each([g](const std::string&) { g->n_given = true; });
  add_integer_option(cmd, "--k", g->spec.k, "The reduction length", 1, limits::kMaxDim)
      ->each([g](const std::string&) { g->k_given = true; });
  cmd->add_option("--m", g->m, "Batch sizes: a range 1-4096, a list 1,2,4,8, or both (1-8,16)")
      ->required();
  cmd->add_option("--model", g->model,
                  "Every layer of a model: deepseek-v3, llama-3-8b, or a layer list .json "
                  "(sim/data/models/*.json shows the form)");
  cmd->add_option("--a-row", g->a_row,
                  "The activation row: a 2-D float .npy (f32/bf16/f16), row --row");
  add_integer_option(cmd, "--row", g->row, "Which row of --a-row", 0, limits::kMaxDim);
  cmd->add_option("--b", g->b, "The weights: a float .npy (N, K) (default: seeded N(0, 1))");
  add_integer_option(cmd, "--seed", g->spec.seed, "Seed of the Gaussian row and weights", 0,
                     ~std::uint64_t(0));
  cmd->add_flag("--no-rows", g->no_rows, "Plans only: no row computed (the model view is fast)");
  cmd->add_option("--mma-model", g->spec.model, "--kernel none: the accumulator model")
      ->capture_default_str();
  add_integer_option(cmd, "--promote-every", g->spec.promote_every,
                     "--kernel none: K elements per promoted chunk (0 = never)", 0,
                     limits::kMaxDim);
  cmd->add_option("--scale-order", g->spec.scale_order, "--kernel none: deepgemm|cublaslt|triton")
      ->capture_default_str();
  add_integer_option(cmd, "--split-k", g->spec.split_k,
                     "--kernel none: K slices (fixed at every M)", 1, limits::kMaxDim);
  cmd->add_option("--csv", g->csv, "Write the plan regions as CSV (a layer column for --model)");
  cmd->add_option("--points-csv", g->points_csv, "Write the plan at every M as CSV");
  cmd->add_option("--json", g->json, "Write the whole report as JSON");
  add_threads_option(cmd, g->spec.threads);
  cmd->callback([g] {
    InvarianceArgs a = *g;
    const InvarianceSpec d;
    if (!a.spec.kernel.empty() && a.spec.kernel != "none" &&
        (a.spec.model != d.model || a.spec.promote_every != d.promote_every ||
         a.spec.scale_order != d.scale_order || a.spec.split_k != d.split_k))
      throw std::invalid_argument(
          fmt::format("kernel {} sets the model, promotion, scale order and split: --mma-model, "
                      "--promote-every, --scale-order and --split-k go with --kernel none",
                      a.spec.kernel));
    run_invariance(a);
  });
}

}  // namespace fp8sim::cli
