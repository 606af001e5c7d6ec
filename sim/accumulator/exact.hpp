// exact: exact dot products and GEMMs of decoded values, rounded once at the end.
//
// The only user of Boost.Multiprecision in fp8sim (exact_dot_fast, its fast twin for the
// sweeps, needs none). Every error fp8sim reports is measured against these results.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "format/format.hpp"
#include "format/rounding.hpp"

namespace fp8sim {

// An exact real number held as a fixed-point integer: value = mantissa * 2^-kScaleBits.
// Wide enough for any sum of products of two finite fp32 values (products reach 2^-298).
class ExactSum {
 public:
  static constexpr int kScaleBits = 320;
  ExactSum();
  ~ExactSum();
  ExactSum(const ExactSum&);
  ExactSum& operator=(const ExactSum&);

  void add(double x);                   // exact; x finite
  void add_product(double a, double b); // exact; a, b finite
  void add(const ExactSum& other);
  bool is_zero() const;
  int sign() const;                     // -1, 0, +1
  // Round once into f (NaN/Inf never arise: inputs are finite).
  std::uint32_t round_to(const FormatSpec& f, const RoundingSpec& r = {}) const;
  double to_double() const;             // round to nearest even double
  // The value as Unrounded (top 64 bits + sticky), for round_to_format.
  Unrounded unrounded() const;

 private:
  struct Impl;
  Impl* impl_;
};

// Exact c + sum a[i]*b[i] of finite doubles. NaN/Inf inputs are the caller's business.
ExactSum exact_dot(std::span<const double> a, std::span<const double> b, double c = 0.0);

// Exact GEMM of decoded values: D[m][n] = round(C[m][n] + sum_k A[m][k]*B[n][k]) into `out`
// (B is N x K, row-major). Returns D as doubles of `out`'s values.
std::vector<double> exact_gemm(int M, int N, int K, std::span<const double> A,
                               std::span<const double> B, std::span<const double> C,
                               const FormatSpec& out, const RoundingSpec& r = {});

// exact_dot_fast: exact_dot (above) without Boost, rounded once: each product split exactly
// with fma and summed in a 2,240-bit fixed-point accumulator of 32-bit digits. About 20x
// faster than ExactSum, for the sweeps' references; tests/test_exact.cpp checks it against
// exact_dot bit for bit.
struct ExactDot {
  double nearest_double;  // correctly rounded to double (round to nearest even)
  float nearest_float;    // correctly rounded to fp32 (nearest even; overflow gives inf)
};
// Throws std::domain_error for a non-finite input or a product that under/overflows double.
ExactDot exact_dot_fast(std::span<const double> a, std::span<const double> b);

// exact_dot_fast(a, b).nearest_double, bit for bit, usually several times faster (for the
// all-pairs references of `fp8sim analyze`): a compensated dot product (Ogita, Rump & Oishi,
// "Accurate sum and dot product", SIAM J. Sci. Comput. 26(6), 2005, Dot2, here in four
// interleaved lanes) whose rounding to double is accepted only where its error bound
// 4 gamma_{n+8}^2 sum |a_i b_i| proves it; otherwise, and for any product beyond
// [2^-900, 2^900], exact_dot_fast decides (and throws as it does).
// tests/test_exact.cpp checks it against exact_dot_fast, cancelling sums included, with the
// AVX2 lanes (taken where the CPU has AVX2 and FMA) and with simd = false (portable lanes).
double exact_dot_nearest_double(std::span<const double> a, std::span<const double> b,
                                bool simd = true);

}  // namespace fp8sim
