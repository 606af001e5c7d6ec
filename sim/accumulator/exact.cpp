// exact: exact sums (Boost.Multiprecision fixed point, and exact_dot_fast without it), each rounded once.
#include "accumulator/exact.hpp"

#include <boost/multiprecision/cpp_int.hpp>
#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
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
  // most); round to 53 bits here with the same rule (exact_dot_fast, below, rounds its own
  // sum to double; tests/test_exact.cpp pins the two together).
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

// ---- exact_dot_fast: exact_dot rounded, without Boost ---------------------------------------------------------------------

namespace {

// value = sum_i digit[i] * 2^(32 i + kLowBit); digits are carry-save int64 until normalised.
// Terms need lsb >= 2^kLowBit (products >= 2^-968 and their fma remainders qualify) and
// msb below 2^(kLowBit + 32 (kDigits - 1)); the last digit carries the sign.
constexpr int kLowBit = -1184;
constexpr int kDigits = 70;  // top bit 2^(32*68 - 1184) = 2^992 before the sign digit

struct FixedAccumulator {
  std::array<std::int64_t, kDigits> d{};
  std::size_t adds = 0;

  void add(double x) {
    if (x == 0.0) return;
    int e = 0;
    const double m = std::frexp(x, &e);                       // x = m 2^e, 0.5 <= |m| < 1
    const auto mi = static_cast<std::int64_t>(std::ldexp(m, 53));  // exact 53-bit integer
    const int lsb = e - 53 - kLowBit;
    if (lsb < 0 || lsb / 32 + 2 >= kDigits - 1)
      throw std::domain_error(fmt::format("exact_dot_fast: term {} is outside the range", x));
    const int i = lsb / 32, s = lsb % 32;
    __int128 v = static_cast<__int128>(mi) << s;              // < 2^86 in magnitude
    d[i] += static_cast<std::int64_t>(v & 0xffffffff);
    v >>= 32;
    d[i + 1] += static_cast<std::int64_t>(v & 0xffffffff);
    v >>= 32;
    d[i + 2] += static_cast<std::int64_t>(v);
    if (++adds == (1u << 29)) normalise();                    // |digit| stays < 2^62
  }

  // Carries so every digit but the last is in [0, 2^32); the last holds the sign.
  void normalise() {
    for (int i = 0; i + 1 < kDigits; ++i) {
      const std::int64_t carry = d[i] >> 32;  // arithmetic shift: floor division
      d[i] -= carry * (std::int64_t(1) << 32);
      d[i + 1] += carry;
    }
    adds = 0;
  }

  // The value as Unrounded: top 64 bits plus sticky.
  Unrounded unrounded() {
    normalise();
    Unrounded u;
    const bool neg = d[kDigits - 1] < 0;
    std::array<std::uint32_t, kDigits> mag{};
    if (neg) {  // two's complement negation of the whole number
      std::uint64_t carry = 1;
      for (int i = 0; i < kDigits; ++i) {
        const std::uint64_t x = static_cast<std::uint32_t>(~static_cast<std::uint32_t>(d[i])) + carry;
        mag[i] = static_cast<std::uint32_t>(x);
        carry = x >> 32;
      }
    } else {
      for (int i = 0; i < kDigits; ++i) mag[i] = static_cast<std::uint32_t>(d[i]);
    }
    int top = kDigits - 1;
    while (top >= 0 && mag[top] == 0) --top;
    if (top < 0) return u;  // exact zero
    // Gather 96 bits from digits top, top-1, top-2 and fold everything lower into sticky.
    unsigned __int128 w = 0;
    for (int j = 0; j < 3; ++j) {
      w <<= 32;
      if (top - j >= 0) w |= mag[top - j];
    }
    bool sticky = false;
    for (int j = top - 3; j >= 0; --j) sticky |= mag[j] != 0;
    int msb = 95;  // w holds bits 0..95; find its leading one
    while (!((w >> msb) & 1)) --msb;
    const int drop = msb - 63;  // keep 64 bits
    std::uint64_t sig;
    if (drop > 0) {
      sticky |= (w & ((static_cast<unsigned __int128>(1) << drop) - 1)) != 0;
      sig = static_cast<std::uint64_t>(w >> drop);
    } else {
      sig = static_cast<std::uint64_t>(w << -drop);
    }
    u.negative = neg;
    u.significand = sig;
    // w's bit 0 has weight 2^(32 (top - 2) + kLowBit); sig's lsb is bit `drop` of w.
    u.exponent = 32 * (top - 2) + kLowBit + drop;
    u.sticky = sticky;
    return u;
  }
};

}  // namespace

