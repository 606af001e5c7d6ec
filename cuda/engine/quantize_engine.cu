// quantize_engine: the GPU steps of quantise_operand (sim/scaling/device_quantize.hpp): each scale
// group's largest magnitude, the scales from those (sim/scaling/device_scales.hpp, the host's
// functions compiled for the device), and every element's code of x / s. Exact: magnitudes
// are compared, not summed, a scale is computed by the host's own IEEE operations, x / s is one
// IEEE double division (correctly rounded on the device as on the host; or, float x under
// one float scale, a float division and its exact remainder that give the same code), and
// codes come from the host's table of exact values and midpoints.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "engine/deferred_checks.cuh"
#include "engine/device_memory.cuh"
#include "scaling/device_quantize.hpp"

namespace fp8sim {
namespace {

using gpu::blocks_for;
using gpu::check;
using gpu::DeviceBuffer;

// Elements of a (row, column group) segment one warp scans.
constexpr int kPiece = 2048;

// One warp per piece of a (row, column group) segment; the warp's largest |x| goes into its
// group by an atomic max on the bits of a nonnegative double (ordered as the doubles are).
// Non-finite elements put the smallest such index into *bad. VEC: each lane loads 16 bytes at
// a time (x on 16 bytes, K and the groups' width multiples of 16 / sizeof(X)).
template <class X, bool VEC>
__global__ void amax_kernel(const X* x, int T, int K, DeviceScaleGroups g, int pieces,
                            unsigned long long* amax, unsigned long long* bad) {
  constexpr int V = VEC ? 16 / sizeof(X) : 1;
  using Vec = std::conditional_t<sizeof(X) == 4, float4, double2>;
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
    X m = 0;  // a largest magnitude is one of the elements: exact in their own type
#pragma unroll 4
    for (int k = begin + lane * V; k < end; k += 32 * V) {
      X v[V];
      if constexpr (VEC) {
        const Vec q = *reinterpret_cast<const Vec*>(x + base + k);
        std::memcpy(v, &q, sizeof v);
      } else {
        v[0] = x[base + k];
      }
#pragma unroll
      for (int u = 0; u < V; ++u) {
        const X a = fabs(v[u]);
        if (!isfinite(a)) atomicMin(bad, static_cast<unsigned long long>(base + k + u));
        else m = fmax(m, a);
      }
    }
    for (int o = 16; o > 0; o /= 2) m = fmax(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0 && m > 0)
      atomicMax(&amax[(t / g.rows_per) * g.cols + c],
                static_cast<unsigned long long>(__double_as_longlong(double(m))));
  }
}

// amax_kernel over x, 16 bytes a lane's load where x and its groups lie on them.
template <class X>
void launch_amax(const X* x, int T, int K, const DeviceScaleGroups& g, int pieces,
                 unsigned long long* amax, unsigned long long* bad, cudaStream_t st) {
  constexpr int V = 16 / sizeof(X);
  const unsigned blocks = blocks_for(std::size_t(T) * g.cols * pieces * 32);
  if (K % V == 0 && g.width % V == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0)
    amax_kernel<X, true><<<blocks, 256, 0, st>>>(x, T, K, g, pieces, amax, bad);
  else
    amax_kernel<X, false><<<blocks, 256, 0, st>>>(x, T, K, g, pieces, amax, bad);
  check(cudaGetLastError(), "amax kernel launch");
}

// The largest maximum of each group of tensor_rows rows (l.tensor_rows; two-level scales, one
// row per scale group: rows r0 to r1 are maxima r0 * cols to r1 * cols), as bits into
// tamax[group]: one block per piece of kTensorPiece maxima of a group, tensor_amax_step over
// its threads, then a tree, then an atomic max on the bits of a nonnegative double (ordered as
// the doubles are). The maxima are nonnegative doubles, never NaN, so no order of these steps
// can change the result of scales_from_amax's loop over them (which starts from 0, as tamax).
constexpr int kScaleThreads = 256;
constexpr int kTensorPiece = 8192;
__global__ void tensor_amax_kernel(const double* amax, DeviceScaleLayout l, std::size_t pieces,
                                   unsigned long long* tamax) {
  __shared__ double part[kScaleThreads];
  const std::size_t groups = (std::size_t(l.T) + l.tensor_rows - 1) / l.tensor_rows;
  for (std::size_t item = blockIdx.x; item < groups * pieces; item += gridDim.x) {
    const std::size_t group = item / pieces;
    const std::size_t r0 = group * l.tensor_rows;
    const std::size_t r1 = min(r0 + l.tensor_rows, std::size_t(l.T));
    const std::size_t begin = r0 * l.cols + (item % pieces) * kTensorPiece;
    const std::size_t end = min(begin + kTensorPiece, r1 * l.cols);
    double m = 0;
    for (std::size_t i = begin + threadIdx.x; i < end; i += blockDim.x)
      m = tensor_amax_step(m, amax[i]);
    part[threadIdx.x] = m;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
      if (int(threadIdx.x) < half)
        part[threadIdx.x] = tensor_amax_step(part[threadIdx.x], part[threadIdx.x + half]);
      __syncthreads();
    }
    if (threadIdx.x == 0 && part[0] > 0)
      atomicMax(&tamax[group], static_cast<unsigned long long>(__double_as_longlong(part[0])));
    __syncthreads();  // part[0] read before the next item writes part
  }
}

