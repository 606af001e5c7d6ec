// device_bands: copies that overlap kernels, for gemm() on host codes in bands
// (sim/gemm/device_bands.cpp; sim/gemm/device_gemm.hpp: copy_device_async, run_device_bands,
// device_sm_count). One upload stream, two kernel streams taken in turn, one download stream,
// ordered by events.
#include <cuda_runtime.h>

#include <vector>

#include "engine/device_memory.cuh"

namespace fp8sim {

using gpu::check;

void copy_device_async(void* dst, std::size_t dpitch, const void* src, std::size_t spitch,
                       std::size_t width, std::size_t rows, bool to_device, void* stream) {
  const cudaMemcpyKind kind = to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
  const auto st = static_cast<cudaStream_t>(stream);
  const char* what = to_device ? "upload" : "download";
  const bool whole = rows == 1 || (dpitch == width && spitch == width);
  if (whole && gpu::copy_staged(dst, src, width * rows, to_device, st)) return;
  if (whole)
    check(cudaMemcpyAsync(dst, src, width * rows, kind, st), what);
  else
    check(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, kind, st), what);
}

int device_sm_count() {
  const gpu::LaunchStream ls(DeviceLaunch{});  // no device: its one-line error
  return gpu::sm_count();
}

namespace {
// The pipeline's streams and events, destroyed (after waiting for their work) however the
// run ends.
struct BandStreams {
  cudaStream_t up = nullptr, kernels[2] = {nullptr, nullptr}, down = nullptr;
  std::vector<cudaEvent_t> uploaded, computed;
  explicit BandStreams(int n) : uploaded(n, nullptr), computed(n, nullptr) {
    for (cudaStream_t* s : {&up, &kernels[0], &kernels[1], &down})
      check(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking), "stream");
    for (int i = 0; i < n; ++i) {
      check(cudaEventCreateWithFlags(&uploaded[i], cudaEventDisableTiming), "event");
      check(cudaEventCreateWithFlags(&computed[i], cudaEventDisableTiming), "event");
    }
  }
  ~BandStreams() {
    for (cudaStream_t s : {up, kernels[0], kernels[1], down})
      if (s) {
        cudaStreamSynchronize(s);
        cudaStreamDestroy(s);
      }
    for (cudaEvent_t e : uploaded)
      if (e) cudaEventDestroy(e);
    for (cudaEvent_t e : computed)
      if (e) cudaEventDestroy(e);
  }
  BandStreams(const BandStreams&) = delete;
  BandStreams& operator=(const BandStreams&) = delete;
};
}  // namespace

void run_device_bands(int n, const std::function<void(int, void*)>& in,
                      const std::function<void(int, void*)>& run,
                      const std::function<void(int, void*)>& out,
                      const std::function<void(void*)>& checked) {
  if (n <= 0) return;
  const gpu::LaunchStream ls(DeviceLaunch{});  // no device: its one-line error
  BandStreams b(n);
  auto download = [&](int i) {
    check(cudaStreamWaitEvent(b.down, b.computed[i], 0), "stream wait");
    out(i, b.down);
  };
  for (int i = 0; i < n; ++i) {
    in(i, b.up);
    check(cudaEventRecord(b.uploaded[i], b.up), "event");
    const cudaStream_t k = b.kernels[i % 2];
    check(cudaStreamWaitEvent(k, b.uploaded[i], 0), "stream wait");
    run(i, k);
    check(cudaEventRecord(b.computed[i], k), "event");
    if (i > 0 && !checked) download(i - 1);
  }
  if (checked) {  // every upload checked before anything comes back
    checked(b.up);
    for (int i = 0; i + 1 < n; ++i) download(i);
  }
  download(n - 1);
  for (cudaStream_t s : {b.up, b.kernels[0], b.kernels[1], b.down})
    check(cudaStreamSynchronize(s), "kernel");
}

}  // namespace fp8sim
