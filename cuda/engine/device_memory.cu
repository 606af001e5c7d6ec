// device_memory: CUDA device memory, copies and streams for the host code that has no CUDA
// headers (sim/gemm/device_gemm.hpp: device_malloc, device_free, device_pool_malloc,
// device_pool_free, device_memory_peak, copy_device).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <exception>
#include <mutex>
#include <string>
#include <unordered_map>

#include "engine/device_memory.cuh"

namespace fp8sim {

using gpu::check;

namespace {
// device_malloc's blocks: their sizes, the bytes live and the most live since the last reset.
struct MallocBook {
  std::mutex mutex;
  std::unordered_map<void*, std::size_t> sizes;
  std::size_t live = 0, peak = 0;
};
MallocBook& malloc_book() {
  static MallocBook book;
  return book;
}
}  // namespace

void* device_malloc(std::size_t bytes, int device) {
  if (device >= 0) check(cudaSetDevice(device), "set device");
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  MallocBook& b = malloc_book();
  const std::lock_guard<std::mutex> lock(b.mutex);
  b.sizes[p] = bytes;
  b.live += bytes;
  b.peak = std::max(b.peak, b.live);
  return p;
}

void device_free(void* p) {
  if (!p) return;
  cudaFree(p);
  MallocBook& b = malloc_book();
  const std::lock_guard<std::mutex> lock(b.mutex);
  if (const auto it = b.sizes.find(p); it != b.sizes.end()) {
    b.live -= it->second;
    b.sizes.erase(it);
  }
}

void* device_pool_malloc(std::size_t bytes, int device) {
  DeviceLaunch launch;
  launch.device = device;
  const gpu::LaunchStream ls(launch);  // no device: its one-line error; the pool kept cached
  void* p = nullptr;
  check(cudaMallocAsync(&p, bytes, cudaStreamPerThread), "cudaMallocAsync");
  check(cudaStreamSynchronize(cudaStreamPerThread), "cudaMallocAsync");
  return p;
}

void device_pool_free(void* p, void* stream) {
  if (!p) return;
  if (std::uncaught_exceptions() > 0) cudaDeviceSynchronize();  // failed work may still use it
  cudaFreeAsync(p, stream ? static_cast<cudaStream_t>(stream) : cudaStreamPerThread);
}

std::size_t device_memory_peak(bool reset) {
  int dev = 0;
  check(cudaGetDevice(&dev), "get device");
  cudaMemPool_t pool;
  check(cudaDeviceGetDefaultMemPool(&pool, dev), "memory pool");
  unsigned long long high = 0;  // cuuint64_t
  check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high), "memory pool");
  MallocBook& b = malloc_book();
  const std::lock_guard<std::mutex> lock(b.mutex);
  const std::size_t peak = static_cast<std::size_t>(high) + b.peak;
  if (reset) {
    unsigned long long zero = 0;  // the pool's mark restarts at what is in use now
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero), "memory pool");
    b.peak = b.live;
  }
  return peak;
}

namespace gpu {

const void* cached_constant(const void* host, std::size_t bytes) {
  int dev = 0;
  check(cudaGetDevice(&dev), "get device");
  std::string key(reinterpret_cast<const char*>(&dev), sizeof dev);
  key.append(static_cast<const char*>(host), bytes);
  static std::mutex mutex;
  static auto* copies = new std::unordered_map<std::string, void*>;  // kept to the end
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = copies->find(key); it != copies->end()) return it->second;
  void* d = nullptr;
  check(cudaMalloc(&d, bytes), "cudaMalloc");
  check(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice), "upload");
  copies->emplace(std::move(key), d);
  return d;
}

}  // namespace gpu

void copy_device(void* dst, const void* src, std::size_t bytes, bool to_device, void* stream,
                 int device) {
  DeviceLaunch launch;
  launch.stream = stream;
  launch.device = device;
  const gpu::LaunchStream st(launch);
  if (!gpu::copy_staged(dst, src, bytes, to_device, st.get()))
    check(cudaMemcpyAsync(dst, src, bytes,
                          to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, st.get()),
          to_device ? "upload" : "download");
  check(cudaStreamSynchronize(st.get()), to_device ? "upload" : "download");
}

}  // namespace fp8sim
