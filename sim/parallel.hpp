// parallel: a deterministic parallel loop over an index range.
//
// Work is split into fixed contiguous pieces, each written by exactly one thread, so a
// result never depends on how many threads ran (every item is computed the same way).
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace fp8sim {

// The thread count to use: `requested` if > 0, else every hardware thread.
inline int resolve_threads(int requested) {
  if (requested > 0) return requested;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

// Calls body(begin, end) on disjoint pieces covering [0, n), from up to `threads` threads
// (0: all). The first exception thrown by a body is rethrown here after all threads end.
template <class Body>
void parallel_for(std::size_t n, int threads, Body&& body) {
  const std::size_t t = std::min<std::size_t>(static_cast<std::size_t>(resolve_threads(threads)),
                                              std::max<std::size_t>(n, 1));
  if (t <= 1) {
    if (n) body(std::size_t{0}, n);
    return;
  }
  std::exception_ptr error;
  std::mutex error_mutex;
  std::vector<std::thread> pool;
  pool.reserve(t);
  for (std::size_t i = 0; i < t; ++i) {
    const std::size_t begin = n * i / t, end = n * (i + 1) / t;
    pool.emplace_back([&, begin, end] {
      try {
        if (begin < end) body(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    });
  }
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace fp8sim