ExactDot exact_dot_fast(std::span<const double> a, std::span<const double> b) {
  if (a.size() != b.size())
    throw std::invalid_argument(
        fmt::format("exact_dot_fast: a has {} elements, b has {}", a.size(), b.size()));
  FixedAccumulator acc;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], y = b[i];
    if (!std::isfinite(x) || !std::isfinite(y))
      throw std::domain_error("exact_dot_fast: non-finite input");
    const double p = x * y;
    if (p == 0.0 && x != 0.0 && y != 0.0)
      throw std::domain_error(fmt::format("exact_dot_fast: product {} * {} underflows", x, y));
    if (!std::isfinite(p))
      throw std::domain_error(fmt::format("exact_dot_fast: product {} * {} overflows", x, y));
    const double r = std::fma(x, y, -p);  // exact remainder unless the product is subnormal
    if (p != 0.0 && std::fabs(p) < 0x1p-968)
      throw std::domain_error(fmt::format("exact_dot_fast: product {} * {} is too small", x, y));
    acc.add(p);
    acc.add(r);
  }
  Unrounded u = acc.unrounded();
  ExactDot out{0.0, 0.0f};
  if (u.significand == 0) return out;
  // Nearest double: the 64-bit significand with the sticky bit folded into its lsb, which
  // lies below double's rounding point, so one conversion rounds correctly.
  const std::uint64_t s = u.significand | (u.sticky ? 1u : 0u);
  const double mag = std::ldexp(static_cast<double>(s), u.exponent);
  out.nearest_double = u.negative ? -mag : mag;
  static const FormatSpec fp32 = format_by_name("fp32");
  out.nearest_float = static_cast<float>(
      decode(fp32, round_to_format(u, fp32, {Rounding::rne, Overflow::nonsat, 32})));
  return out;
}

namespace {

// Step 1 of exact_dot_nearest_double over n products (n a multiple of kLanes): Dot2 in kLanes
// interleaved lanes (element i in lane i mod kLanes); an AVX2 twin where the CPU has it.
constexpr int kLanes = 4;
struct Dot2Lanes {
  double s[kLanes] = {}, c[kLanes] = {}, abs_sum[kLanes] = {};
  bool in_range = true;
};
Dot2Lanes dot2_lanes_scalar(const double* a, const double* b, std::size_t n) {
  Dot2Lanes d;
  double hi[kLanes] = {}, lo[kLanes] = {0x1p1000, 0x1p1000, 0x1p1000, 0x1p1000};
  for (std::size_t i = 0; i < n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const double x = a[i + l], y = b[i + l];
      const double p = x * y;
      const double ap = std::fabs(p);
      hi[l] = std::max(hi[l], ap);                     // |p| > 2^900: out of range
      lo[l] = std::min(lo[l], (x == 0.0) | (y == 0.0) ? 0x1p1000 : ap);  // < 2^-900: too
      const double r = std::fma(x, y, -p);            // p + r = x y exactly (TwoProduct)
      const double t = d.s[l] + p, z = t - d.s[l];    // t + e = s + p exactly (TwoSum)
      d.c[l] += ((d.s[l] - (t - z)) + (p - z)) + r;
      d.s[l] = t;
      d.abs_sum[l] += ap;
    }
  }
  for (int l = 0; l < kLanes; ++l) d.in_range &= hi[l] <= 0x1p900 && lo[l] >= 0x1p-900;
  return d;
}

