// test_seed: the one seed of every randomised test: FP8SIM_SEED (decimal or 0x-hex) or
// 20261123, printed once per test binary so a failing run can be repeated draw for draw.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace fp8sim {

inline std::uint64_t test_seed() {
  static const std::uint64_t seed = [] {
    const char* env = std::getenv("FP8SIM_SEED");
    const std::uint64_t s = env != nullptr && *env != '\0' ? std::strtoull(env, nullptr, 0) : 20261123;
    std::printf("seed %llu (set FP8SIM_SEED to change)\n", static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

}  // namespace fp8sim
