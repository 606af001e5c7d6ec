// cublaslt_fp8: cuBLASLt FP8 GEMM (E4M3 x E4M3, TN) with CUBLASLT_MATMUL_DESC_FAST_ACCUM on/off.
#pragma once

#include <cstdint>
#include <string>

namespace fp8sim::cuda {

struct CublasLtGemm {
  bool fast_accum = false;
  bool out_bf16 = false;   // D in bf16 (converted to fp32 values on the way out) else fp32
};

// D (M x N fp32 row-major, DEVICE) = A (M x K e4m3, row-major) * B^T (B: N x K e4m3)
// (+ C, M x N fp32, with beta = 1 when C is not null: cuBLASLt adds C in its epilogue, after
// the accumulation; C is not supported with a bf16 output here).
// A split-K-free algorithm is chosen (splitK = 1), so each output is one dot product.
// `algo_note` receives the chosen algorithm's id/tile/stages in one line.
// work: a device workspace of `work_bytes`. Returns "" or a one-line error.
std::string cublaslt_gemm(const CublasLtGemm& g, int M, int N, int K, const std::uint8_t* A,
                          const std::uint8_t* B, const float* C, float* D, void* work, std::size_t work_bytes,
                          std::string* algo_note = nullptr);
std::string cublaslt_version();

}  // namespace fp8sim::cuda
