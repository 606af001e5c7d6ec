// quantize_device: quantise_operand (scaling.hpp) on an operand in CUDA device memory (a
// torch CUDA tensor), with no copy of it: the same scales and codes, bit for bit.
#pragma once

#include <cstdint>

#include "format/format.hpp"
#include "scaling/device_quantize.hpp"
#include "scaling/device_scales.hpp"
#include "scaling/scaling.hpp"

namespace fp8sim {

// The table the device rounds with (DeviceEncodeTable), every entry from encode() of the
// value, each code as encode(decode(code)) gives it back. f: signed, at most 8 bits.
DeviceEncodeTable device_encode_table(const FormatSpec& f);

// Fills t's binade index (binade0, first, bits: table_nearest_binade's) from t.n and
// t.value (ascending, value[0] = 0, n >= 2), each binade marked regular only where its values
// are its slots'.
void index_binades(DeviceEncodeTable& t);

// The table the device rounds scales with (DeviceRoundTable), every entry decode(encode())
// of its value. f: unsigned, at most 8 bits, at most 128 nonnegative values (UE4M3).
DeviceRoundTable device_round_table(const FormatSpec& f);

// What the device computes an element format's scales from (DeviceScaleRule): its largest
// value and exponent, and UE4M3's rounding.
DeviceScaleRule device_scale_rule(const FormatSpec& element);

// Quantises x (T x K, row-major, float32 or, x_double, float64, on CUDA device `device`; -1
// the current one) into codes (T x K one-byte codes of f, on the same device), on `stream`
// (a cudaStream_t; null: the default stream). Returns the scales as quantise_operand does
// (its operand left empty), computed on the device and downloaded once (no host work per
// element or per scale group). Throws std::invalid_argument naming the problem: a format
// that is unsigned or wider than 8 bits, a value that is not finite (the codes then not
// written), K not a multiple of the block length. count_saturated false: `saturated` is not
// counted (0), and on a stream of the caller's the call returns once the scales are known,
// the codes following on `stream` in order (run_device_quantise).
QuantisedOperand quantise_resident(const ScalingSpec& s, OperandRole role, const FormatSpec& f,
                                   int T, int K, const void* x, bool x_double, int tensor_rows,
                                   std::uint8_t* codes, void* stream = nullptr, int device = -1,
                                   bool count_saturated = true);

// quantise_resident for a GEMM that reads the scales on the device (fp8sim.torch's operands):
// one level of scales, all rows under one tensor scale, written into `scales` (device memory,
// gemm_scale_shape's rows x cols floats), and the host does not wait for the device at all.
// An element that is not finite is not thrown here: every scale becomes NaN (so is every
// output of a GEMM that reads them) and the element is reported by
// check_deferred_quantisations, which this call runs first (without waiting) for the earlier
// ones. Throws std::invalid_argument for what it cannot defer: two-level scales, no scales,
// no stream of the caller's.
void quantise_resident_deferred(const ScalingSpec& s, OperandRole role, const FormatSpec& f,
                                int T, int K, const void* x, bool x_double,
                                std::uint8_t* codes, float* scales, void* stream, int device);

}  // namespace fp8sim
