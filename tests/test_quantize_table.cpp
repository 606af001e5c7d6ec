// test_quantize_table: the GPU quantiser's rounding (device_table.hpp's table_encode and
// table_round, the same inline functions nvcc compiles into the kernels) against encode() with
// RNE and saturation, on every value, every midpoint and its neighbours, signed zeros,
// magnitudes beyond the largest value and random doubles over the whole range: elements for
// every signed format of at most 8 bits the quantiser takes, scales for UE4M3 (NaN, Inf and
// negative values too). Runs on the CPU, so CI checks it without a GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "scaling/device_table.hpp"
#include "format/format.hpp"
#include "scaling/quantize_device.hpp"
#include "format/rounding.hpp"
#include "rounding_probes.hpp"

using namespace fp8sim;

namespace {

// What the CPU quantiser hands back for v: encode with RNE and saturation, as the code of
// its value (fp8sim.quantize's codes).
unsigned oracle(double v, const FormatSpec& f) {
  return encode(decode(f, encode(v, f, RoundingSpec{Rounding::rne, Overflow::saturate, 32})), f);
}

}  // namespace

TEST_CASE("the GPU quantiser's table rounds as encode() does", "[quantize][exhaustive]") {
  std::mt19937_64 gen(1);
  for (const char* name : {"e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e3m4", "e2m3", "e3m2",
                           "e2m1", "e3m3", "e2m2", "e6m1", "e1m6"}) {
    const FormatSpec f = format_by_name(name);
    const DeviceEncodeTable t = device_encode_table(f);
    std::vector<double> probes = test::rounding_probes({t.value, std::size_t(t.n)});
    probes.insert(probes.end(), {0.0, -0.0, std::numeric_limits<double>::denorm_min(),
                                 2 * t.value[t.n - 1], 1e300});
    std::uniform_real_distribution<double> exponent(std::log2(t.value[1]) - 4,
                                                    std::log2(t.value[t.n - 1]) + 2);
    for (int i = 0; i < 20000; ++i) probes.push_back(std::exp2(exponent(gen)));
    int mismatches = 0;
    for (double p : probes)
      for (double v : {p, -p}) {
        const unsigned want = oracle(v, f), got = table_encode(v, t);
        if (want != got && ++mismatches <= 5)
          FAIL_CHECK(name << ": table_encode(" << v << ") = " << got << ", encode gives " << want);
      }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("the GPU quantiser's scale table rounds as encode() does", "[quantize][exhaustive]") {
  std::mt19937_64 gen(1);
  const FormatSpec f = format_by_name("ue4m3");
  const DeviceRoundTable t = device_round_table(f);
  REQUIRE(t.n == 127);  // UE4M3: codes 0x00 to 0x7e are 0 to 448, 0x7f is NaN
  REQUIRE(t.value[t.n - 1] == 448);
  std::vector<double> probes = test::rounding_probes({t.value, std::size_t(t.n)});
  for (int i = 0; i < t.n; ++i) probes.push_back(-t.value[i]);
  probes.insert(probes.end(), {0.0, -0.0, std::numeric_limits<double>::denorm_min(),
                               2 * t.value[t.n - 1], 1e300, INFINITY, -INFINITY, NAN, -1.0,
                               -std::numeric_limits<double>::denorm_min(), -1e300});
  std::uniform_real_distribution<double> exponent(-14, 12);
  for (int i = 0; i < 20000; ++i) probes.push_back(std::exp2(exponent(gen)));
  const RoundingSpec rne_sat{Rounding::rne, Overflow::saturate, 32};
  int mismatches = 0;
  for (double v : probes) {
    const double want = decode(f, encode(v, f, rne_sat)), got = table_round(v, t);
    const bool same = std::isnan(want) ? std::isnan(got)
                                       : std::memcmp(&want, &got, sizeof want) == 0;
    if (!same && ++mismatches <= 5)
      FAIL_CHECK("ue4m3: table_round(" << v << ") = " << got << ", encode gives " << want);
  }
  CHECK(mismatches == 0);
}

TEST_CASE("the GPU quantiser refuses formats it cannot round", "[quantize]") {
  CHECK_THROWS_AS(device_encode_table(format_by_name("fp16")), std::invalid_argument);
  CHECK_THROWS_AS(device_encode_table(format_by_name("ue8m0")), std::invalid_argument);
  CHECK_THROWS_AS(device_encode_table(format_by_name("ue4m3")), std::invalid_argument);
  CHECK_THROWS_AS(device_round_table(format_by_name("e4m3")), std::invalid_argument);
  CHECK_THROWS_AS(device_round_table(format_by_name("ue8m0")), std::invalid_argument);  // no 0
}

TEST_CASE("the GPU quantiser's table rounds exactly from any binade guess", "[quantize]") {
  // table_floor_binade's guess only shortens the search: guesses from wrong binade entries
  // (random floors and slot counts) still give encode()'s codes.
  std::mt19937_64 gen(2);
  for (const char* name : {"e4m3", "e5m2", "e2m1", "e3m2"}) {
    const FormatSpec f = format_by_name(name);
    DeviceEncodeTable t = device_encode_table(f);
    std::uniform_int_distribution<int> first(0, t.n - 1), bits(0, 7);
    for (int b = 0; b < kTableBinades; ++b) {
      t.first[b] = static_cast<unsigned char>(first(gen));
      t.bits[b] = static_cast<unsigned char>(bits(gen));
    }
    std::vector<double> probes = test::rounding_probes({t.value, std::size_t(t.n)});
    int mismatches = 0;
    for (double p : probes)
      for (double v : {p, -p}) {
        const unsigned want = oracle(v, f), got = table_encode(v, t);
        if (want != got && ++mismatches <= 5)
          FAIL_CHECK(name << ": table_encode(" << v << ") = " << got << ", encode gives " << want);
      }
    CHECK(mismatches == 0);
  }
}
