// hw_device: device buffers and error checks for fp8sim-hw (CUDA runtime, host side).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace fp8sim::hw {

// Throws std::runtime_error("<what>: <cuda error>") on failure.
inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
// A launcher's "" / error string.
inline void launch_check(const std::string& err) {
  if (!err.empty()) throw std::runtime_error(err);
}

// One cudaMalloc'd array of T (plain device memory, never managed).
template <class T>
class DevBuf {
 public:
  DevBuf() = default;
  explicit DevBuf(std::size_t n) : n_(n) {
    if (n > 0) cuda_check(cudaMalloc(&p_, n * sizeof(T)), "cudaMalloc");
  }
  explicit DevBuf(const std::vector<T>& h) : DevBuf(h.size()) { upload(h); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  ~DevBuf() {
    if (p_) cudaFree(p_);
  }
  void upload(const std::vector<T>& h) {
    if (!h.empty())
      cuda_check(cudaMemcpy(p_, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  }
  std::vector<T> download() const {
    std::vector<T> h(n_);
    if (n_ > 0) cuda_check(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "download");
    return h;
  }
  T* get() const { return p_; }
  T* get_or_null() const { return n_ ? p_ : nullptr; }
  std::size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace fp8sim::hw
