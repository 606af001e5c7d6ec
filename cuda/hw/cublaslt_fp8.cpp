// cublaslt_fp8: cuBLASLt FP8 GEMM (E4M3 x E4M3, TN) with CUBLASLT_MATMUL_DESC_FAST_ACCUM on/off.
//
// Row-major D = A * B^T is column-major D^T = B * A^T: cuBLASLt's "A" is our B read
// transposed (op T, lda = K) and its "B" is our A (op N, ldb = K), m = N, n = M, ldd = N.
// FP8 on Hopper requires this TN form (cuBLAS docs, "cublasLtMatmul" FP8 notes).
#include "hw/cublaslt_fp8.hpp"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <fmt/format.h>

#include <memory>
#include <vector>

namespace fp8sim::cuda {
namespace {

#define FP8SIM_LT(call)                                                                      \
  do {                                                                                       \
    const cublasStatus_t s_ = (call);                                                        \
    if (s_ != CUBLAS_STATUS_SUCCESS)                                                         \
      return fmt::format("cuBLASLt: {} failed with status {}", #call, static_cast<int>(s_)); \
  } while (0)

struct Handles {
  cublasLtHandle_t lt = nullptr;
  ~Handles() {
    if (lt) cublasLtDestroy(lt);
  }
};

}  // namespace

std::string cublaslt_version() {
  return fmt::format("cuBLASLt {}", cublasLtGetVersion());
}

std::string cublaslt_gemm(const CublasLtGemm& g, int M, int N, int K, const std::uint8_t* A,
                          const std::uint8_t* B, const float* C, float* D, void* work, std::size_t work_bytes,
                          std::string* algo_note) {
  static Handles h;
  if (h.lt == nullptr) FP8SIM_LT(cublasLtCreate(&h.lt));
  if (M % 16 || N % 16 || K % 16) return "cuBLASLt FP8: M, N and K must be multiples of 16";
  if (C != nullptr && g.out_bf16) return "cuBLASLt FP8: C with a bf16 output is not supported here";

  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  auto cleanup = [&] {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
  };
  struct Cleanup {
    decltype(cleanup)& f;
    ~Cleanup() { f(); }
  } at_exit{cleanup};

  FP8SIM_LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  FP8SIM_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  FP8SIM_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  const std::int8_t fast = g.fast_accum ? 1 : 0;
  FP8SIM_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));

  const cudaDataType_t dtype = g.out_bf16 ? CUDA_R_16BF : CUDA_R_32F;
  FP8SIM_LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, K, N, K));  // our B, read as K x N
  FP8SIM_LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, K, M, K));  // our A, K x M
  FP8SIM_LT(cublasLtMatrixLayoutCreate(&lc, dtype, N, M, N));            // D^T, N x M

  FP8SIM_LT(cublasLtMatmulPreferenceCreate(&pref));
  FP8SIM_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &work_bytes, sizeof work_bytes));
  constexpr int kWant = 16;
  cublasLtMatmulHeuristicResult_t res[kWant] = {};
  int got = 0;
  FP8SIM_LT(cublasLtMatmulAlgoGetHeuristic(h.lt, op, la, lb, lc, lc, pref, kWant, res, &got));
  // Prefer an algorithm without split-K, so every output is one chained dot product.
  int pick = -1;
  for (int i = 0; i < got && pick < 0; ++i) {
    if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
    std::uint32_t splitk = 1;
    std::size_t w = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                         sizeof splitk, &w);
    if (splitk <= 1) pick = i;
  }
  // None: force splitK = 1 on the first algorithm and ask cuBLASLt whether it still runs.
  cublasLtMatmulAlgo_t forced{};
  bool use_forced = false;
  if (pick < 0 && got > 0) {
    forced = res[0].algo;
    const std::uint32_t one = 1;
    const std::uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
    cublasLtMatmulAlgoConfigSetAttribute(&forced, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one, sizeof one);
    cublasLtMatmulAlgoConfigSetAttribute(&forced, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &none, sizeof none);
    cublasLtMatmulHeuristicResult_t chk{};
    if (cublasLtMatmulAlgoCheck(h.lt, op, la, lb, lc, lc, &forced, &chk) == CUBLAS_STATUS_SUCCESS &&
        chk.workspaceSize <= work_bytes)
      use_forced = true, pick = 0;
  }
  if (pick < 0) return fmt::format("cuBLASLt: no split-K-free FP8 algorithm among {} found", got);
  if (algo_note != nullptr) {
    std::int32_t id = -1, tile = -1, stages = -1;
    std::size_t w = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&res[pick].algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
    cublasLtMatmulAlgoConfigGetAttribute(&res[pick].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w);
    cublasLtMatmulAlgoConfigGetAttribute(&res[pick].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &w);
    *algo_note = fmt::format("algo id {} tile {} stages {} (heuristic #{} of {}{})", id, tile, stages,
                             pick, got, use_forced ? ", splitK forced to 1" : "");
  }

  const float alpha = 1.0f, beta = C != nullptr ? 1.0f : 0.0f;
  void* out = D;
  void* tmp = nullptr;
  if (g.out_bf16 && cudaMalloc(&tmp, static_cast<std::size_t>(M) * N * 2) != cudaSuccess)
    return "cuBLASLt: cudaMalloc for the bf16 output failed";
  if (g.out_bf16) out = tmp;
  const cublasStatus_t s = cublasLtMatmul(h.lt, op, &alpha, B, la, A, lb, &beta, C != nullptr ? static_cast<const void*>(C) : out, lc, out, lc,
                                          use_forced ? &forced : &res[pick].algo, work, work_bytes, nullptr);
  std::string err;
  if (s != CUBLAS_STATUS_SUCCESS) err = fmt::format("cuBLASLt: cublasLtMatmul failed with status {}", static_cast<int>(s));
  if (g.out_bf16 && err.empty()) {
    std::vector<__nv_bfloat16> hb(static_cast<std::size_t>(M) * N);
    std::vector<float> hf(hb.size());
    cudaMemcpy(hb.data(), tmp, hb.size() * 2, cudaMemcpyDeviceToHost);
    for (std::size_t i = 0; i < hb.size(); ++i) hf[i] = __bfloat162float(hb[i]);
    cudaMemcpy(D, hf.data(), hf.size() * 4, cudaMemcpyHostToDevice);
  }
  if (tmp) cudaFree(tmp);
  const cudaError_t e = cudaGetLastError();
  if (err.empty() && e != cudaSuccess) err = std::string("cuBLASLt: ") + cudaGetErrorString(e);
  return err;
}

}  // namespace fp8sim::cuda
