// bindings: the parts of the fp8sim._core module, each defined in its own file.
#pragma once

#include <nanobind/nanobind.h>

namespace fp8sim::py {
void bind_format(nanobind::module_& m);  // bind_format.cpp: formats, conversions, quantize
void bind_gemm(nanobind::module_& m);    // bind_gemm.cpp: gemm, models
void bind_study(nanobind::module_& m);   // bind_study.cpp: sweep, replay, probe
void bind_analyze(nanobind::module_& m); // bind_analyze.cpp: analyze
void bind_invariance(nanobind::module_& m);  // bind_invariance.cpp: invariance
}  // namespace fp8sim::py
