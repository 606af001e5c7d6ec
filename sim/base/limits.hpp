// limits: the largest inputs fp8sim accepts, as named constants.
//
// Every reader checks its input against these before allocating, and a rejection names the
// constant: "A.npy: shape (12000000, 256) needs 3072000000 bytes but the file holds 128
// (limits: kMaxFileBytes = 34359738368)". Raise one here (and in docs/limits.md) when a real use
// needs more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace fp8sim::limits {

// GEMM shapes: M, N and K each, and M x N (D is held in memory as float32).
inline constexpr std::int64_t kMaxDim = std::int64_t{1} << 30;
inline constexpr std::int64_t kMaxOutputElements = std::int64_t{1} << 31;
// Files read (.npy data, manifests): larger files are refused before they are read.
inline constexpr std::uint64_t kMaxFileBytes = std::uint64_t{1} << 35;      // 32 GiB
inline constexpr std::uint64_t kMaxManifestBytes = std::uint64_t{1} << 26;  // 64 MiB
inline constexpr std::size_t kMaxNpyHeaderBytes = std::size_t{1} << 20;
inline constexpr std::size_t kMaxNpyRank = 32;  // NumPy's own limit
// Capture manifests.
inline constexpr std::size_t kMaxCases = std::size_t{1} << 16;
inline constexpr std::size_t kMaxPrefixes = std::size_t{1} << 16;
inline constexpr int kMaxJsonDepth = 64;
inline constexpr std::size_t kMaxStringLength = 4096;  // a manifest string, a model string
// cuBLASLt plan tables read by path (sim/kernel/plan_table.hpp): the .json and the .bin each
// at most kMaxManifestBytes, the grid the .bin expands to (variants x M x N x K points, two
// bytes each) at most this many points (the built-in tables hold 1332240).
inline constexpr std::uint64_t kMaxPlanPoints = std::uint64_t{1} << 24;
// Engine threads (0 = every hardware thread).
inline constexpr int kMaxThreads = 1024;
// A value quoted in an error message is cut to this many characters ("...").
inline constexpr std::size_t kMaxQuotedValue = 60;

// "(limits: kMaxDim = 1073741824)": the suffix every limit error ends with.
inline std::string named(const char* name, std::uint64_t value) {
  return fmt::format("(limits: {} = {})", name, value);
}

// `text` for an error message: cut to `max` characters, control characters and non-ASCII
// bytes written as \xNN (so a message stays one printable line).
inline std::string quoted(const std::string& text, std::size_t max = kMaxQuotedValue) {
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    out += c >= 0x20 && c < 0x7f ? std::string(1, char(c)) : fmt::format("\\x{:02x}", c);
  }
  if (text.size() > max) out += fmt::format("... ({} characters)", text.size());
  return out;
}

}  // namespace fp8sim::limits
