// block_fold: power-of-two block scales folded into the operands (block_fold.hpp).
#include "gemm/block_fold.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace fp8sim {

FormatSpec folded_format(const FormatSpec& f) {
  return format_by_name(fmt::format("e8m{}", f.mantissa_bits));
}

GemmSpec without_block_scales(const GemmSpec& s) {
  GemmSpec plain = s;
  plain.model.block_scale.reset();
  plain.scaling = Scaling::none;
  return plain;
}

std::optional<FoldedOperands> fold_block_scales(const GemmSpec& s, const Operand& A,
                                                const Operand& B, std::span<const float> sa,
                                                std::span<const float> sb, std::size_t a_cols,
                                                std::size_t b_cols) {
  const auto& in = s.model.block_scale;
  if (!in || s.model.group_sum != 1 || in->format.mantissa_bits != 0) return std::nullopt;
  const auto fold = [&](const Operand& x, std::span<const float> sc, std::size_t cols)
      -> std::optional<Operand> {
    Operand y = x;
    y.format = folded_format(x.format);
    for (std::size_t r = 0; r < std::size_t(x.rows); ++r)
      for (std::size_t k = 0; k < std::size_t(x.cols); ++k) {
        const std::size_t i = r * x.cols + k;
        const float scale = sc[r * cols + k / in->block], v = x.value[i];
        if (std::isnan(scale)) {
          y.value[i] = std::numeric_limits<float>::quiet_NaN();
          y.has_special = true;
          continue;
        }
        if (v == 0.0f || !std::isfinite(v)) continue;  // zeros align at their own rule
        const int e = std::ilogb(scale);
        const float w = std::ldexp(v, e);
        if (!std::isfinite(w) || std::ldexp(w, -e) != v) return std::nullopt;
        y.value[i] = w;
        y.exponent[i] = static_cast<std::int16_t>(x.exponent[i] + e);
      }
    return y;
  };
  auto fa = fold(A, sa, a_cols);
  if (!fa) return std::nullopt;
  auto fb = fold(B, sb, b_cols);
  if (!fb) return std::nullopt;
  return FoldedOperands{std::move(*fa), std::move(*fb), A.format, B.format};
}

}  // namespace fp8sim
