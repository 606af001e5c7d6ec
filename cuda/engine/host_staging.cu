// host_staging: copies between pageable host memory and the device through pinned staging
// buffers that the library owns. A pageable cudaMemcpy stages through the driver's buffers on
// one host thread (uploads 9.1 GB/s on the H100 machine, 2026-11-26, against 48 GB/s from
// pinned memory); here up to eight host threads each copy their share of the source into
// pinned slabs (or, downloading, out of them), two a thread, while the copy engine moves the
// thread's other slab. Staged downloads of D took gemm() on host codes (H100, 2026-11-27,
// against direct ones in the same run): 4096^3 nvfp4 2.79e12-3.08e12 to 3.37e12-3.41e12,
// mxf8f6f4 2.0e12 to 2.15e12, 2048x2048x1024 1.22e12 to 1.58e12, 8192^3 4.12e12-4.17e12 to
// 4.32e12. The caller's memory is never
// registered (cudaHostRegister is process-wide: another thread's copy of the same buffer
// could see it unregistered mid-copy), so concurrent calls on shared buffers stay safe.
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "engine/device_memory.cuh"

namespace fp8sim::gpu {

namespace {

constexpr std::size_t kSlabBytes = std::size_t(1) << 20;  // one pinned staging buffer
// Copies below kStagedBytes go directly (measured on uploads; downloads take the same
// threshold): staged, the 4 MiB column bands of 16x4096x7168 made gemm() slower (6.1e10
// MAC/s against 7.5e10 to 1.3e11 direct) and 2048x2048x1024's 2 MiB operands too (1.06e12
// against 1.15e12 to 1.3e12), while 64x7168x16384's 14 MiB bands went from 5.0e11 to
// 1.15e12 and 8192^3's 64 MiB of B from 3.94e12 to 4.18e12 (H100, 2026-11-26).
constexpr int kStagingThreads = 8;                        // host threads at most
constexpr int kMaxSlabs = 48;  // pinned memory held at most (48 MiB), all devices together

// The staging threads: started by the first staged copy and kept (they wait for work until
// the process ends; never joined, as the CUDA runtime may be gone when static destructors
// run). One copy at a time uses them: `busy`, tried, not waited for (a concurrent copy goes
// directly). A child forked after they started has none of them: `mine` is false
// there, and its copies go directly instead of waiting for threads that do not exist.
class StagingThreads {
 public:
  std::mutex busy;

  bool mine() const { return ::getpid() == pid_; }

  explicit StagingThreads(int n) : pid_(::getpid()) {
    for (int i = 0; i < n; ++i) {
      try {
        threads_.emplace_back([this, i] { serve(i); });
      } catch (const std::system_error&) {
        break;  // out of threads: fewer of them
      }
    }
    for (std::thread& t : threads_) t.detach();
  }
  int size() const { return int(threads_.size()); }

