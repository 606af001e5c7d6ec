// kernel_events: the GEMM kernels' time by CUDA events, read without a wait per call. Events
// come from a pool per device (created once, reused); each GEMM's pair either is read at once
// (a call that synchronises anyway) or joins the calling thread's pending list, which
// device_kernel_seconds() reads (waiting) and device_kernel_take() hands over (not waiting).
#pragma once

#include <cuda_runtime.h>

namespace fp8sim::gpu {

// Two events of the current device, the first recorded on `st` (before the kernels).
struct KernelTiming {
  cudaEvent_t start = nullptr, end = nullptr;
  int device = 0;
};
KernelTiming timing_start(cudaStream_t st);

// Records the second event on `st` (after the kernels). Then one of: `timing_read` (the
// stream already synchronised: the kernels' seconds, added to the thread's total, events
// released) or `timing_defer` (the pair joins the thread's pending list; the list is kept
// short by reading its oldest pairs, long finished, when it grows).
void timing_stop(const KernelTiming& t, cudaStream_t st);
double timing_read(const KernelTiming& t);
void timing_defer(const KernelTiming& t);

}  // namespace fp8sim::gpu
