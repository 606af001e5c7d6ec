// hw_provenance: which GPU, driver and CUDA a fp8sim-hw report or capture came from.
#include "hw/hw_provenance.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cctype>
#include <ctime>
#include <fstream>

#include "hw/hw_device.hpp"
#include "io/revision.hpp"

namespace fp8sim::hw {

DeviceInfo device_info() {
  DeviceInfo d;
  cudaDeviceProp p{};
  cuda_check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
  d.name = fmt::format("{} (sm_{}{}, {} SMs)", p.name, p.major, p.minor, p.multiProcessorCount);
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  d.cuda = fmt::format("driver API {}.{}, runtime {}.{}", drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
  d.driver = d.cuda;
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  if (std::getline(f, line)) {
    // "NVRM version: NVIDIA UNIX ... Kernel Module [for x86_64]  580.159.04  Release Build ...":
    // the first word of the form digits.digits[.digits].
    std::size_t i = 0;
    while (i < line.size()) {
      const std::size_t j = line.find(' ', i);
      const std::string w = line.substr(i, j == std::string::npos ? std::string::npos : j - i);
      if (w.size() >= 3 && std::isdigit(static_cast<unsigned char>(w[0])) && w.find('.') != std::string::npos &&
          w.find_first_not_of("0123456789.") == std::string::npos) {
        d.driver = w;
        break;
      }
      if (j == std::string::npos) break;
      i = j + 1;
    }
  }
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  d.date = buf;
  return d;
}

json provenance(const DeviceInfo& d, std::uint64_t seed, const std::string& generator) {
  return json{{"device", d.name}, {"driver", d.driver}, {"cuda", d.cuda}, {"date", d.date},
              {"git_revision", git_revision()}, {"generator", generator}, {"seed", seed}};
}

bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

}  // namespace fp8sim::hw
