// gemm_device: gemm() and batched_dot() on Device::cuda, after their checks (gemm.cpp).
#pragma once

#include <span>

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

}  // namespace fp8sim
