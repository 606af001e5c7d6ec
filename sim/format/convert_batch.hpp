// convert_batch: fast float32 -> narrow-format encoding of whole arrays, bit-identical to encode().
//
// encode() is the reference: one exact, general rounding per value. encode_batch() is the
// same function specialised to float32 inputs and formats of at most 8 bits, written as a
// branch-free loop over the input bits that the compiler vectorises (an AVX2 build of the
// loop is picked at run time where the CPU has it; otherwise a portable build runs).
// tests/test_format_cuda_fp8.cpp checks it against encode() and cuda_fp8.h on all 2^32 inputs.
#pragma once

#include <cstdint>
#include <span>

#include "format/format.hpp"
#include "format/rounding.hpp"

namespace fp8sim {

// Encodes every x[i] into f under r: out[i] == encode(x[i], f, r) for every i.
// Preconditions (std::invalid_argument otherwise): total_bits(f) <= 8, r.mode is deterministic
// (not sr), out.size() == x.size().
// Errors exactly where encode() throws std::domain_error: a NaN into a format without NaN, or
// an overflow under `nonsat` into a format with neither Inf nor NaN (e2m1, e2m3, e3m2). Then
// std::domain_error is thrown after the whole array was processed (out holds garbage for
// those elements and correct codes for the rest).
// `threads`: 1 runs on the calling thread; 0 uses every hardware thread; the result never
// depends on it.
void encode_batch(const FormatSpec& f, const RoundingSpec& r, std::span<const float> x,
                  std::span<std::uint8_t> out, int threads = 1);

// Which build of the loop encode_batch runs on this CPU: "avx2" or "generic" (forced by the
// environment variable FP8SIM_ISA=generic).
const char* encode_batch_isa();

}  // namespace fp8sim
