// deferred_checks: defer_bad_element and check_deferred_quantisations (deferred_checks.cuh).
#include "engine/deferred_checks.cuh"

#include <cmath>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/device_memory.cuh"
#include "gemm/device_gemm.hpp"

namespace fp8sim {
namespace gpu {
namespace {

constexpr std::size_t kDeferredSlots = 1024;

struct Pending {
  cudaEvent_t done = nullptr;
  int device = 0;  // the event's (made on a device, recorded on its streams only)
  std::size_t slot = 0, elements = 0;
};

// The pending reports in the order they were made, their pinned slots (two words each, made
// on first use; portable: any device copies into them), the free slots and each device's
// free events.
struct Registry {
  std::mutex mutex;
  std::deque<Pending> pending;
  unsigned long long* slots = nullptr;
  std::vector<std::size_t> free_slots;
  std::unordered_map<int, std::vector<cudaEvent_t>> free_events;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: reports may be read at exit
  return *r;
}

// The report of a finished one ("" where its operand had none); frees its slot and event.
std::string read(Registry& r, const Pending& p) {
  const unsigned long long* w = r.slots + 2 * p.slot;
  std::string message;
  if (w[0] < p.elements) {
    double v = 0;
    std::memcpy(&v, &w[1], sizeof v);
    const char* value = std::isnan(v) ? (std::signbit(v) ? "-nan" : "nan")
                                      : (std::signbit(v) ? "-inf" : "inf");
    message = "x: value at index " + std::to_string(w[0]) + " is " +
              value + " (found on the GPU after the quantisation returned; every output of "
              "the GEMMs that read it is NaN)";
  }
  r.free_slots.push_back(p.slot);
  r.free_events[p.device].push_back(p.done);
  return message;
}

}  // namespace

void defer_bad_element(const unsigned long long* words, std::size_t elements, cudaStream_t st) {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  if (r.slots == nullptr) {
    void* p = nullptr;
    check(cudaHostAlloc(&p, kDeferredSlots * 2 * sizeof(unsigned long long),
                        cudaHostAllocPortable), "pinned memory");
    r.slots = static_cast<unsigned long long*>(p);
    for (std::size_t i = kDeferredSlots; i-- > 0;) r.free_slots.push_back(i);
  }
  std::string oldest_report;  // thrown once this report is registered
  if (r.free_slots.empty()) {  // the oldest waited for, and reported here where it found one
    const Pending oldest = r.pending.front();
    r.pending.pop_front();
    check(cudaEventSynchronize(oldest.done), "quantize kernels");
    oldest_report = read(r, oldest);
  }
  Pending p;
  p.slot = r.free_slots.back();
  p.elements = elements;
  p.device = current_device();  // st's (the quantiser's launch set it)
  std::vector<cudaEvent_t>& events = r.free_events[p.device];
  if (!events.empty()) {
    p.done = events.back();
    events.pop_back();
  } else {
    check(cudaEventCreateWithFlags(&p.done, cudaEventDisableTiming), "event");
  }
  check(cudaMemcpyAsync(r.slots + 2 * p.slot, words, 2 * sizeof(unsigned long long),
                        cudaMemcpyDeviceToHost, st), "download");
  check(cudaEventRecord(p.done, st), "event");
  r.free_slots.pop_back();
  r.pending.push_back(p);
  if (!oldest_report.empty()) throw std::invalid_argument(oldest_report);
}

}  // namespace gpu

void check_deferred_quantisations(bool wait) {
  gpu::Registry& r = gpu::registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  std::string first;
  for (auto it = r.pending.begin(); it != r.pending.end();) {
    if (wait) {
      gpu::check(cudaEventSynchronize(it->done), "quantize kernels");
    } else {
      const cudaError_t e = cudaEventQuery(it->done);
      if (e == cudaErrorNotReady) break;  // the later ones at a later check, in order
      gpu::check(e, "quantize kernels");
    }
    const std::string message = gpu::read(r, *it);
    if (first.empty()) first = message;
    it = r.pending.erase(it);
  }
  if (!first.empty()) throw std::invalid_argument(first);
}

}  // namespace fp8sim
