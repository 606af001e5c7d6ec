// scale_check: block scales checked on the device (device_gemm.hpp's check_scales_on_device),
// so that gemm_resident's FP4 GEMMs do not loop over millions of scales on the host. The
// same test as the host's (sim/gemm/dispatch.cpp, check_block_scales): a scale is a value of
// its format where its float bits have 16 zero low bits and the table's bit for the high 16
// is set, or it is a NaN and the format has one.
#include <cuda_runtime.h>

#include <cstring>
#include <vector>

#include "engine/device_memory.cuh"

namespace fp8sim {
namespace {

using gpu::check;

// out[0]: the smallest index of a scale that is not a value; out[1]: 1 where some is not
// finite (both left as set where every scale passes).
__global__ void scale_check_kernel(const float* s, std::size_t n, const std::uint32_t* table,
                                   bool nan_ok, unsigned long long* out) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const float x = s[i];
    const std::uint32_t b = __float_as_uint(x);
    const bool value = isnan(x) ? nan_ok
                                : (b & 0xffffu) == 0 && (table[b >> 21] >> ((b >> 16) & 31)) & 1u;
    if (!value) atomicMin(&out[0], static_cast<unsigned long long>(i));
    if (!isfinite(x)) out[1] = 1;
  }
}

}  // namespace

DeviceScaleCheck check_scales_on_device(const float* scales, std::size_t n,
                                        const std::uint32_t* table, bool nan_ok,
                                        void* stream, int device) {
  DeviceLaunch launch;
  launch.stream = stream;
  launch.device = device;
  const gpu::LaunchStream ls(launch);
  const cudaStream_t st = ls.get();
  // One upload: the two results (first bad index = n, all finite), then the table.
  std::vector<unsigned long long> stage(2 + kScaleTableWords / 2);
  stage[0] = n;
  stage[1] = 0;
  std::memcpy(stage.data() + 2, table, kScaleTableWords * sizeof *table);
  const gpu::DeviceBuffer buf = gpu::device_alloc(stage.size() * sizeof stage[0], st);
  auto* out = static_cast<unsigned long long*>(buf.get());
  check(cudaMemcpyAsync(out, stage.data(), stage.size() * sizeof stage[0], cudaMemcpyHostToDevice,
                        st), "upload");
  if (n > 0) {
    scale_check_kernel<<<gpu::blocks_for(n), 256, 0, st>>>(
        scales, n, reinterpret_cast<const std::uint32_t*>(out + 2), nan_ok, out);
    check(cudaGetLastError(), "scale check kernel launch");
  }
  unsigned long long got[2];
  check(cudaMemcpyAsync(got, out, sizeof got, cudaMemcpyDeviceToHost, st), "download");
  check(cudaStreamSynchronize(st), "scale check kernel");
  return {static_cast<std::size_t>(got[0]), got[1] == 0};
}

}  // namespace fp8sim
