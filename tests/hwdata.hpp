// hwdata: readers for the public tensor-core validation vectors: the committed .npy copy
// (tests/data/hwdata, made by its make_npy.py) and the original text in shared/data.
//
// Text: <root>/<GPU>/<FMT>/a_<GPU>_<FMT>.txt etc.: 32 inputs per line as big-endian float32
// hex; c and d as 32-character binary strings of float32 bits (see that folder's README).
#pragma once

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "format/format.hpp"
#include "io/npy.hpp"

namespace fp8sim::test {

struct HwRows {
  int T = 0, K = 0;
  std::vector<double> a, b;  // T x K values
  std::vector<float> c, d;   // T each
};

inline std::string shared_data_root() {
  const char* env = std::getenv("FP8SIM_SHARED_DATA");
  return std::string(env ? env : "../shared/data") + "/tensor-core-validation";
}

inline bool file_exists(const std::string& p) { return std::ifstream(p).good(); }

// Reads one GPU/format set and its d column ("fp32" or "fp16"). Throws on malformed lines.
inline HwRows read_hw_rows(const std::string& gpu, const std::string& fmt, const std::string& col) {
  const std::string dir = shared_data_root() + "/" + gpu + "/" + fmt + "/";
  auto lines = [&](const std::string& name) {
    std::ifstream f(dir + name);
    if (!f) throw std::runtime_error(dir + name + ": cannot open");
    std::vector<std::string> out;
    for (std::string l; std::getline(f, l);)
      if (!l.empty()) out.push_back(l);
    return out;
  };
  auto bits = [](const std::string& s, int base) {
    return std::bit_cast<float>(static_cast<std::uint32_t>(std::stoul(s, nullptr, base)));
  };
  HwRows r;
  const auto A = lines("a_" + gpu + "_" + fmt + ".txt"), B = lines("b_" + gpu + "_" + fmt + ".txt");
  const auto C = lines("c_" + gpu + "_fp32.txt"), D = lines("d_" + gpu + "_" + col + ".txt");
  r.T = static_cast<int>(A.size());
  if (B.size() != A.size() || C.size() != A.size() || D.size() != A.size())
    throw std::runtime_error(dir + ": files have different row counts");
  for (int t = 0; t < r.T; ++t) {
    for (const auto* src : {&A, &B}) {
      std::istringstream in((*src)[t]);
      int k = 0;
      for (std::string w; in >> w; ++k) (src == &A ? r.a : r.b).push_back(bits(w, 16));
      if (r.K == 0) r.K = k;
      if (k != r.K) throw std::runtime_error(dir + ": row " + std::to_string(t) + " length");
    }
    r.c.push_back(bits(C[t], 2));
    r.d.push_back(bits(D[t], 2));
  }
  return r;
}

inline std::string test_data_root() {
  const char* env = std::getenv("FP8SIM_TEST_DATA");
  return std::string(env ? env : "tests/data") + "/hwdata";
}

// The committed copy: FP8 codes decoded to values, c and the d column as measured.
inline HwRows read_hw_npy(const std::string& gpu, const std::string& fmt, const std::string& col) {
  const std::string base = test_data_root() + "/" + gpu + "_" + fmt + "_";
  const FormatSpec f = format_by_name(fmt == "E4M3" ? "e4m3" : "e5m2");
  const NpyArray a = read_npy_checked(base + "a.npy", "|u1", {0, 0});
  const NpyArray b = read_npy_checked(base + "b.npy", "|u1", {a.shape[0], a.shape[1]});
  HwRows r;
  r.T = static_cast<int>(a.shape[0]);
  r.K = static_cast<int>(a.shape[1]);
  for (std::uint8_t code : a.as<std::uint8_t>()) r.a.push_back(decode(f, code));
  for (std::uint8_t code : b.as<std::uint8_t>()) r.b.push_back(decode(f, code));
  const std::size_t T = a.shape[0];
  r.c = read_npy_checked(base + "c.npy", "<f4", {T}).as<float>();
  r.d = read_npy_checked(base + "d_" + col + ".npy", "<f4", {T}).as<float>();
  return r;
}

}  // namespace fp8sim::test
