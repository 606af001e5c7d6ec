// rounding: the reference function that rounds an exact value into a FormatSpec.
//
// round_to_format() defines every rounding in fp8sim: encoding from double, rounding an exact
// Boost.Multiprecision sum, the 14-bit output of Hopper's accumulator. A few hot loops round
// in a fast clone instead, each pinned to the reference bit for bit by a test:
//   encode_batch (convert_batch.cpp)                 test_format_batch, test_format_cuda_fp8
//   the GEMM engine's fused_step_fast term cuts and
//   round_accumulator_output_fast (engine_cpu.cpp)   test_gemm_engine
//   exact_dot_fast's nearest fp32 goes through round_to_format; doubles are beyond FormatSpec,
//   so ExactSum::to_double and exact_dot_fast round to double each on their own (exact.cpp),
//   pinned to each other by test_exact
// The accumulator's term cut (cut_to_grid in accumulator/step.cpp: rz or rne to an integer grid)
// is the one rounding outside this file without a reference here; test_gemm_cases works it
// by hand.
#pragma once

#include <cstdint>
#include <string_view>

#include "format/format.hpp"

namespace fp8sim {

enum class Rounding : std::uint8_t {
  rne,  // to nearest, ties to even
  rz,   // toward zero (truncate)
  ru,   // toward +infinity
  rd,   // toward -infinity
  rna,  // to nearest, ties away from zero
  sr,   // stochastic: round up with probability (discarded fraction), using sr_bits random bits
};

enum class Overflow : std::uint8_t {
  saturate,  // CUDA's .satfinite: overflow and +-Inf go to +-max finite; NaN stays NaN
  nonsat,    // IEEE-style: overflow goes to Inf where the format has one, else NaN
             // (a rounding direction toward zero still gives max finite, as IEEE 754 says)
};

// CPFloat-style options record for one rounding; validated by validate(RoundingSpec).
struct RoundingSpec {
  Rounding mode = Rounding::rne;
  Overflow overflow = Overflow::saturate;
  int sr_bits = 32;  // random bits per stochastic rounding, 1..64 (bias <= 2^-sr_bits ulp)
};

Rounding parse_rounding(std::string_view s);   // rne|rz|ru|rd|rna|sr, else invalid_argument
Overflow parse_overflow(std::string_view s);   // saturate|nonsat (aliases satfinite, sat)
std::string_view to_string(Rounding r);
std::string_view to_string(Overflow o);
void validate(const RoundingSpec& r);

// An exact finite value before rounding: (-1)^negative * significand * 2^exponent, plus
// "a little more" when sticky is set (nonzero bits exist below the significand's lsb).
// The significand may be 0 only when sticky is false (an exact zero).
struct Unrounded {
  bool negative = false;
  std::uint64_t significand = 0;
  int exponent = 0;
  bool sticky = false;
};

// Rounds u into f. `random` supplies the stochastic-rounding bits (its low sr_bits are
// used); other modes ignore it. Result is a code of f.
//   1. Find the quantum: 2^(max(e_u, emin) - mantissa_bits), e_u = exponent of u's msb.
//   2. Split u into the integer n of quanta and the discarded fraction (+ sticky).
//   3. Round n by the mode; a carry out of the significand renormalises.
//   4. Zero: signed where the format has -0. e8m0 (no zero) clamps to its smallest value.
//   5. Overflow past max finite: see Overflow.
// Throws std::domain_error when the result is not representable at all (overflow with
// `nonsat` into a format with neither Inf nor NaN, e.g. e2m1).
std::uint32_t round_to_format(const Unrounded& u, const FormatSpec& f, const RoundingSpec& r,
                              std::uint64_t random = 0);

// Encodes a double (NaN, +-Inf allowed) into f through round_to_format.
// NaN gives f's NaN (sign kept where the format can); NaN into a format without NaN throws
// std::domain_error. +-Inf behaves as an overflow. Negative values into unsigned e8m0 give NaN.
std::uint32_t encode(double x, const FormatSpec& f, const RoundingSpec& r = {},
                     std::uint64_t random = 0);

// Round a double to the nearest value of f and back: decode(f, encode(x, f, r)).
double quantize(double x, const FormatSpec& f, const RoundingSpec& r = {},
                std::uint64_t random = 0);

}  // namespace fp8sim
