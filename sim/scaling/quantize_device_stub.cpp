// quantize_device_stub: the CUDA quantiser's entry points (run_device_amax, run_device_encode)
// in a build without CUDA (linked instead of cuda/engine/'s).
#include <stdexcept>

#include "scaling/device_quantize.hpp"

namespace fp8sim {

long long run_device_amax(const void*, bool, int, int, const DeviceScaleGroups&, double*,
                          std::size_t, const DeviceLaunch&) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

std::size_t run_device_encode(const void*, bool, int, int, const float*, int, int, const float*,
                              const DeviceEncodeTable&, unsigned char*, const DeviceLaunch&,
                              bool) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

}  // namespace fp8sim
