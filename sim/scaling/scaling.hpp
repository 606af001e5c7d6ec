// scaling: quantising a T x K operand into a format with scales (none, per tensor, per row,
// 1 x Nc tiles, Nc x Nc blocks, MX 1 x Nc), and how a scale is encoded (fp32, 2^n, E8M0, or
// UE4M3 under an fp32 tensor scale: NVFP4).
//
// Convention: x ~= s * q with q a value of the element format and s the dequantisation
// scale the GEMM multiplies back in at promotion (gemm.hpp). For one scale block with
// largest magnitude amax and element maximum fmax:
//   fp32: s = fl32(amax / fmax)                 (amax lands on fmax, up to fp32 rounding;
//                                                 clamped to fp32's normal range, 2^-126 to
//                                                 its max, as pow2 is)
//   pow2: s = 2^ceil(log2(amax / fmax))          (the smallest 2^n with amax / s <= fmax)
//   e8m0: s = 2^(floor(log2 amax) - emax)        (OCP MX v1.0 s6.3, emax = the element
//                                                 format's largest exponent; values above
//                                                 fmax after scaling saturate)
//   ue4m3: s = g * u, two levels (NVFP4, NVIDIA's recipe): g = fl32(tamax / (fmax * 448))
//         per tensor (tamax: the tensor's largest magnitude, clamped as fp32), and per block
//         u = max(RNE_sat_ue4m3(amax / (fmax * g)), 2^-6), a normal UE4M3 value (torchao's
//         nvfp4_quantize clamps the same way; it rounds in fp32). The block-scaled MMA
//         applies u; g is applied to the fp32 result, D = fl32(acc * fl32(g_a * g_b)).
// amax = 0 gives s = 1. Every q = round_to_format(x / s) with round-to-nearest-even and
// saturation (x / s computed in double).
//
// Which elements share a scale (rows are trials; "tensor" is `tensor_rows` rows):
//   none   : no scale (s = 1 everywhere; the GEMM gets Scaling::none)
//   tensor : one scale per group of tensor_rows rows x K          (GEMM: per-row scales)
//   row    : one scale per row                                    (GEMM: per-row scales)
//   tile   : 1 x Nc tiles along K, for A and B                    (GEMM: block, g = Nc)
//   block  : A in 1 x Nc tiles, B in Nc x Nc blocks (Nc rows of B x Nc columns), DeepSeek-V3
//            s3.3.1 (activations 1x128, weights 128x128)          (GEMM: block, g = Nc)
//   mx     : 1 x Nc tiles (Nc = 32 unless "mx<Nc>"), A and B, E8M0 scales (OCP MX) or
//            UE4M3 ones; "nvfp4" is mx16:ue4m3                    (GEMM: mx)
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format/format.hpp"
#include "gemm/gemm.hpp"
#include "scaling/scale_encoding.hpp"

