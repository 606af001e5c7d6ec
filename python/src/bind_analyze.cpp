// bind_analyze: analyze() (sim/analysis/analyze.hpp) on caller arrays, its three CSV tables as text.
#include <fmt/format.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "analysis/analyze.hpp"
#include "arrays.hpp"
#include "bindings.hpp"
#include "gemm/device.hpp"
#include "io/output_file.hpp"
#include "kernel/recipe.hpp"

namespace fp8sim::py {
namespace {

// A float32 2-D array (the values of `dtype`: f32, bf16 or f16) as the analysis' input.
InputMatrix input(const AnyArray& a, const char* name, const std::string& dtype) {
  const View v = view(a, name, "<f4", 2);
  InputMatrix m;
  m.rows = int(v.shape[0]);
  m.cols = int(v.shape[1]);
  m.dtype = dtype;
  const auto* p = static_cast<const float*>(v.data);
  m.values.assign(p, p + v.size());
  for (std::size_t i = 0; i < m.values.size(); ++i)
    if (!std::isfinite(m.values[i]))
      throw std::invalid_argument(fmt::format("{}: element ({}, {}) is {} (inputs must be finite)",
                                              name, i / m.cols, i % m.cols, m.values[i]));
  return m;
}

std::tuple<std::string, std::string, std::string, std::vector<std::string>> run_analyze(
    const AnyArray& a, const AnyArray& b, const std::string& a_dtype, const std::string& b_dtype,
    const RecipeRequest& q, bool stages, std::size_t pairs, std::uint64_t seed, int threads,
    const std::string& device, bool skip_invalid, const std::string& out) {
  AnalyzeSpec s;
  s.recipes = recipe_list(q);
  s.stages = stages;
  s.pairs = pairs;
  s.seed = seed;
  s.threads = threads;
  s.device = parse_device(device);
  s.skip_invalid = skip_invalid;
  const InputMatrix A = input(a, "a", a_dtype), B = input(b, "b", b_dtype);
  if (A.cols != B.cols)
    throw std::invalid_argument(fmt::format("b is {} x {} but a is {} x {}: K differs (b is N x K)",
                                            B.rows, B.cols, A.rows, A.cols));
  AnalyzeResult r;
  {
    nb::gil_scoped_release release;
    r = analyze(s, A, B);
  }
  std::ostringstream main, rows, pair;
  write_analyze_csv(main, r);
  write_analyze_rows_csv(rows, r);
  write_analyze_pairs_csv(pair, r);
  if (!out.empty()) {  // as the CLI writes them: all three or none (output_file.hpp)
    std::filesystem::create_directories(out);
    const auto path = [&](const char* name) {
      return (std::filesystem::path(out) / name).string();
    };
    write_files({{path("analyze.csv"), main.str()}, {path("analyze_rows.csv"), rows.str()},
                 {path("analyze_pairs.csv"), pair.str()}});
  }
  return {main.str(), rows.str(), pair.str(), r.skipped};
}

}  // namespace

void bind_analyze(nb::module_& m) {
  m.def(
      "analyze_csv",
      [](const AnyArray& a, const AnyArray& b, const std::string& a_dtype,
         const std::string& b_dtype, const std::vector<std::string>& recipes,
         const std::vector<std::string>& formats, const std::vector<std::string>& scalings,
         const std::vector<std::string>& encodings, const std::vector<std::string>& models,
         const std::vector<int>& promote_every, const std::optional<std::string>& out_type,
         bool stages,
         std::int64_t pairs, std::uint64_t seed, int threads, const std::string& device,
         bool skip_invalid, const std::string& out) {
        if (pairs < 0) throw std::invalid_argument(fmt::format("pairs = {} is negative", pairs));
        return run_analyze(a, b, a_dtype, b_dtype,
                           {recipes, formats, scalings, encodings, models, promote_every, out_type},
                           stages, std::size_t(pairs), seed, threads, device, skip_invalid, out);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("a_dtype"), nb::arg("b_dtype"), nb::arg("recipes"),
      nb::arg("formats"), nb::arg("scalings"), nb::arg("encodings"), nb::arg("models"),
      nb::arg("promote_every"), nb::arg("out_type").none(), nb::arg("stages"), nb::arg("pairs"),
      nb::arg("seed"), nb::arg("threads"), nb::arg("device"), nb::arg("skip_invalid"),
      nb::arg("out") = "",
      "analyze(): (recipes CSV, rows CSV, pairs CSV, skipped) as `fp8sim analyze` writes them.");
  m.def("recipe_names", [] {
    std::vector<std::string> names;
    for (const NamedRecipe& n : named_recipes()) names.push_back(n.name);
    return names;
  }, "The named recipes (sim/kernel/recipe.cpp's table), in its order.");
  m.def(
      "recipe_gemm",
      [](const std::string& name, const std::string& gemm) {
        const GemmRole role = gemm == "fprop" ? GemmRole::fprop
                              : gemm == "dgrad" ? GemmRole::dgrad
                              : gemm == "wgrad" ? GemmRole::wgrad
                              : throw std::invalid_argument(fmt::format(
                                    "gemm '{}': expected fprop, dgrad or wgrad", gemm));
        const Recipe r = recipe_by_name(name, role);
        nb::dict d;
        d["a_format"] = r.a_format.name;
        d["b_format"] = r.b_format.name;
        d["scaling"] = r.scaling.name;
        d["model"] = r.model.name;
        d["promote_every"] = r.promote_every;
        d["scale_order"] = std::string(to_string(r.order));
        d["out_type"] = r.out_type.name;
        d["kernel"] = r.kernel;
        return d;
      },
      nb::arg("name"), nb::arg("gemm"),
      "One GEMM (fprop, dgrad, wgrad) of a named recipe as a dict of fp8sim.gemm's settings.");
}

}  // namespace fp8sim::py
