// device_table: round-to-nearest-even with saturation by table, as the CUDA quantiser rounds
// (cuda/engine/quantize_engine.cu): elements into the codes of a signed format
// (DeviceEncodeTable), scales into the values of an unsigned one (DeviceRoundTable, UE4M3).
// The host fills each table from encode() itself (quantize_device.cpp), so that the device
// decides only by exact comparisons of doubles; the host tests every function here against
// encode() (tests/test_quantize_table.cpp).
//
// sim/ never includes CUDA headers: plain C++17 so that nvcc compiles it as it is, each
// function FP8SIM_HOST_DEVICE (host and device code from the same source).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define FP8SIM_HOST_DEVICE __host__ __device__
#else
#define FP8SIM_HOST_DEVICE
#endif

namespace fp8sim {

// The largest j < n with value[j] <= a, for value[0] <= a (value ascending).
FP8SIM_HOST_DEVICE inline int table_floor(const double* value, int n, double a) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (value[mid] <= a) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// Round-to-nearest-even with saturation into a signed format of at most 8 bits, as codes: a
// magnitude a of a value v != 0 takes
//   a > value[n-1]            over (v > 0) / over_neg
//   a == value[j]             pos[j] / neg[j]
//   value[j] < a < value[j+1] the nearer one's code; at the midpoint mid_pos[j] / mid_neg[j]
// and v == +-0 takes zero_pos / zero_neg.
struct DeviceEncodeTable {
  int n = 0;                 // nonnegative finite values, ascending (value[0] = 0)
  int unused = 0;            // (no padding: the engine keys its device copy by these bytes)
  double value[128] = {};
  unsigned char pos[128] = {}, neg[128] = {};
  unsigned char mid_pos[128] = {}, mid_neg[128] = {};
  unsigned char zero_pos = 0, zero_neg = 0, over = 0, over_neg = 0;
};

// The code of v by the table (the device's rounding; the host tests it against encode()).
FP8SIM_HOST_DEVICE inline unsigned char table_encode(double v, const DeviceEncodeTable& e) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  const bool neg = (bits >> 63) != 0;
  const double a = neg ? -v : v;
  if (a == 0) return neg ? e.zero_neg : e.zero_pos;
  if (a > e.value[e.n - 1]) return neg ? e.over_neg : e.over;
  const int lo = table_floor(e.value, e.n, a);
  if (e.value[lo] == a) return neg ? e.neg[lo] : e.pos[lo];
  const double midpoint = 0.5 * (e.value[lo] + e.value[lo + 1]);  // exact: adjacent values
  if (a < midpoint) return neg ? e.neg[lo] : e.pos[lo];
  if (a > midpoint) return neg ? e.neg[lo + 1] : e.pos[lo + 1];
  return neg ? e.mid_neg[lo] : e.mid_pos[lo];
}

// Round-to-nearest-even with saturation into an unsigned format of at most 8 bits (UE4M3
// scales), as the value decode(encode(v)) gives back: v takes
//   NaN                       nan
//   +-0                       zero
//   v < 0                     negative (an unsigned format's NaN for every negative value)
//   v > value[n-1] (Inf too)  over (saturation: the largest value)
//   v == value[j]             at[j]
//   value[j] < v < value[j+1] the nearer one's at[]; at the midpoint mid[j]
struct DeviceRoundTable {
  int n = 0;                 // nonnegative finite values, ascending (value[0] = 0)
  int unused = 0;            // (no padding: the engine keys its device copy by these bytes)
  double value[128] = {};
  double at[128] = {};       // what value[j] rounds to (itself)
  double mid[128] = {};      // what the midpoint of value[j] and value[j+1] rounds to
  double nan = 0, zero = 0, negative = 0, over = 0;
};

// v rounded by the table (the device's UE4M3 scale rounding; the host tests it against
// encode()).
FP8SIM_HOST_DEVICE inline double table_round(double v, const DeviceRoundTable& t) {
  if (v != v) return t.nan;
  if (v == 0) return t.zero;
  if (v < 0) return t.negative;
  if (v > t.value[t.n - 1]) return t.over;
  const int lo = table_floor(t.value, t.n, v);
  if (t.value[lo] == v) return t.at[lo];
  const double midpoint = 0.5 * (t.value[lo] + t.value[lo + 1]);  // exact: adjacent values
  if (v < midpoint) return t.at[lo];
  if (v > midpoint) return t.at[lo + 1];
  return t.mid[lo];
}

}  // namespace fp8sim
