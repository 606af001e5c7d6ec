// gemm_engine_arith: exact device arithmetic for the CUDA GEMM engine's reference path: a
// wide fixed-point sum (sim's ExactSum) and rounding into an IEEE-style format
// (sim's round_to_format / round_accumulator_output / quantize), bit for bit.
#pragma once

#include <cstdint>

#include "gemm/device_gemm.hpp"

namespace fp8sim::gpu {

// An exact value before rounding: (-1)^neg * sig * 2^exp, plus a little more when sticky.
struct Unrounded {
  bool neg = false;
  std::uint64_t sig = 0;
  int exp = 0;
  bool sticky = false;
};

__device__ inline Unrounded unrounded_from_double(double x) {
  const std::uint64_t b = static_cast<std::uint64_t>(__double_as_longlong(x));
  Unrounded u;
  u.neg = (b >> 63) != 0;
  const int field = static_cast<int>((b >> 52) & 0x7ff);
  const std::uint64_t frac = b & ((std::uint64_t{1} << 52) - 1);
  u.sig = field == 0 ? frac : frac | (std::uint64_t{1} << 52);
  u.exp = (field == 0 ? 1 : field) - 1075;
  return u;
}

// round_to_format for a signed IEEE-style format, overflow to Inf (nonsat); the zero keeps
// its sign. Returns the rounded value.
__device__ inline double round_to(const Unrounded& u, const DeviceFormat& f, int mode) {
  const bool neg = u.neg;
  if (u.sig == 0 && !u.sticky) return neg ? -0.0 : 0.0;
  const int M = f.mantissa_bits, emin = f.min_exponent;
  std::uint64_t n = 0;
  bool half = false, below = false;
  int qe;
  if (u.sig == 0) {
    qe = emin - M;
    below = true;
  } else {
    const int msb = 63 - __clzll(static_cast<long long>(u.sig));
    const int e_u = u.exp + msb;
    qe = (e_u > emin ? e_u : emin) - M;
    const int shift = qe - u.exp;
    if (shift <= 0) {
      n = u.sig << -shift;
      below = u.sticky;
    } else if (shift < 64) {
      n = u.sig >> shift;
      half = (u.sig >> (shift - 1)) & 1u;
      below = (u.sig & ((std::uint64_t{1} << (shift - 1)) - 1u)) != 0 || u.sticky;
    } else {
      half = shift == 64 && (u.sig >> 63) != 0;
      below = (shift == 64 ? (u.sig << 1) != 0 : true) || u.sticky;
    }
  }
  const bool inexact = half || below;
  bool up = false;
  switch (mode) {
    case kRne: up = half && (below || (n & 1u)); break;
    case kRna: up = half; break;
    case kRu: up = inexact && !neg; break;
    case kRd: up = inexact && neg; break;
    default: break;
  }
  n += up ? 1u : 0u;
  if ((n >> (M + 1)) != 0) {
    n >>= 1;
    qe += 1;
  }
  if (n == 0) return neg ? -0.0 : 0.0;
  const int top = 63 - __clzll(static_cast<long long>(n)) + qe;
  if (top > f.max_exponent) {
    const bool toward_zero = mode == kRz || (mode == kRd && !neg) || (mode == kRu && neg);
    const double big = toward_zero
        ? ldexp(static_cast<double>((std::uint64_t{1} << (M + 1)) - 1), f.max_exponent - M)
        : __longlong_as_double(0x7ff0000000000000LL);
    return neg ? -big : big;
  }
  const double v = ldexp(static_cast<double>(n), qe);
  return neg ? -v : v;
}

// sim's quantize(x, f, {rne, nonsat}): NaN and Inf stay as they are.
__device__ inline double quantize_rne(double x, const DeviceFormat& f) {
  if (!isfinite(x)) return x;
  return round_to(unrounded_from_double(x), f, kRne);
}

// sim's round_accumulator_output: past the output's largest binade the result is +-Inf
// whatever the direction; a zero result is +0, or (signed_zero) -0 where a nonzero negative
// sum rounded to zero.
__device__ inline double round_output(const DeviceModel& m, const Unrounded& u, int mode) {
  if (u.sig != 0) {
    const int msb = 63 - __clzll(static_cast<long long>(u.sig));
    if (u.exp + msb > m.output.max_exponent)
      return u.neg ? -__longlong_as_double(0x7ff0000000000000LL)
                   : __longlong_as_double(0x7ff0000000000000LL);
  }
  const double v = round_to(u, m.output, mode);
  if (v != 0.0) return v;
  return m.signed_zero && u.neg && (u.sig != 0 || u.sticky) ? -0.0 : 0.0;
}

// An exact sum of finite doubles whose bits lie in [2^-kLow, 2^(32*kLimbs-kLow-1)):
// two's complement in 32-bit limbs. Products of fp32 values reach 2^-298, cut terms 2^-360.
class WideSum {
 public:
  static constexpr int kLimbs = 24;
  static constexpr int kLow = 416;

