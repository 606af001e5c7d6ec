// spec: GemmSpec's names, shapes and checks, and the output rounding (gemm.hpp).
#include "gemm/gemm.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "base/limits.hpp"
#include "base/parallel.hpp"
#include "format/rounding.hpp"

namespace fp8sim {

// ---- names and shapes ----------------------------------------------------------------------

Scaling parse_scaling(std::string_view s) {
  if (s == "none") return Scaling::none;
  if (s == "tensor") return Scaling::tensor;
  if (s == "row") return Scaling::row;
  if (s == "block") return Scaling::block;
  if (s == "mx") return Scaling::mx;
  throw std::invalid_argument(
      fmt::format("unknown scaling '{}' (known: none, tensor, row, block, mx)", s));
}

std::string_view to_string(Scaling s) {
  switch (s) {
    case Scaling::none: return "none";
    case Scaling::tensor: return "tensor";
    case Scaling::row: return "row";
    case Scaling::block: return "block";
    case Scaling::mx: return "mx";
  }
  return "?";
}

ScaleOrder parse_scale_order(std::string_view s) {
  if (s == "deepgemm") return ScaleOrder::deepgemm;
  if (s == "cublaslt") return ScaleOrder::cublaslt;
  if (s == "triton") return ScaleOrder::triton;
  throw std::invalid_argument(
      fmt::format("unknown scale order '{}' (known: deepgemm, cublaslt, triton)", s));
}

std::string_view to_string(ScaleOrder s) {
  switch (s) {
    case ScaleOrder::deepgemm: return "deepgemm";
    case ScaleOrder::cublaslt: return "cublaslt";
    case ScaleOrder::triton: return "triton";
  }
  return "?";
}

namespace {

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

bool is_output_type(const FormatSpec& f) {
  return f.specials == Specials::ieee &&
         ((f.exponent_bits == 8 && (f.mantissa_bits == 23 || f.mantissa_bits == 7)) ||
          (f.exponent_bits == 5 && f.mantissa_bits == 10));
}

}  // namespace

int scale_block(const GemmSpec& s) {
  if (s.scaling == Scaling::block) return s.block;
  if (s.scaling == Scaling::mx) return s.mx_block;
  return 0;
}

void use_model_block_scales(GemmSpec& s) {
  const auto& in = s.model.block_scale;
  if (!in) return;
  s.scaling = Scaling::mx;
  s.mx_block = in->block;
  s.mx_scale = in->format;
}

ScaleShapes scale_shapes(const GemmSpec& s, int M, int N, int K) {
  const std::size_t m = M, n = N, k = K;
  switch (s.scaling) {
    case Scaling::none: return {0, 0, 0, 0};
    case Scaling::tensor: return {1, 1, 1, 1};
    case Scaling::row: return {m, 1, n, 1};
    case Scaling::block: {
      const std::size_t g = s.block, kb = ceil_div(k, g);
      return {m, kb, ceil_div(n, g), kb};
    }
    case Scaling::mx: {
      const std::size_t kb = ceil_div(k, s.mx_block);
      return {m, kb, n, kb};
    }
  }
  return {0, 0, 0, 0};
}

ScaleShapes batched_scale_shapes(const GemmSpec& s, int T, int K) {
  const int bs = scale_block(s);
  const std::size_t cols = bs == 0 ? 1 : ceil_div(std::size_t(K), std::size_t(bs));
  return {std::size_t(T), cols, std::size_t(T), cols};
}

int padded_k(const GemmSpec& s, int K) {
  if (s.k_tile <= 0 || K % s.k_tile == 0) return K;
  return static_cast<int>(ceil_div(std::size_t(K), std::size_t(s.k_tile)) * s.k_tile);
}

void validate(const GemmSpec& s, int M, int N, int K_given) {
  if (M < 0 || N < 0 || K_given < 1)
    throw std::invalid_argument(fmt::format(
        "GEMM shape M={} N={} K={}: K must be >= 1 and M, N >= 0 (M or N = 0: an empty D)", M,
        N, K_given));
  if (s.k_tile < 0)
    throw std::invalid_argument(fmt::format("k_tile = {} is negative", s.k_tile));
  const int K = padded_k(s, K_given);  // the chain runs on the zero-padded K
  validate(s.model);
  check_threads(s.threads);
  // Every integer setting within the CLI's option ranges (the same limits for every front-end).
  for (const auto& [name, v] : {std::pair<const char*, int>{"promote_every", s.promote_every},
                                {"block", s.block}, {"mx_block", s.mx_block},
                                {"split_k", s.split_k}, {"split_k_align", s.split_k_align}})
    if (v > limits::kMaxDim)
      throw std::invalid_argument(fmt::format("{} = {} is too large {}", name, v,
                                              limits::named("kMaxDim", limits::kMaxDim)));
  for (const FormatSpec* f : {&s.a_format, &s.b_format}) {
    validate(*f);
    if (f->exponent_bits > 8 || f->mantissa_bits > 23)
      throw std::invalid_argument(
          fmt::format("operand format {} is wider than fp32; the engine holds values as floats",
                      f->name));
  }
  if (s.split_k < 1)
    throw std::invalid_argument(fmt::format("split_k = {} must be >= 1", s.split_k));
  if (s.split_k_align < 1)
    throw std::invalid_argument(
        fmt::format("split_k_align = {} must be >= 1", s.split_k_align));
  if (!is_output_type(s.out_type))
    throw std::invalid_argument(
        fmt::format("output type {} is not f32, bf16 or f16", s.out_type.name));
  const int g = step_products(s.model);
  if (g > 0 && K % g != 0)
    throw std::invalid_argument(fmt::format(
        "K = {} is not a multiple of model {}'s group of {} products", K, s.model.name, g));
  if (s.promote_every < 0)
    throw std::invalid_argument(fmt::format("promote_every = {} is negative", s.promote_every));
  if (g > 0 && s.promote_every % g != 0)
    throw std::invalid_argument(fmt::format(
        "promote_every = {} is not a multiple of model {}'s group of {}", s.promote_every,
        s.model.name, g));
  const int bs = scale_block(s);
  if (s.scaling == Scaling::block && s.block < 1)
    throw std::invalid_argument(fmt::format("scale block {} must be >= 1", s.block));
  if (s.scaling == Scaling::mx && s.mx_block < 1)
    throw std::invalid_argument(fmt::format("MX scale block {} must be >= 1", s.mx_block));
  if (const auto& in = s.model.block_scale) {  // scales inside the MMA
    if (s.scaling != Scaling::mx || s.mx_block != in->block || !(s.mx_scale == in->format))
      throw std::invalid_argument(fmt::format(
          "model {} applies {} scales per {} elements inside the MMA: it needs scaling mx with "
          "mx_block {} and {} scales (got scaling {}, mx_block {}, {} scales)",
          s.model.name, in->format.name, in->block, in->block, in->format.name,
          to_string(s.scaling), s.mx_block, s.mx_scale.name));
    if (K % in->block != 0)
      throw std::invalid_argument(fmt::format("K = {} is not a multiple of model {}'s scale block {}",
                                              K, s.model.name, in->block));
  } else if (bs > 0) {
    const int chunk = s.promote_every == 0 ? K : s.promote_every;
    if (bs % chunk != 0 && !(s.promote_every == 0 && K <= bs))
      throw std::invalid_argument(fmt::format(
          "{} scaling with blocks of {} along K needs promote_every dividing {} (got {}): "
          "scales are applied when a chunk is promoted",
          to_string(s.scaling), bs, bs, s.promote_every == 0 ? "never" : std::to_string(chunk)));
  }
}

float to_out_type(const FormatSpec& out, float v) {
  if (out.mantissa_bits == 23) return v;
  return static_cast<float>(quantize(v, out, {Rounding::rne, Overflow::nonsat, 32}));
}

}  // namespace fp8sim
