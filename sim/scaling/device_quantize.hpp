// device_quantize: the GPU side of quantise_operand (scaling.hpp) as plain data, for
// cuda/engine/quantize_engine.cu. The host computes the scales from each group's largest magnitude
// (scales_from_amax); the device finds those magnitudes and rounds every element.
//
// sim/ never includes CUDA headers; sim/scaling/quantize_device_stub.cpp defines these
// functions (as an error) in a build without CUDA. Plain C++17 so that nvcc compiles it as it is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gemm/device_gemm.hpp"

namespace fp8sim {

// Round-to-nearest-even with saturation into a signed format of at most 8 bits, as a table
// the host fills from encode() itself (quantize_device.cpp), so that the device decides only
// by exact comparisons of doubles: a magnitude a of a value v != 0 takes
//   a > value[n-1]            over (v > 0) / over_neg
//   a == value[j]             pos[j] / neg[j]
//   value[j] < a < value[j+1] the nearer one's code; at the midpoint mid_pos[j] / mid_neg[j]
// and v == +-0 takes zero_pos / zero_neg.
struct DeviceEncodeTable {
  int n = 0;                 // nonnegative finite values, ascending (value[0] = 0)
  double value[128] = {};
  unsigned char pos[128] = {}, neg[128] = {};
  unsigned char mid_pos[128] = {}, mid_neg[128] = {};
  unsigned char zero_pos = 0, zero_neg = 0, over = 0, over_neg = 0;
};

#if defined(__CUDACC__)
#define FP8SIM_HOST_DEVICE __host__ __device__
#else
#define FP8SIM_HOST_DEVICE
#endif

// The code of v by the table (the device's rounding; the host tests it against encode()).
FP8SIM_HOST_DEVICE inline unsigned char table_encode(double v, const DeviceEncodeTable& e) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  const bool neg = (bits >> 63) != 0;
  const double a = neg ? -v : v;
  if (a == 0) return neg ? e.zero_neg : e.zero_pos;
  if (a > e.value[e.n - 1]) return neg ? e.over_neg : e.over;
  int lo = 0, hi = e.n - 1;  // the largest j with value[j] <= a
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (e.value[mid] <= a) lo = mid;
    else hi = mid - 1;
  }
  if (e.value[lo] == a) return neg ? e.neg[lo] : e.pos[lo];
  const double midpoint = 0.5 * (e.value[lo] + e.value[lo + 1]);  // exact: adjacent values
  if (a < midpoint) return neg ? e.neg[lo] : e.pos[lo];
  if (a > midpoint) return neg ? e.neg[lo + 1] : e.pos[lo + 1];
  return neg ? e.mid_neg[lo] : e.mid_pos[lo];
}

// Where each scale group lies in a T x K operand: groups of rows_per rows by `width` columns,
// cols of them along K (the layout of ScaleGroups).
struct DeviceScaleGroups {
  int rows_per = 1, width = 0, cols = 0;
};

// amax[(t / rows_per) * cols + c] = the largest |x| of each group (host memory, as doubles)
// of x (T x K on the current CUDA device, float32 when x_double is false, else float64;
// cols >= 1: every element in a group). Returns the index of the first element that is not
// finite, or -1.
long long run_device_amax(const void* x, bool x_double, int T, int K, const DeviceScaleGroups& g,
                          double* amax, std::size_t amax_size, const DeviceLaunch& launch = {});

// codes[t*K+k] = the code of x[t*K+k] / s (RNE, saturating) with s = tensor_scales[t] (or 1)
// times scales[t*cols + k/nc] (cols 1: scales[t]; cols 0: 1), scales and tensor_scales host
// memory, x and codes device memory. Returns the number of |x / s| above value[n-1] (count:
// counted; else 0, and on launch.stream with one scale for all rows (or none) the call returns
// without waiting for the kernel: the codes follow in stream order).
std::size_t run_device_encode(const void* x, bool x_double, int T, int K, const float* scales,
                              int cols, int nc, const float* tensor_scales,
                              const DeviceEncodeTable& table, unsigned char* codes,
                              const DeviceLaunch& launch = {}, bool count = true);

}  // namespace fp8sim
