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

#include <cmath>
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

// Where a rounds to nearest among value[] (ascending): value[j] (mid false: a is it, or nearer
// to it than to its neighbour), or the midpoint of value[j] and value[j+1] (mid true), where
// the table says which way a tie goes.
struct TableSpot {
  int j;
  bool mid;
};

// TableSpot of a, from its floor lo (value[lo] <= a < value[lo+1], or a == value[lo]).
FP8SIM_HOST_DEVICE inline TableSpot table_nearest_at(const double* value, int lo, double a) {
  if (value[lo] == a) return {lo, false};
  const double midpoint = 0.5 * (value[lo] + value[lo + 1]);  // exact: adjacent values
  if (a == midpoint) return {lo, true};
  return {a < midpoint ? lo : lo + 1, false};
}

// TableSpot of a, value[0] <= a <= value[n-1].
FP8SIM_HOST_DEVICE inline TableSpot table_nearest(const double* value, int n, double a) {
  return table_nearest_at(value, table_floor(value, n, a), a);
}

// Round-to-nearest-even with saturation into a signed format of at most 8 bits, as codes: a
// magnitude a of a value v != 0 takes
//   a > value[n-1]            over (v > 0) / over_neg
//   a == value[j]             pos[j] / neg[j]
//   value[j] < a < value[j+1] the nearer one's code; at the midpoint mid_pos[j] / mid_neg[j]
// and v == +-0 takes zero_pos / zero_neg.
// Where a lies is found from its binade (kTableBinades of them from binade0, the double
// exponent field of value[1]): the largest j with value[j] <= 2^e of binade e (first), and
// 2^k slots that hold its values (bits: k), evenly spaced from 2^e in every ExMy binade (2^m
// of them, fewer in the top one). Where the host found a binade so (kBinadeRegular: its
// values are 2^e (1 + i / 2^k) at first + i, and the next binade's first value follows at
// first + 2^k), the nearest value or midpoint comes from a's fraction bits alone; elsewhere
// the top bits of the fraction give a first guess that table_floor_from confirms (any table
// stays exact).
constexpr int kTableBinades = 126;  // (the table's 1800 bytes without padding)
constexpr unsigned char kBinadeRegular = 0x80;  // in bits[]: above k
struct DeviceEncodeTable {
  int n = 0;                 // nonnegative finite values, ascending (value[0] = 0)
  int binade0 = 0;           // the double exponent field of value[1]
  double value[128] = {};
  unsigned char pos[128] = {}, neg[128] = {};
  unsigned char mid_pos[128] = {}, mid_neg[128] = {};
  unsigned char zero_pos = 0, zero_neg = 0, over = 0, over_neg = 0;
  unsigned char first[kTableBinades] = {}, bits[kTableBinades] = {};
};
static_assert(sizeof(DeviceEncodeTable) == 8 + 128 * 8 + 4 * 128 + 4 + 2 * kTableBinades,
              "no padding: the engine keys its device copy by the table's bytes");

// The largest j < n with value[j] <= a (value[0] <= a), from a first guess j.
FP8SIM_HOST_DEVICE inline int table_floor_from(const double* value, int n, double a, int j) {
  while (j + 1 < n && value[j + 1] <= a) ++j;
  while (j > 0 && value[j] > a) --j;
  return j;
}

// TableSpot of a, 0 < a <= e.value[e.n - 1], through a's binade.
FP8SIM_HOST_DEVICE inline TableSpot table_nearest_binade(const DeviceEncodeTable& e, double a) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &a, sizeof bits);
  int b = static_cast<int>(bits >> 52) - e.binade0;
  int j = 0;
  if (b >= 0) {
    b = b < kTableBinades ? b : kTableBinades - 1;
    const int k = e.bits[b] & ~kBinadeRegular;
    const std::uint64_t fraction = bits & 0xfffffffffffffull;
    j = e.first[b] + static_cast<int>(fraction >> (52 - k));
    if (e.bits[b] & kBinadeRegular) {  // a's slot j and its place in it, as integers
      const std::uint64_t rest = fraction & ((std::uint64_t(1) << (52 - k)) - 1);
      const std::uint64_t half = std::uint64_t(1) << (51 - k);
      if (rest == half) return {j, true};
      return {rest < half ? j : j + 1, false};
    }
    j = j < e.n ? j : e.n - 1;
  }
  return table_nearest_at(e.value, table_floor_from(e.value, e.n, a, j), a);
}

