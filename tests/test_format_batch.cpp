// test_format_batch: encode_batch is bit-identical to encode() for every <=8-bit format and mode.
//
// Formats: every preset of at most 8 bits and eXmY shapes that stress the edges (e1m2, e2m0,
// e3m3, e4m0, e7m0, e1m6, e6m1), plus a custom e4m3 with a bias of 140 (its range lies
// among float32 subnormals: 2^-142 .. 2^-132). Modes rne rz ru rd rna, policies saturate and nonsat.
// Inputs: every value of the format, every midpoint, +-1 and +-2 float32 ulps around both,
// zeros, infinities, NaNs, float32 extremes, and every 16411th float32 bit pattern (a prime
// stride, so all exponents and many low-bit patterns), all with both signs. Under the
// sanitizers (sanitized.hpp) every 262147th pattern instead (prime too, 16 times sparser):
// build/ checks the full list.
// e4m3 and e5m2 are also checked on all 2^32 inputs by test_format_cuda_fp8.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "format/convert_batch.hpp"
#include "format/format.hpp"
#include "format/rounding.hpp"
#include "sanitized.hpp"

using namespace fp8sim;

namespace {

constexpr Rounding kModes[] = {Rounding::rne, Rounding::rz, Rounding::ru, Rounding::rd,
                               Rounding::rna};
constexpr Overflow kPolicies[] = {Overflow::saturate, Overflow::nonsat};

std::vector<FormatSpec> formats_under_test() {
  std::vector<FormatSpec> v;
  for (const auto& n : preset_format_names())
    if (total_bits(format_by_name(n)) <= 8) v.push_back(format_by_name(n));
  for (const char* n : {"e1m2", "e2m0", "e3m3", "e4m0", "e7m0", "e1m6", "e6m1"})
    v.push_back(format_by_name(n));
  FormatSpec tiny = format_by_name("e4m3");
  tiny.name = "e4m3_bias140";
  tiny.bias = 140;
  v.push_back(tiny);
  return v;
}

std::vector<float> inputs_for(const FormatSpec& f) {
  std::vector<float> base;
  std::vector<double> vals;
  for (std::uint32_t c = 0; c < code_count(f); ++c)
    if (std::isfinite(decode(f, c))) vals.push_back(std::fabs(decode(f, c)));
  std::sort(vals.begin(), vals.end());
  vals.push_back(vals.back() * 2);
  for (std::size_t i = 0; i + 1 < vals.size(); ++i) {
    base.push_back(static_cast<float>(vals[i]));
    base.push_back(static_cast<float>((vals[i] + vals[i + 1]) / 2));
  }
  base.push_back(static_cast<float>(vals.back()));
  std::vector<float> x;
  for (float b : base) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(b);
    for (int d = -2; d <= 2; ++d)
      if (static_cast<std::int64_t>(bits) + d >= 0) x.push_back(std::bit_cast<float>(bits + d));
  }
  const float specials[] = {0.0f, std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                            std::numeric_limits<float>::denorm_min(), 1e30f, 1e-30f};
  for (float s : specials) x.push_back(s);
  const std::uint64_t stride = test::kSanitized ? 262147 : 16411;
  for (std::uint64_t b = 0; b < (std::uint64_t{1} << 31); b += stride)
    x.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(b)));
  const std::size_t n = x.size();
  for (std::size_t i = 0; i < n; ++i) x.push_back(-x[i]);
  return x;
}

}  // namespace

TEST_CASE("encode_batch equals encode on every <=8-bit format, mode and policy", "[batch]") {
  std::printf("encode_batch runs its %s loop\n", encode_batch_isa());
  for (const FormatSpec& f : formats_under_test()) {
    const std::vector<float> all = inputs_for(f);
    for (Rounding mode : kModes)
      for (Overflow pol : kPolicies) {
        const RoundingSpec r{mode, pol, 32};
        // Inputs that encode() accepts (it refuses NaN or nonsat overflow in some formats).
        std::vector<float> x;
        std::vector<std::uint8_t> want;
        std::vector<float> refused;
        for (float v : all) {
          try {
            want.push_back(static_cast<std::uint8_t>(encode(static_cast<double>(v), f, r)));
            x.push_back(v);
          } catch (const std::domain_error&) {
            refused.push_back(v);
          }
        }
        std::vector<std::uint8_t> got(x.size());
        encode_batch(f, r, x, got, /*threads=*/1);
        std::size_t failures = 0;
        for (std::size_t i = 0; i < x.size(); ++i)
          if (got[i] != want[i] && failures++ < 5)
            std::printf("encode_batch %s %s %s x=0x%08x => got 0x%02x want 0x%02x\n",
                        f.name.c_str(), std::string(to_string(mode)).c_str(),
                        std::string(to_string(pol)).c_str(), std::bit_cast<std::uint32_t>(x[i]),
                        got[i], want[i]);
        INFO(f.name << " " << to_string(mode) << " " << to_string(pol) << ": " << failures
                    << " mismatches of " << x.size());
        CHECK(failures == 0);
        // Refused inputs make encode_batch throw too (256 of them, spread over the list).
        const std::size_t step = refused.size() / 256 + 1;
        for (std::size_t k = 0; k < refused.size(); k += step) {
          float v = refused[k];
          std::uint8_t out = 0;
          CHECK_THROWS_AS(encode_batch(f, r, std::span<const float>(&v, 1),
                                       std::span<std::uint8_t>(&out, 1)),
                          std::domain_error);
        }
      }
  }
}

TEST_CASE("encode_batch results do not depend on the thread count", "[batch]") {
  const FormatSpec f = format_by_name("e4m3");
  std::vector<float> x(3'000'001);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = std::bit_cast<float>(static_cast<std::uint32_t>(i * 1431u));
  std::vector<std::uint8_t> one(x.size()), many(x.size());
  encode_batch(f, {}, x, one, 1);
  encode_batch(f, {}, x, many, 0);
  CHECK(one == many);
}

TEST_CASE("encode_batch rejects what it cannot do", "[batch]") {
  std::vector<float> x(4, 1.0f);
  std::vector<std::uint8_t> out(4), short_out(3);
  CHECK_THROWS_AS(encode_batch(format_by_name("fp16"), {}, x, out), std::invalid_argument);
  CHECK_THROWS_AS(encode_batch(format_by_name("e4m3"), {Rounding::sr}, x, out),
                  std::invalid_argument);
  CHECK_THROWS_AS(encode_batch(format_by_name("e4m3"), {}, x, short_out), std::invalid_argument);
}
