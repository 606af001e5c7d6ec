// convert_batch: encode_batch, the vectorised float32 -> <=8-bit encoder (same results as encode()).
#include "format/convert_batch.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string_view>

#include "base/parallel.hpp"

namespace fp8sim {
namespace {

// Everything the loop needs about (f, r), computed once. Special results are taken from the
// scalar reference itself (encode / round_to_format), so the two cannot disagree about them.
struct Params {
  std::int32_t M = 0;          // mantissa bits
  std::int32_t emin = 0;       // exponent of the smallest normal binade
  std::uint32_t maxmag = 0;    // largest finite magnitude code
  std::uint32_t e8m0 = 0;      // 1 for the e8m0 convention (no subnormals, no zero)
  std::uint32_t sign_bit = 0;  // the code's sign bit (0: unsigned format)
  std::uint32_t zero[2] = {};  // code of +0 / -0 (and of results that round to zero)
  std::uint32_t ovf[2] = {};   // code of a finite value past max finite, by sign
  std::uint32_t inf[2] = {};   // code of +inf / -inf
  std::uint32_t nan[2] = {};   // code of +nan / -nan
  std::uint32_t nan_bad[2] = {};  // 1: a NaN input of this sign is an error (no NaN)
  std::uint32_t ovf_bad[2] = {};  // 1: a finite overflow of this sign is an error
  std::uint32_t inf_bad[2] = {};  // 1: an infinite input of this sign is an error
};

Params make_params(const FormatSpec& f, const RoundingSpec& r) {
  Params p;
  p.M = f.mantissa_bits;
  p.emin = min_normal_exponent(f);
  p.maxmag = max_finite_magnitude_code(f);
  p.e8m0 = f.specials == Specials::e8m0 ? 1u : 0u;
  p.sign_bit = sign_mask(f);
  for (int s = 0; s < 2; ++s) {
    const double sign = s ? -1.0 : 1.0;
    p.zero[s] = encode(sign * 0.0, f, r);
    try {  // 2^1000 is past the largest finite value of every format
      p.ovf[s] = round_to_format(Unrounded{s != 0, 1, 1000, false}, f, r);
    } catch (const std::domain_error&) {
      p.ovf_bad[s] = 1;
    }
    try {
      p.inf[s] = encode(sign * std::numeric_limits<double>::infinity(), f, r);
    } catch (const std::domain_error&) {
      p.inf_bad[s] = 1;
    }
    try {
      p.nan[s] = encode(std::copysign(std::numeric_limits<double>::quiet_NaN(), sign), f, r);
    } catch (const std::domain_error&) {
      p.nan_bad[s] = 1;
    }
  }
  return p;
}

// The loop. For one input x (bits b):
//   1. Split off the sign; classify NaN, Inf, zero.
//   2. Normalise: float subnormals are scaled by 2^64 (exact) so every nonzero finite x is
//      sig * 2^(e-23) with sig in [2^23, 2^24).
//   3. The quantum is 2^(max(e, emin) - M): shift = 23 - M + max(emin - e, 0), capped at 25
//      (past 24 every bit of sig is below the half-quantum, which the cap keeps true).
//   4. n = sig >> shift quanta; rem = the discarded bits; round n up by the mode.
//   5. Code magnitude = (max(e - emin, 0) << M) + n. This one formula covers normals (n in
//      [2^M, 2^(M+1)], a carry lands on the next binade's first code), subnormals (e < emin,
//      n in [0, 2^M]) and, with n >= 1 forced, e8m0 (code = field).
//   6. Past maxmag: overflow code; then Inf, NaN, zero and unsigned-negative overrides.
// 1 if c else 0, and a branch-free select on such a bit.
[[gnu::always_inline]] inline std::uint32_t bit(bool c) { return static_cast<std::uint32_t>(c); }
[[gnu::always_inline]] inline std::uint32_t pick(std::uint32_t c, std::uint32_t if1,
                                                 std::uint32_t if0) {
  return if0 ^ ((if1 ^ if0) & (0u - c));
}

template <Rounding R>
[[gnu::always_inline]] inline std::uint32_t encode_loop(const Params& p, const float* in,
                                                        std::uint8_t* out, std::size_t n_items) {
  const std::int32_t M = p.M, emin = p.emin;
  const std::uint32_t maxmag = p.maxmag, e8 = p.e8m0, sign_bit = p.sign_bit;
  const std::uint32_t zero0 = p.zero[0], zero1 = p.zero[1], ovf0 = p.ovf[0], ovf1 = p.ovf[1];
  const std::uint32_t inf0 = p.inf[0], inf1 = p.inf[1], nan0 = p.nan[0], nan1 = p.nan[1];
  const std::uint32_t nan_bad0 = p.nan_bad[0], nan_bad1 = p.nan_bad[1];
  const std::uint32_t ovf_bad0 = p.ovf_bad[0], ovf_bad1 = p.ovf_bad[1];
  const std::uint32_t inf_bad0 = p.inf_bad[0], inf_bad1 = p.inf_bad[1];
  const std::uint32_t unsigned_fmt = sign_bit == 0 ? 1u : 0u;
  std::uint32_t bad = 0;
  for (std::size_t i = 0; i < n_items; ++i) {
    // 1.
    const std::uint32_t b = std::bit_cast<std::uint32_t>(in[i]);
    const std::uint32_t neg = b >> 31;
    const std::uint32_t a = b & 0x7fffffffu;
    const std::uint32_t is_nan = bit(a > 0x7f800000u);
    const std::uint32_t is_inf = bit(a == 0x7f800000u);
    const std::uint32_t is_zero = bit(a == 0u);
    // 2.
    const std::uint32_t E = a >> 23;
    const std::uint32_t is_sub = bit(E == 0);
    const std::uint32_t scaled = std::bit_cast<std::uint32_t>(std::bit_cast<float>(a) * 0x1p64f);
    const std::uint32_t an = pick(is_sub, scaled, a);
    const std::int32_t e =
        static_cast<std::int32_t>(an >> 23) - 127 - static_cast<std::int32_t>(is_sub << 6);
    const std::uint32_t sig = (an & 0x7fffffu) | 0x800000u;
    // 3.
    const std::int32_t below = std::max(emin - e, 0);
    const std::int32_t shift = std::min(23 - M + below, 25);
    // 4.
    std::uint32_t n = sig >> shift;
    const std::uint32_t rem = sig & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1);
    std::uint32_t up;
    if constexpr (R == Rounding::rne)
      up = bit(rem > half) | (bit(rem == half) & n & 1u);
    else if constexpr (R == Rounding::rna)
      up = bit(rem >= half);
    else if constexpr (R == Rounding::rz)
      up = 0u;
    else if constexpr (R == Rounding::ru)
      up = bit(rem != 0) & (neg ^ 1u);
    else
      up = bit(rem != 0) & neg;
    n += up;
    // 5.
    const std::int32_t binade = std::max(e - emin, 0);
    const std::uint32_t mag = (static_cast<std::uint32_t>(binade) << M) + std::max(n, e8) - e8;
    // 6.
    const std::uint32_t ovf = bit(mag > maxmag);
    const std::uint32_t zero = pick(neg, zero1, zero0);
    std::uint32_t code = pick(bit(mag == 0), zero, mag | (neg * sign_bit));
    code = pick(ovf, pick(neg, ovf1, ovf0), code);
    code = pick(is_inf, pick(neg, inf1, inf0), code);
    code = pick(is_nan, pick(neg, nan1, nan0), code);
    code = pick(is_zero, zero, code);
    code = pick(unsigned_fmt & neg & (is_zero ^ 1u), nan0, code);
    const std::uint32_t finite_ovf = ovf & ((is_inf | is_nan | is_zero) ^ 1u);
    bad |= (is_nan & pick(neg, nan_bad1, nan_bad0)) | (is_inf & pick(neg, inf_bad1, inf_bad0)) |
           (finite_ovf & pick(neg, ovf_bad1, ovf_bad0));
    out[i] = static_cast<std::uint8_t>(code);
  }
  return bad;
}

using LoopFn = std::uint32_t (*)(const Params&, const float*, std::uint8_t*, std::size_t);

template <Rounding R>
std::uint32_t loop_generic(const Params& p, const float* in, std::uint8_t* out,
                           std::size_t n) {
  return encode_loop<R>(p, in, out, n);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define FP8SIM_HAVE_AVX2_CLONE 1
template <Rounding R>
[[gnu::target("avx2")]] std::uint32_t loop_avx2(const Params& p, const float* in,
                                                std::uint8_t* out, std::size_t n) {
  return encode_loop<R>(p, in, out, n);
}
#endif

// FP8SIM_ISA=generic in the environment forces the portable loop (tests run both builds).
bool cpu_has_avx2() {
#ifdef FP8SIM_HAVE_AVX2_CLONE
  static const bool has = [] {
    const char* isa = std::getenv("FP8SIM_ISA");
    if (isa && std::string_view(isa) == "generic") return false;
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
#else
  return false;
#endif
}

template <Rounding R>
LoopFn pick() {
#ifdef FP8SIM_HAVE_AVX2_CLONE
  if (cpu_has_avx2()) return &loop_avx2<R>;
#endif
  return &loop_generic<R>;
}

}  // namespace

const char* encode_batch_isa() { return cpu_has_avx2() ? "avx2" : "generic"; }

void encode_batch(const FormatSpec& f, const RoundingSpec& r, std::span<const float> x,
                  std::span<std::uint8_t> out, int threads) {
  validate(f);
  validate(r);
  if (total_bits(f) > 8)
    throw std::invalid_argument(fmt::format(
        "encode_batch: format '{}' has {} bits (at most 8)", f.name, total_bits(f)));
  if (x.size() != out.size())
    throw std::invalid_argument(fmt::format("encode_batch: {} inputs but {} outputs", x.size(),
                                            out.size()));
  LoopFn fn = nullptr;
  switch (r.mode) {
    case Rounding::rne: fn = pick<Rounding::rne>(); break;
    case Rounding::rz: fn = pick<Rounding::rz>(); break;
    case Rounding::ru: fn = pick<Rounding::ru>(); break;
    case Rounding::rd: fn = pick<Rounding::rd>(); break;
    case Rounding::rna: fn = pick<Rounding::rna>(); break;
    case Rounding::sr:
      throw std::invalid_argument("encode_batch: stochastic rounding is not supported (use encode)");
  }
  const Params p = make_params(f, r);
  const float* in = x.data();
  std::atomic<std::uint32_t> bad{0};
  constexpr std::size_t kPiece = 1 << 16;  // pieces of fixed size: results never depend on threads
  const std::size_t pieces = (x.size() + kPiece - 1) / kPiece;
  parallel_for(pieces, threads, [&](std::size_t b, std::size_t e) {
    std::uint32_t local = 0;
    for (std::size_t piece = b; piece < e; ++piece) {
      const std::size_t lo = piece * kPiece, hi = std::min(x.size(), lo + kPiece);
      local |= fn(p, in + lo, out.data() + lo, hi - lo);
    }
    if (local) bad.fetch_or(local);
  });
  if (bad.load()) {
    if (p.nan_bad[0])
      throw std::domain_error(fmt::format(
          "encode_batch: a NaN or overflow cannot be encoded in format '{}', which has no NaN "
          "(use the saturate policy for overflow)",
          f.name));
    throw std::domain_error(fmt::format(
        "encode_batch: overflow into format '{}', which has no Inf or NaN: use the saturate "
        "policy",
        f.name));
  }
}

}  // namespace fp8sim
