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

// The probes p and -p whose table_encode differs from the oracle (the first five reported).
int count_mismatches(const char* name, const FormatSpec& f, const DeviceEncodeTable& t,
                     const std::vector<double>& probes) {
  int n = 0;
  for (double p : probes)
    for (double v : {p, -p}) {
      const unsigned want = oracle(v, f), got = table_encode(v, t);
      if (want != got && ++n <= 5)
        FAIL_CHECK(name << ": table_encode(" << v << ") = " << got << ", encode gives " << want);
    }
  return n;
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
    CHECK(count_mismatches(name, f, t, probes) == 0);
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
  // Outside the binades found regular, table_nearest_binade's guess only shortens the search:
  // guesses from wrong binade entries (random floors and slot counts) still give encode()'s
  // codes.
  std::mt19937_64 gen(2);
  for (const char* name : {"e4m3", "e5m2", "e2m1", "e3m2"}) {
    const FormatSpec f = format_by_name(name);
    DeviceEncodeTable t = device_encode_table(f);
    std::uniform_int_distribution<int> first(0, t.n - 1), bits(0, 7);
    for (int b = 0; b < kTableBinades; ++b) {
      t.first[b] = static_cast<unsigned char>(first(gen));
      t.bits[b] = static_cast<unsigned char>(bits(gen));  // never kBinadeRegular
    }
    std::vector<double> probes = test::rounding_probes({t.value, std::size_t(t.n)});
    CHECK(count_mismatches(name, f, t, probes) == 0);
  }
}

TEST_CASE("every binade of an ExMy format is regular in the GPU quantiser's table", "[quantize]") {
  // The integer path of table_nearest_binade (which the first test checks against encode())
  // covers every element between the smallest and the largest value of these formats.
  for (const char* name : {"e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e3m4", "e2m3", "e3m2",
                           "e2m1", "e3m3", "e2m2", "e6m1", "e1m6"}) {
    const DeviceEncodeTable t = device_encode_table(format_by_name(name));
    int e_top = 0;
    std::frexp(t.value[t.n - 1], &e_top);  // top in [2^(e_top-1), 2^e_top)
    const int binades = e_top - 1 + 1023 - t.binade0 + 1;
    REQUIRE(binades <= kTableBinades);
    for (int b = 0; b < binades; ++b)
      if ((t.bits[b] & kBinadeRegular) == 0) FAIL_CHECK(name << ": binade " << b << " irregular");
  }
}

TEST_CASE("a table of uneven values rounds as the plain search does", "[quantize]") {
  // Binades with uneven values, gaps and counts that are not powers of two (no format has
  // them): index_binades marks them irregular, and table_nearest_binade finds what
  // table_nearest's binary search finds, on every value, midpoint and neighbour and on draws.
  DeviceEncodeTable t;
  const std::vector<double> v = {0, 0.1, 0.3, 0.5, 1, 1.25, 1.5, 1.75, 2, 2.5, 3.75, 4,
                                 4.5, 5, 5.5, 6, 6.5, 7, 7.5, 8, 9, 11, 15, 16, 40, 96};
  t.n = static_cast<int>(v.size());
  for (int i = 0; i < t.n; ++i) t.value[i] = v[i];
  index_binades(t);
  int regular = 0;
  for (int b = 0; b < kTableBinades; ++b) regular += (t.bits[b] & kBinadeRegular) != 0;
  // [0.5, 1), [1, 2) and [4, 8); not [8, 16), four values and 16 next, but uneven
  CHECK(regular == 3);
  std::mt19937_64 gen(3);
  std::vector<double> probes = test::rounding_probes({t.value, std::size_t(t.n)});
  std::uniform_real_distribution<double> exponent(-6, std::log2(96.0));
  for (int i = 0; i < 20000; ++i) probes.push_back(std::exp2(exponent(gen)));
  int mismatches = 0;
  for (double a : probes) {
    if (!(a > 0 && a <= 96)) continue;
    const TableSpot want = table_nearest(t.value, t.n, a), got = table_nearest_binade(t, a);
    if ((want.j != got.j || want.mid != got.mid) && ++mismatches <= 5)
      FAIL_CHECK("a = " << a << ": (" << got.j << ", " << got.mid << "), the search gives ("
                        << want.j << ", " << want.mid << ")");
  }
  CHECK(mismatches == 0);
}

TEST_CASE("the float quotient's code is the double quotient's", "[quantize][exhaustive]") {
  // table_encode_quotient (float division, the remainder where q is a midpoint or the largest
  // value) against table_encode of the double quotient: x near every value and midpoint times
  // random scales (x = P s rounded to float and its neighbours: quotients just off, and on, the
  // midpoints), random x and s over the float range, zeros and quotients beyond the largest
  // value, and the saturation flag.
  std::mt19937_64 gen(4);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> exp2(-30, 30), wide(-140, 120);
  for (const char* name : {"e4m3", "e5m2", "e4m3fnuz", "e3m4", "e2m1", "e3m2", "e6m1", "e1m6"}) {
    const DeviceEncodeTable t = device_encode_table(format_by_name(name));
    std::vector<double> points = test::rounding_probes({t.value, std::size_t(t.n)});
    std::vector<std::pair<float, float>> cases;
    for (double p : points)
      for (int r = 0; r < 8; ++r) {
        const float s = std::ldexp(mant(gen), exp2(gen));
        float x = static_cast<float>(p * s);
        for (int step = 0; step < 2; ++step) x = std::nextafter(x, 0.0f);
        for (int step = 0; step < 5; ++step, x = std::nextafter(x, INFINITY)) {
          cases.emplace_back(x, s);
          cases.emplace_back(-x, s);
        }
      }
    for (int i = 0; i < 200000; ++i)
      cases.emplace_back(std::ldexp(mant(gen), wide(gen)) * (i % 2 ? 1.0f : -1.0f),
                         std::ldexp(mant(gen), wide(gen)));
    for (float s : {1.0f, 3.0f, 1e-30f, 1e30f})
      for (float x : {0.0f, -0.0f, 1e-45f, -1e-45f, 3e38f, -3e38f})
        cases.emplace_back(x, s);
    int mismatches = 0;
    for (const auto& [x, s] : cases) {
      const double v = static_cast<double>(x) / static_cast<double>(s);
      const unsigned want = table_encode(v, t);
      const bool want_over = std::fabs(v) > t.value[t.n - 1];
      bool over = !want_over;
      const unsigned got = table_encode_quotient(x, s, t, &over);
      if ((got != want || over != want_over) && ++mismatches <= 5)
        FAIL_CHECK(name << ": " << x << " / " << s << " gives " << got << (over ? " over" : "")
                        << ", the double quotient " << want << (want_over ? " over" : ""));
    }
    CHECK(mismatches == 0);
  }
}
