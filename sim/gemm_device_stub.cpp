// gemm_device_stub: the CUDA engines' entry points (run_device_gemm, copy_device,
// device_malloc, device_free, device_kernel_seconds, run_device_amax, run_device_encode) in a
// build without CUDA (linked instead of cuda/'s).
#include <stdexcept>

#include "device_gemm.hpp"
#include "device_quantize.hpp"

namespace fp8sim {

void run_device_gemm(const DeviceGemm&, const DeviceLaunch&) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

void copy_device(void*, const void*, std::size_t, bool) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

void* device_malloc(std::size_t) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

void device_free(void*) {}

double device_kernel_seconds() { return 0.0; }

long long run_device_amax(const void*, bool, int, int, const DeviceScaleGroups&, double*,
                          std::size_t, const DeviceLaunch&) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

std::size_t run_device_encode(const void*, bool, int, int, const float*, int, int, const float*,
                              const DeviceEncodeTable&, unsigned char*, const DeviceLaunch&) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

}  // namespace fp8sim
