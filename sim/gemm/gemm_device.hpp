// gemm_device: gemm() and batched_dot() on Device::cuda, after their checks (gemm/dispatch.cpp).
#pragma once

#include <span>

#include "gemm/block_fold.hpp"
#include "gemm/device_gemm.hpp"
#include "gemm/gemm.hpp"

namespace fp8sim {

// An IEEE-style format (an output, a C register, an output type) as the CUDA engine's numbers.
DeviceFormat device_format(const FormatSpec& f);

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
// Whether resident codes of s's formats fold with the power-of-two block scales sa and sb
// where the kernels read them (resident_on_device): a model that applies them to single
// products (no group sums) and whose plain model the engine runs, every scale finite and
// nonzero, and every element times its scale an exact finite float (bounded by the formats'
// extremes and the scales').
bool folded_codes_fit(const GemmSpec& s, std::span<const float> sa, std::span<const float> sb);
// The same from the scales' log2 ranges (check_scales_on_device's).
bool folded_codes_fit(const GemmSpec& s, const ScaleLog2& la, const ScaleLog2& lb);

// gemm() (batched: batched_dot()) of a group-sum model (group_sums_fit) on the CUDA engine:
// s with the model's MX scaling, sa and sb its block scales; A, B, C and the scales finite
// (what group_sums_on_device_fit checks).
bool group_sums_on_device_fit(const GemmSpec& s, const Operand& A, const Operand& B,
                              std::span<const float> C, std::span<const float> sa,
                              std::span<const float> sb);
// The same for operands of formats a and b whose elements are all finite or not.
bool group_sums_on_device_fit(const GemmSpec& s, const FormatSpec& a, const FormatSpec& b,
                              bool finite_elements, std::span<const float> C,
                              std::span<const float> sa, std::span<const float> sb);
void group_sums_on_device(const GemmSpec& s, const Operand& A, const Operand& B,
                          std::span<const float> C, std::span<const float> sa,
                          std::span<const float> sb, std::span<float> D, bool batched,
                          const DeviceLaunch& launch = {});

// gemm() (batched: batched_dot()) of a block-scaled model whose steps neither fold nor take
// the group-sum step (fp32 or bf16 operands, non-finite values or scales) on the CUDA engine:
// every step the CPU engine's reference step with block scales (Engine::scaled_step ->
// fused_step_exponents with StepScales), the same bits; s with the model's MX scaling, sa and
// sb its block scales. Throws std::domain_error with the CPU engine's message where a step
// raises an error (a group sum not exact in a double). Where scaled_reference_on_device_fit:
// a block-scaled model (no chained blocks, not exact) whose c joins or is added after, in at
// most 8 lanes (c exact and c realigned stay on the CPU engine).
bool scaled_reference_on_device_fit(const AccumulatorSpec& m);
// Its DeviceGemm (run_device_gemm's input; step_errors unset), and the CPU engine's
// std::domain_error for a DeviceStepError (nothing for 0): what scaled_reference_on_device
// runs between them (tests/test_gemm_scaled_host.cpp runs the device step on the host there).
DeviceGemm scaled_reference_device_gemm(const GemmSpec& s, const Operand& A, const Operand& B,
                                        std::span<const float> C, std::span<const float> sa,
                                        std::span<const float> sb, std::span<float> D,
                                        bool batched);
void throw_step_error(const AccumulatorSpec& m, unsigned error);
void scaled_reference_on_device(const GemmSpec& s, const Operand& A, const Operand& B,
                                std::span<const float> C, std::span<const float> sa,
                                std::span<const float> sb, std::span<float> D, bool batched,
                                const DeviceLaunch& launch = {});

// One run of the CUDA engine on codes in CUDA device memory (gemm_resident's route, after its
// checks): columns [k0, k0 + len) of A (M x ld codes) and B (N x ld), columns at or beyond
// `cols` read as zero padding; D (M x N float32, device) written in place on `stream` of
// `device`, fp32 values of s.out_type. A block-scaled model runs here only on group sums
// (group_sums_on_device_fit holds, C's finiteness checked on the device) or with its scales
// folded into the codes' values as the kernels read them (folded_codes_fit holds; sa and sb
// host memory, or device memory where launch.scales_on_device, with their log2 ranges).
// `launch`: how the engine launches (tests; codes_checked: the codes checked already, gemm()'s
// bands), its stream and device replaced by these.
void resident_on_device(const GemmSpec& s, int M, int N, int ld, int k0, int len, int cols,
                        const std::uint8_t* A, const std::uint8_t* B, const float* C,
                        std::span<const float> sa, std::span<const float> sb, float* D,
                        void* stream, int device, const DeviceLaunch& launch = {});

}  // namespace fp8sim