namespace fp8sim {

enum class ScaleGranularity : std::uint8_t { none, tensor, row, tile, block, mx };

struct ScalingSpec {
  std::string name;  // canonical text: "none", "tensor", "row", "tile128", "block128", "mx",
                     // "mx16", "nvfp4", with ":pow2", ":e8m0" or ":ue4m3" when the encoding
                     // is not the granularity's default (fp32; e8m0 for mx)
  ScaleGranularity granularity = ScaleGranularity::none;
  int nc = 0;        // tile / block length along K (mx: 32 by default), 0 otherwise
  ScaleEncoding encoding = ScaleEncoding::fp32;
};

// "none", "tensor", "row", "tile<Nc>", "block<Nc>", "mx" or "mx<Nc>", "nvfp4", optionally
// ":fp32", ":pow2" or ":e8m0" (mx: ":e8m0" or ":ue4m3"; ue4m3 only for mx). Throws
// std::invalid_argument naming the problem.
ScalingSpec scaling_by_name(std::string_view text);

// The encoding's name for CSVs: "fp32", "pow2", "e8m0", "ue4m3", or "none" when there are no
// scales.
std::string_view encoding_name(const ScalingSpec& s);

// How the GEMM engine is told about these scales (Scaling and its block length).
Scaling engine_scaling(const ScalingSpec& s);

// Sets g's scaling, block (block / tile) and mx_block / mx_scale (mx) for these scales.
void set_engine_scaling(GemmSpec& g, const ScalingSpec& s);

// The dequantisation scale for a block with largest magnitude amax (see the table above;
// ue4m3 takes the tensor scale g, the other encodings ignore it).
double scale_for_amax(double amax, const FormatSpec& element, ScaleEncoding enc,
                      double tensor_scale = 1.0);

// The tensor scale g of a two-level (ue4m3) encoding for a tensor whose largest magnitude
// is tamax (1 when tamax is 0).
double tensor_scale_for_amax(double tamax, const FormatSpec& element);

// Role of an operand: B's "block" scales cover Nc rows; everything else is the same for A, B.
enum class OperandRole : std::uint8_t { a, b };

// One quantised operand: codes of `format`, and the scales the engine takes for it
// (T x scale_cols, row-major; scale_cols = 1 for tensor/row, K / Nc for tile/block/mx and
// 0 for none, when `scales` is empty).
struct QuantisedOperand {
  Operand operand;            // values q (the engine's input), T x K
  std::vector<float> scales;  // per row (and per tile along K)
  int scale_cols = 0;
  std::vector<float> tensor_scales;  // two-level (ue4m3): each row's tensor scale g; else empty
  std::size_t saturated = 0;  // elements whose |x / s| exceeded the format's max
};

// Quantises x (T x K, row-major, finite). Preconditions: K a multiple of Nc for tile/block/
// mx, tensor_rows >= 1. Results do not depend on `threads`.
QuantisedOperand quantise_operand(const ScalingSpec& s, OperandRole role, const FormatSpec& f,
                                  int T, int K, std::span<const double> x, int tensor_rows,
                                  int threads = 0);

// Which elements share a scale: groups of rows_per rows (the last one may be shorter) by
// `width` columns; cols groups along K (0 for none). Throws std::invalid_argument as
// quantise_operand does (K not a multiple of Nc, tensor_rows < 1).
struct ScaleGroups {
  int rows_per = 1;
  int width = 0;
  int cols = 0;
  std::size_t row_groups = 0;
};
ScaleGroups scale_groups(const ScalingSpec& s, OperandRole role, int T, int K, int tensor_rows);

// The scales (and two-level tensor scales) of a T-row operand whose group (rg, c) has largest
// magnitude amax[rg * cols + c]: quantise_operand's scales, with operand left empty (on
// `threads` threads, 0 all; never a different result). The GPU quantiser
// (quantize_device.hpp) computes amax there and the scales here.
QuantisedOperand scales_from_amax(const ScalingSpec& s, const FormatSpec& f, int T,
                                  const ScaleGroups& g, std::span<const double> amax,
                                  int tensor_rows, int threads = 0);

// q's scales in the shape the all-pairs gemm() takes for engine_scaling(s): B's Nc x Nc
// blocks one row per block (quantise_operand repeats a block's scale on each of its Nc
// rows); every other operand's scales as they are, one row per row.
std::vector<float> gemm_scales(const ScalingSpec& s, OperandRole role, const QuantisedOperand& q);

// The shape of gemm_scales(s, role, q) for a T x K operand with tensor_rows rows per tensor
// scale (0: all T rows): rows x cols, 0 x 0 for none; a scale for the whole tensor is one
// scale (1 x 1, 0 x 1 when T = 0). The one rule every front-end and torch's fake kernel of
// fp8sim::quantize take the scale shape from. Throws as scale_groups.
struct ScaleShape {
  std::size_t rows = 0, cols = 0;
};
ScaleShape gemm_scale_shape(const ScalingSpec& s, OperandRole role, int T, int K, int tensor_rows);

// The dequantised value s * q of element (t, k), as the exact reference uses it.
inline double dequantised(const QuantisedOperand& q, int K, std::size_t t, int k, int nc) {
  const double v = q.operand.value[t * K + k];
  if (q.scale_cols == 0) return v;
  const int col = q.scale_cols == 1 ? 0 : k / nc;
  const double g = q.tensor_scales.empty() ? 1.0 : q.tensor_scales[t];
  return g * q.scales[t * q.scale_cols + col] * v;  // exact: a UE4M3 scale times a <= 8-bit value
}

// The second level of two-level scales, as cuBLASLt applies its alpha: fl32(acc * fl32(ga * gb)).
inline float tensor_scaled(float acc, float ga, float gb) { return acc * (ga * gb); }

}  // namespace fp8sim