  __device__ WideSum() {
    for (int i = 0; i < kLimbs; ++i) w_[i] = 0;
  }

  __device__ void add(double x) {
    if (x == 0.0) return;
    Unrounded u = unrounded_from_double(x);
    while ((u.sig & 1u) == 0) u.sig >>= 1, ++u.exp;
    const int pos = u.exp + kLow;  // >= 0 for every value the engine adds
    const int li = pos >> 5, sh = pos & 31;
    const std::uint64_t lo = u.sig << sh;
    const std::uint32_t p[3] = {static_cast<std::uint32_t>(lo), static_cast<std::uint32_t>(lo >> 32),
                                static_cast<std::uint32_t>(sh ? u.sig >> (64 - sh) : 0)};
    if (!u.neg) {
      std::uint64_t carry = 0;
      for (int i = li; i < kLimbs; ++i) {
        const std::uint64_t t = std::uint64_t{w_[i]} + (i - li < 3 ? p[i - li] : 0u) + carry;
        w_[i] = static_cast<std::uint32_t>(t);
        carry = t >> 32;
        if (i - li >= 2 && carry == 0) break;
      }
    } else {
      std::uint64_t borrow = 0;
      for (int i = li; i < kLimbs; ++i) {
        const std::uint64_t sub = (i - li < 3 ? p[i - li] : 0u) + borrow;
        borrow = std::uint64_t{w_[i]} < sub ? 1 : 0;
        w_[i] = static_cast<std::uint32_t>(std::uint64_t{w_[i]} - sub);
        if (i - li >= 2 && borrow == 0) break;
      }
    }
  }

  // The top 64 bits and a sticky bit.
  __device__ Unrounded unrounded() const {
    std::uint32_t m[kLimbs];
    Unrounded u;
    u.neg = (w_[kLimbs - 1] >> 31) != 0;
    std::uint64_t carry = 1;
    for (int i = 0; i < kLimbs; ++i) {
      if (u.neg) {
        const std::uint64_t t = std::uint64_t{~w_[i]} + carry;
        m[i] = static_cast<std::uint32_t>(t);
        carry = t >> 32;
      } else {
        m[i] = w_[i];
      }
    }
    int hi = kLimbs - 1;
    while (hi >= 0 && m[hi] == 0) --hi;
    if (hi < 0) return Unrounded{};
    const int top = hi * 32 + 31 - __clz(static_cast<int>(m[hi]));
    const int start = top - 63;
    auto limb = [&](int i) -> std::uint64_t { return i >= 0 && i < kLimbs ? m[i] : 0u; };
    if (start <= 0) {
      u.sig = (limb(0) | (limb(1) << 32));
      u.exp = -kLow;
      return u;
    }
    const int li = start >> 5, sh = start & 31;
    const std::uint64_t lo = limb(li) | (limb(li + 1) << 32);
    u.sig = sh ? (lo >> sh) | (limb(li + 2) << (64 - sh)) : lo;
    bool sticky = (limb(li) & ((std::uint64_t{1} << sh) - 1u)) != 0;
    for (int i = 0; i < li; ++i) sticky = sticky || m[i] != 0;
    u.sticky = sticky;
    u.exp = start - kLow;
    return u;
  }

 private:
  std::uint32_t w_[kLimbs];
};

}  // namespace fp8sim::gpu