// The code of v by the table (the device's rounding; the host tests it against encode()).
FP8SIM_HOST_DEVICE inline unsigned char table_encode(double v, const DeviceEncodeTable& e) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  const bool neg = (bits >> 63) != 0;
  const double a = neg ? -v : v;
  if (a == 0) return neg ? e.zero_neg : e.zero_pos;
  if (a > e.value[e.n - 1]) return neg ? e.over_neg : e.over;
  const TableSpot p = table_nearest_binade(e, a);
  if (p.mid) return neg ? e.mid_neg[p.j] : e.mid_pos[p.j];
  return neg ? e.neg[p.j] : e.pos[p.j];
}

// table_encode's code of v, and whether |v| lies above the largest value (*over: saturated).
FP8SIM_HOST_DEVICE inline unsigned char table_encode_over(double v, const DeviceEncodeTable& e,
                                                          bool* over) {
  *over = (v < 0 ? -v : v) > e.value[e.n - 1];
  return table_encode(v, e);
}

// The code of the quotient x / s as table_encode(double(x) / s) gives it (and whether its
// magnitude lies above the largest value: *over), in float arithmetic where it can: q = x / s
// rounded to float, and the division's remainder x - q s (exact by one fma) where q itself is
// a midpoint. q is the float nearest x / s and every value and midpoint of an 8-bit format is
// a float, so no midpoint lies between them: they round alike, except where q is a midpoint
// (the remainder's sign says which side x / s is, or that it is the tie) or the largest value
// (above it, x / s saturates). Elsewhere (q below the smallest binade, in one that is not
// regular, beyond the largest value, not finite) the double quotient's code.
FP8SIM_HOST_DEVICE inline unsigned char table_encode_quotient(float x, float s,
                                                              const DeviceEncodeTable& e,
                                                              bool* over) {
  const float q = x / s;
  std::uint32_t bits = 0;
  std::memcpy(&bits, &q, sizeof bits);
  const bool neg = (bits >> 31) != 0;
  const float a = neg ? -q : q;
  const double top = e.value[e.n - 1];
  const int b = static_cast<int>((bits >> 23) & 0xff) - (e.binade0 - 1023 + 127);
  if (a != 0 && a <= top && b >= 0 && b < kTableBinades && (e.bits[b] & kBinadeRegular)) {
    const int k = e.bits[b] & ~kBinadeRegular;
    const std::uint32_t fraction = bits & 0x7fffffu;
    const int j = e.first[b] + static_cast<int>(fraction >> (23 - k));
    const std::uint32_t rest = fraction & ((std::uint32_t(1) << (23 - k)) - 1);
    const std::uint32_t half = std::uint32_t(1) << (22 - k);
    *over = false;
    if (rest != half && a != top) {
      const int at = rest < half ? j : j + 1;
      return neg ? e.neg[at] : e.pos[at];
    }
    // q is a midpoint or the largest value: which side of it is x / s, in magnitude.
#if defined(__CUDA_ARCH__)
    const float r = __fmaf_rn(-q, s, x);
#else
    const float r = std::fma(-q, s, x);
#endif
    const bool above = r != 0 && ((r > 0) != neg);
    if (a == top) {
      *over = above;
      return above ? (neg ? e.over_neg : e.over) : (neg ? e.neg[j] : e.pos[j]);
    }
    if (r == 0) return neg ? e.mid_neg[j] : e.mid_pos[j];
    return above ? (neg ? e.neg[j + 1] : e.pos[j + 1]) : (neg ? e.neg[j] : e.pos[j]);
  }
  return table_encode_over(static_cast<double>(x) / static_cast<double>(s), e, over);
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
