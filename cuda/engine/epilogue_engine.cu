// epilogue_engine: the library GEMM's split-K reduction and epilogue on CUDA device memory
// (run_device_epilogue) and the finiteness check of an fp32 array there (device_all_finite),
// both declared in sim/gemm/device_gemm.hpp beside the GEMM engine's entry point.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "engine/device_memory.cuh"
#include "engine/gemm_engine_arith.cuh"
#include "gemm/device_gemm.hpp"

namespace fp8sim {

using gpu::check;
using gpu::device_alloc;
using gpu::DeviceBuffer;
using gpu::upload;

namespace {
// Sets *bad where some of the n floats at p is not finite.
__global__ void nonfinite_kernel(const float* p, std::size_t n, int* bad) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    if (!isfinite(p[i])) *bad = 1;
}

// One output of run_device_epilogue's element-wise pass, m and col its row and column.
__device__ __forceinline__ float epilogue_at(const DeviceEpilogue& e, float v, float part,
                                             int m, int col) {
  if (e.part) v = __fadd_rn(v, part);
  if (e.finish) {
    if (e.scales == 1)
      v = __fmul_rn(v, e.scales_on_device ? __fmul_rn(e.sa[0], e.sb[0])
                                          : __fmul_rn(e.sa_value, e.sb_value));
    else if (e.scales == 2) v = __fmul_rn(__fmul_rn(v, e.sb[col]), e.sa[m]);
    if (e.bias) v = __fadd_rn(v, e.bias[col]);
    if (!e.out_fp32) v = float(gpu::quantize_rne(v, e.out_type));
  }
  return v;
}

// run_device_epilogue's element-wise pass (e's host arrays replaced by device copies). VEC:
// four outputs of one row a thread, as one 16-byte load and store (N a multiple of 4, D and
// part on 16 bytes).
template <bool VEC>
__global__ void epilogue_kernel(const DeviceEpilogue e, float* D) {
  constexpr int V = VEC ? 4 : 1;
  const std::size_t n = std::size_t(e.M) * e.N;
  for (std::size_t i = (blockIdx.x * std::size_t(blockDim.x) + threadIdx.x) * V; i < n;
       i += std::size_t(gridDim.x) * blockDim.x * V) {
    const int m = int(i / unsigned(e.N)), col = int(i % unsigned(e.N));
    float v[V], part[V] = {};
    if constexpr (VEC) {
      const float4 q = *reinterpret_cast<const float4*>(D + i);
      v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
      if (e.part) {
        const float4 p = *reinterpret_cast<const float4*>(e.part + i);
        part[0] = p.x, part[1] = p.y, part[2] = p.z, part[3] = p.w;
      }
    } else {
      v[0] = D[i];
      if (e.part) part[0] = e.part[i];
    }
#pragma unroll
    for (int u = 0; u < V; ++u) v[u] = epilogue_at(e, v[u], part[u], m, col + u);
    if constexpr (VEC) *reinterpret_cast<float4*>(D + i) = make_float4(v[0], v[1], v[2], v[3]);
    else D[i] = v[0];
  }
}
}  // namespace

void run_device_epilogue(const DeviceEpilogue& e, float* D, void* stream, int device) {
  DeviceLaunch launch;
  launch.stream = stream;
  launch.device = device;
  const gpu::LaunchStream ls(launch);
  const cudaStream_t st = ls.get();
  const std::size_t n = std::size_t(e.M) * e.N;
  if (n == 0) return;
  DeviceEpilogue d = e;
  DeviceBuffer bsa, bsb, bbias;
  // Tensor scales go by value (kernel parameters); row scales and a bias are host arrays
  // uploaded from pageable memory, and the host waits for the kernel then (as it did for
  // every epilogue), as without a stream of the caller's. Scales on the device already are
  // read there.
  bool uploaded = false;
  const bool host_scales = e.finish && !e.scales_on_device;
  if (host_scales && e.scales == 1) {
    d.sa_value = e.sa[0];
    d.sb_value = e.sb[0];
  } else if (host_scales && e.scales == 2) {
    d.sa = upload(e.sa, std::size_t(e.M), st, bsa);
    d.sb = upload(e.sb, std::size_t(e.N), st, bsb);
    uploaded = true;
  }
  if (e.finish && e.bias) {
    d.bias = upload(e.bias, std::size_t(e.N), st, bbias);
    uploaded = true;
  }
  const auto on16 = [](const float* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  if (e.N % 4 == 0 && on16(D) && (!e.part || on16(e.part)))
    epilogue_kernel<true><<<gpu::blocks_for(n / 4), 256, 0, st>>>(d, D);
  else
    epilogue_kernel<false><<<gpu::blocks_for(n), 256, 0, st>>>(d, D);
  check(cudaGetLastError(), "epilogue kernel launch");
  if (uploaded || !stream) check(cudaStreamSynchronize(st), "epilogue kernel");
}

bool device_all_finite(const float* p, std::size_t n, void* stream, int device) {
  DeviceLaunch launch;
  launch.stream = stream;
  launch.device = device;
  const gpu::LaunchStream ls(launch);
  const cudaStream_t st = ls.get();
  if (n == 0) return true;
  const DeviceBuffer flag = device_alloc(sizeof(int), st);
  int* bad = static_cast<int*>(flag.get());
  check(cudaMemsetAsync(bad, 0, sizeof(int), st), "memset");
  nonfinite_kernel<<<gpu::blocks_for(n), 256, 0, st>>>(p, n, bad);
  check(cudaGetLastError(), "finiteness kernel launch");
  int host = 0;
  check(cudaMemcpyAsync(&host, bad, sizeof host, cudaMemcpyDeviceToHost, st), "download");
  check(cudaStreamSynchronize(st), "finiteness kernel");
  return host == 0;
}

}  // namespace fp8sim
