// cuda_host_shim: the CUDA intrinsics and qualifiers that cuda/engine/gemm_engine_step.cuh,
// gemm_engine_arith.cuh and gemm_engine_scaled.cuh use, as plain C++ with the same results
// (each `_rn` / `_rz` operation one IEEE operation in that rounding; bit casts; counts of
// leading and trailing zeros; atomics as plain updates on one thread), so that a host test
// (test_gemm_scaled_host.cpp) runs the device step's arithmetic. Include it before those
// files, and compile without FMA contraction (-ffp-contract=off), as the engine is
// (--fmad=false).
#pragma once

#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>

#define __device__
#define __host__
#define __forceinline__ inline

using std::copysign;
using std::fabs;
using std::frexp;
using std::ilogb;
using std::isfinite;
using std::isinf;
using std::isnan;
using std::ldexp;
using std::rint;
using std::trunc;

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(unsigned(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline double __dadd_rz(double a, double b) {
  std::fesetround(FE_TOWARDZERO);
  const volatile double r = a + b;
  std::fesetround(FE_TONEAREST);
  return r;
}
inline float __fadd_rz(float a, float b) {
  std::fesetround(FE_TOWARDZERO);
  const volatile float r = a + b;
  std::fesetround(FE_TONEAREST);
  return r;
}
inline long long __double_as_longlong(double x) { return std::bit_cast<long long>(x); }
inline double __longlong_as_double(long long x) { return std::bit_cast<double>(x); }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
  const unsigned long long old = *p;
  if (v < old) *p = v;
  return old;
}
