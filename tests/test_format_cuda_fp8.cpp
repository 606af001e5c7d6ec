// test_format_cuda_fp8: all 2^32 float32 inputs encode into e4m3/e5m2 exactly as cuda_fp8.h does.
//
// Oracle: CUDA's host conversion __nv_cvt_float_to_fp8(x, sat, __NV_E4M3/__NV_E5M2) from
// cuda_fp8.h (plain C++ on the host, no GPU needed). Four configurations: e4m3 and e5m2, each
// with __NV_SATFINITE (our `saturate`) and __NV_NOSAT (our `nonsat`), rounding rne (the only
// mode cuda_fp8.h has). NaN inputs may map to any NaN code.
//   - encode_batch (sim/format/convert_batch.hpp) is checked on every one of the 2^32 patterns;
//   - the scalar encode() is checked on every 61st pattern (61 is prime, so the subset hits
//     every residue of every power-of-two field: all exponents, all low-mantissa patterns);
//     all 2^32 would take about 15 CPU-minutes per configuration.
// Each configuration is its own Catch2 test case (tag [e4m3] etc.) so ctest runs them in
// parallel; each case also uses every hardware thread.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <atomic>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "format/convert_batch.hpp"
#include "format/format.hpp"
#include "base/parallel.hpp"
#include "format/rounding.hpp"

#if defined(FP8SIM_HAVE_CUDA_FP8_H) && __has_include(<cuda_fp8.h>)
#include <cuda_fp8.h>
#define FP8SIM_CUDA_ORACLE 1
#endif

using namespace fp8sim;

namespace {

#ifdef FP8SIM_CUDA_ORACLE
// The oracle on consecutive float32 bit patterns base, base + 1, ...: a loop of its own with
// the configuration fixed at compile time, which the compiler makes branch-free (0.3 ns a
// pattern here; 3.6 when called inside the checking loop with the configuration as arguments).
template <__nv_fp8_interpretation_t kInterp, __nv_saturation_t kSat>
void oracle_codes(std::uint32_t base, std::vector<std::uint8_t>& want) {
  for (std::size_t i = 0; i < want.size(); ++i)
    want[i] = __nv_cvt_float_to_fp8(std::bit_cast<float>(base + static_cast<std::uint32_t>(i)),
                                    kSat, kInterp);
}

struct Config {
  const char* format;
  Overflow overflow;
  void (*oracle)(std::uint32_t base, std::vector<std::uint8_t>& want);
};

void check_all_floats(const Config& c) {
  const FormatSpec f = format_by_name(c.format);
  const RoundingSpec r{Rounding::rne, c.overflow, 32};
  const char* policy = c.overflow == Overflow::saturate ? "saturate" : "nonsat";
  constexpr std::uint64_t kTotal = std::uint64_t{1} << 32;
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  constexpr std::uint64_t kStride = 61;
  bool is_nan_code[256];
  for (std::uint32_t code = 0; code < 256; ++code)
    is_nan_code[code] = classify(f, code) == ValueClass::nan;
  std::atomic<std::uint64_t> batch_bad{0}, scalar_bad{0}, scalar_checked{0};
  std::mutex print_mutex;
  int printed = 0;
  auto report = [&](const char* path, std::uint32_t bits, std::uint32_t got, std::uint32_t want) {
    std::lock_guard<std::mutex> lock(print_mutex);
    if (printed++ < 20)
      std::printf("%s %s %s rne x=0x%08x => got 0x%02x want 0x%02x\n", path, c.format, policy,
                  bits, got, want);
  };
  parallel_for(kTotal / kChunk, /*threads=*/0, [&](std::size_t b, std::size_t e) {
    std::vector<float> x(kChunk);
    std::vector<std::uint8_t> got(kChunk), want(kChunk);
    std::uint64_t bad_b = 0, bad_s = 0, n_s = 0;
    for (std::size_t chunk = b; chunk < e; ++chunk) {
      const std::uint32_t base = static_cast<std::uint32_t>(chunk * kChunk);
      for (std::size_t i = 0; i < kChunk; ++i)
        x[i] = std::bit_cast<float>(base + static_cast<std::uint32_t>(i));
      encode_batch(f, r, x, got, /*threads=*/1);
      c.oracle(base, want);
      // Element by element only where the chunk's codes differ somewhere (NaNs may differ).
      const bool equal = std::memcmp(got.data(), want.data(), kChunk) == 0;
      for (std::size_t i = 0; i < kChunk && !equal; ++i) {
        if (got[i] == want[i] || (is_nan_code[want[i]] && is_nan_code[got[i]])) continue;
        ++bad_b;
        report("encode_batch", base + static_cast<std::uint32_t>(i), got[i], want[i]);
      }
      // The scalar encode() from the first index in this chunk that is a multiple of the stride.
      for (std::size_t i = (kStride - base % kStride) % kStride; i < kChunk; i += kStride) {
        ++n_s;
        const std::uint32_t s = encode(static_cast<double>(x[i]), f, r);
        if (is_nan_code[want[i]] ? s < 256 && is_nan_code[s] : s == want[i]) continue;
        ++bad_s;
        report("encode", base + static_cast<std::uint32_t>(i), s, want[i]);
      }
    }
    batch_bad += bad_b;
    scalar_bad += bad_s;
    scalar_checked += n_s;
  });
  std::printf("%s %s: encode_batch (%s) %llu of 2^32 mismatches; encode %llu of %llu mismatches\n",
              c.format, policy, encode_batch_isa(),
              static_cast<unsigned long long>(batch_bad.load()),
              static_cast<unsigned long long>(scalar_bad.load()),
              static_cast<unsigned long long>(scalar_checked.load()));
  CHECK(batch_bad.load() == 0);
  CHECK(scalar_bad.load() == 0);
  CHECK(scalar_checked.load() == (kTotal + kStride - 1) / kStride);
}
#endif

void waive_if_no_header() {
#ifndef FP8SIM_CUDA_ORACLE
  std::printf("waived: cuda_fp8.h not found (set FP8SIM_CUDA_INCLUDE_DIR to CUDA's include dir)\n");
  std::fflush(stdout);
  std::exit(77);
#endif
}

}  // namespace

TEST_CASE("e4m3 saturate: all float32 encode as cuda_fp8.h", "[e4m3][saturate]") {
  waive_if_no_header();
#ifdef FP8SIM_CUDA_ORACLE
  check_all_floats({"e4m3", Overflow::saturate, oracle_codes<__NV_E4M3, __NV_SATFINITE>});
#endif
}

TEST_CASE("e4m3 nonsat: all float32 encode as cuda_fp8.h", "[e4m3][nonsat]") {
  waive_if_no_header();
#ifdef FP8SIM_CUDA_ORACLE
  check_all_floats({"e4m3", Overflow::nonsat, oracle_codes<__NV_E4M3, __NV_NOSAT>});
#endif
}

TEST_CASE("e5m2 saturate: all float32 encode as cuda_fp8.h", "[e5m2][saturate]") {
  waive_if_no_header();
#ifdef FP8SIM_CUDA_ORACLE
  check_all_floats({"e5m2", Overflow::saturate, oracle_codes<__NV_E5M2, __NV_SATFINITE>});
#endif
}

TEST_CASE("e5m2 nonsat: all float32 encode as cuda_fp8.h", "[e5m2][nonsat]") {
  waive_if_no_header();
#ifdef FP8SIM_CUDA_ORACLE
  check_all_floats({"e5m2", Overflow::nonsat, oracle_codes<__NV_E5M2, __NV_NOSAT>});
#endif
}
