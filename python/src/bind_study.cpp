// bind_study: the sweep engine (CSV text with the experiments' columns), replay and probe.
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <sstream>
#include <stdexcept>

#include "arrays.hpp"
#include "bindings.hpp"
#include "analysis/probe.hpp"
#include "io/replay.hpp"
#include "analysis/sweep.hpp"

namespace fp8sim::py {
namespace {

template <class T, class F>
std::vector<T> by_name(const std::vector<std::string>& names, F f) {
  std::vector<T> out;
  for (const auto& n : names) out.push_back(f(n));
  return out;
}

nb::tuple sweep_csv(const std::vector<std::string>& distributions, const std::vector<int>& k,
                    const std::vector<double>& rho, const std::vector<std::string>& formats,
                    const std::vector<std::string>& scalings,
                    const std::vector<int>& promote_every,
                    const std::vector<std::string>& models, int trials, int tensor_rows,
                    std::uint64_t seed, int threads, bool skip_invalid) {
  SweepSpec s;
  s.distributions = by_name<DistributionSpec>(distributions, distribution_by_name);
  s.k = k;
  s.rho = rho;
  s.formats = by_name<FormatSpec>(formats, format_by_name);
  s.scalings = by_name<ScalingSpec>(scalings, scaling_by_name);
  s.promote_every = promote_every;
  s.models = by_name<AccumulatorSpec>(models, accumulator_by_name);
  s.trials = trials;
  s.tensor_rows = tensor_rows;
  s.seed = seed;
  s.threads = threads;
  s.skip_invalid = skip_invalid;
  validate(s);
  std::ostringstream csv;
  SweepResult r;
  {
    nb::gil_scoped_release release;
    r = run_sweep(s);
    write_trials_csv(csv, r);
  }
  return nb::make_tuple(csv.str(), r.skipped);
}

// The report as replay_json() writes it (parsed in Python) and format_case()'s line per case.
nb::tuple replay_report(const std::string& dir, const std::string& model, int promote_every,
                        const std::string& case_name, int threads, const std::string& kernel) {
  ReplayReport r;
  {
    nb::gil_scoped_release release;
    ReplayOptions o;
    o.kernel = kernel;
    o.model = model;
    o.promote_every = promote_every;
    o.case_name = case_name;
    o.threads = threads;
    r = replay(dir, o);
  }
  std::vector<std::string> lines;
  for (const ReplayCase& c : r.cases) lines.push_back(format_case(c));
  return nb::make_tuple(replay_json(r), lines);
}

nb::dict report_dict(const ProbeReport& r) {
  nb::dict d;
  d["group"] = r.group;
  d["block"] = r.block;
  d["interleave"] = r.interleave;
  d["unpack"] = r.unpack;
  d["frac_bits"] = r.frac_bits;
  d["term_cut"] = std::string(to_string(r.term_cut));
  d["out_bits"] = r.out_bits;
  d["output_rounding"] = std::string(to_string(r.output_rounding));
  d["c_joins"] = r.c_joins;
  d["renormalise"] = r.renormalise;
  d["promote_every"] = r.promote_every;
  d["c_adder_bits"] = r.c_adder_bits;
  d["model"] = r.describe();
  d["evidence"] = r.evidence;
  return d;
}

// A Python kernel(a, b, c) -> T results, as a DotKernel (called with the GIL held).
DotKernel python_kernel(nb::callable f) {
  return [f](const DotBatch& batch) {
    nb::gil_scoped_acquire gil;
    const std::size_t T = batch.T, K = batch.K;
    std::vector<float> c = batch.c.empty() ? std::vector<float>(T, 0.0f) : batch.c;
    nb::object got = f(to_numpy(std::vector<std::uint8_t>(batch.a), {T, K}),
                       to_numpy(std::vector<std::uint8_t>(batch.b), {T, K}),
                       to_numpy(std::move(c), {T}));
    const auto arr = nb::cast<nb::ndarray<const float, nb::c_contig, nb::device::cpu>>(got);
    if (arr.size() != T)
      throw std::runtime_error("probe: the kernel returned " + std::to_string(arr.size()) +
                               " results for " + std::to_string(T) + " dot products");
    return std::vector<float>(arr.data(), arr.data() + T);
  };
}

nb::dict run_probe(const std::optional<nb::callable>& kernel, const std::string& model,
                   int promote_every, const std::string& format,
                   const std::optional<std::string>& b_format, int max_k, int max_group,
                   int k_multiple) {
  ProbeOptions o;
  o.format = format_by_name(format);
  if (b_format) o.b_format = format_by_name(*b_format);
  o.max_k = max_k;
  o.max_group = max_group;
  o.k_multiple = k_multiple;
  if (kernel) return report_dict(probe(python_kernel(*kernel), o));
  ProbeReport r;
  {
    nb::gil_scoped_release release;
    r = probe(model_kernel(accumulator_by_name(model), promote_every), o);
  }
  return report_dict(r);
}

}  // namespace

void bind_study(nb::module_& m) {
  m.def("sweep_csv", &sweep_csv, nb::arg("distributions"), nb::arg("k"), nb::arg("rho"),
        nb::arg("formats"), nb::arg("scalings"), nb::arg("promote_every"), nb::arg("models"),
        nb::arg("trials"), nb::arg("tensor_rows"), nb::arg("seed"), nb::arg("threads"),
        nb::arg("skip_invalid"), "run_sweep, as the experiments' tidy CSV text, and the skipped list.");
  m.def("replay", &replay_report, nb::arg("dir"), nb::arg("model") = "",
        nb::arg("promote_every") = -1, nb::arg("case") = "", nb::arg("threads") = 0,
        nb::arg("kernel") = "", "Replays a capture folder bit for bit: (JSON report, one line per case).");
  m.def("probe", &run_probe, nb::arg("kernel").none(), nb::arg("model") = "hopper-wgmma",
        nb::arg("promote_every") = 0, nb::arg("format") = "e4m3",
        nb::arg("b_format").none() = nb::none(), nb::arg("max_k") = 4096,
        nb::arg("max_group") = 256, nb::arg("k_multiple") = 1,
        "Infers a dot-product kernel's accumulator parameters (kernel None: the model's own).");
}

}  // namespace fp8sim::py