// The same operations, lane for lane, with the four lanes in one AVX2 register (so the
// same bits as dot2_lanes_scalar).
[[gnu::target("avx2,fma")]] Dot2Lanes dot2_lanes_avx2(const double* a, const double* b,
                                                      std::size_t n) {
  const __m256d sign = _mm256_set1_pd(-0.0), zero = _mm256_setzero_pd(),
                big = _mm256_set1_pd(0x1p1000);
  __m256d s = zero, c = zero, abs_sum = zero, hi = zero, lo = big;
  for (std::size_t i = 0; i < n; i += kLanes) {
    const __m256d x = _mm256_loadu_pd(a + i), y = _mm256_loadu_pd(b + i);
    const __m256d p = _mm256_mul_pd(x, y);
    const __m256d ap = _mm256_andnot_pd(sign, p);
    hi = _mm256_max_pd(ap, hi);
    const __m256d has_zero = _mm256_or_pd(_mm256_cmp_pd(x, zero, _CMP_EQ_OQ),
                                          _mm256_cmp_pd(y, zero, _CMP_EQ_OQ));
    lo = _mm256_min_pd(_mm256_blendv_pd(ap, big, has_zero), lo);
    const __m256d r = _mm256_fmsub_pd(x, y, p);
    const __m256d t = _mm256_add_pd(s, p), z = _mm256_sub_pd(t, s);
    const __m256d e = _mm256_add_pd(_mm256_sub_pd(s, _mm256_sub_pd(t, z)), _mm256_sub_pd(p, z));
    c = _mm256_add_pd(c, _mm256_add_pd(e, r));
    s = t;
    abs_sum = _mm256_add_pd(abs_sum, ap);
  }
  Dot2Lanes d;
  _mm256_storeu_pd(d.s, s);
  _mm256_storeu_pd(d.c, c);
  _mm256_storeu_pd(d.abs_sum, abs_sum);
  double h[kLanes], l[kLanes];
  _mm256_storeu_pd(h, hi);
  _mm256_storeu_pd(l, lo);
  for (int k = 0; k < kLanes; ++k) d.in_range &= h[k] <= 0x1p900 && l[k] >= 0x1p-900;
  return d;
}

Dot2Lanes dot2_lanes(const double* a, const double* b, std::size_t n, bool simd) {
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return simd && avx2 ? dot2_lanes_avx2(a, b, n) : dot2_lanes_scalar(a, b, n);
}

}  // namespace

double exact_dot_nearest_double(std::span<const double> a, std::span<const double> b,
                                bool simd) {
  if (a.size() != b.size()) return exact_dot_fast(a, b).nearest_double;  // throws
  // 1. Dot2 in four lanes: products split exactly (TwoProduct by fma), their high parts summed
  //    with TwoSum into s, every low part and TwoSum error added into c; abs sums sum |p|.
  //    The last n mod 4 products go through the same lanes padded with zeros.
  const std::size_t n = a.size(), body = n - n % kLanes;
  Dot2Lanes d = dot2_lanes(a.data(), b.data(), body, simd);
  if (body < n) {
    double ta[kLanes] = {}, tb[kLanes] = {};
    std::copy(a.begin() + body, a.end(), ta);
    std::copy(b.begin() + body, b.end(), tb);
    const Dot2Lanes t = dot2_lanes(ta, tb, kLanes, simd);
    // Lane l continues with its tail product: TwoSum of the two lanes' highs.
    for (int l = 0; l < kLanes; ++l) {
      const double hi = d.s[l] + t.s[l], z = hi - d.s[l];
      d.c[l] += ((d.s[l] - (hi - z)) + (t.s[l] - z)) + t.c[l];
      d.s[l] = hi;
      d.abs_sum[l] += t.abs_sum[l];
    }
    d.in_range &= t.in_range;
  }
  const double *s = d.s, *c = d.c, *abs_sum = d.abs_sum;
  if (!d.in_range || !std::isfinite(abs_sum[0] + abs_sum[1] + abs_sum[2] + abs_sum[3]))
    return exact_dot_fast(a, b).nearest_double;
  // 2. The lanes' highs summed with TwoSum too; (r, e) = the unrounded sum, exactly r + e.
  double hi = 0, lo = 0, abs_total = 0;
  for (int l = 0; l < kLanes; ++l) {
    const double t = hi + s[l], z = t - hi;
    lo += ((hi - (t - z)) + (s[l] - z)) + c[l];
    hi = t;
    abs_total += abs_sum[l];
  }
  const double r = hi + lo, z = r - hi;
  const double e = (hi - (r - z)) + (lo - z);
  // 3. Accept r when exact = r + e + d, |d| <= bound, cannot reach half of r's smaller gap.
  const double u = 0x1p-53, nu = double(n + 8) * u;
  const double gamma = nu / (1 - nu);
  const double bound = 4 * gamma * gamma * abs_total * (1 + gamma);
  const double ar = std::fabs(r);
  if (std::isfinite(r) && ar >= 0x1p-960) {
    const double half_gap = (ar - std::nextafter(ar, 0.0)) / 2;
    if (std::fabs(e) + bound < half_gap) return r;
  }
  return exact_dot_fast(a, b).nearest_double;
}

}  // namespace fp8sim