// Each row's tensor scale, from its group's largest maximum (tensor_scale_of).
__global__ void tensor_scales_kernel(const unsigned long long* tamax, DeviceScaleLayout l,
                                     const DeviceScaleRule* rule, float* tensor_scales) {
  for (std::size_t t = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; t < std::size_t(l.T);
       t += std::size_t(gridDim.x) * blockDim.x)
    tensor_scales[t] = tensor_scale_of(
        __longlong_as_double(static_cast<long long>(tamax[t / l.tensor_rows])), *rule);
}

// Every scale of the layout (T x cols), each from its group's maximum (scale_at); deferred
// (DeviceQuantiseJob::deferred): NaN where an element is not finite (*bad < elements).
__global__ void scales_kernel(const double* amax, const float* tensor_scales, DeviceScaleLayout l,
                              const DeviceScaleRule* rule, float* scales,
                              const unsigned long long* bad, std::size_t elements) {
  const std::size_t n = std::size_t(l.T) * l.cols;
  const bool nan = bad != nullptr && *bad < elements;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    scales[i] = nan ? __int_as_float(0x7fc00000) : scale_at(amax, tensor_scales, l, *rule, i);
}

// scales null: every element's scale is its tensor scale (or 1); scales' row of x's row t:
// t / scale_rows_per. float x under one level of scales: the code of x / s from the float
// quotient (table_encode_quotient: the double quotient's code); else x / s in double. Writes
// nothing where an element is not finite (*bad < T * K), except deferred (bad_value set):
// then every code is written and the first such element's bits (as a double) go into
// *bad_value. Each thread takes V elements of a row at a time (V = 4: K a multiple of 4 and
// codes on 4 bytes, written as one word), their loads issued together.
template <class X, int V>
__global__ void encode_kernel(const X* x, int T, int K, const float* scales, int cols, int nc,
                              int scale_rows_per, const float* tensor_scales,
                              const DeviceEncodeTable* table,
                              const unsigned long long* bad, unsigned char* codes,
                              unsigned long long* saturated, unsigned long long* bad_value) {
  static_assert(sizeof(DeviceEncodeTable) % 4 == 0, "copied in 4-byte words");
  static_assert(V == 1 || V == 4, "one code, or one word of them");
  __shared__ alignas(8) int words[sizeof(DeviceEncodeTable) / 4];
  const std::size_t n = std::size_t(T) * K;
  const unsigned long long first_bad = *bad;
  if (first_bad < n && bad_value == nullptr) return;
  for (int i = threadIdx.x; i < int(sizeof words / 4); i += blockDim.x)
    words[i] = reinterpret_cast<const int*>(table)[i];
  __syncthreads();
  const DeviceEncodeTable& e = *reinterpret_cast<const DeviceEncodeTable*>(words);
  unsigned long long over = 0;
  // Rows on the grid's y, columns on its x: no 64-bit division of an element's index.
  for (int t = blockIdx.y; t < T; t += gridDim.y) {
    const std::size_t base = std::size_t(t) * K;
    const double ts = tensor_scales ? double(tensor_scales[t]) : 1.0;
    const float* srow =
        scales ? scales + std::size_t(scale_rows_per == 1 ? t : t / scale_rows_per) * cols
               : nullptr;
    for (int k0 = (blockIdx.x * blockDim.x + threadIdx.x) * V; k0 < K;
         k0 += gridDim.x * blockDim.x * V) {
      X xs[V];
#pragma unroll
      for (int u = 0; u < V; ++u) xs[u] = x[base + k0 + u];
      unsigned word = 0;
#pragma unroll
      for (int u = 0; u < V; ++u) {
        const int k = k0 + u;
        const float sk = srow ? srow[cols == 1 ? 0 : k / nc] : 1.0f;
        if (base + k == first_bad)
          *bad_value = static_cast<unsigned long long>(__double_as_longlong(double(xs[u])));
        bool above = false;
        const unsigned char code =
            std::is_same_v<X, float> && tensor_scales == nullptr  // one float scale
                ? table_encode_quotient(float(xs[u]), sk, e, &above)
                : table_encode_over(static_cast<double>(xs[u]) / (ts * double(sk)), e, &above);
        over += above;
        word |= unsigned(code) << (8 * u);
      }
      if constexpr (V == 4) *reinterpret_cast<unsigned*>(codes + base + k0) = word;
      else codes[base + k0] = static_cast<unsigned char>(word);
    }
  }
  if (over && saturated) atomicAdd(saturated, over);
}

