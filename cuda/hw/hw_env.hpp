// hw_env: fp8sim-hw's environment switches, each read where it is used.
#pragma once

#include <cstdlib>

namespace fp8sim::hw {

// FP8SIM_HW_SKIP_WGMMA=1 leaves the wgmma kernels out of every subcommand (e.g. on a part
// where they fault).
inline bool skip_wgmma() {
  const char* e = std::getenv("FP8SIM_HW_SKIP_WGMMA");
  return e != nullptr && e[0] == '1';
}

}  // namespace fp8sim::hw
