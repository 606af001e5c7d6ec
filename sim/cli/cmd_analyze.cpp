// cmd_analyze: `fp8sim analyze` (FP8 error analysis of the user's A and B .npy files under a
// grid of recipes) and `fp8sim recipes` (the named-recipe table).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/analyze.hpp"
#include "cli/options.hpp"
#include "cli/sha256.hpp"
#include "commands.hpp"
#include "io/output_file.hpp"
#include "base/parallel.hpp"
#include "io/provenance.hpp"
#include "io/revision.hpp"

namespace fp8sim::cli {
namespace {

namespace fs = std::filesystem;

struct AnalyzeArgs {
  std::string a, b, dtype = "auto";
  std::vector<std::string> recipes;
  std::vector<std::string> formats, scalings, encodings, models;
  std::vector<int> promote_every;
  std::string out_type;  // the grid's output type (f32 unless given; named recipes carry their own)
  bool out_type_given = false;
  std::size_t pairs = 4096;
  std::uint64_t seed = 1;
  bool no_stages = false;
  int threads = 0;
  std::string device = "cpu";
  std::string out = "out/analyze";
  bool quiet = false;
  bool skip_invalid = false;
};

// Model names split on commas, except a custom:... model, which is one whole value (its keys
// hold commas): repeat --models for several custom models.
std::vector<std::string> model_names(const std::vector<std::string>& raw) {
  std::vector<std::string> out;
  for (const std::string& v : raw) {
    if (v.starts_with("custom:")) {
      out.push_back(v);
      continue;
    }
    std::size_t start = 0;
    while (start <= v.size()) {
      const std::size_t comma = std::min(v.find(',', start), v.size());
      if (comma == start)
        throw std::invalid_argument(fmt::format(
            "--models: empty item in '{}' (a comma at the start, the end or twice)", v));
      out.push_back(v.substr(start, comma - start));
      start = comma + 1;
    }
  }
  return out;
}

nlohmann::json recipe_json(const RecipeResult& x) {
  const Recipe& r = x.recipe;
  nlohmann::json j = {{"name", r.name},
                      {"a_format", r.a_format.name},
                      {"b_format", r.b_format.name},
                      {"scaling", r.scaling.name},
                      {"scale_encoding", encoding_name(r.scaling)},
                      {"model", {{"name", r.model.name}, {"describe", describe(r.model)},
                                 {"evidence", r.model.evidence}}},
                      {"promote_every", r.promote_every},
                      {"scale_order", to_string(r.order)},
                      {"out_type", r.out_type.name},
                      {"gemms", x.gemms},
                      {"seconds", x.seconds},
                      {"gemm_seconds", x.gemm_seconds},
                      {"kernel_seconds", x.kernel_seconds}};
  for (std::size_t i = 0; i < kAnalyzeStages.size(); ++i)
    if (!x.stages[i].unmeasured.empty()) j["unmeasured"][kAnalyzeStages[i]] = x.stages[i].unmeasured;
  for (const NamedRecipe& n : named_recipes())
    if (n.name == r.name) {
      j["description"] = n.description;
      j["evidence"] = n.evidence;
    }
  return j;
}

nlohmann::json input_json(const std::string& path, const InputMatrix& m) {
  return {{"path", path}, {"shape", {m.rows, m.cols}}, {"dtype", m.dtype},
          {"sha256", sha256_file(path)}};
}

// The command as given, for the manifest: every option that was set with its values.
std::string command_line(const CLI::App& cmd) {
  std::string c = "fp8sim " + cmd.get_name();
  for (const CLI::Option* o : cmd.get_options()) {
    if (o->count() == 0) continue;
    c += " " + o->get_name();
    if (o->get_expected_max() == 0) continue;  // a flag
    std::string values;
    for (const std::string& v : o->results()) values += (values.empty() ? "" : ",") + v;
    c += " " + values;
  }
  return c;
}

void run_analyze(const AnalyzeArgs& g, const std::string& command) {
  AnalyzeSpec s;
  s.recipes = recipe_list({g.recipes, g.formats, g.scalings, g.encodings, model_names(g.models),
                            g.promote_every,
                            g.out_type_given ? std::optional(g.out_type) : std::nullopt});
  s.skip_invalid = g.skip_invalid;
  s.stages = !g.no_stages;
  s.pairs = g.pairs;
  s.seed = g.seed;
  s.threads = g.threads;
  s.device = parse_device(g.device);
  const InputDtype dtype = parse_input_dtype(g.dtype);
  const auto [A, B] = read_input_pair(g.a, g.b, dtype);
  fs::create_directories(g.out);  // fail before the run, not after it

  const auto t0 = std::chrono::steady_clock::now();
  const AnalyzeResult r = analyze(s, A, B, [&](const std::string& line) {
    if (!g.quiet) print_stderr(fmt::format("analyze: {}\n", line));
  });
  const double runtime =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const auto path = [&](const char* name) { return (fs::path(g.out) / name).string(); };
  const std::vector<std::string> files = {path("analyze.csv"), path("analyze_rows.csv"),
                                          path("analyze_pairs.csv"), path("analyze.json")};
  nlohmann::json j;
  j["command"] = command;
  j["created_utc"] = utc_now_iso();
  j["git_revision"] = git_revision();
  const MachineInfo mi = this_machine();
  j["machine"] = {{"hostname", mi.hostname}, {"os", mi.os}, {"hardware_threads", mi.hardware_threads}};
  j["threads"] = resolve_threads(s.threads);
  j["device"] = to_string(s.device);
  j["seed"] = s.seed;
  j["pairs"] = r.pair_m.size();
  j["stages"] = s.stages;
  j["shape"] = {{"m", r.M}, {"n", r.N}, {"k", r.K}};
  j["inputs"] = {{"a", input_json(g.a, A)}, {"b", input_json(g.b, B)}};
  j["reference_seconds"] = r.reference_seconds;
  j["runtime_s"] = runtime;
  for (const RecipeResult& x : r.recipes) j["recipes"].push_back(recipe_json(x));
  j["skipped"] = r.skipped;
  j["files"] = files;
  j["definitions"] =
      "sqnr_db = 10 log10(sum R^2 / sum (D - R)^2) with R the exact product of the unquantised "
      "inputs (each output rounded once to double) and D the recipe's result; row/col: the same "
      "over one output row / column; <stage>_exact_sqnr_db: the SQNR with that stage made exact "
      "and <stage>_share = (E - E_stage) / E its share of the error energy E (sim/analysis/analyze.hpp "
      "defines each stage made exact); cosine / pearson: of row m of A and row n of B over the "
      "sampled pairs";
  // All four files are written in full first and renamed into place only when all four are
  // (output_file.hpp): a failed run leaves none of them.
  std::ostringstream text[3];
  write_analyze_csv(text[0], r);
  write_analyze_rows_csv(text[1], r);
  write_analyze_pairs_csv(text[2], r);
  write_files({{files[0], text[0].str()}, {files[1], text[1].str()}, {files[2], text[2].str()},
               {files[3], j.dump(2) + "\n"}});

  double gemm_s = 0, kernel_s = 0;
  for (const RecipeResult& x : r.recipes) gemm_s += x.gemm_seconds, kernel_s += x.kernel_seconds;
  fmt::print("A {} x {} ({}), B {} x {} ({}): {} recipes in {:.1f} s (exact reference {:.1f} s; "
             "emulated GEMMs {:.1f} s{})\n",
             r.M, r.K, A.dtype, r.N, r.K, B.dtype, r.recipes.size(), runtime, r.reference_seconds,
             gemm_s, s.device == Device::cuda ? fmt::format(", of which CUDA kernels {:.2f} s", kernel_s)
                                              : std::string());
  fmt::print("{:<34} {:>9} {:>10} {:>10}", "recipe", "SQNR dB", "row q05", "row q95");
  for (const char* st : kAnalyzeStages) fmt::print(" {:>9}", st);
  fmt::print(" {:>5}\n", "GEMMs");
  for (const RecipeResult& x : r.recipes) {
    fmt::print("{:<34} {:>9.2f} {:>10.2f} {:>10.2f}", x.recipe.name, x.sqnr_db,
               x.row_quantiles.q05, x.row_quantiles.q95);
    for (const StageResult& st : x.stages)
      fmt::print(" {:>9}", s.stages && st.unmeasured.empty() ? fmt::format("{:.1f}%", 100 * st.share)
                                                               : std::string("-"));
    fmt::print(" {:>5}\n", x.gemms);
  }
  for (const std::string& why : r.skipped) fmt::print("skipped {}\n", why);
  for (const RecipeResult& x : r.recipes)
    for (std::size_t i = 0; i < kAnalyzeStages.size(); ++i)
      if (!x.stages[i].unmeasured.empty())
        fmt::print("unmeasured {} {}: {}\n", x.recipe.name, kAnalyzeStages[i], x.stages[i].unmeasured);
  fmt::print("pairs' Pearson correlation: q05 {:.3f}, median {:.3f}, q95 {:.3f}\n", r.pearson.q05,
             r.pearson.median, r.pearson.q95);
  for (const auto& f : files) fmt::print("  wrote {}\n", f);
}

}  // namespace

void add_analyze_command(CLI::App& app) {
  auto g = std::make_shared<AnalyzeArgs>();
  auto* cmd = app.add_subcommand(
      "analyze", "FP8 error analysis of your own A (M x K) and B (N x K) under a grid of recipes");
  cmd->add_option("--a", g->a, "A.npy: float32, bfloat16 or float16, shape (M, K)")->required();
  cmd->add_option("--b", g->b, "B.npy: same dtypes, shape (N, K) (D = A B^T, cuBLASLt TN)")
      ->required();
  cmd->add_option("--dtype", g->dtype,
                  "auto|f32|bf16|f16 (auto: <f4, <f2, and <V2 as np.save writes ml_dtypes' "
                  "bfloat16; bf16 also takes <u2 bit patterns)")
      ->capture_default_str();
  add_list_option(cmd, "--recipes", g->recipes,
                  "Named recipes, comma list, or 'all' (see `fp8sim recipes`)");
  add_list_option(cmd, "--formats", g->formats, "Grid: element formats (default e4m3)");
  add_list_option(cmd, "--scalings", g->scalings,
                  "Grid: none, tensor, row, block<Nc>, mx, mx<Nc>, nvfp4 (default tensor)");
  add_list_option(cmd, "--encodings", g->encodings,
                  "Grid: scale encodings fp32, pow2, e8m0 (default fp32; mx and nvfp4 name "
                  "theirs)");
  cmd->add_option("--models", g->models,
                  "Grid: accumulator models, comma list (default hopper-wgmma); repeat the flag "
                  "for custom:... models");
  add_integer_list_option(cmd, "--promote-every", g->promote_every,
                          "Grid: promotion intervals, 0 = never (default 128)", 0,
                          limits::kMaxDim);
  cmd->add_option("--out-type", g->out_type, "Grid: output type f32|bf16|f16 (default f32)");
  add_integer_option(cmd, "--pairs", g->pairs, "Row pairs sampled for the correlation (0: none)",
                     0, limits::kMaxOutputElements);
  add_integer_option(cmd, "--seed", g->seed, "Seed of the sampled pairs", 0, ~std::uint64_t{0});
  cmd->add_flag("--no-stages", g->no_stages, "Skip the stage attribution (one GEMM per recipe)");
  add_threads_option(cmd, g->threads);
  add_device_option(cmd, g->device);
  cmd->add_option("--out", g->out, "Output folder (created)")->capture_default_str();
  cmd->add_flag("--quiet", g->quiet, "No progress lines on stderr");
  cmd->add_flag("--skip-invalid", g->skip_invalid,
                "Skip recipes the engine rejects for this shape (listed) instead of failing");
  cmd->callback([g, cmd] {
    g->out_type_given = cmd->count("--out-type") > 0;
    run_analyze(*g, command_line(*cmd));
  });

  auto* list = app.add_subcommand("recipes", "List the named recipes `fp8sim analyze` takes");
  list->callback([] {
    for (const NamedRecipe& n : named_recipes()) {
      fmt::print("{:<15} {}\n", n.name, n.description);
      fmt::print("{:<15} a={} b={} scaling={} model={} promote_every={} order={} out={}\n", "",
                 n.a_format, n.b_format, n.scaling, n.model, n.promote_every, n.order, n.out_type);
      if (!n.grad_format.empty() || n.grad_promote_every >= 0)
        fmt::print("{:<15} dgrad, wgrad: a={} promote_every={}\n", "",
                   n.grad_format.empty() ? n.a_format : n.grad_format,
                   n.grad_promote_every >= 0 ? n.grad_promote_every : n.promote_every);
      fmt::print("{:<15} evidence: {}\n", "", n.evidence);
    }
  });
}

}  // namespace fp8sim::cli
