// quantize_device_stub: the CUDA quantiser's entry points (run_device_quantise,
// run_device_transpose_codes) in a build without CUDA (linked instead of cuda/engine/'s).
#include <stdexcept>

#include "scaling/device_quantize.hpp"

namespace fp8sim {

DeviceQuantiseResult run_device_quantise(const DeviceQuantiseJob&, const DeviceLaunch&) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

void run_device_transpose_codes(const unsigned char*, int, int, unsigned char*,
                                const DeviceLaunch&) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

}  // namespace fp8sim
