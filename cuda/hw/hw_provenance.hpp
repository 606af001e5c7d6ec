// hw_provenance: which GPU, driver and CUDA a fp8sim-hw report or capture came from.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace fp8sim::hw {

using json = nlohmann::ordered_json;

struct DeviceInfo {
  std::string name, driver, cuda, date;
};

// Device 0's name (sm_XY, SM count), the driver version (from /proc/driver/nvidia/version,
// else the driver API version), the CUDA driver and runtime versions, and the UTC time now.
DeviceInfo device_info();

// The provenance fields every report and manifest starts with.
json provenance(const DeviceInfo& d, std::uint64_t seed, const std::string& generator);

// True when a CUDA device is present.
bool have_device();

}  // namespace fp8sim::hw
