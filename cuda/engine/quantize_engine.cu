// quantize_engine: the GPU steps of quantise_operand (sim/scaling/device_quantize.hpp): each scale
// group's largest magnitude, and every element's code of x / s. Exact: magnitudes are
// compared, not summed, x / s is one IEEE double division (correctly rounded on the device as
// on the host), and codes come from the host's table of exact values and midpoints.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "engine/device_memory.cuh"
#include "scaling/device_quantize.hpp"

namespace fp8sim {
namespace {

using gpu::blocks_for;
using gpu::check;
using gpu::DeviceBuffer;

template <class X>
__device__ double load(const X* x, std::size_t i) {
  return static_cast<double>(x[i]);
}

// Elements of a (row, column group) segment one warp scans.
constexpr int kPiece = 2048;

// One warp per piece of a (row, column group) segment; the warp's largest |x| goes into its
// group by an atomic max on the bits of a nonnegative double (ordered as the doubles are).
// Non-finite elements put the smallest such index into *bad.
template <class X>
__global__ void amax_kernel(const X* x, int T, int K, DeviceScaleGroups g, int pieces,
                            unsigned long long* amax, unsigned long long* bad) {
  const int lane = threadIdx.x % 32;
  const std::size_t warps = std::size_t(gridDim.x) * (blockDim.x / 32);
  const std::size_t items = std::size_t(T) * g.cols * pieces;
  for (std::size_t s = (blockIdx.x * std::size_t(blockDim.x) + threadIdx.x) / 32; s < items;
       s += warps) {
    const std::size_t segment = s / pieces;
    const int begin = static_cast<int>(s % pieces) * kPiece;
    const int end = min(g.width, begin + kPiece);
    const std::size_t t = segment / g.cols;
    const int c = static_cast<int>(segment % g.cols);
    const std::size_t base = t * K + std::size_t(c) * g.width;
    double m = 0;
    for (int k = begin + lane; k < end; k += 32) {
      const double v = fabs(load(x, base + k));
      if (!isfinite(v)) atomicMin(bad, static_cast<unsigned long long>(base + k));
      else m = fmax(m, v);
    }
    for (int o = 16; o > 0; o /= 2) m = fmax(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0 && m > 0)
      atomicMax(&amax[(t / g.rows_per) * g.cols + c],
                static_cast<unsigned long long>(__double_as_longlong(m)));
  }
}

// scales null: every element's scale is `one` (one scale for the operand, by value).
template <class X>
__global__ void encode_kernel(const X* x, int T, int K, const float* scales, float one, int cols,
                              int nc, const float* tensor_scales, const DeviceEncodeTable* table,
                              unsigned char* codes, unsigned long long* saturated) {
  static_assert(sizeof(DeviceEncodeTable) % 4 == 0, "copied in 4-byte words");
  __shared__ alignas(8) int words[sizeof(DeviceEncodeTable) / 4];
  for (int i = threadIdx.x; i < int(sizeof words / 4); i += blockDim.x)
    words[i] = reinterpret_cast<const int*>(table)[i];
  __syncthreads();
  const DeviceEncodeTable& e = *reinterpret_cast<const DeviceEncodeTable*>(words);
  const double top = e.value[e.n - 1];
  unsigned long long over = 0;
  const std::size_t n = std::size_t(T) * K;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t t = i / K;
    const int k = static_cast<int>(i % K);
    const double s = (tensor_scales ? double(tensor_scales[t]) : 1.0) *
                     (cols == 0 ? 1.0 : !scales ? double(one)
                                 : double(scales[t * cols + (cols == 1 ? 0 : k / nc)]));
    const double v = load(x, i) / s;
    if (fabs(v) > top) ++over;
    codes[i] = table_encode(v, e);
  }
  if (over && saturated) atomicAdd(saturated, over);
}

}  // namespace

