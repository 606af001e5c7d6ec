// gemm_device_stub: run_device_gemm() and copy_device() in a build without CUDA (linked instead of cuda/'s).
#include <stdexcept>

#include "device_gemm.hpp"

namespace fp8sim {

void run_device_gemm(const DeviceGemm&, const DeviceLaunch&) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

void copy_device(void*, const void*, std::size_t, bool) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

}  // namespace fp8sim
