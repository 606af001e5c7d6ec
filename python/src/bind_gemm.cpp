// bind_gemm: gemm() on caller arrays (no operand copies beyond the engine's one decode), models.
#include <fmt/format.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <stdexcept>

#include "accumulator/accumulator.hpp"
#include "kernel/cublaslt_plan.hpp"
#include "arrays.hpp"
#include "bindings.hpp"
#include "gemm/gemm.hpp"
#include "gemm/gemm_device.hpp"
#include "kernel/gemm_inputs.hpp"
#include "kernel/kernel.hpp"
#include "kernel/triton_config.hpp"

namespace fp8sim::py {
namespace {

// A bias argument as float32 values (N of them), or empty.
std::vector<float> bias_values(const std::optional<AnyArray>& bias, std::size_t N) {
  if (!bias) return {};
  const View v = view(*bias, "bias", "<f4");
  if (v.size() != N)
    throw std::runtime_error(fmt::format("bias: expected {} float32 values (N), got {}", N, v.size()));
  const auto* p = static_cast<const float*>(v.data);
  return {p, p + N};
}

// The scale arguments as gemm() takes them (both empty without scaling), after the spec's
// check against the shape (scale_shapes() divides by its blocks).
std::pair<std::vector<float>, std::vector<float>> scales_of(
    const GemmSpec& s, std::size_t M, std::size_t N, std::size_t K,
    const std::optional<AnyArray>& a_scales, const std::optional<AnyArray>& b_scales) {
  validate(s, int(M), int(N), int(K));
  if (s.scaling == Scaling::none) return {};
  const ScaleShapes sh = scale_shapes(s, int(M), int(N), int(K));
  const View va = view(*a_scales, "a_scales"), vb = view(*b_scales, "b_scales");
  return {scale_values("a_scales", {va.descr, va.shape, va.data}, s.scaling, sh.a_rows,
                       sh.a_cols, s.mx_scale),
          scale_values("b_scales", {vb.descr, vb.shape, vb.data}, s.scaling, sh.b_rows,
                       sh.b_cols, s.mx_scale)};
}

nb::ndarray<nb::numpy, float> run_gemm(const AnyArray& a, const AnyArray& b,
                                       const std::optional<AnyArray>& c,
                                       const std::optional<AnyArray>& a_scales,
                                       const std::optional<AnyArray>& b_scales,
                                       const std::optional<AnyArray>& bias,
                                       const GemmOptions& g) {
  GemmSpec s = gemm_spec(g, a_scales.has_value(), b_scales.has_value());
  const View A = view(a, "a", "|u1", 2), B = view(b, "b", "|u1", 2);
  const std::size_t M = A.shape[0], K = A.shape[1], N = B.shape[0];
  check_gemm_problem("a", "b", M, K, N, B.shape[1]);
  apply_triton_config(s, g, int(M), int(N), int(K));
  std::span<const float> C;
  if (c) {
    const View v = view(*c, "c", "<f4");
    if (v.shape != std::vector<std::size_t>{M, N})
      throw std::runtime_error(fmt::format("c: expected shape ({}, {}), got {} values", M, N, v.size()));
    C = {static_cast<const float*>(v.data), v.size()};
  }
  const auto [sa, sb] = scales_of(s, M, N, K, a_scales, b_scales);
  const std::vector<float> bv = bias_values(bias, N);
  std::vector<float> D(M * N);
  {
    nb::gil_scoped_release release;
    gemm(s, int(M), int(N), int(K), {static_cast<const std::uint8_t*>(A.data), M * K},
         {static_cast<const std::uint8_t*>(B.data), N * K}, C, sa, sb, D, bv);
  }
  return to_numpy(std::move(D), {M, N});
}

// A GEMM's arguments on CUDA device arrays, checked: codes A (M x K) and B (N x K), C (or
// null) and D (M x N float32, C-contiguous), all on a's device.
struct CudaGemm {
  GemmSpec s;
  std::size_t M = 0, N = 0, K = 0;
  int device = 0;
  const std::uint8_t* A = nullptr;
  const std::uint8_t* B = nullptr;
  const float* C = nullptr;
};

CudaGemm cuda_gemm(const CudaArray& a, const CudaArray& b, const std::optional<CudaArray>& c,
                   CudaOut& d, const GemmOptions& g, bool a_scales, bool b_scales) {
  CudaGemm x;
  x.s = gemm_spec(g, a_scales, b_scales);
  const View A = view(a, "a", "|u1", 2), B = view(b, "b", "|u1", 2);
  const std::size_t M = A.shape[0], K = A.shape[1], N = B.shape[0];
  check_gemm_problem("a", "b", M, K, N, B.shape[1]);
  apply_triton_config(x.s, g, int(M), int(N), int(K));
  x.M = M;
  x.N = N;
  x.K = K;
  x.device = a.device_id();
  x.A = static_cast<const std::uint8_t*>(A.data);
  x.B = static_cast<const std::uint8_t*>(B.data);
  check_device<std::runtime_error>("b", b.device_id(), "a", x.device);
  check_device<std::runtime_error>("out", d.device_id(), "a", x.device);
  check_matrix<std::runtime_error>(d, "out", M, N, "float32");
  if (c) {
    check_device<std::runtime_error>("c", c->device_id(), "a", x.device);
    const View v = view(*c, "c", "<f4", 2);
    if (v.shape != std::vector<std::size_t>{M, N})
      throw std::runtime_error(fmt::format("c: expected shape ({}, {}), got ({}, {})", M, N,
                                           v.shape[0], v.shape[1]));
    x.C = static_cast<const float*>(v.data);
  }
  return x;
}

// gemm() on CUDA device arrays, in place and without copies: D (M x N float32, on the same
// device) is written by the CUDA engine on `stream`; scales are host arrays.
void run_gemm_cuda(const CudaArray& a, const CudaArray& b, const std::optional<CudaArray>& c,
                   CudaOut& d, const std::optional<AnyArray>& a_scales,
                   const std::optional<AnyArray>& b_scales, const std::optional<AnyArray>& bias,
                   const GemmOptions& g, std::uintptr_t stream) {
  const CudaGemm x = cuda_gemm(a, b, c, d, g, a_scales.has_value(), b_scales.has_value());
  const auto [sa, sb] = scales_of(x.s, x.M, x.N, x.K, a_scales, b_scales);
  const std::vector<float> bv = bias_values(bias, x.N);
  nb::gil_scoped_release release;
  gemm_resident(x.s, int(x.M), int(x.N), int(x.K), x.A, x.B, x.C, sa, sb, d.data(),
                caller_stream(stream), x.device, bv);
}

// run_gemm_cuda with the scales on the device too (float32 CUDA arrays of the scale shapes, on
// a's device), as quantize_cuda_deferred writes them: taken as they are, and the host does not
// wait for the device (gemm_resident_scales_on_device). No bias.
void run_gemm_cuda_scales_on_device(const CudaArray& a, const CudaArray& b,
                                    const std::optional<CudaArray>& c, CudaOut& d,
                                    const CudaArray& a_scales, const CudaArray& b_scales,
                                    const GemmOptions& g, std::uintptr_t stream) {
  const CudaGemm x = cuda_gemm(a, b, c, d, g, true, true);
  check_device<std::runtime_error>("a_scales", a_scales.device_id(), "a", x.device);
  check_device<std::runtime_error>("b_scales", b_scales.device_id(), "a", x.device);
  const int M = int(x.M), N = int(x.N), K = int(x.K);
  validate(x.s, M, N, K);
  if (x.s.scaling == Scaling::none)
    throw std::runtime_error("scales on the device: the scaling is none");
  const ScaleShapes sh = scale_shapes(x.s, M, N, K);
  const View va = view(a_scales, "a_scales", "<f4"), vb = view(b_scales, "b_scales", "<f4");
  check_scale_header("a_scales", va.descr, va.shape, x.s.scaling, sh.a_rows, sh.a_cols);
  check_scale_header("b_scales", vb.descr, vb.shape, x.s.scaling, sh.b_rows, sh.b_cols);
  nb::gil_scoped_release release;
  gemm_resident_scales_on_device(x.s, M, N, K, x.A, x.B, x.C,
                                 {static_cast<const float*>(va.data), sh.a_rows * sh.a_cols},
                                 {static_cast<const float*>(vb.data), sh.b_rows * sh.b_cols},
                                 d.data(), caller_stream(stream), x.device);
}

// Codes of any unsigned width (uint8, uint16, uint32) as one T x K operand of `f`.
Operand codes_operand(const AnyArray& x, const char* name, const FormatSpec& f) {
  const View v = view(x, name, "", 2);
  const std::size_t n = v.size();
  std::vector<std::uint32_t> codes(n);
  if (v.descr == "|u1") {
    const auto* p = static_cast<const std::uint8_t*>(v.data);
    std::copy(p, p + n, codes.begin());
  } else if (v.descr == "<u2") {
    const auto* p = static_cast<const std::uint16_t*>(v.data);
    std::copy(p, p + n, codes.begin());
  } else if (v.descr == "<u4") {
    const auto* p = static_cast<const std::uint32_t*>(v.data);
    std::copy(p, p + n, codes.begin());
  } else {
    throw std::runtime_error(fmt::format("{}: expected dtype |u1, <u2 or <u4 codes, got {}", name, v.descr));
  }
  return decode_operand(f, int(v.shape[0]), int(v.shape[1]), std::span<const std::uint32_t>(codes));
}

// T independent MMA dot products (batched_dot): D[t] = the model's chain over row t of A and
// B with c[t] entering, one value of the model's output each (no promotion, no epilogue).
nb::ndarray<nb::numpy, float> run_mma(const AnyArray& a, const AnyArray& b,
                                      const std::optional<AnyArray>& c,
                                      const std::optional<AnyArray>& a_scales,
                                      const std::optional<AnyArray>& b_scales,
                                      const std::string& a_format, const std::string& b_format,
                                      const std::string& model) {
  GemmSpec s;
  s.model = accumulator_by_name(model);
  s.out_type = format_by_name("fp32");
  s.a_format = format_by_name(a_format);
  s.b_format = format_by_name(b_format);
  const Operand A = codes_operand(a, "a", s.a_format), B = codes_operand(b, "b", s.b_format);
  const std::size_t T = A.rows, K = A.cols;
  if (B.rows != A.rows || B.cols != A.cols)
    throw std::runtime_error(fmt::format("b: expected shape ({}, {}) as a, got ({}, {})", T, K,
                                         B.rows, B.cols));
  std::vector<float> sa, sb;
  if (const auto& in = s.model.block_scale) {
    if (!a_scales || !b_scales)
      throw std::runtime_error(fmt::format("model {} applies {} scales inside the MMA: pass "
                                           "a_scales and b_scales", model, in->format.name));
    use_model_block_scales(s);
    const std::size_t cols = (K + in->block - 1) / in->block;
    const View va = view(*a_scales, "a_scales"), vb = view(*b_scales, "b_scales");
    // NaN scale codes as the instruction takes them (the differential tests draw every code).
    sa = scale_values("a_scales", {va.descr, va.shape, va.data}, s.scaling, T, cols, in->format,
                      /*nan_codes=*/true);
    sb = scale_values("b_scales", {vb.descr, vb.shape, vb.data}, s.scaling, T, cols, in->format,
                      /*nan_codes=*/true);
  } else if (a_scales || b_scales) {
    throw std::runtime_error(fmt::format("model {} has no block scales: a_scales and b_scales "
                                         "are for block-scaled models", model));
  }
  std::vector<float> C;
  if (c) {
    const View v = view(*c, "c", "<f4", 1);
    if (v.size() != T)
      throw std::runtime_error(fmt::format("c: expected {} float32 values, got {}", T, v.size()));
    const auto* p = static_cast<const float*>(v.data);
    C.assign(p, p + T);
  }
  std::vector<float> D(T);
  {
    nb::gil_scoped_release release;
    batched_dot(s, A, B, C, sa, sb, D);
  }
  return to_numpy(std::move(D), {T});
}

std::vector<std::tuple<std::string, std::string, std::string, std::string, std::string>> models() {
  std::vector<std::tuple<std::string, std::string, std::string, std::string, std::string>> out;
  for (const auto& m : accumulator_presets()) {
    std::string aliases;
    for (const auto& a : m.aliases) aliases += (aliases.empty() ? "" : " ") + a;
    out.emplace_back(m.name, aliases, m.instruction, describe(m), m.evidence);
  }
  return out;
}

}  // namespace

void bind_gemm(nb::module_& m) {
  nb::class_<GemmOptions>(m, "GemmOptions",
                          "A GEMM's options as the CLI names them (sim/kernel/gemm_inputs.hpp); "
                          "every field starts at the library's default.")
      .def(nb::init<>())
      .def_rw("a_format", &GemmOptions::a_format)
      .def_rw("b_format", &GemmOptions::b_format)
      .def_rw("model", &GemmOptions::model)
      .def_rw("promote_every", &GemmOptions::promote_every)
      .def_rw("scaling", &GemmOptions::scaling)
      .def_rw("block", &GemmOptions::block)
      .def_rw("scale_order", &GemmOptions::scale_order)
      .def_rw("out_type", &GemmOptions::out_type)
      .def_rw("threads", &GemmOptions::threads)
      .def_rw("device", &GemmOptions::device)
      .def_rw("split_k", &GemmOptions::split_k)
      .def_rw("split_k_align", &GemmOptions::split_k_align)
      .def_rw("mx_block", &GemmOptions::mx_block)
      .def_rw("mx_scale", &GemmOptions::mx_scale)
      .def_rw("kernel", &GemmOptions::kernel)
      .def_rw("triton_config", &GemmOptions::triton_config)
      .def_rw("gpu", &GemmOptions::gpu)
      .def_rw("given", &GemmOptions::given);
  m.def(
      "triton_plan",
      [](const std::string& kernel, int m, int n, int k, const std::string& config,
         const std::string& gpu) {
        kernel_by_name(kernel);
        const TritonPlan p = triton_plan(config, m, n, k, gpu, kernel);
        const TritonConfig& c = p.config;
        return std::make_tuple(std::make_tuple(c.block_m, c.block_n, c.block_k, c.group_m,
                                               c.num_warps, c.num_stages),
                               p.config_source, p.instruction, p.why,
                               triton_kernel_for(kernel, p), describe(p, kernel));
      },
      nb::arg("kernel"), nb::arg("m"), nb::arg("n"), nb::arg("k"), nb::arg("config"),
      nb::arg("gpu"),
      "A Triton kernel's config for one GEMM and what Triton lowers it to "
      "(sim/kernel/triton_config.hpp): ((BM, BN, BK, GROUP_M, WARPS, STAGES), source, "
      "instruction, why, routed preset, text).");
  m.def("gemm", &run_gemm, nb::arg("a"), nb::arg("b"), nb::arg("c").none(),
        nb::arg("a_scales").none(), nb::arg("b_scales").none(), nb::arg("bias").none(),
        nb::arg("options"), "D = A B^T through an accumulator model, as `fp8sim gemm`.");
  m.def(
      "gemm_cuda",
      [](const CudaArray& a, const CudaArray& b, const std::optional<CudaArray>& c, CudaOut& out,
         const std::optional<AnyArray>& a_scales, const std::optional<AnyArray>& b_scales,
         const std::optional<AnyArray>& bias, GemmOptions options, std::uintptr_t stream) {
        options.device = "cuda";
        options.threads = 0;
        run_gemm_cuda(a, b, c, out, a_scales, b_scales, bias, options, stream);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("c").none(), nb::arg("out"),
      nb::arg("a_scales").none(), nb::arg("b_scales").none(), nb::arg("bias").none(),
      nb::arg("options"), nb::arg("stream"),
      "out = A B^T on CUDA device arrays through the CUDA engine, in place on `stream`.");
  m.def(
      "gemm_cuda_scales_on_device",
      [](const CudaArray& a, const CudaArray& b, const std::optional<CudaArray>& c, CudaOut& out,
         const CudaArray& a_scales, const CudaArray& b_scales, GemmOptions options,
         std::uintptr_t stream) {
        options.device = "cuda";
        options.threads = 0;
        run_gemm_cuda_scales_on_device(a, b, c, out, a_scales, b_scales, options, stream);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("c").none(), nb::arg("out"), nb::arg("a_scales"),
      nb::arg("b_scales"), nb::arg("options"), nb::arg("stream"),
      "gemm_cuda with float32 scales on the device (quantize_cuda_deferred's), taken as they "
      "are, without waiting for the device.");
  m.def("cublaslt_plan",
        [](const std::string& gpu, int m, int n, int k, const std::string& out, bool fast,
           const std::string& scale, bool bias) {
          ScaledMmCall c;
          c.m = m;
          c.n = n;
          c.k = k;
          c.out = out;
          c.fast = fast;
          c.scale = scale;
          c.bias = bias;
          const CublasltPlan p = cublaslt_plan(gpu, c);
          nb::dict d;
          d["split_k"] = p.split_k;
          d["reduction"] = p.reduction;
          d["tile"] = p.tile;
          d["stages"] = p.stages;
          d["cluster"] = p.cluster;
          d["algo_id"] = p.algo_id;
          d["source"] = p.source;
          d["gpu"] = p.gpu;
          d["versions"] = p.versions;
          d["why"] = p.why;
          return d;
        },
        nb::arg("gpu"), nb::arg("m"), nb::arg("n"), nb::arg("k"), nb::arg("out"),
        nb::arg("fast"), nb::arg("scale"), nb::arg("bias"),
        "cuBLASLt's recorded plan for one torch._scaled_mm call (sim/kernel/cublaslt_plan.hpp); "
        "raises ValueError where the recordings cannot decide.");
  m.def("recorded_gpus", &recorded_gpus, "The GPUs whose cuBLASLt plans are built in.");
  m.def("kernels", [] {
          std::vector<std::tuple<std::string, std::string, std::string, std::string, std::string,
                                 std::string>> out;
          for (const KernelSpec& k : kernel_presets())
            out.emplace_back(k.name, k.description, describe(k), k.upstream, k.evidence,
                             k.not_modelled);
          return out;
        },
        "(name, description, parameters, upstream, evidence, not modelled) of every kernel "
        "preset, as `fp8sim kernels` lists them.");
  m.def("mma", &run_mma, nb::arg("a"), nb::arg("b"), nb::arg("c").none(),
        nb::arg("a_scales").none(), nb::arg("b_scales").none(), nb::arg("a_format"),
        nb::arg("b_format"), nb::arg("model"),
        "Row-by-row MMA dot products through an accumulator model (batched_dot).");
  m.def("models", &models,
        "(name, aliases, instruction, parameters, evidence) of every accumulator preset.");
  m.def("describe_model", [](const std::string& name) { return describe(accumulator_by_name(name)); },
        nb::arg("model"), "A model's parameters, as `fp8sim models` prints them.");
  m.def("gemm_scaling", [](const std::string& name) {
    return std::string(to_string(gemm_scaling_of(name)));
  }, nb::arg("name"), "The engine's scaling (none|tensor|row|block|mx) for a gemm scaling name.");
  nb::class_<DeviceKernelEvents>(m, "DeviceKernelEvents",
                                 "GEMM kernel events taken from the calling thread "
                                 "(device_kernel_take); seconds() waits for those kernels.")
      .def("seconds", &DeviceKernelEvents::seconds,
           nb::call_guard<nb::gil_scoped_release>(),
           "The kernels' time in seconds (waits for them; the same value on later calls).")
      .def("__len__", &DeviceKernelEvents::size);
  m.def("device_kernel_take", &device_kernel_take,
        "The calling thread's GEMM kernel events not read yet (no wait), as a "
        "DeviceKernelEvents; their time leaves device_kernel_seconds().");
  m.def("device_kernel_seconds", &device_kernel_seconds, nb::call_guard<nb::gil_scoped_release>(),
        "The CUDA engine's GEMM kernel time on the calling thread so far, in seconds (CUDA "
        "events around the GEMM kernels; decoding, copies and set-up excluded; waits for "
        "the kernels not read yet); 0 in a build without CUDA. A caller reads the difference "
        "across its own calls.");
}

}  // namespace fp8sim::py
