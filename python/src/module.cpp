// module: fp8sim._core, the nanobind module over the C++ library (one core, thin front-end).
#include "bindings.hpp"
#include "io/revision.hpp"

NB_MODULE(_core, m) {
  m.doc() = "fp8sim's C++ core; use the fp8sim package, which wraps these functions.";
  m.attr("git_revision") = fp8sim::git_revision();
  m.attr("version") = FP8SIM_VERSION;  // CMakeLists.txt's project VERSION (pyproject reads it too)
  fp8sim::py::bind_format(m);
  fp8sim::py::bind_gemm(m);
  fp8sim::py::bind_study(m);
  fp8sim::py::bind_analyze(m);
  fp8sim::py::bind_invariance(m);
}
