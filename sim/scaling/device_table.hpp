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

// Where a (value[0] <= a <= value[n-1]) rounds to nearest among value[] (ascending): value[j]
// (mid false: a is it, or nearer to it than to its neighbour), or the midpoint of value[j]
// and value[j+1] (mid true), where the table says which way a tie goes.
struct TableSpot {
  int j;
  bool mid;
};
FP8SIM_HOST_DEVICE inline TableSpot table_nearest(const double* value, int n, double a) {
  const int lo = table_floor(value, n, a);
  if (value[lo] == a) return {lo, false};
  const double midpoint = 0.5 * (value[lo] + value[lo + 1]);  // exact: adjacent values
  if (a == midpoint) return {lo, true};
  return {a < midpoint ? lo : lo + 1, false};
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
  const TableSpot p = table_nearest(e.value, e.n, a);
  if (p.mid) return neg ? e.mid_neg[p.j] : e.mid_pos[p.j];
  return neg ? e.neg[p.j] : e.pos[p.j];
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
  const TableSpot p = table_nearest(t.value, t.n, v);
  return p.mid ? t.mid[p.j] : t.at[p.j];
}

}  // namespace fp8sim
