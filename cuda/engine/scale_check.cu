// scale_check: block scales checked on the device (device_gemm.hpp's check_scales_on_device),
// so that gemm_resident's block-scaled GEMMs do not loop over millions of scales on the host,
// with the log2 ranges of A's and B's scales that folding them into codes needs. The
// same test as the host's (sim/gemm/dispatch.cpp, ScaleValues::check): a scale is a value of
// its format where its float bits have 16 zero low bits and the table's bit for the high 16
// is set, or it is a NaN and the format has one.
#include <cuda_runtime.h>

#include <cstring>
#include <vector>

#include "engine/device_memory.cuh"

namespace fp8sim {
namespace {

using gpu::check;

// The results' words: the smallest index of a scale that is not a value, 1 where some is
// not finite, then for A's scales (below split) and B's: the smallest and the largest
// floor(log2 s) of the finite nonzero ones plus kBias, and 1 where some is zero or not finite.
enum : int { kFirstBad, kNonFinite, kLoA, kHiA, kLoB, kHiB, kZeroA, kZeroB, kWords };
constexpr unsigned kBias = 1024, kNoLo = 1u << 20;

__global__ void scale_check_kernel(const float* s, std::size_t n, std::size_t split,
                                   const std::uint32_t* table, bool nan_ok,
                                   unsigned long long* out) {
  unsigned lo[2] = {kNoLo, kNoLo}, hi[2] = {0, 0}, zero[2] = {0, 0};
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const float x = s[i];
    const std::uint32_t b = __float_as_uint(x);
    const bool value = isnan(x) ? nan_ok
                                : (b & 0xffffu) == 0 && (table[b >> 21] >> ((b >> 16) & 31)) & 1u;
    if (!value) atomicMin(&out[kFirstBad], static_cast<unsigned long long>(i));
    if (!isfinite(x)) out[kNonFinite] = 1;
    const int seg = i < split ? 0 : 1;
    if (!isfinite(x) || x == 0.0f) {
      zero[seg] = 1;
    } else {
      const unsigned e = static_cast<unsigned>(ilogbf(x) + static_cast<int>(kBias));
      lo[seg] = min(lo[seg], e);
      hi[seg] = max(hi[seg], e);
    }
  }
  // Each warp's extremes, then one atomic a warp and word (every lane reaches this).
  for (int seg = 0; seg < 2; ++seg) {
    const unsigned wl = __reduce_min_sync(0xffffffffu, lo[seg]);
    const unsigned wh = __reduce_max_sync(0xffffffffu, hi[seg]);
    const unsigned wz = __reduce_or_sync(0xffffffffu, zero[seg]);
    if (threadIdx.x % 32 == 0) {
      if (wl != kNoLo) atomicMin(&out[seg ? kLoB : kLoA], static_cast<unsigned long long>(wl));
      if (wh != 0) atomicMax(&out[seg ? kHiB : kHiA], static_cast<unsigned long long>(wh));
      if (wz) out[seg ? kZeroB : kZeroA] = 1;
    }
  }
}

}  // namespace

DeviceScaleCheck check_scales_on_device(const float* scales, std::size_t n, std::size_t split,
                                        const std::uint32_t* table, bool nan_ok,
                                        void* stream, int device) {
  DeviceLaunch launch;
  launch.stream = stream;
  launch.device = device;
  const gpu::LaunchStream ls(launch);
  const cudaStream_t st = ls.get();
  // One upload: the results' words (first bad index = n, all finite, no log2 yet), then the
  // table.
  std::vector<unsigned long long> stage(kWords + kScaleTableWords / 2, 0);
  stage[kFirstBad] = n;
  stage[kLoA] = stage[kLoB] = kNoLo;
  std::memcpy(stage.data() + kWords, table, kScaleTableWords * sizeof *table);
  const gpu::DeviceBuffer buf = gpu::device_alloc(stage.size() * sizeof stage[0], st);
  auto* out = static_cast<unsigned long long*>(buf.get());
  check(cudaMemcpyAsync(out, stage.data(), stage.size() * sizeof stage[0], cudaMemcpyHostToDevice,
                        st), "upload");
  if (n > 0) {
    scale_check_kernel<<<gpu::blocks_for(n), 256, 0, st>>>(
        scales, n, split, reinterpret_cast<const std::uint32_t*>(out + kWords), nan_ok, out);
    check(cudaGetLastError(), "scale check kernel launch");
  }
  unsigned long long got[kWords];
  check(cudaMemcpyAsync(got, out, sizeof got, cudaMemcpyDeviceToHost, st), "download");
  check(cudaStreamSynchronize(st), "scale check kernel");
  const auto log2 = [&](int lo, int hi, int zero) {
    ScaleLog2 r;
    if (got[lo] != kNoLo) {
      r.lo = static_cast<int>(got[lo]) - static_cast<int>(kBias);
      r.hi = static_cast<int>(got[hi]) - static_cast<int>(kBias);
    }
    r.all_finite_nonzero = got[zero] == 0;
    return r;
  };
  return {static_cast<std::size_t>(got[kFirstBad]), got[kNonFinite] == 0,
          log2(kLoA, kHiA, kZeroA), log2(kLoB, kHiB, kZeroB)};
}

}  // namespace fp8sim