long long run_device_amax(const void* x, bool x_double, int T, int K, const DeviceScaleGroups& g,
                          double* amax, std::size_t amax_size, const DeviceLaunch& launch) {
  const gpu::LaunchStream stream(launch);
  const cudaStream_t st = stream.get();
  const std::size_t n = std::size_t(T) * K;
  // One allocation: the first bad index, then the groups' maxima (as bits; 0 is +0.0).
  DeviceBuffer buf = gpu::device_alloc((1 + amax_size) * sizeof(unsigned long long), st);
  auto* words = static_cast<unsigned long long*>(buf.get());
  check(cudaMemsetAsync(words + 1, 0, amax_size * sizeof(unsigned long long), st), "memset");
  check(cudaMemsetAsync(words, 0xff, sizeof(unsigned long long), st), "memset");  // none: >= n
  if (g.cols > 0 && n > 0) {
    const int pieces = (g.width + kPiece - 1) / kPiece;
    const unsigned blocks = blocks_for(std::size_t(T) * g.cols * pieces * 32);
    if (x_double)
      amax_kernel<<<blocks, 256, 0, st>>>(static_cast<const double*>(x), T, K, g, pieces,
                                          words + 1, words);
    else
      amax_kernel<<<blocks, 256, 0, st>>>(static_cast<const float*>(x), T, K, g, pieces,
                                          words + 1, words);
    check(cudaGetLastError(), "amax kernel launch");
  }
  unsigned long long first_bad = 0;
  check(cudaMemcpyAsync(&first_bad, words, sizeof first_bad, cudaMemcpyDeviceToHost, st),
        "download");
  check(cudaMemcpyAsync(amax, words + 1, amax_size * sizeof(double), cudaMemcpyDeviceToHost, st),
        "download");
  check(cudaStreamSynchronize(st), "amax kernel");
  return first_bad < n ? static_cast<long long>(first_bad) : -1;
}

std::size_t run_device_encode(const void* x, bool x_double, int T, int K, const float* scales,
                              int cols, int nc, const float* tensor_scales,
                              const DeviceEncodeTable& table, unsigned char* codes,
                              const DeviceLaunch& launch, bool count) {
  const gpu::LaunchStream stream(launch);
  const cudaStream_t st = stream.get();
  const std::size_t n = std::size_t(T) * K;
  if (n == 0) return 0;
  // The table from the device's cached copy (uploaded once per format); one scale for every
  // row (tensor scaling) by value; other scales uploaded from the host.
  const auto* d_table = static_cast<const DeviceEncodeTable*>(
      gpu::cached_constant(&table, sizeof table));
  const bool one = cols == 1 && !tensor_scales && scales &&
                   std::all_of(scales, scales + T, [&](float v) {
                     return std::memcmp(&v, scales, sizeof v) == 0;  // the same bits
                   });
  DeviceBuffer keep_scales, keep_tensor, keep_count;
  const float* d_scales =
      one ? nullptr : gpu::upload(scales, std::size_t(T) * cols, st, keep_scales);
  const float* d_tensor = gpu::upload(tensor_scales, tensor_scales ? std::size_t(T) : 0, st,
                                      keep_tensor);
  unsigned long long* d_count = nullptr;
  if (count) {
    keep_count = gpu::device_alloc(sizeof(unsigned long long), st);
    d_count = static_cast<unsigned long long*>(keep_count.get());
    check(cudaMemsetAsync(d_count, 0, sizeof *d_count, st), "memset");
  }
  const float one_scale = one ? scales[0] : 1.0f;
  const unsigned blocks = blocks_for(n);
  if (x_double)
    encode_kernel<<<blocks, 256, 0, st>>>(static_cast<const double*>(x), T, K, d_scales,
                                          one_scale, cols, nc, d_tensor, d_table, codes, d_count);
  else
    encode_kernel<<<blocks, 256, 0, st>>>(static_cast<const float*>(x), T, K, d_scales,
                                          one_scale, cols, nc, d_tensor, d_table, codes, d_count);
  check(cudaGetLastError(), "encode kernel launch");
  // Without the count, nothing uploaded from the host and a stream of the caller's: no wait
  // (the codes are written in stream order, before what the caller queues next there).
  if (!count && !keep_scales && !keep_tensor && launch.stream) return 0;
  unsigned long long counted = 0;
  if (count)
    check(cudaMemcpyAsync(&counted, d_count, sizeof counted, cudaMemcpyDeviceToHost, st),
          "download");
  check(cudaStreamSynchronize(st), "encode kernel");
  return static_cast<std::size_t>(counted);
}

}  // namespace fp8sim
