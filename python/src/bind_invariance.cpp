// bind_invariance: the batch-invariance report (sim/analysis/invariance.hpp) as JSON text,
// its printed table and the row under each distinct arithmetic; the model view likewise.
#include <fmt/format.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>

#include "analysis/invariance.hpp"
#include "arrays.hpp"
#include "bindings.hpp"

namespace fp8sim::py {
namespace {

// A float32 / float64 array of `count` values as doubles (the user's row or weights).
std::vector<double> values(const std::optional<AnyArray>& a, const char* name) {
  if (!a) return {};
  const View v = view(*a, name);
  std::vector<double> out(v.size());
  if (v.descr == "<f4") {
    const auto* p = static_cast<const float*>(v.data);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = p[i];
  } else if (v.descr == "<f8") {
    const auto* p = static_cast<const double*>(v.data);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = p[i];
  } else {
    throw std::invalid_argument(
        fmt::format("{}: dtype {}: expected float32 or float64 values", name, v.descr));
  }
  return out;
}

// A Python function as InvarianceSpec::ask_cublaslt: called with (m, n, k, out, fast, scale,
// bias), it returns the plan as a dict (split_k, reduction, tile, stages, cluster, algo_id,
// source, gpu, versions, why) or a str, the one line of a refusal. The function is held by a
// shared pointer whose deleter takes the GIL, so that the spec may be copied and destroyed
// while the GIL is released.
std::function<CublasltPlan(const ScaledMmCall&)> python_plan_query(nb::callable f) {
  std::shared_ptr<nb::callable> held(new nb::callable(std::move(f)), [](nb::callable* p) {
    nb::gil_scoped_acquire gil;
    delete p;
  });
  return [held](const ScaledMmCall& c) {
    nb::gil_scoped_acquire gil;
    nb::object r;
    try {
      r = (*held)(c.m, c.n, c.k, c.out, c.fast, c.scale, c.bias);
    } catch (nb::python_error& e) {  // its message, as a refusal (the GIL is held here)
      throw std::invalid_argument(nb::cast<std::string>(nb::str(e.value())));
    }
    if (nb::isinstance<nb::str>(r)) throw std::invalid_argument(nb::cast<std::string>(r));
    const nb::dict d = nb::cast<nb::dict>(r);
    const auto text = [&](const char* key) {
      return d.contains(key) ? nb::cast<std::string>(nb::str(d[key])) : std::string();
    };
    CublasltPlan p;
    p.split_k = nb::cast<int>(d["split_k"]);
    if (p.split_k < 1)
      throw std::invalid_argument(fmt::format("cuBLASLt's plan at {}x{}x{}: split_k {} (< 1)",
                                              c.m, c.n, c.k, p.split_k));
    // Without "reduction": COMPUTE_TYPE for a split, the scheme of every split recorded.
    p.reduction = d.contains("reduction") ? text("reduction")
                  : p.split_k > 1        ? std::string("COMPUTE_TYPE")
                                         : std::string("NONE");
    p.tile = text("tile");
    p.stages = text("stages");
    p.cluster = text("cluster");
    p.algo_id = d.contains("algo_id") ? nb::cast<int>(d["algo_id"]) : -1;
    p.source = text("source");
    p.gpu = text("gpu");
    p.versions = text("versions");
    p.why = text("why");
    return p;
  };
}

}  // namespace

void bind_invariance(nb::module_& m) {
  nb::class_<InvarianceSpec>(m, "InvarianceSpec", "sim/analysis/invariance.hpp's InvarianceSpec")
      .def(nb::init<>())
      .def_rw("kernel", &InvarianceSpec::kernel)
      .def_rw("gpu", &InvarianceSpec::gpu)
      .def_rw("out_type", &InvarianceSpec::out_type)
      .def_rw("scaling", &InvarianceSpec::scaling)
      .def_rw("bias", &InvarianceSpec::bias)
      .def_rw("triton_config", &InvarianceSpec::triton_config)
      .def_rw("model", &InvarianceSpec::model)
      .def_rw("promote_every", &InvarianceSpec::promote_every)
      .def_rw("scale_order", &InvarianceSpec::scale_order)
      .def_rw("split_k", &InvarianceSpec::split_k)
      .def_rw("n", &InvarianceSpec::n)
      .def_rw("k", &InvarianceSpec::k)
      .def_rw("m", &InvarianceSpec::m)
      .def_rw("seed", &InvarianceSpec::seed)
      .def_rw("rows", &InvarianceSpec::rows)
      .def_rw("threads", &InvarianceSpec::threads)
      .def(
          "ask_cublaslt",
          [](InvarianceSpec& s, nb::callable f) { s.ask_cublaslt = python_plan_query(std::move(f)); },
          nb::arg("query"),
          "cuBLASLt's plan asked of query(m, n, k, out, fast, scale, bias) -> dict or str "
          "(a refusal) instead of the recorded tables.");
  m.def("parse_m_list", &parse_m_list, nb::arg("text"), "\"1-4096\", \"1,2,4\": the M values.");
  m.def(
      "invariance",
      [](InvarianceSpec s, const std::optional<AnyArray>& a_row, const std::optional<AnyArray>& b) {
        s.a_row = values(a_row, "a_row");
        s.b = values(b, "b");
        InvarianceReport r;
        {
          nb::gil_scoped_release release;
          r = invariance_report(s);
        }
        const std::size_t n = std::size_t(s.n), count = r.rows.size();
        std::vector<float> rows;
        for (const auto& row : r.rows) rows.insert(rows.end(), row.begin(), row.end());
        return std::make_tuple(report_json(r), format_report(r),
                               to_numpy(std::move(rows), {count, n}));
      },
      nb::arg("spec"), nb::arg("a_row").none(), nb::arg("b").none(),
      "invariance_report(): (JSON text, the CLI's table, the row under each distinct arithmetic).");
  m.def(
      "model_invariance",
      [](const std::string& model, InvarianceSpec s, const std::optional<AnyArray>& a_row) {
        s.a_row = values(a_row, "a_row");
        const ModelLayers ml = model_layers(model);
        std::vector<LayerInvariance> v;
        {
          nb::gil_scoped_release release;
          v = model_invariance(s, ml);
        }
        std::vector<std::tuple<std::string, int, int, std::string, std::string>> layers;
        for (const LayerInvariance& l : v)
          layers.emplace_back(l.layer.name, l.layer.n, l.layer.k, l.layer.from,
                              report_json(l.report));
        return std::make_tuple(layers, format_model_table(ml, v), ml.source);
      },
      nb::arg("model"), nb::arg("spec"), nb::arg("a_row").none(),
      "model_invariance(): per layer (name, N, K, from, JSON text), the CLI's table, the source.");
  m.def("model_names", &model_names, "The built-in layer lists (sim/data/models).");
}

}  // namespace fp8sim::py