  // Runs work(i) on thread i for every i < size(), returns once all are done, and rethrows
  // the first exception a work threw.
  void run(const std::function<void(int)>& work) {
    std::unique_lock<std::mutex> lock(mutex_);
    job_ = &work;
    pending_ = size();
    error_ = nullptr;
    ++generation_;
    start_.notify_all();
    done_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void serve(int i) {
    unsigned seen = 0;
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      const std::function<void(int)>* job = job_;
      lock.unlock();
      std::exception_ptr error;
      try {
        (*job)(i);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      if (error && !error_) error_ = error;
      if (--pending_ == 0) done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* job_ = nullptr;
  unsigned generation_ = 0;
  int pending_ = 0;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
  const pid_t pid_;
};

StagingThreads& staging_threads() {
  static auto* threads = new StagingThreads(
      int(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, kStagingThreads)));
  return *threads;
}

// A slab: pinned host memory and the event after the last copy out of it (recorded on a
// stream of `device`, whose events it takes).
struct Slab {
  void* host = nullptr;
  cudaEvent_t done = nullptr;
  int device = 0;
};

// The free slabs, made on demand and kept to the end of the process.
struct SlabPool {
  std::mutex mutex;
  std::vector<Slab> free;
  int made = 0;
};
SlabPool& slab_pool() {
  static auto* pool = new SlabPool;
  return *pool;
}

// n slabs of `device` for one copy, or none where the pool cannot give them (kMaxSlabs
// made and taken, or pinned memory refused).
std::vector<Slab> take_slabs(int n, int device) {
  SlabPool& pool = slab_pool();
  const std::lock_guard<std::mutex> lock(pool.mutex);
  std::vector<Slab> got;
  for (auto it = pool.free.begin(); it != pool.free.end() && int(got.size()) < n;) {
    if (it->device == device) {
      got.push_back(*it);
      it = pool.free.erase(it);
    } else {
      ++it;
    }
  }
  while (int(got.size()) < n && pool.made < kMaxSlabs) {
    Slab s;
    s.device = device;
    if (cudaHostAlloc(&s.host, kSlabBytes, cudaHostAllocPortable) != cudaSuccess) break;
    if (cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming) != cudaSuccess) {
      cudaFreeHost(s.host);
      break;
    }
    ++pool.made;
    got.push_back(s);
  }
  cudaGetLastError();  // a refused allocation is not this copy's error
  if (int(got.size()) < n) {
    pool.free.insert(pool.free.end(), got.begin(), got.end());
    got.clear();
  }
  return got;
}

// Back to the pool, their copies perhaps still running: the next copy to take a slab waits
// for its event before writing into it.
void give_slabs(const std::vector<Slab>& slabs) {
  SlabPool& pool = slab_pool();
  const std::lock_guard<std::mutex> lock(pool.mutex);
  pool.free.insert(pool.free.end(), slabs.begin(), slabs.end());
}

}  // namespace

bool copy_staged(void* dst, const void* src, std::size_t bytes, bool to_device, cudaStream_t st) {
  if (bytes < kStagedBytes) return false;  // device_gemm.hpp
  StagingThreads& workers = staging_threads();
  if (!workers.mine()) return false;
  std::unique_lock<std::mutex> mine(workers.busy, std::try_to_lock);
  if (!mine.owns_lock()) return false;
  int device = 0;
  check(cudaGetDevice(&device), "get device");
  const int threads = workers.size();
  if (threads == 0) return false;
  const std::vector<Slab> slabs = take_slabs(2 * threads, device);
  if (slabs.empty()) return false;
  const char* what = to_device ? "upload" : "download";
  // Thread t copies bytes [bytes t / threads, bytes (t + 1) / threads) in slab-sized chunks,
  // through its slabs 2t and 2t + 1 in turn; every copy goes on st, so an upload's later work
  // on st (and its events) follows all of them, and a download's copies follow st's work
  // before. A slab is written (by the host or by a download's copy) only after its event: its
  // last copy, perhaps another call's, has left it.
  auto up = [&](int t) {
    check(cudaSetDevice(device), "set device");  // the current device is per host thread
    const std::size_t begin = bytes * t / threads, end = bytes * (t + 1) / threads;
    int turn = 0;
    for (std::size_t at = begin; at < end; at += kSlabBytes, turn ^= 1) {
      const Slab& s = slabs[2 * t + turn];
      const std::size_t n = std::min(kSlabBytes, end - at);
      check(cudaEventSynchronize(s.done), what);
      std::memcpy(s.host, static_cast<const char*>(src) + at, n);
      check(cudaMemcpyAsync(static_cast<char*>(dst) + at, s.host, n, cudaMemcpyHostToDevice, st),
            what);
      check(cudaEventRecord(s.done, st), what);
    }
  };
  // A download: each slab's chunk copied out to dst once its copy is done, while the copy
  // engine fills the thread's other slab.
  auto down = [&](int t) {
    check(cudaSetDevice(device), "set device");
    const std::size_t begin = bytes * t / threads, end = bytes * (t + 1) / threads;
    std::size_t held_at[2] = {0, 0}, held[2] = {0, 0};  // each slab's chunk not yet out
    auto out = [&](int k) {
      if (held[k] == 0) return;
      check(cudaEventSynchronize(slabs[2 * t + k].done), what);
      std::memcpy(static_cast<char*>(dst) + held_at[k], slabs[2 * t + k].host, held[k]);
      held[k] = 0;
    };
    int turn = 0;
    for (std::size_t at = begin; at < end; at += kSlabBytes, turn ^= 1) {
      const Slab& s = slabs[2 * t + turn];
      out(turn);
      check(cudaEventSynchronize(s.done), what);
      held_at[turn] = at;
      held[turn] = std::min(kSlabBytes, end - at);
      check(cudaMemcpyAsync(s.host, static_cast<const char*>(src) + at, held[turn],
                            cudaMemcpyDeviceToHost, st),
            what);
      check(cudaEventRecord(s.done, st), what);
    }
    out(turn);
    out(turn ^ 1);
  };
  const std::function<void(int)> stripe = to_device ? std::function<void(int)>(up)
                                                    : std::function<void(int)>(down);
  try {
    workers.run(stripe);
  } catch (...) {
    cudaStreamSynchronize(st);  // no copy may still use a slab another call takes
    give_slabs(slabs);
    throw;
  }
  give_slabs(slabs);
  return true;
}

}  // namespace fp8sim::gpu
