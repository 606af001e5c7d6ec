// engine_cpu: the CPU engine. Every output of a GEMM (or of T batched dot products) is one
// chain of steps along K, chunks promoted into an FP32 main accumulator with their scales;
// outputs run in parallel and never depend on the thread count. It decides nothing about
// routes: gemm/dispatch.cpp hands it a checked spec and unpacked operands.
#pragma once

#include <cstdint>
#include <span>

#include "gemm/gemm.hpp"

namespace fp8sim {

// Which rows of A and B each output dots together.
enum class Pairing : std::uint8_t {
  all_pairs,   // gemm(): output (m, n) = A row m . B row n, D is M x N
  row_by_row,  // batched_dot(): output t = A row t . B row t, D has T elements
};

// Every output on the CPU: spec already validated for A and B's shapes, sa and sb of shapes
// sh, D (and D_prefix, P x outputs, for the P prefixes of K) sized. Throws std::domain_error
// with the first error a reference step raised.
void cpu_engine(const GemmSpec& spec, const Operand& A, const Operand& B, std::span<const float> C,
                std::span<const float> sa, std::span<const float> sb, const ScaleShapes& sh,
                std::span<float> D, Pairing pairing, std::span<const int> prefix,
                std::span<float> D_prefix);

}  // namespace fp8sim
