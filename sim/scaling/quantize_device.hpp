// quantize_device: quantise_operand (scaling.hpp) on an operand in CUDA device memory (a
// torch CUDA tensor), with no copy of it: the same scales and codes, bit for bit.
#pragma once

#include <cstdint>

#include "scaling/device_quantize.hpp"
#include "format/format.hpp"
#include "scaling/scaling.hpp"

namespace fp8sim {

// The table the device rounds with (DeviceEncodeTable), every entry from encode() of the
// value, each code as encode(decode(code)) gives it back. f: signed, at most 8 bits.
DeviceEncodeTable device_encode_table(const FormatSpec& f);

// Quantises x (T x K, row-major, float32 or, x_double, float64, on CUDA device `device`; -1
// the current one) into codes (T x K one-byte codes of f, on the same device), on `stream`
// (a cudaStream_t; null: the default stream). Returns the scales as quantise_operand does
// (its operand left empty). Throws std::invalid_argument naming the problem: a format that
// is unsigned or wider than 8 bits, a value that is not finite, K not a multiple of the
// block length. count_saturated false: `saturated` is not counted (0), and where no host
// array goes to the device (one scale for the operand, or none) the call returns once the
// scales are known, the codes following on `stream` (a stream of the caller's) in order.
QuantisedOperand quantise_resident(const ScalingSpec& s, OperandRole role, const FormatSpec& f,
                                   int T, int K, const void* x, bool x_double, int tensor_rows,
                                   std::uint8_t* codes, void* stream = nullptr, int device = -1,
                                   bool count_saturated = true);

}  // namespace fp8sim
