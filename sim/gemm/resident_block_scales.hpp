// resident_block_scales: block scales inside the MMA for GEMMs on codes in CUDA memory
// (gemm_resident, gemm()'s bands: gemm/dispatch.cpp, gemm/device_bands.cpp): which device
// route a block-scaled GEMM takes, the test that its scales are values of the scale format
// (ScaleValues, on the host for every route), and the scales copied to the device once and
// checked there, which decides the launch that reads them in place.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "gemm/device_gemm.hpp"
#include "gemm/gemm.hpp"

namespace fp8sim {

// How a block-scaled GEMM on resident codes runs, before the scales' values and C are looked
// at: on the device on group sums of finite formats (the group-sum step) or on single products
// (the scales folded into the codes' values), where no bias, no library GEMM and no padded K
// wrap it; elsewhere through the host.
enum class BlockRoute { host, group_sums, folded };
BlockRoute block_route(const GemmSpec& s, int K, bool bias);

// Scales a model applies inside the MMA must be values of its scale format (NaN included).
// Formats of up to 16 bits: the format's values (every code decoded; a zero stands for both
// signs, as == compares) as float bits; where all of them have 16 zero low bits (up to 7
// mantissa bits: e4m3, ue8m0, ...), `high_half`: a scale is looked up by its high 16 bits in
// a 64 Ki-bit table (a few nanoseconds a scale, so that FP4 GEMMs' millions of scales cost
// milliseconds; on resident codes the device looks them up: block_scales_on_device), else
// among the sorted values; wider formats: each scale encoded and decoded.
struct ScaleValues {
  FormatSpec f;
  bool table = false, nan = false, high_half = false;
  std::vector<std::uint32_t> values;  // sorted float bits
  std::vector<std::uint32_t> high;    // high_half: bit (bits >> 16) set for each value

  explicit ScaleValues(const FormatSpec& format);
  bool is_value(float x) const;
  // The one-line error for scale i of `what` ("A scales", "B scales"), x, not a value.
  [[noreturn]] void bad(const GemmSpec& s, const char* what, std::size_t i, float x) const;
  // Throws bad() for the first scale of A's, then of B's, that is not a value.
  void check(const GemmSpec& s, std::span<const float> sa, std::span<const float> sb) const;
};
// ScaleValues of `format`, made once per format (a pure function of it) and kept.
const ScaleValues& scale_values(const FormatSpec& format);

// The block scales in device memory, as the route reads them: A's and B's (`copy`'s memory),
// and the launch that says so (scales_on_device, their log2 ranges for folding).
struct DeviceBlockScales {
  std::span<const float> a, b;
  DeviceLaunch launch;
};

// A block-scaled GEMM's scales for its device route (route group_sums or folded;
// values.high_half, values of s's scale format): sa and sb (host) copied once into `copy`
// (device_pool memory of `device`, handed back after the work queued on `stream`) and checked
// there (check_scales_on_device, after the work queued on `stream`): the first that is not a
// value, A's before B's, throws values.bad()'s line, as ScaleValues::check does on the host.
// Returns them where the route's other conditions hold: group sums, every scale finite and
// C (`outputs` floats of device memory, or null) finite; folded, folded_codes_fit on their
// log2 ranges. Else nothing: the caller's host route runs. Nothing proportional to the scales
// or C runs on the host.
std::optional<DeviceBlockScales> block_scales_on_device(
    const GemmSpec& s, BlockRoute route, const ScaleValues& values, std::span<const float> sa,
    std::span<const float> sb, const float* C, std::size_t outputs, DeviceBlock& copy,
    void* stream, int device);

}  // namespace fp8sim
