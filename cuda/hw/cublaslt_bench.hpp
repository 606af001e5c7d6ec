// cublaslt_bench: the real FP8 GEMM's time (cuBLASLt, e4m3 x e4m3 -> fp32) for benchmarks.
// Plain C++ (no CUDA headers) so that experiments/ can call it.
#pragma once

#include <string>

namespace fp8sim::cuda {

// Median seconds of one M x N x K cuBLASLt FP8 GEMM on random codes (device memory, after
// warm-up), or a negative value with `error` set.
double cublaslt_fp8_seconds(int M, int N, int K, int reps, std::string* error);

// The current CUDA device for a benchmark's header: "<name>, driver <x.y>, CUDA runtime <x.y>",
// or "no CUDA device".
std::string device_description();

}  // namespace fp8sim::cuda
