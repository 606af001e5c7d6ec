// hw_harness: fp8sim-hw's test vectors (suites) and the model side of a comparison (model
// output, bitwise equality), shared by the check, capture and probe subcommands.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/bits.hpp"  // same_bits, hex_bits
#include "format/format.hpp"
#include "gemm/gemm.hpp"

namespace fp8sim::hw {

// One GEMM problem: D = A * B^T (+ C in the accumulator), sim/gemm/gemm.hpp conventions.
struct Case {
  std::string suite;
  FormatSpec a_format, b_format;
  int M = 64, N = 16, K = 0;
  std::vector<std::uint8_t> A, B;  // M x K, N x K codes
  std::vector<float> C;            // M x N or empty
  std::vector<float> sa, sb;       // block scales (1 x 128 for A, 128 x 128 for B) or empty
  std::uint64_t seed = 0;
};

// Suite names, in table order.
const std::vector<std::string>& suite_names();

// The cases of one suite for a format pair (deterministic in seed). `block_scales` adds
// sa / sb; K values where the variant cannot run are still generated (the caller skips).
std::vector<Case> make_suite(const std::string& suite, const FormatSpec& a, const FormatSpec& b,
                             std::uint64_t seed, bool block_scales, int max_k);

// Model output for a case (throws std::invalid_argument when the spec cannot run it).
std::vector<float> run_model(const GemmSpec& s, const Case& c);


}  // namespace fp8sim::hw
