// gemm_device_stub: the CUDA GEMM engine's entry points (run_device_gemm, copy_device,
// copy_device_async, run_device_bands, find_bad_codes_on_device, device_sm_count,
// run_device_epilogue, device_all_finite, check_scales_on_device, device_malloc,
// device_free, device_pool_malloc, device_pool_free, device_kernel_seconds,
// device_kernel_take, device_memory_peak, check_deferred_quantisations) in a build without
// CUDA (linked instead of cuda/engine/'s).
#include <stdexcept>

#include "gemm/device_gemm.hpp"

namespace fp8sim {

void check_deferred_quantisations(bool) {}  // nothing can be pending without CUDA

void run_device_gemm(const DeviceGemm&, const DeviceLaunch&) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

void copy_device(void*, const void*, std::size_t, bool, void*, int) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

void copy_device_async(void*, std::size_t, const void*, std::size_t, std::size_t, std::size_t,
                       bool, void*) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

void run_device_bands(int, const std::function<void(int, void*)>&,
                      const std::function<void(int, void*)>&,
                      const std::function<void(int, void*)>&,
                      const std::function<void(void*)>&) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

void find_bad_codes_on_device(const std::uint8_t*, std::size_t, unsigned, std::size_t,
                              unsigned long long*, void*) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

int device_sm_count() { throw std::runtime_error("device cuda: fp8sim was built without CUDA"); }

void run_device_epilogue(const DeviceEpilogue&, float*, void*, int) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

bool device_all_finite(const float*, std::size_t, void*, int) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

DeviceScaleCheck check_scales_on_device(const float*, std::size_t, std::size_t,
                                        const std::uint32_t*, bool, void*, int) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

void* device_malloc(std::size_t, int) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

void device_free(void*) {}

void* device_pool_malloc(std::size_t, int) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

void device_pool_free(void*, void*) {}

double device_kernel_seconds() { return 0.0; }

DeviceKernelEvents device_kernel_take() { return {}; }
DeviceKernelEvents::DeviceKernelEvents(DeviceKernelEvents&&) noexcept = default;
DeviceKernelEvents& DeviceKernelEvents::operator=(DeviceKernelEvents&&) noexcept = default;
DeviceKernelEvents::~DeviceKernelEvents() = default;
double DeviceKernelEvents::seconds() { return 0.0; }

std::size_t device_memory_peak(bool) { return 0; }

}  // namespace fp8sim
