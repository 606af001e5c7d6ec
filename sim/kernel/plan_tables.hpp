// plan_tables: the recorded cuBLASLt plan tables (sim/data/cublaslt_plans_<gpu>.json and .bin)
// as built into the library; sim/CMakeLists.txt generates the definition from the files there.
#pragma once

#include <span>
#include <string_view>

namespace fp8sim {

struct BuiltinPlanTable {
  std::string_view gpu;   // "h100": the file name's suffix
  std::string_view meta;  // the .json's text
  std::string_view blob;  // the .bin's bytes
};

std::span<const BuiltinPlanTable> builtin_plan_tables();

}  // namespace fp8sim
