// gemm_device: gemm() and batched_dot() on Device::cuda, after their checks (gemm.cpp).
#pragma once

#include <span>

#include "block_fold.hpp"
#include "device_gemm.hpp"
#include "gemm.hpp"

namespace fp8sim {

// The GEMM of gemm(s, A, B, ...) on the CUDA engine; A and B as the CPU engine sees them
// (alignment exponents of an unpacking model already applied), shapes already checked.
void gemm_on_device(const GemmSpec& s, const Operand& A, const Operand& B,
                    std::span<const float> C, std::span<const float> sa,
                    std::span<const float> sb, std::span<float> D,
                    const DeviceLaunch& launch = {});

// batched_dot(s, A, B, ...) on the CUDA engine, likewise.
void batched_dot_on_device(const GemmSpec& s, const Operand& A, const Operand& B,
                           std::span<const float> C, std::span<const float> sa,
                           std::span<const float> sb, std::span<float> D);

// gemm() (batched: batched_dot()) of a block-scaled model on the CUDA engine with its scales
// folded into the operands (block_fold.hpp): s with the model's MX scaling, sa and sb the
// scales that were folded. Every element's alignment floor moves with its scale, so subnormal
// elements align as the CPU engine aligns them.
void folded_on_device(const GemmSpec& s, const FoldedOperands& f, std::span<const float> C,
                      std::span<const float> sa, std::span<const float> sb,
                      std::span<float> D, bool batched, const DeviceLaunch& launch = {});

// gemm() (batched: batched_dot()) of a group-sum model (group_sums_fit) on the CUDA engine:
// s with the model's MX scaling, sa and sb its block scales; A, B, C and the scales finite
// (what group_sums_on_device_fit checks).
bool group_sums_on_device_fit(const GemmSpec& s, const Operand& A, const Operand& B,
                              std::span<const float> C, std::span<const float> sa,
                              std::span<const float> sb);
void group_sums_on_device(const GemmSpec& s, const Operand& A, const Operand& B,
                          std::span<const float> C, std::span<const float> sa,
                          std::span<const float> sb, std::span<float> D, bool batched,
                          const DeviceLaunch& launch = {});

// gemm() on operands already in CUDA device memory (e.g. torch CUDA tensors), with no copy
// of them: A (M x K) and B (N x K) one-byte codes of s.a_format / s.b_format, C (M x N
// float32, or null) and D (M x N float32) on the current CUDA device; scales (host) as
// gemm() takes them. The engine decodes each code once on the device and writes D in place,
// on `stream` (a cudaStream_t; null: the default stream) of CUDA device `device` (-1: the
// current one), and returns when D is written.
// Checks as gemm() does (bad codes too); throws std::invalid_argument naming the problem.
// Split-K slices and a kernel's zero-padded K tail read the codes in place; each slice's
// fp32 result is summed on the host, where a bias (host, N values) and scales after K
// (gemm_split.hpp) are applied, and D copied back (the operands never move).
void gemm_resident(const GemmSpec& s, int M, int N, int K, const std::uint8_t* A,
                   const std::uint8_t* B, const float* C, std::span<const float> sa,
                   std::span<const float> sb, float* D, void* stream = nullptr,
                   int device = -1, std::span<const float> bias = {});

}  // namespace fp8sim