// The encode kernel over x, V elements a thread where they lie on one word of codes, on a
// grid of at most 64 blocks of 256 threads a row and about 8 blocks an SM in all (each block
// copies the table first: a block per 256 elements copied more of it than it read of x).
template <class X>
void launch_encode(const X* x, int T, int K, const float* scales, int cols, int nc,
                   int rows_per, const float* tensor, const DeviceEncodeTable* table,
                   const unsigned long long* bad, unsigned char* codes,
                   unsigned long long* count, unsigned long long* bad_value, cudaStream_t st) {
  const bool word = K % 4 == 0 && reinterpret_cast<std::uintptr_t>(codes) % 4 == 0;
  const std::size_t per_block = word ? 1024 : 256;
  const auto gx =
      static_cast<unsigned>(std::clamp<std::size_t>((std::size_t(K) + per_block - 1) / per_block,
                                                    1, 64));
  const std::size_t most = std::max<std::size_t>(8 * std::size_t(gpu::sm_count()) / gx, 1);
  const auto gy = static_cast<unsigned>(std::clamp<std::size_t>(std::size_t(T), 1, most));
  if (word)
    encode_kernel<X, 4><<<dim3(gx, gy), 256, 0, st>>>(x, T, K, scales, cols, nc, rows_per,
                                                      tensor, table, bad, codes, count,
                                                      bad_value);
  else
    encode_kernel<X, 1><<<dim3(gx, gy), 256, 0, st>>>(x, T, K, scales, cols, nc, rows_per,
                                                      tensor, table, bad, codes, count,
                                                      bad_value);
  check(cudaGetLastError(), "encode kernel launch");
}

}  // namespace

