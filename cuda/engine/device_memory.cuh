// device_memory: what the CUDA engines (gemm_engine.cu, quantize_engine.cu) share on the
// host side: errors as std::runtime_error, stream-ordered device memory from the device's
// cached pool, uploads, and the device and stream a DeviceLaunch asks for.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "gemm/device_gemm.hpp"

namespace fp8sim::gpu {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("device cuda: ") + what + ": " + cudaGetErrorString(e));
}

// Device memory, stream-ordered: allocated and freed on the engine's stream from the device's
// default pool (kept cached between calls: no cudaMalloc/cudaFree synchronisation per call).
struct DeviceFree {
  cudaStream_t stream = nullptr;
  void operator()(void* p) const { cudaFreeAsync(p, stream); }
};
using DeviceBuffer = std::unique_ptr<void, DeviceFree>;

inline DeviceBuffer device_alloc(std::size_t bytes, cudaStream_t st) {
  void* d = nullptr;
  check(cudaMallocAsync(&d, bytes, st), "cudaMallocAsync");
  return DeviceBuffer(d, DeviceFree{st});
}

template <class T>
T* upload(const T* host, std::size_t n, cudaStream_t st, DeviceBuffer& keep) {
  if (host == nullptr || n == 0) return nullptr;
  keep = device_alloc(n * sizeof(T), st);
  void* d = keep.get();
  check(cudaMemcpyAsync(d, host, n * sizeof(T), cudaMemcpyHostToDevice, st), "upload");
  return static_cast<T*>(d);
}

// A copy of `bytes` of host data in the current device's memory, made once per device and
// content and kept for the process (the engines' code tables: a few KiB each); read-only.
// No upload (and no wait for the stream) after the first.
const void* cached_constant(const void* host, std::size_t bytes);

// Blocks of 256 threads for a grid-stride loop over `threads` items (at least one block, at
// most 2^16: each thread strides over the rest).
inline unsigned blocks_for(std::size_t threads) {
  return static_cast<unsigned>(std::clamp<std::size_t>((threads + 255) / 256, 1, 1u << 16));
}

// Set-up a call needs once per device and process, not at every call (a GEMM's own runtime
// calls are most of a small one's time): f runs unless `done` has device dev's bit (devices 0
// to 63; beyond, every time), and sets it only after f, so that a thread that finds it set
// finds the set-up done. Threads that find it clear at once both run f (idempotent set-up).
template <class F>
void once_per_device(std::atomic<std::uint64_t>& done, int dev, F&& f) {
  const std::uint64_t bit = dev >= 0 && dev < 64 ? std::uint64_t{1} << dev : 0;
  if (bit && (done.load(std::memory_order_acquire) & bit)) return;
  f();
  if (bit) done.fetch_or(bit, std::memory_order_release);
}

inline int current_device() {
  int dev = 0;
  check(cudaGetDevice(&dev), "get device");
  return dev;
}

// The current CUDA device's number of streaming multiprocessors (tile shapes by occupancy),
// asked once per device.
inline int sm_count() {
  static std::atomic<int> known[64];
  const int dev = current_device();
  if (dev >= 0 && dev < 64 && known[dev].load(std::memory_order_relaxed) > 0)
    return known[dev].load(std::memory_order_relaxed);
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "device attribute");
  if (dev >= 0 && dev < 64) known[dev].store(sms, std::memory_order_relaxed);
  return sms;
}

// The device and stream of one engine call: checks that there is a CUDA device, makes
// launch.device current (where >= 0), keeps the default pool's freed memory cached, and uses
// launch.stream, or a stream of its own (launch.own_stream, destroyed with this), or the
// default stream.
class LaunchStream {
 public:
  explicit LaunchStream(const DeviceLaunch& launch) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      cudaGetLastError();
      throw std::runtime_error("device cuda: no CUDA device");
    }
    if (launch.device >= 0) check(cudaSetDevice(launch.device), "set device");
    static std::atomic<std::uint64_t> pool_kept{0};
    const int dev = current_device();
    once_per_device(pool_kept, dev, [dev] {
      cudaMemPool_t pool;
      check(cudaDeviceGetDefaultMemPool(&pool, dev), "memory pool");
      std::uint64_t keep = UINT64_MAX;
      check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
            "memory pool");
    });
    stream_ = static_cast<cudaStream_t>(launch.stream);
    if (!stream_ && launch.own_stream) {
      check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
      owned_ = true;
    }
  }
  ~LaunchStream() {
    if (owned_) cudaStreamDestroy(stream_);
  }
  LaunchStream(const LaunchStream&) = delete;
  LaunchStream& operator=(const LaunchStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
  bool owned_ = false;
};

// Copies `bytes` between pageable host memory and device memory on stream st (to_device: src
// on the host, dst on the device; else the other way), through the library's pinned staging
// buffers on several host threads (host_staging.cu). An upload returns once src may be
// reused, its copies queued on st; a download returns once dst holds the bytes, its copies
// after st's earlier work. False, having copied nothing, where the copy is small or the
// staging buffers are all taken (the caller copies directly).
bool copy_staged(void* dst, const void* src, std::size_t bytes, bool to_device, cudaStream_t st);

}  // namespace fp8sim::gpu
