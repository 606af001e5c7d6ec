// cublaslt_bench: timing cuBLASLt's FP8 GEMM with CUDA events on random device operands.
#include "hw/cublaslt_bench.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "hw/cublaslt_fp8.hpp"

namespace fp8sim::cuda {

double cublaslt_fp8_seconds(int M, int N, int K, int reps, std::string* error) {
  const std::size_t na = std::size_t(M) * K, nb = std::size_t(N) * K, nd = std::size_t(M) * N;
  const std::size_t work_bytes = 64u << 20;
  void *A = nullptr, *B = nullptr, *D = nullptr, *work = nullptr;
  auto fail = [&](const std::string& e) {
    if (error) *error = e;
    for (void* p : {A, B, D, work}) cudaFree(p);
    return -1.0;
  };
  if (cudaMalloc(&A, na) || cudaMalloc(&B, nb) || cudaMalloc(&D, nd * 4) || cudaMalloc(&work, work_bytes))
    return fail("cudaMalloc failed");
  std::vector<std::uint8_t> host(std::max(na, nb));
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  for (auto& c : host) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<std::uint8_t>(x) & 0xf7;  // no NaN (0x7f / 0xff)
  }
  cudaMemcpy(A, host.data(), na, cudaMemcpyHostToDevice);
  cudaMemcpy(B, host.data(), nb, cudaMemcpyHostToDevice);
  const CublasLtGemm g{};
  auto once = [&] {
    return cublaslt_gemm(g, M, N, K, static_cast<const std::uint8_t*>(A),
                         static_cast<const std::uint8_t*>(B), nullptr, static_cast<float*>(D), work,
                         work_bytes);
  };
  if (std::string e = once(); !e.empty()) return fail(e);
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  std::vector<float> ms;
  for (int r = 0; r < std::max(reps, 1); ++r) {
    cudaEventRecord(t0);
    once();
    cudaEventRecord(t1);
    cudaEventSynchronize(t1);
    float m = 0;
    cudaEventElapsedTime(&m, t0, t1);
    ms.push_back(m);
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  std::sort(ms.begin(), ms.end());
  fail("");
  return ms[ms.size() / 2] * 1e-3;
}

std::string device_description() {
  int dev = 0, driver = 0, runtime = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    cudaGetLastError();
    return "no CUDA device";
  }
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  return std::string(prop.name) + ", driver CUDA " + std::to_string(driver / 1000) + "." +
         std::to_string(driver % 1000 / 10) + ", runtime " + std::to_string(runtime / 1000) + "." +
         std::to_string(runtime % 1000 / 10);
}

}  // namespace fp8sim::cuda
