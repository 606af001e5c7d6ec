// device_quantize: the GPU side of quantise_operand (scaling.hpp) as plain data, for
// cuda/engine/quantize_engine.cu. The device finds each scale group's largest magnitude,
// computes the scales from them (device_scales.hpp, the bits of scales_from_amax) and rounds
// every element (device_table.hpp); the maxima never leave the device and no scale is
// uploaded: the host downloads the finished scales once.
//
// sim/ never includes CUDA headers; sim/scaling/quantize_device_stub.cpp defines
// run_device_quantise and run_device_transpose_codes (as errors) in a build without CUDA.
// Plain C++17 so that nvcc compiles it as it is.
#pragma once

#include <cstddef>

#include "gemm/device_gemm.hpp"
#include "scaling/device_scales.hpp"
#include "scaling/device_table.hpp"

namespace fp8sim {

// Where each group whose largest magnitude is found lies in a T x K operand: groups of
// rows_per rows by `width` columns, cols of them along K (the layout of ScaleGroups).
struct DeviceScaleGroups {
  int rows_per = 1, width = 0, cols = 0;
};

// One quantisation on the device (quantise_resident's): x (T x K on the current CUDA device,
// float32, or float64 where x_double) into codes (T x K one-byte codes, device memory).
struct DeviceQuantiseJob {
  const void* x = nullptr;
  bool x_double = false;
  int T = 0, K = 0;
  // The groups whose largest magnitudes are found (cols >= 1: every element in a group). With
  // scales, the scale groups; without (scales null), one group over the operand, which still
  // finds the values that are not finite.
  DeviceScaleGroups groups;
  // The scales, computed on the device (scales_from_amax's bits) and downloaded here (host
  // memory, T x layout.cols floats), or null for none. layout.rows_per and layout.cols are
  // groups'; tensor_scales (host, T floats) where layout.encoding is ue4m3, else null.
  float* scales = nullptr;
  float* tensor_scales = nullptr;
  DeviceScaleLayout layout;
  const DeviceScaleRule* rule = nullptr;    // host memory; the engine keeps a device copy
  int nc = 0;                               // elements per scale along K (cols > 1)
  const DeviceEncodeTable* table = nullptr; // the element format's rounding (host memory)
  unsigned char* codes = nullptr;
  bool count = true;                        // count the saturated elements
  // Deferred (one-level scales, no count, a stream of the caller's): `scales` is device
  // memory in the layout gemm() takes (one row a row group: one for a tensor scale, one per
  // nc rows of B's blocks), written there and not downloaded, and the host does not wait at
  // all. An element that is not finite makes every scale NaN (so that every output of a GEMM
  // that reads them is NaN), the codes are written all the same, and the element is reported
  // by a deferred check (defer_bad_element) that check_deferred_quantisations
  // (device_gemm.hpp) reads later.
  bool deferred = false;
};

struct DeviceQuantiseResult {
  long long first_bad = -1;  // the index of the first element that is not finite, or -1
  std::size_t saturated = 0; // the number of |x / s| above the format's largest value
                             // (count; else 0)
};

// Runs the job on launch.stream (null: the default stream) of launch.device:
//   1. the largest |x| of each group, and the first element that is not finite;
//   2. with scales: the tensor scales (two-level), then every scale (T x cols, each group's on
//      each of its rows), from the maxima on the device;
//   3. codes[t*K+k] = the code of x[t*K+k] / s (RNE, saturating; x / s one double division)
//      with s = tensor_scales[t] (or 1) times scales[t*cols + k/nc] (cols 1: scales[t]; no
//      scales: 1); not written where an element is not finite;
//   4. the scales (and tensor scales) downloaded once.
// The host waits once: after step 4, which is queued after step 3 (count, or no stream of the
// caller's), or (count false, on a caller's stream) before step 3 is queued, for the scales
// only: the codes then follow in stream order, before what the caller queues next there, and
// are not written at all where an element is not finite.
DeviceQuantiseResult run_device_quantise(const DeviceQuantiseJob& job,
                                         const DeviceLaunch& launch = {});

// dst (cols x rows, row-major) = src (rows x cols, row-major)^T: one-byte codes in device
// memory of launch.device, on launch.stream (null: the default stream), without waiting (a
// quantised operand that a later GEMM reads transposed). src and dst do not overlap.
void run_device_transpose_codes(const unsigned char* src, int rows, int cols,
                                unsigned char* dst, const DeviceLaunch& launch);

}  // namespace fp8sim
