// kernel_events: the GEMM kernels' time by CUDA events without a wait per call
// (kernel_events.cuh; device_kernel_seconds, DeviceKernelEvents in sim/gemm/device_gemm.hpp).
#include "engine/kernel_events.cuh"

#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/device_memory.cuh"

namespace fp8sim {
namespace gpu {
namespace {

// Free events of each device (events are made on a device and recorded on its streams only).
struct EventPool {
  std::mutex mutex;
  std::unordered_map<int, std::vector<cudaEvent_t>> free;
};
EventPool& event_pool() {
  static EventPool* pool = new EventPool;  // never destroyed: events may return at exit
  return *pool;
}

cudaEvent_t acquire(int device) {
  EventPool& p = event_pool();
  {
    const std::lock_guard<std::mutex> lock(p.mutex);
    auto& v = p.free[device];
    if (!v.empty()) {
      cudaEvent_t e = v.back();
      v.pop_back();
      return e;
    }
  }
  cudaEvent_t e = nullptr;
  check(cudaEventCreate(&e), "event");
  return e;
}

void release(int device, cudaEvent_t e) {
  if (!e) return;
  EventPool& p = event_pool();
  const std::lock_guard<std::mutex> lock(p.mutex);
  p.free[device].push_back(e);
}

// The calling thread's kernel seconds read so far, and its pairs not read yet.
thread_local double seconds_read = 0.0;
thread_local std::vector<KernelTiming> pending;

// Waits for t's kernels; their seconds (the events stay with t).
double elapsed(const KernelTiming& t) {
  check(cudaEventSynchronize(t.end), "kernel");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, t.start, t.end), "event");
  return ms * 1e-3;
}

// A pair handed over by device_kernel_take, as the engine's timing again.
KernelTiming timing_of(const DeviceKernelEvents::Pair& p) {
  return {static_cast<cudaEvent_t>(p.start), static_cast<cudaEvent_t>(p.end), p.device};
}

void release(const KernelTiming& t) {
  release(t.device, t.start);
  release(t.device, t.end);
}

// More pending pairs than this: the oldest half is read (their kernels long finished).
constexpr std::size_t kPendingMax = 256;

}  // namespace

KernelTiming timing_start(cudaStream_t st) {
  KernelTiming t;
  check(cudaGetDevice(&t.device), "get device");
  t.start = acquire(t.device);
  t.end = acquire(t.device);
  check(cudaEventRecord(t.start, st), "event");
  return t;
}

void timing_stop(const KernelTiming& t, cudaStream_t st) {
  check(cudaEventRecord(t.end, st), "event");
}

double timing_read(const KernelTiming& t) {
  const double s = elapsed(t);
  release(t);
  seconds_read += s;
  return s;
}

void timing_defer(const KernelTiming& t) {
  if (pending.size() >= kPendingMax) {
    const std::size_t half = pending.size() / 2;
    for (std::size_t i = 0; i < half; ++i) timing_read(pending[i]);
    pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(half));
  }
  pending.push_back(t);
}

}  // namespace gpu

double device_kernel_seconds() {
  std::vector<gpu::KernelTiming> todo;
  todo.swap(gpu::pending);
  for (const gpu::KernelTiming& t : todo) gpu::timing_read(t);
  return gpu::seconds_read;
}

DeviceKernelEvents device_kernel_take() {
  DeviceKernelEvents out;
  for (const gpu::KernelTiming& t : gpu::pending) out.pairs_.push_back({t.start, t.end, t.device});
  gpu::pending.clear();
  return out;
}

DeviceKernelEvents::DeviceKernelEvents(DeviceKernelEvents&& o) noexcept
    : pairs_(std::move(o.pairs_)), seconds_(o.seconds_), settled_(o.settled_) {
  o.pairs_.clear();
}

DeviceKernelEvents& DeviceKernelEvents::operator=(DeviceKernelEvents&& o) noexcept {
  if (this != &o) {
    for (const Pair& p : pairs_) gpu::release(gpu::timing_of(p));
    pairs_ = std::move(o.pairs_);
    o.pairs_.clear();
    seconds_ = o.seconds_;
    settled_ = o.settled_;
  }
  return *this;
}

DeviceKernelEvents::~DeviceKernelEvents() {
  // Recorded or finished: a later record overwrites them.
  for (const Pair& p : pairs_) gpu::release(gpu::timing_of(p));
}

double DeviceKernelEvents::seconds() {
  if (!settled_) {
    double s = 0;
    for (const Pair& p : pairs_) s += gpu::elapsed(gpu::timing_of(p));
    seconds_ = s;
    settled_ = true;
  }
  return seconds_;
}

}  // namespace fp8sim
