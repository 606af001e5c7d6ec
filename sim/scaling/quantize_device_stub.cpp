// quantize_device_stub: the CUDA quantiser's entry point (run_device_quantise) in a build
// without CUDA (linked instead of cuda/engine/'s).
#include <stdexcept>

#include "scaling/device_quantize.hpp"

namespace fp8sim {

DeviceQuantiseResult run_device_quantise(const DeviceQuantiseJob&, const DeviceLaunch&) {
  throw std::runtime_error("device cuda: fp8sim was built without CUDA");
}

}  // namespace fp8sim
