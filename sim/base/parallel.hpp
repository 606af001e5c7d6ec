// parallel: a deterministic parallel loop over an index range.
//
// Work is split into fixed contiguous pieces, each written by exactly one thread, so a
// result never depends on how many threads ran (every item is computed the same way).
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "base/limits.hpp"

namespace fp8sim {

// Checks a requested thread count: 0 (every hardware thread) up to limits::kMaxThreads.
// Throws std::invalid_argument "threads = <n> is not in 0..1024 (0 = all) (limits: ...)":
// the one check behind every front-end's `threads` (CLI --threads, Python threads=).
inline void check_threads(int requested) {
  if (requested < 0 || requested > limits::kMaxThreads)
    throw std::invalid_argument(fmt::format("threads = {} is not in 0..{} (0 = all) {}",
                                            requested, limits::kMaxThreads,
                                            limits::named("kMaxThreads", limits::kMaxThreads)));
}

// The thread count to use: `requested` if > 0, else every hardware thread (at most
// limits::kMaxThreads). Throws as check_threads for a count out of range.
inline int resolve_threads(int requested) {
  check_threads(requested);
  if (requested > 0) return requested;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(std::min<unsigned>(hw, limits::kMaxThreads));
}

// Calls body(begin, end) on disjoint pieces covering [0, n), from up to `threads` threads
// (0: all). The first exception thrown by a body is rethrown here after all threads end.
// When the system cannot start another thread, the calling thread runs the pieces left
// (the pieces are fixed, so the result is the same).
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
  auto run = [&](std::size_t begin, std::size_t end) {
    try {
      if (begin < end) body(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  for (std::size_t i = 0; i < t; ++i) {
    const std::size_t begin = n * i / t, end = n * (i + 1) / t;
    bool started = false;
    try {
      pool.emplace_back(run, begin, end);
      started = true;
    } catch (const std::system_error&) {
      // e.g. EAGAIN: out of threads; this piece runs here, below
    }
    if (!started) run(begin, end);
  }
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace fp8sim
