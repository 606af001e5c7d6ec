// device: names of the devices a GEMM runs on.
#include "gemm/device.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace fp8sim {

Device parse_device(std::string_view s) {
  if (s == "cpu") return Device::cpu;
  if (s == "cuda") return Device::cuda;
  throw std::invalid_argument(fmt::format("unknown device '{}' (known: cpu, cuda)", s));
}

std::string_view to_string(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }

}  // namespace fp8sim
