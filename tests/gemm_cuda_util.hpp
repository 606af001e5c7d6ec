// gemm_cuda_util: what the CUDA engine's tests (test_gemm_cuda.cpp, test_gemm_cuda_kpar.cpp)
// share: the seed, bitwise comparison, seeded operands and C (random and adversarial), and a
// tally of mismatches.
#pragma once

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/rng.hpp"
#include "gemm/device_gemm.hpp"
#include "gemm/gemm.hpp"

namespace fp8sim::gpu_test {

inline std::uint64_t seed() {
  const char* env = std::getenv("FP8SIM_SEED");
  return env ? std::strtoull(env, nullptr, 0) : 20261123;
}

inline bool same(float x, float y) {
  return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y) ||
         (std::isnan(x) && std::isnan(y));
}

// Random codes: every code of the format equally likely, NaN/Inf kept at `special` per mille
// (subnormals replaced by zeros where `subnormals` is false).
inline Operand random_operand(const FormatSpec& f, int rows, int cols, std::uint64_t stream,
                              int special, bool subnormals = true) {
  std::vector<std::uint32_t> codes(std::size_t(rows) * cols);
  for (std::size_t i = 0; i < codes.size(); ++i) {
    const std::uint64_t r = random_u64(seed(), stream, i);
    std::uint32_t c = static_cast<std::uint32_t>(r % code_count(f));
    const auto cls = classify(f, c);
    if ((cls == ValueClass::nan || cls == ValueClass::inf) && int((r >> 40) % 1000) >= special) c = 0;
    if (cls == ValueClass::subnormal && !subnormals) c = 0;
    codes[i] = c;
  }
  return decode_operand(f, rows, cols, std::span<const std::uint32_t>(codes));
}

// A launch of the given kernel (0 fastest, 1 one thread an output) on a stream of its own or
// the default stream.
inline DeviceLaunch launch_of(int kernel, bool own_stream) {
  DeviceLaunch l;
  l.kernel = kernel;
  l.own_stream = own_stream;
  return l;
}

// n seeded codes of format f from random stream `stream`; NaN and Inf codes kept at a rate of
// special per mille (else +0).
inline std::vector<std::uint8_t> random_codes(const FormatSpec& f, std::size_t n,
                                              std::uint64_t stream, int special) {
  std::vector<std::uint8_t> codes(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t r = random_u64(seed(), stream, i);
    std::uint32_t c = static_cast<std::uint32_t>(r % code_count(f));
    const auto cls = classify(f, c);
    if ((cls == ValueClass::nan || cls == ValueClass::inf) && int((r >> 40) % 1000) >= special)
      c = 0;
    codes[i] = static_cast<std::uint8_t>(c);
  }
  return codes;
}

// n seeded powers of two 2^-16..2^16, from random stream `stream` (MX scales).
inline std::vector<float> pow2_scales(std::size_t n, std::uint64_t stream) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = std::ldexp(1.0f, int(random_u64(seed(), stream, i) % 33) - 16);
  return v;
}

// n seeded block scales of scale format sf near 1 (E8M0 codes 119..135: 2^-8..2^8; other
// formats codes 48..63), from random stream `stream`.
inline std::vector<float> block_scales_near_one(const FormatSpec& sf, std::size_t n,
                                                std::uint64_t stream) {
  const bool e8 = sf.exponent_bits == 8;
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t r = random_u64(seed(), stream, i);
    v[i] = static_cast<float>(decode(sf, std::uint32_t(e8 ? 119 + r % 17 : 48 + r % 16)));
  }
  return v;
}

inline std::vector<float> random_floats(std::size_t n, std::uint64_t stream, int lo, int hi) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t r = random_u64(seed(), stream, i);
    v[i] = std::ldexp(1.0f + float(r % 1024) / 1024.0f, lo + int((r >> 20) % (hi - lo + 1))) *
           ((r >> 40) & 1 ? -1.0f : 1.0f);
  }
  return v;
}

