// gemm_inputs: output-type names, problem checks and scale arrays shared by the front-ends.
#include "kernel/gemm_inputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "kernel/kernel.hpp"
#include "scaling/scaling.hpp"
#include "base/limits.hpp"

namespace fp8sim {

FormatSpec output_type_by_name(std::string_view name, std::string_view what) {
  if (name == "f32" || name == "fp32") return format_by_name("fp32");
  if (name == "bf16") return format_by_name("bf16");
  if (name == "f16" || name == "fp16") return format_by_name("fp16");
  throw std::invalid_argument(fmt::format("unknown {} '{}' (f32, bf16, f16)", what,
                                          limits::quoted(std::string(name))));
}

bool GemmOptions::is_given(std::string_view field) const {
  const GemmOptions d;
  if (std::find(given.begin(), given.end(), field) != given.end()) return true;
  if (field == "model") return model != d.model;
  if (field == "promote_every") return promote_every != d.promote_every;
  if (field == "scale_order") return scale_order != d.scale_order;
  if (field == "split_k_align") return split_k_align != d.split_k_align;
  if (field == "block") return block != d.block;
  if (field == "mx_block") return mx_block != d.mx_block;
  if (field == "mx_scale") return mx_scale != d.mx_scale;
  return false;
}

GemmSpec gemm_spec(const GemmOptions& o, bool have_a_scales, bool have_b_scales) {
  GemmSpec s;
  s.a_format = format_by_name(o.a_format);
  s.b_format = format_by_name(o.b_format);
  s.model = accumulator_by_name(o.model);
  s.promote_every = o.promote_every;
  s.block = o.block;
  s.order = parse_scale_order(o.scale_order);
  s.out_type = output_type_by_name(o.out_type);
  s.threads = o.threads;
  s.device = parse_device(o.device);
  s.split_k = o.split_k;
  s.split_k_align = o.split_k_align;
  // MX scales: the model's own block and format when it scales inside the MMA.
  const auto& in = s.model.block_scale;
  s.mx_block = o.mx_block != 0 ? o.mx_block : in ? in->block : 32;
  s.mx_scale = !o.mx_scale.empty() ? format_by_name(o.mx_scale)
               : in                ? in->format
                                   : format_by_name("ue8m0");
  if (is_engine_scaling(o.scaling)) {
    s.scaling = resolve_scaling(o.scaling, have_a_scales, have_b_scales);
  } else {  // a quantiser's name (block128, mx16, nvfp4, ...): it carries its own block
    if (o.is_given("block") || o.is_given("mx_block") || o.is_given("mx_scale"))
      throw std::invalid_argument(fmt::format(
          "scaling {} names its block and scale format: drop block, mx_block and mx_scale",
          o.scaling));
    const ScalingSpec named = scaling_by_name(o.scaling);
    resolve_scaling(to_string(engine_scaling(named)), have_a_scales, have_b_scales);
    set_engine_scaling(s, named);
  }
  // Options that apply to nothing in this call: refused, never ignored.
  if (is_engine_scaling(o.scaling)) {
    if (o.is_given("block") && s.scaling != Scaling::block)
      throw std::invalid_argument(fmt::format(
          "block applies to scaling block only (scaling is {})", to_string(s.scaling)));
    for (const char* name : {"mx_block", "mx_scale"})
      if (o.is_given(name) && s.scaling != Scaling::mx)
        throw std::invalid_argument(fmt::format("{} applies to scaling mx only (scaling is {})",
                                                name, to_string(s.scaling)));
  }
  if (!o.kernel.empty()) {
    const KernelSpec& k = kernel_by_name(o.kernel);
    for (const char* name : {"model", "promote_every", "scale_order", "split_k_align"})
      if (o.is_given(name))
        throw std::invalid_argument(fmt::format(
            "kernel {} sets the model, promote_every, scale_order and split_k_align: drop {}",
            k.name, name));
    apply_kernel(s, k);
  } else if (o.is_given("split_k_align") && s.split_k == 1) {
    throw std::invalid_argument("split_k_align applies to a split only (split_k is 1)");
  }
  if (!o.triton_config.empty() && !is_triton_kernel(o.kernel))
    throw std::invalid_argument(fmt::format(
        "a Triton config goes with a Triton kernel preset (--kernel triton-w8a8-block-fp8 or "
        "triton-fp8-dot){}",
        o.kernel.empty() ? std::string() : fmt::format(", not {}", o.kernel)));
  return s;
}

std::optional<TritonPlan> apply_triton_config(GemmSpec& s, const GemmOptions& o, int M, int N,
                                              int K) {
  if (o.triton_config.empty()) return std::nullopt;
  const TritonPlan p =
      triton_plan(o.triton_config, M, N, K, o.gpu.empty() ? "h100" : o.gpu, o.kernel);
  apply_triton_plan(s, o.kernel, p);
  return p;
}

bool is_engine_scaling(std::string_view name) {
  return name.empty() || name == "none" || name == "tensor" || name == "row" || name == "block" ||
         name == "mx";
}

Scaling gemm_scaling_of(std::string_view name) {
  if (name.empty()) return Scaling::none;
  return is_engine_scaling(name) ? parse_scaling(name) : engine_scaling(scaling_by_name(name));
}

Scaling resolve_scaling(std::string_view name, bool have_a_scales, bool have_b_scales) {
  const bool have_scales = have_a_scales || have_b_scales;
  if (have_scales && !(have_a_scales && have_b_scales))
    throw std::invalid_argument("--a-scales and --b-scales go together");
  const Scaling s = name.empty() ? (have_scales ? Scaling::tensor : Scaling::none)
                                 : parse_scaling(name);
  if (s != Scaling::none && !have_scales)
    throw std::invalid_argument(
        fmt::format("--scaling {} needs --a-scales and --b-scales", to_string(s)));
  if (s == Scaling::none && have_scales)
    throw std::invalid_argument("scale files given with --scaling none");
  return s;
}

void check_gemm_problem(std::string_view a_source, std::string_view b_source, std::size_t M,
                        std::size_t K, std::size_t N, std::size_t Kb) {
  if (Kb != K)
    throw std::runtime_error(
        fmt::format("{}: B is {} x {} but A is {} x {}: K differs", b_source, N, Kb, M, K));
  // M or N = 0: an empty D, as torch.mm gives. K = 0 has no product to model (torch.mm
  // gives zeros, torch._scaled_mm an error): refused.
  if (K == 0)
    throw std::runtime_error(fmt::format(
        "{}: K = 0 ({} x {} times {} x {}): an empty sum has no tensor-core chain to model",
        a_source, M, K, N, K));
  if (M > std::size_t(limits::kMaxDim) || N > std::size_t(limits::kMaxDim) ||
      K > std::size_t(limits::kMaxDim))
    throw std::runtime_error(fmt::format("{}: problem {} x {} x {} is too large {}", a_source, M,
                                         N, K, limits::named("kMaxDim", limits::kMaxDim)));
  if (M * N > std::size_t(limits::kMaxOutputElements))
    throw std::runtime_error(
        fmt::format("{}: D of {} x {} is too large {}", a_source, M, N,
                    limits::named("kMaxOutputElements", limits::kMaxOutputElements)));
}

void check_scale_header(std::string_view source, const std::string& descr,
                        const std::vector<std::size_t>& shape, Scaling scaling, std::size_t rows,
                        std::size_t cols) {
  const bool codes = scaling == Scaling::mx && (descr == "|u1" || descr == "<u1");
  if (!codes && descr != "<f4")
    throw std::runtime_error(fmt::format("{}: expected dtype <f4{}, got {}", source,
                                         scaling == Scaling::mx ? " or |u1" : "",
                                         limits::quoted(descr)));
  const bool shape_ok = (shape == std::vector<std::size_t>{rows, cols}) ||
                        (cols == 1 && shape == std::vector<std::size_t>{rows}) ||
                        (rows * cols == 1 && shape.empty());
  if (!shape_ok) {
    std::string dims;
    for (std::size_t e : shape) dims += (dims.empty() ? "" : " x ") + std::to_string(e);
    throw std::runtime_error(
        fmt::format("{}: expected {} x {} scales for {} scaling, got shape ({})", source, rows,
                    cols, to_string(scaling), dims));
  }
}

std::vector<float> scale_values(std::string_view source, const ScaleArray& a, Scaling scaling,
                                std::size_t rows, std::size_t cols, const FormatSpec& code_format,
                                bool nan_codes) {
  check_scale_header(source, a.descr, a.shape, scaling, rows, cols);
  const bool codes = scaling == Scaling::mx && (a.descr == "|u1" || a.descr == "<u1");
  const std::size_t n = rows * cols;
  std::vector<float> v(n);
  if (codes) {  // the scale format's finite codes (its NaN code only with nan_codes)
    const auto* c = static_cast<const std::uint8_t*>(a.data);
    for (std::size_t i = 0; i < n; ++i) {
      if (!is_valid_code(code_format, c[i]))
        throw std::runtime_error(fmt::format("{}: code {:#x} at index {} is not a {} code",
                                             source, c[i], i, code_format.name));
      v[i] = float(decode(code_format, c[i]));
      if (!nan_codes && !std::isfinite(v[i]))
        throw std::runtime_error(fmt::format("{}: code {:#x} at index {} is {} in {} (scales "
                                             "must be finite)", source, c[i], i, v[i],
                                             code_format.name));
    }
    return v;
  }
  if (n) std::memcpy(v.data(), a.data, n * sizeof(float));
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      throw std::runtime_error(fmt::format("{}: scale at index {} is {}", source, i, v[i]));
  return v;
}

}  // namespace fp8sim
