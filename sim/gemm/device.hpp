// device: where a GEMM runs (the CPU engine or the CUDA engine), one field of GemmSpec.
#pragma once

#include <cstdint>
#include <string_view>

namespace fp8sim {

enum class Device : std::uint8_t {
  cpu,   // sim/gemm/engine_cpu.cpp's engine on the host's threads
  cuda,  // the CUDA engine (cuda/): same bits as the CPU engine, on the current CUDA device
};

// "cpu" | "cuda"; throws std::invalid_argument naming the known devices.
Device parse_device(std::string_view s);
std::string_view to_string(Device d);

}  // namespace fp8sim
