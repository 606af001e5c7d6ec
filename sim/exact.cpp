// exact: fixed-point Boost.Multiprecision sums; rounded once through round_to_format.
#include "exact.hpp"

#include <boost/multiprecision/cpp_int.hpp>
#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace fp8sim {

namespace mp = boost::multiprecision;

struct ExactSum::Impl {
  mp::cpp_int v;  // value * 2^kScaleBits
};

ExactSum::ExactSum() : impl_(new Impl) {}
ExactSum::~ExactSum() { delete impl_; }
ExactSum::ExactSum(const ExactSum& o) : impl_(new Impl(*o.impl_)) {}
ExactSum& ExactSum::operator=(const ExactSum& o) {
  if (this != &o) *impl_ = *o.impl_;
  return *this;
}

namespace {

// x = m * 2^e with m a 53-bit integer; returns x * 2^shift as an exact integer.
mp::cpp_int scaled(double x, int shift) {
  if (!std::isfinite(x)) throw std::domain_error("exact sum of a non-finite value");
  if (x == 0.0) return 0;
  int e = 0;
  const double m = std::frexp(std::fabs(x), &e);
  mp::cpp_int r = static_cast<std::int64_t>(std::ldexp(m, 53));
  const int s = e - 53 + shift;
  if (s >= 0) {
    r <<= s;
  } else {
    // Below the fixed-point grid only for values far under fp32's range (see kScaleBits).
    if ((r & ((mp::cpp_int(1) << -s) - 1)) != 0)
      throw std::domain_error("exact sum: value below the fixed-point grid");
    r >>= -s;
  }
  return x < 0 ? mp::cpp_int(-r) : r;
}

}  // namespace

void ExactSum::add(double x) { impl_->v += scaled(x, kScaleBits); }

void ExactSum::add_product(double a, double b) {
  if (a == 0.0 || b == 0.0) {
    if (!std::isfinite(a) || !std::isfinite(b))
      throw std::domain_error("exact sum of a non-finite value");
    return;
  }
  // a*b = (ma * 2^ea) (mb * 2^eb): multiply the integers, then place on the grid.
  int ea = 0, eb = 0;
  if (!std::isfinite(a) || !std::isfinite(b))
    throw std::domain_error("exact sum of a non-finite value");
  const double fa = std::frexp(std::fabs(a), &ea), fb = std::frexp(std::fabs(b), &eb);
  mp::cpp_int p = mp::cpp_int(static_cast<std::int64_t>(std::ldexp(fa, 53))) *
                  static_cast<std::int64_t>(std::ldexp(fb, 53));
  const int s = ea + eb - 106 + kScaleBits;
  if (s >= 0) {
    p <<= s;
  } else {
    if ((p & ((mp::cpp_int(1) << -s) - 1)) != 0)
      throw std::domain_error("exact sum: product below the fixed-point grid");
    p >>= -s;
  }
  if ((a < 0) != (b < 0)) p = -p;
  impl_->v += p;
}

void ExactSum::add(const ExactSum& o) { impl_->v += o.impl_->v; }
bool ExactSum::is_zero() const { return impl_->v == 0; }
int ExactSum::sign() const { return impl_->v.sign(); }

Unrounded ExactSum::unrounded() const {
  Unrounded u;
  if (impl_->v == 0) return u;
  u.negative = impl_->v < 0;
  mp::cpp_int mag = mp::abs(impl_->v);
  const int msb = static_cast<int>(mp::msb(mag));
  const int drop = msb >= 63 ? msb - 63 : 0;  // keep the top 64 bits
  if (drop > 0) {
    u.sticky = (mag & ((mp::cpp_int(1) << drop) - 1)) != 0;
    mag >>= drop;
  }
  u.significand = static_cast<std::uint64_t>(mag);
  u.exponent = drop - kScaleBits;
  return u;
}

std::uint32_t ExactSum::round_to(const FormatSpec& f, const RoundingSpec& r) const {
  return round_to_format(unrounded(), f, r);
}

double ExactSum::to_double() const {
  // A double is e11m52 with bias 1023, which FormatSpec cannot hold (8 exponent bits at
  // most); round to 53 bits here with the same rule, in one place.
  const Unrounded u = unrounded();
  if (u.significand == 0) return 0.0;
  const int msb = 63 - __builtin_clzll(u.significand);
  std::uint64_t n = u.significand;
  int e = u.exponent;
  if (msb > 52) {
    const int sh = msb - 52;
    const std::uint64_t rest = n & ((std::uint64_t{1} << sh) - 1);
    const std::uint64_t half = std::uint64_t{1} << (sh - 1);
    n >>= sh;
    e += sh;
    if (rest > half || (rest == half && (u.sticky || (n & 1)))) ++n;  // ties to even
  }
  const double v = std::ldexp(static_cast<double>(n), e);
  return u.negative ? -v : v;
}

ExactSum exact_dot(std::span<const double> a, std::span<const double> b, double c) {
  if (a.size() != b.size())
    throw std::invalid_argument(
        fmt::format("exact_dot: lengths differ ({} vs {})", a.size(), b.size()));
  ExactSum s;
  s.add(c);
  for (std::size_t i = 0; i < a.size(); ++i) s.add_product(a[i], b[i]);
  return s;
}

std::vector<double> exact_gemm(int M, int N, int K, std::span<const double> A,
                               std::span<const double> B, std::span<const double> C,
                               const FormatSpec& out, const RoundingSpec& r) {
  if (A.size() != std::size_t(M) * K || B.size() != std::size_t(N) * K ||
      (!C.empty() && C.size() != std::size_t(M) * N))
    throw std::invalid_argument("exact_gemm: operand sizes do not match M, N, K");
  std::vector<double> D(std::size_t(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      const ExactSum s = exact_dot(A.subspan(std::size_t(m) * K, K),
                                   B.subspan(std::size_t(n) * K, K),
                                   C.empty() ? 0.0 : C[std::size_t(m) * N + n]);
      D[std::size_t(m) * N + n] = decode(out, s.round_to(out, r));
    }
  return D;
}

}  // namespace fp8sim
