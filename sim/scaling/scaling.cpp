// scaling: amax per scale block, scale encoding, and round-to-format of x / s.
#include "scaling/scaling.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "base/parallel.hpp"
#include "format/rounding.hpp"

namespace fp8sim {

ScalingSpec scaling_by_name(std::string_view text) {
  ScalingSpec s;
  const auto colon = text.find(':');
  const std::string_view gran = text.substr(0, colon);
  const std::string_view enc = colon == std::string_view::npos ? "" : text.substr(colon + 1);
  if (colon != std::string_view::npos && enc.empty())
    throw std::invalid_argument(fmt::format("scaling '{}': nothing after ':' (an encoding: fp32, "
                                            "pow2, e8m0, ue4m3)", text));
  const auto number_after = [&](std::string_view prefix) {
    const std::string_view digits = gran.substr(prefix.size());
    int v = 0;
    const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (digits.empty() || r.ec != std::errc() || r.ptr != digits.data() + digits.size() || v < 1)
      throw std::invalid_argument(fmt::format(
          "scaling '{}': {} needs a block length >= 1, e.g. {}128", text, prefix, prefix));
    return v;
  };
  if (gran == "none") {
    s.granularity = ScaleGranularity::none;
  } else if (gran == "tensor") {
    s.granularity = ScaleGranularity::tensor;
  } else if (gran == "row") {
    s.granularity = ScaleGranularity::row;
  } else if (gran.starts_with("tile")) {
    s.granularity = ScaleGranularity::tile;
    s.nc = number_after("tile");
  } else if (gran.starts_with("block")) {
    s.granularity = ScaleGranularity::block;
    s.nc = number_after("block");
  } else if (gran == "nvfp4") {
    if (!enc.empty())
      throw std::invalid_argument(fmt::format("scaling '{}': nvfp4 scales are always ue4m3", text));
    s.granularity = ScaleGranularity::mx;
    s.nc = 16;
    s.encoding = ScaleEncoding::ue4m3;
  } else if (gran.starts_with("mx")) {
    s.granularity = ScaleGranularity::mx;
    s.nc = gran == "mx" ? 32 : number_after("mx");
    s.encoding = ScaleEncoding::e8m0;
  } else {
    throw std::invalid_argument(fmt::format(
        "unknown scaling '{}' (known: none, tensor, row, tile<Nc>, block<Nc>, mx, mx<Nc>, nvfp4)",
        text));
  }
  if (!enc.empty()) {
    if (enc == "fp32") s.encoding = ScaleEncoding::fp32;
    else if (enc == "pow2") s.encoding = ScaleEncoding::pow2;
    else if (enc == "e8m0") s.encoding = ScaleEncoding::e8m0;
    else if (enc == "ue4m3") s.encoding = ScaleEncoding::ue4m3;
    else
      throw std::invalid_argument(fmt::format(
          "scaling '{}': unknown scale encoding '{}' (fp32, pow2, e8m0, ue4m3)", text, enc));
    const bool mx = s.granularity == ScaleGranularity::mx;
    if (mx && s.encoding != ScaleEncoding::e8m0 && s.encoding != ScaleEncoding::ue4m3)
      throw std::invalid_argument(fmt::format("scaling '{}': mx scales are e8m0 or ue4m3", text));
    if (!mx && s.encoding == ScaleEncoding::ue4m3)
      throw std::invalid_argument(fmt::format("scaling '{}': ue4m3 scales are for mx blocks", text));
    if (s.granularity == ScaleGranularity::none)
      throw std::invalid_argument(fmt::format("scaling '{}': none has no scale encoding", text));
  }
  if (s.granularity == ScaleGranularity::mx) {
    s.name = s.nc == 32 ? "mx" : fmt::format("mx{}", s.nc);
    if (s.encoding == ScaleEncoding::ue4m3) s.name = s.nc == 16 ? "nvfp4" : s.name + ":ue4m3";
  } else {
    s.name = std::string(gran);
    if (s.encoding != ScaleEncoding::fp32) s.name += fmt::format(":{}", encoding_name(s));
  }
  return s;
}

std::string_view encoding_name(const ScalingSpec& s) {
  if (s.granularity == ScaleGranularity::none) return "none";
  switch (s.encoding) {
    case ScaleEncoding::fp32: return "fp32";
    case ScaleEncoding::pow2: return "pow2";
    case ScaleEncoding::e8m0: return "e8m0";
    case ScaleEncoding::ue4m3: return "ue4m3";
  }
  return "none";
}

Scaling engine_scaling(const ScalingSpec& s) {
  switch (s.granularity) {
    case ScaleGranularity::none: return Scaling::none;
    case ScaleGranularity::tensor:
    case ScaleGranularity::row: return Scaling::row;
    case ScaleGranularity::tile:
    case ScaleGranularity::block: return Scaling::block;
    case ScaleGranularity::mx: return Scaling::mx;
  }
  return Scaling::none;
}

void set_engine_scaling(GemmSpec& g, const ScalingSpec& s) {
  g.scaling = engine_scaling(s);
  if (g.scaling == Scaling::block) g.block = s.nc;
  if (g.scaling == Scaling::mx) {
    g.mx_block = s.nc;
    g.mx_scale = format_by_name(s.encoding == ScaleEncoding::ue4m3 ? "ue4m3" : "ue8m0");
  }
}

namespace {

const FormatSpec& ue4m3() {
  static const FormatSpec f = format_by_name("ue4m3");
  return f;
}

// fl32(x) clamped to fp32's normal range (a scale of 0 or Inf would give NaN codes).
double fp32_scale(double x) {
  return std::clamp(static_cast<float>(x), std::numeric_limits<float>::min(),
                    std::numeric_limits<float>::max());
}

}  // namespace

double tensor_scale_for_amax(double tamax, const FormatSpec& element) {
  if (!(tamax > 0) || !std::isfinite(tamax)) return 1.0;
  return fp32_scale(tamax / (max_finite(element) * max_finite(ue4m3())));
}

double scale_for_amax(double amax, const FormatSpec& element, ScaleEncoding enc,
                      double tensor_scale) {
  const double fmax = max_finite(element);
  if (enc == ScaleEncoding::ue4m3) {
    // At least UE4M3's smallest normal value 2^-6, as torchao's nvfp4_quantize clamps
    // (E4M3_EPS): a block of zeros, or one far below its tensor's largest, gets that scale.
    const double u = decode(ue4m3(), encode(amax / (fmax * tensor_scale), ue4m3(),
                                            RoundingSpec{Rounding::rne, Overflow::saturate, 32}));
    return std::max(u, 0x1p-6);
  }
  if (!(amax > 0) || !std::isfinite(amax)) return 1.0;
  switch (enc) {
    case ScaleEncoding::fp32:  // within fp32's normal range, as pow2
      return fp32_scale(amax / fmax);
    case ScaleEncoding::pow2: {
      int e = std::ilogb(amax / fmax);  // 2^e <= amax / fmax < 2^(e+1)
      if (std::ldexp(1.0, e) < amax / fmax) ++e;
      return std::ldexp(1.0, std::clamp(e, -126, 127));
    }
    case ScaleEncoding::e8m0:
      // OCP MX v1.0 s6.3: X = 2^(floor(log2(amax)) - emax_elem), clamped to E8M0's range.
      return std::ldexp(1.0, std::clamp(std::ilogb(amax) - max_exponent(element), -127, 127));
    case ScaleEncoding::ue4m3: break;  // above
  }
  return 1.0;
}

std::vector<float> gemm_scales(const ScalingSpec& s, OperandRole role, const QuantisedOperand& q) {
  if (s.granularity != ScaleGranularity::block || role != OperandRole::b) return q.scales;
  std::vector<float> out;
  const std::size_t rows = q.scales.size() / q.scale_cols;
  for (std::size_t r = 0; r < rows; r += s.nc)
    out.insert(out.end(), q.scales.begin() + r * q.scale_cols,
               q.scales.begin() + (r + 1) * q.scale_cols);
  return out;
}

ScaleShape gemm_scale_shape(const ScalingSpec& s, OperandRole role, int T, int K, int tensor_rows) {
  if (T < 0 || K < 0 || tensor_rows < 0)
    throw std::invalid_argument(fmt::format("scale shape of {} x {} with tensor_rows {}: negative",
                                            T, K, tensor_rows));
  const std::size_t t = static_cast<std::size_t>(T);
  const int rows_per = tensor_rows == 0 || tensor_rows >= T ? std::max(T, 1) : tensor_rows;
  const ScaleGroups g = scale_groups(s, role, T, K, rows_per);
  const std::size_t cols = static_cast<std::size_t>(g.cols);
  if (cols == 0) return {0, 0};
  if (s.granularity == ScaleGranularity::tensor && rows_per >= T)
    return {std::min<std::size_t>(t, 1), 1};
  if (s.granularity == ScaleGranularity::block && role == OperandRole::b)
    return {g.row_groups, cols};
  return {t, cols};
}

ScaleGroups scale_groups(const ScalingSpec& s, OperandRole role, int T, int K, int tensor_rows) {
  if (tensor_rows < 1) throw std::invalid_argument("quantise_operand: tensor_rows must be >= 1");
  const bool tiled = s.granularity == ScaleGranularity::tile ||
                     s.granularity == ScaleGranularity::block || s.granularity == ScaleGranularity::mx;
  if (tiled && K % s.nc != 0)
    throw std::invalid_argument(fmt::format(
        "scaling {}: K = {} is not a multiple of the block length {}", s.name, K, s.nc));
  ScaleGroups g;
  g.cols = s.granularity == ScaleGranularity::none ? 0 : tiled ? K / s.nc : 1;
  g.width = g.cols == 1 ? K : s.nc;
  if (s.granularity == ScaleGranularity::tensor) g.rows_per = tensor_rows;
  if (s.granularity == ScaleGranularity::block && role == OperandRole::b) g.rows_per = s.nc;
  g.row_groups = g.cols == 0 ? 0 : (static_cast<std::size_t>(T) + g.rows_per - 1) / g.rows_per;
  return g;
}

QuantisedOperand scales_from_amax(const ScalingSpec& s, const FormatSpec& f, int T,
                                  const ScaleGroups& g, std::span<const double> amax,
                                  int tensor_rows, int threads) {
  QuantisedOperand q;
  q.scale_cols = g.cols;
  q.scales.assign(static_cast<std::size_t>(T) * g.cols, 1.0f);
  const std::size_t cols = g.cols;
  // Two-level scales: each group of tensor_rows rows' tensor scale g, from its rows' blocks
  // (only mx scales are two-level, one row per block).
  const bool two_level = s.encoding == ScaleEncoding::ue4m3;
  if (two_level) {
    q.tensor_scales.resize(T);
    for (std::size_t r0 = 0; r0 < std::size_t(T); r0 += tensor_rows) {
      const std::size_t r1 = std::min<std::size_t>(r0 + tensor_rows, T);
      double tamax = 0;
      for (std::size_t i = r0 * cols; i < r1 * cols; ++i) tamax = std::max(tamax, amax[i]);
      std::fill(q.tensor_scales.begin() + r0, q.tensor_scales.begin() + r1,
                static_cast<float>(tensor_scale_for_amax(tamax, f)));
    }
  }
  parallel_for(g.row_groups, threads, [&](std::size_t begin, std::size_t end) {
    for (std::size_t rg = begin; rg < end; ++rg) {
      const std::size_t r0 = rg * g.rows_per, r1 = std::min<std::size_t>(r0 + g.rows_per, T);
      const double gt = two_level ? double(q.tensor_scales[r0]) : 1.0;
      for (std::size_t c = 0; c < cols; ++c) {
        const float sc = static_cast<float>(scale_for_amax(amax[rg * cols + c], f, s.encoding, gt));
        for (std::size_t r = r0; r < r1; ++r) q.scales[r * cols + c] = sc;
      }
    }
  });
  return q;
}

QuantisedOperand quantise_operand(const ScalingSpec& s, OperandRole role, const FormatSpec& f,
                                  int T, int K, std::span<const double> x, int tensor_rows,
                                  int threads) {
  const std::size_t n = static_cast<std::size_t>(T) * K;
  if (x.size() != n)
    throw std::invalid_argument(
        fmt::format("quantise_operand: {} values for {} x {}", x.size(), T, K));
  const ScaleGroups g = scale_groups(s, role, T, K, tensor_rows);

  // 1. Each scale group's largest magnitude, then its scale.
  std::vector<double> amax(g.row_groups * g.cols, 0.0);
  parallel_for(g.row_groups, threads, [&](std::size_t begin, std::size_t end) {
    for (std::size_t rg = begin; rg < end; ++rg) {
      const std::size_t r0 = rg * g.rows_per, r1 = std::min<std::size_t>(r0 + g.rows_per, T);
      for (int c = 0; c < g.cols; ++c) {
        double m = 0;
        for (std::size_t r = r0; r < r1; ++r)
          for (int k = c * g.width; k < (c + 1) * g.width; ++k)
            m = std::max(m, std::fabs(x[r * K + k]));
        amax[rg * g.cols + c] = m;
      }
    }
  });
  QuantisedOperand q = scales_from_amax(s, f, T, g, amax, tensor_rows, threads);
  const bool two_level = !q.tensor_scales.empty();
  const int cols = q.scale_cols;

  // 2. Elements: q = RNE(x / s), saturating.
  const RoundingSpec rne_sat{Rounding::rne, Overflow::saturate, 32};
  const double fmax = max_finite(f);
  std::vector<std::uint32_t> codes(n);
  std::vector<std::size_t> saturated(static_cast<std::size_t>(T), 0);
  parallel_for(static_cast<std::size_t>(T), threads, [&](std::size_t begin, std::size_t end) {
    for (std::size_t t = begin; t < end; ++t)
      for (int k = 0; k < K; ++k) {
        const double sc = (two_level ? double(q.tensor_scales[t]) : 1.0) *
                          (cols == 0 ? 1.0 : q.scales[t * cols + (cols == 1 ? 0 : k / s.nc)]);
        const double v = x[t * K + k] / sc;
        if (std::fabs(v) > fmax) ++saturated[t];
        codes[t * K + k] = encode(v, f, rne_sat);
      }
  });
  for (std::size_t c : saturated) q.saturated += c;
  q.operand = decode_operand(f, T, K, std::span<const std::uint32_t>(codes));
  return q;
}

}  // namespace fp8sim
