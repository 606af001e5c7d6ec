// rng: counter-based random numbers, so a seed fixes every draw whatever the thread count.
//
// Draw i of stream s under seed k is a pure function random_u64(k, s, i): threads never share
// a generator, and results cannot depend on how work is split between them.
#pragma once

#include <cstdint>
#include <string_view>

namespace fp8sim {

// SplitMix64 finaliser (Steele, Lea & Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014): a bijective mix of 64 bits.
constexpr std::uint64_t mix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The i-th 64-bit draw of stream `stream` under `seed`.
constexpr std::uint64_t random_u64(std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  return mix64(mix64(seed ^ mix64(stream)) + i * 0xd1b54a32d192ed03ull);
}

// A stream number from a name: 64-bit FNV-1a of its bytes (the same on every standard
// library, unlike std::hash).
constexpr std::uint64_t stream_of(std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char ch : name) h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001b3ull;
  return h;
}

// Uniform double in [0, 1) with 53 random bits.
constexpr double to_unit_double(std::uint64_t r) {
  return static_cast<double>(r >> 11) * 0x1.0p-53;
}

}  // namespace fp8sim