DeviceQuantiseResult run_device_quantise(const DeviceQuantiseJob& j, const DeviceLaunch& launch) {
  if (j.deferred && (j.count || !launch.stream || j.tensor_scales || !j.scales))
    throw std::invalid_argument("quantize on CUDA: a deferred quantisation takes one level of "
                                "scales, no count and a stream of the caller's");
  const gpu::LaunchStream stream(launch);
  const cudaStream_t st = stream.get();
  const std::size_t n = std::size_t(j.T) * j.K;
  const DeviceScaleGroups& g = j.groups;
  const std::size_t row_groups = (std::size_t(j.T) + g.rows_per - 1) / g.rows_per;
  const std::size_t amax_size = std::max<std::size_t>(row_groups * g.cols, 1);
  // The scales' rows: one a row of x (as scales_from_amax lays them out), or, deferred, one a
  // row group (the layout gemm() takes: one for a tensor, one per 128 rows of B's blocks).
  const std::size_t scale_rows = j.deferred ? row_groups : std::size_t(j.T);
  const std::size_t scale_count = j.scales ? scale_rows * j.layout.cols : 0;
  const std::size_t tensor_count = j.tensor_scales ? std::size_t(j.T) : 0;
  const std::size_t tensor_groups =
      tensor_count ? (std::size_t(j.T) + j.layout.tensor_rows - 1) / j.layout.tensor_rows : 0;
  // One allocation: the first bad index and the saturated count, the groups' maxima and the
  // tensor groups' (as bits; 0 is +0.0), then the tensor scales and the scales (floats).
  const std::size_t words_size =
      2 + amax_size + tensor_groups + (tensor_count + scale_count + 1) / 2;
  DeviceBuffer buf = gpu::device_alloc(words_size * sizeof(unsigned long long), st);
  auto* words = static_cast<unsigned long long*>(buf.get());
  unsigned long long* d_bad = words;
  unsigned long long* d_count = words + 1;
  unsigned long long* d_amax = words + 2;
  unsigned long long* d_tamax = d_amax + amax_size;
  auto* d_tensor = reinterpret_cast<float*>(d_tamax + tensor_groups);
  // Deferred: the scales go straight into the caller's device memory (one level only).
  float* d_scales = j.deferred ? j.scales : d_tensor + tensor_count;
  check(cudaMemsetAsync(words + 1, 0,
                        (1 + amax_size + tensor_groups) * sizeof(unsigned long long), st),
        "memset");
  check(cudaMemsetAsync(d_bad, 0xff, sizeof(unsigned long long), st), "memset");  // none: >= n

  // 1. The groups' maxima and the first element that is not finite.
  if (g.cols > 0 && n > 0) {
    const int pieces = (g.width + kPiece - 1) / kPiece;
    if (j.x_double)
      launch_amax(static_cast<const double*>(j.x), j.T, j.K, g, pieces, d_amax, d_bad, st);
    else
      launch_amax(static_cast<const float*>(j.x), j.T, j.K, g, pieces, d_amax, d_bad, st);
  }

  // 2. The scales from the maxima (the rule from the device's cached copy, uploaded once per
  // format): tensor scales first, which the scales read.
  const auto* amax = reinterpret_cast<const double*>(d_amax);
  if (tensor_count > 0 || scale_count > 0) {
    const auto* d_rule = static_cast<const DeviceScaleRule*>(
        gpu::cached_constant(j.rule, sizeof *j.rule));
    if (tensor_count > 0) {
      // Pieces of a group's maxima: its rows (at most T) times cols, kTensorPiece at a time.
      const std::size_t rows = std::min<std::size_t>(j.layout.tensor_rows, j.T);
      const std::size_t pieces = (rows * j.layout.cols + kTensorPiece - 1) / kTensorPiece;
      if (pieces > 0) {
        const auto blocks = unsigned(std::min<std::size_t>(tensor_groups * pieces, 1 << 16));
        tensor_amax_kernel<<<blocks, kScaleThreads, 0, st>>>(amax, j.layout, pieces, d_tamax);
        check(cudaGetLastError(), "tensor amax kernel launch");
      }
      tensor_scales_kernel<<<blocks_for(tensor_count), 256, 0, st>>>(d_tamax, j.layout, d_rule,
                                                                     d_tensor);
      check(cudaGetLastError(), "tensor scales kernel launch");
    }
    if (scale_count > 0) {
      DeviceScaleLayout layout = j.layout;
      if (j.deferred) {  // a row per row group
        layout.T = static_cast<int>(row_groups);
        layout.rows_per = 1;
      }
      scales_kernel<<<blocks_for(scale_count), 256, 0, st>>>(
          amax, tensor_count > 0 ? d_tensor : nullptr, layout, d_rule, d_scales,
          j.deferred ? d_bad : nullptr, n);
      check(cudaGetLastError(), "scales kernel launch");
    }
  }

  // 4. One download of everything the host gets: to pageable memory, each copy returns once
  // it is done.
  DeviceQuantiseResult result;
  unsigned long long head[2] = {0, 0};  // first bad index, saturated count
  const auto download = [&] {
    check(cudaMemcpyAsync(head, words, sizeof head, cudaMemcpyDeviceToHost, st), "download");
    if (tensor_count > 0)
      check(cudaMemcpyAsync(j.tensor_scales, d_tensor, tensor_count * sizeof(float),
                            cudaMemcpyDeviceToHost, st), "download");
    if (scale_count > 0)
      check(cudaMemcpyAsync(j.scales, d_scales, scale_count * sizeof(float),
                            cudaMemcpyDeviceToHost, st), "download");
    check(cudaStreamSynchronize(st), "quantize kernels");
    result.first_bad = head[0] < n ? static_cast<long long>(head[0]) : -1;
    result.saturated = static_cast<std::size_t>(head[1]);
  };
  // Without the count, on a stream of the caller's: the host waits for the scales only, and
  // the codes follow in stream order (none where an element is not finite).
  const bool wait_for_codes = j.count || !launch.stream;
  if (!wait_for_codes && !j.deferred) {
    download();
    if (result.first_bad >= 0) return result;
  }

  // 3. The codes, from the scales on the device (the element format's table from the device's
  // cached copy).
  if (n > 0) {
    const auto* d_table = static_cast<const DeviceEncodeTable*>(
        gpu::cached_constant(j.table, sizeof *j.table));
    const int cols = j.scales ? j.layout.cols : 0;
    const int rows_per = j.deferred ? g.rows_per : 1;
    unsigned long long* count = j.count ? d_count : nullptr;
    unsigned long long* bad_value = j.deferred ? d_count : nullptr;  // no count: its word
    const float* scales = scale_count > 0 ? d_scales : nullptr;
    const float* tensor = tensor_count > 0 ? d_tensor : nullptr;
    if (j.x_double)
      launch_encode(static_cast<const double*>(j.x), j.T, j.K, scales, cols, j.nc, rows_per,
                    tensor, d_table, d_bad, j.codes, count, bad_value, st);
    else
      launch_encode(static_cast<const float*>(j.x), j.T, j.K, scales, cols, j.nc, rows_per,
                    tensor, d_table, d_bad, j.codes, count, bad_value, st);
  }
  if (j.deferred) {
    gpu::defer_bad_element(words, n, st);  // the first bad index and its value
    return result;
  }
  if (wait_for_codes) download();
  return result;
}

}  // namespace fp8sim
