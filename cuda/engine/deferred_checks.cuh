// deferred_checks: reports the device gives after the host has moved on (a deferred
// quantisation's first element that is not finite, DeviceQuantiseJob::deferred): two device
// words copied, in stream order, into pinned host memory, an event recorded after them, and
// read by check_deferred_quantisations (sim/gemm/device_gemm.hpp) once it has passed.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace fp8sim::gpu {

// After the work queued on st so far: words[0], the first bad element's index of an operand
// x of `elements` elements (>= elements: none), and words[1], its value's bits as a double.
// At most 1024 reports are pending: past that, the oldest is waited for (and reported then).
void defer_bad_element(const unsigned long long* words, std::size_t elements, cudaStream_t st);

}  // namespace fp8sim::gpu