struct Tally {
  std::size_t outputs = 0, configs = 0, bad = 0;
  std::string first;
};

// Counts the outputs of one configuration and records the first mismatch.
inline void tally(const std::vector<float>& cpu, const std::vector<float>& gpu, int N, Tally& t,
           const std::string& what) {
  ++t.configs;
  t.outputs += cpu.size();
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    if (same(cpu[i], gpu[i])) continue;
    if (t.bad++ == 0)
      t.first = fmt::format("seed={} {} output ({}, {}): cpu {:08x} cuda {:08x}", seed(), what,
                            i / N, i % N, std::bit_cast<std::uint32_t>(cpu[i]),
                            std::bit_cast<std::uint32_t>(gpu[i]));
  }
}

// One configuration on both devices.
inline void compare(GemmSpec s, const Operand& A, const Operand& B, const std::vector<float>& C,
             const std::vector<float>& sa, const std::vector<float>& sb, Tally& t,
             const std::string& what) {
  std::vector<float> cpu(std::size_t(A.rows) * B.rows), gpu(cpu.size());
  s.device = Device::cpu;
  gemm(s, A, B, C, sa, sb, cpu);
  s.device = Device::cuda;
  gemm(s, A, B, C, sa, sb, gpu);
  tally(cpu, gpu, B.rows, t, what);
}

// Adversarial operands for the tiled kernels: each row one kind, chosen by row % 4 -- random
// codes (specials at `special` per mille), the largest magnitudes with random signs (long
// cancellations, sums at the top of the exactness bound), mostly zeros of both signs, the
// smallest magnitudes (subnormals, the alignment floor).
// The codes of adversarial_operand (rows x cols, row-major).
inline std::vector<std::uint32_t> adversarial_code_values(const FormatSpec& f, int rows,
                                                          int cols, std::uint64_t stream,
                                                          int special) {
  const std::uint32_t n = code_count(f), sign = n / 2;
  std::vector<std::uint32_t> codes(std::size_t(rows) * cols);
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < cols; ++k) {
      const std::size_t i = std::size_t(r) * cols + k;
      const std::uint64_t x = random_u64(seed(), stream, i);
      std::uint32_t c = static_cast<std::uint32_t>(x % n);
      switch (r % 4) {
        case 1: c = sign - 2 - std::uint32_t(x % 6); break;       // near the largest finite
        case 2: c = (x >> 8) % 16 == 0 ? c : 0; break;            // mostly zeros
        case 3: c = std::uint32_t(x % 12); break;                 // subnormals, smallest normals
        default: break;
      }
      if (r % 4 != 0 && (x >> 32) & 1) c |= sign;                 // either sign, -0 included
      const auto cls = classify(f, c);
      if ((cls == ValueClass::nan || cls == ValueClass::inf) && int((x >> 40) % 1000) >= special)
        c = 0;
      codes[i] = c;
    }
  return codes;
}

inline Operand adversarial_operand(const FormatSpec& f, int rows, int cols, std::uint64_t stream,
                                   int special) {
  const std::vector<std::uint32_t> codes = adversarial_code_values(f, rows, cols, stream, special);
  return decode_operand(f, rows, cols, std::span<const std::uint32_t>(codes));
}

// C for the tiled kernels: wide exponents (fp32 subnormals up to grids beyond float's range,
// which send the output to the per-output kernel), zeros of both signs, Inf and NaN.
inline std::vector<float> adversarial_c(std::size_t n, std::uint64_t stream) {
  std::vector<float> v = random_floats(n, stream, -149, 125);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t x = random_u64(seed(), stream + 7, i) % 64;
    if (x == 0) v[i] = 0.0f;
    if (x == 1) v[i] = -0.0f;
    if (x == 2) v[i] = INFINITY;
    if (x == 3) v[i] = NAN;
    if (x >= 4 && x < 24) v[i] = std::ldexp(v[i], -std::ilogb(v[i]) + int(x % 9) - 4);  // near 1
  }
  return v;
}


}  // namespace fp8sim::gpu_test
