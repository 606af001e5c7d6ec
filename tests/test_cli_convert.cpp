// test_cli_convert: the `fp8sim encode`, `decode` and `table` contract, including every error.
//
// Runs the real binary (FP8SIM_CLI). Expected codes and values come from arithmetic in this
// file (sign/exponent/mantissa fields written out, MX FP4 values from the OCP MX spec), never
// from the CLI or the library's encode/decode. Printed values are parsed as exact decimals
// (Boost rationals) so "exact" means exact, not "parses back to the same double".
#include <catch2/catch.hpp>

#include "cli_runner.hpp"
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/multiprecision/cpp_int.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using boost::multiprecision::cpp_int;
using boost::multiprecision::cpp_rational;
namespace fs = std::filesystem;

namespace {

using fp8sim::test::Run;
using fp8sim::test::run_cli;
using fp8sim::test::slurp;
using fp8sim::test::workdir;

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  for (std::string l; std::getline(ss, l);) v.push_back(l);
  return v;
}

// A successful run whose stdout is exactly these lines (and nothing on stderr).
void expect_lines(const std::string& args, const std::vector<std::string>& want) {
  const Run r = run_cli(args);
  INFO("fp8sim " << args << " => rc " << r.status << " stderr: " << r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  std::string joined;
  for (const auto& w : want) joined += w + "\n";
  CHECK(r.out == joined);
}

// A failing run: non-zero exit, exactly one line on stderr mentioning `needle`, no stdout.
void expect_error(const std::string& args, const std::string& needle) {
  const Run r = run_cli(args);
  INFO("fp8sim " << args << " => rc " << r.status << " stdout: " << r.out
                 << " stderr: " << r.err);
  CHECK(r.status != 0);
  CHECK(r.status < 128);  // an error exit, not a crash
  CHECK(r.out.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find(needle) != std::string::npos);
}

// Code of a normal, exactly representable v in a format with M mantissa bits, bias B and the
// sign at bit `sign_bit`: sign | (exponent + B) << M | fraction.
std::uint32_t normal_code(double v, int M, int B, int sign_bit) {
  const std::uint32_t s = std::signbit(v) ? (1u << sign_bit) : 0u;
  int e = 0;
  const double m = std::frexp(std::fabs(v), &e);  // |v| = m 2^e, m in [0.5, 1)
  const auto frac = static_cast<std::uint32_t>(std::ldexp(m * 2 - 1, M));
  REQUIRE(std::ldexp(static_cast<double>((1u << M) + frac), e - 1 - M) == std::fabs(v));
  return s | (static_cast<std::uint32_t>(e - 1 + B) << M) | frac;
}
std::string hex2(std::uint32_t c) { return fmt::format("0x{:02x}", c); }
std::string hex4(std::uint32_t c) { return fmt::format("0x{:04x}", c); }

// An exact decimal ("-1.5", "1.52587890625e-05", "0") as a rational; fails on other text.
cpp_rational parse_decimal(const std::string& s) {
  std::size_t i = 0;
  bool neg = false;
  if (i < s.size() && s[i] == '-') neg = true, ++i;
  cpp_int digits = 0;
  int scale = 0, digit_count = 0;
  bool dot = false;
  for (; i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.'); ++i) {
    if (s[i] == '.') {
      REQUIRE_FALSE(dot);
      dot = true;
      continue;
    }
    digits = digits * 10 + (s[i] - '0');
    ++digit_count;
    if (dot) --scale;
  }
  REQUIRE(digit_count > 0);
  if (i < s.size()) {
    REQUIRE(s[i] == 'e');
    scale += std::stoi(s.substr(i + 1));
    i = s.size();
  }
  cpp_rational r(digits);
  const cpp_int p10 = boost::multiprecision::pow(cpp_int(10), std::abs(scale));
  if (scale >= 0)
    r *= p10;
  else
    r /= p10;
  return neg ? -r : r;
}
cpp_rational exact(double v) {  // v = m * 2^e exactly
  int e = 0;
  const double m = std::frexp(v, &e);
  const auto im = static_cast<long long>(std::ldexp(m, 53));
  const int shift = e - 53;
  cpp_rational r(im);
  if (shift >= 0) return r * cpp_rational(cpp_int(1) << shift);
  return r / cpp_rational(cpp_int(1) << -shift);
}

}  // namespace

TEST_CASE("encode prints one 0x code per line", "[encode]") {
  // e4m3 (OCP E4M3FN): bias 7, 3 mantissa bits, max 448 = 0x7e, NaN S.1111.111.
  const double values[] = {1.0, -2.0, 448.0, 0.015625, 12.0, -0.375, 240.0};
  std::string args = "encode --format e4m3 --";
  std::vector<std::string> want;
  for (double v : values) {
    args += fmt::format(" {}", v);
    want.push_back(hex2(normal_code(v, 3, 7, 7)));
  }
  expect_lines(args, want);
  // Hex floats, inf, -inf; subnormal 2^-9 = 0x01; zeros.
  expect_lines("encode --format e4m3 -- 0x1.8p3 -0x1p-9 0 -0 inf -inf",
               {hex2(normal_code(12.0, 3, 7, 7)), "0x81", "0x00", "0x80", "0x7e", "0xfe"});
  expect_lines("encode --format e4m3 --overflow nonsat -- inf -inf 1000",
               {"0x7f", "0xff", "0x7f"});
  // NaN: any NaN code of e4m3 (0x7f or 0xff).
  {
    const Run r = run_cli("encode --format e4m3 -- nan");
    REQUIRE(r.status == 0);
    CHECK((r.out == "0x7f\n" || r.out == "0xff\n"));
  }
  // e5m2 (IEEE): bias 15, max 57344 = 0x7b, Inf 0x7c.
  expect_lines("encode -f e5m2 -- 57344 1e9 -1e9",
               {hex2(normal_code(57344.0, 2, 15, 7)), "0x7b", "0xfb"});
  expect_lines("encode -f e5m2 --overflow nonsat -- 1e9 -inf", {"0x7c", "0xfc"});
  // Two hex digits a byte: e2m1 is 4 bits, fp16 16 bits, e5m6 12 bits.
  expect_lines("encode --format e2m1 -- 6 -0.5", {"0x07", "0x09"});
  expect_lines("encode --format fp16 -- 1 -65504",
               {hex4(normal_code(1.0, 10, 15, 15)), hex4(normal_code(-65504.0, 10, 15, 15))});
  expect_lines("encode --format e5m6 -- 1.5", {hex4(normal_code(1.5, 6, 15, 11))});
  // Values need no "--" when none is negative.
  expect_lines("encode --format e4m3 1 2", {"0x38", "0x40"});
}

TEST_CASE("encode honours --rounding", "[encode]") {
  // 1 + 1/16 lies halfway between e4m3's 1 (0x38) and 1.125 (0x39); 1 + 1/32 below halfway.
  const std::pair<const char*, std::vector<std::string>> cases[] = {
      {"rne", {"0x38", "0xb8", "0x38", "0x3a"}},  // 1.1875 ties to 1.25 (even 0x3a)
      {"rna", {"0x39", "0xb9", "0x38", "0x3a"}},
      {"rz", {"0x38", "0xb8", "0x38", "0x39"}},
      {"ru", {"0x39", "0xb8", "0x39", "0x3a"}},
      {"rd", {"0x38", "0xb9", "0x38", "0x39"}},
  };
  for (const auto& [mode, want] : cases)
    expect_lines(fmt::format("encode --format e4m3 --rounding {} -- 1.0625 -1.0625 1.03125 1.1875",
                             mode),
                 want);
  // Toward zero never overflows to NaN, even under nonsat (IEEE 754 7.4).
  expect_lines("encode --format e4m3 --rounding rz --overflow nonsat -- 1000", {"0x7e"});
  // Decimals are rounded once, exactly, not first to a double: 1.0625 + 1e-22 is above the
  // tie (1.125 = 0x39), 1.0625 - 1e-22 below it (0x38), whatever the mode breaks ties with.
  expect_lines("encode --format e4m3 -- 1.0625000000000000000001 1.0624999999999999999999",
               {"0x39", "0x38"});
  expect_lines("encode --format e4m3 --rounding rna -- 1.0624999999999999999999", {"0x38"});
  // 1e-400 is a positive number below every double: ru gives the smallest subnormal.
  expect_lines("encode --format e4m3 --rounding ru -- 1e-400 -1e-400", {"0x01", "0x80"});
  expect_lines("encode --format e4m3 --rounding rd -- 1e-400 -1e-400", {"0x00", "0x81"});
  // 1e400 is finite: toward zero it gives max finite even under nonsat; Inf only rounding up.
  expect_lines("encode --format e5m2 --overflow nonsat --rounding rz -- 1e400 -1e400",
               {"0x7b", "0xfb"});
  expect_lines("encode --format e5m2 --overflow nonsat --rounding ru -- 1e400 -1e400",
               {"0x7c", "0xfb"});
  // Stochastic: a seed fixes the result; codes are one of the two neighbours.
  const Run a = run_cli("encode --format e4m3 --rounding sr --seed 5 -- 1.0625 1.0625 1.0625");
  const Run b = run_cli("encode --format e4m3 --rounding sr --seed 5 -- 1.0625 1.0625 1.0625");
  REQUIRE(a.status == 0);
  CHECK(a.out == b.out);
  for (const auto& l : lines(a.out)) CHECK((l == "0x38" || l == "0x39"));
}

TEST_CASE("decode prints exact values, nan, inf and -inf", "[decode]") {
  // e4m3: 0x38 = 1, 0x01 = 2^-9, 0x7e = 448, 0x80 = -0, 0x7f/0xff NaN.
  expect_lines("decode --format e4m3 -- 0x38 0x01 0x7e 0x80 0x7f 0xff 56",
               {"1", "0.001953125", "448", "-0", "nan", "nan", "1"});
  expect_lines("decode --format e5m2 -- 0x7c 0xfc 0x7d", {"inf", "-inf", "nan"});
  expect_lines("decode --format e4m3fnuz -- 0x80 0x00", {"nan", "0"});
  // Every finite code's printed value is exactly sign * 2^(e-bias) * 1.f (or subnormal).
  for (const auto& [name, E, M, bias] : {std::tuple{"e5m2", 5, 2, 15}, std::tuple{"e4m3", 4, 3, 7},
                                         std::tuple{"e3m4", 3, 4, 3}}) {
    std::string args = fmt::format("decode --format {} --", name);
    std::vector<double> want;
    for (std::uint32_t c = 0; c < 256; ++c) {
      const std::uint32_t field = (c >> M) & ((1u << E) - 1), frac = c & ((1u << M) - 1);
      const bool top = field == (1u << E) - 1;
      if (top && (std::string(name) != "e4m3" || frac == (1u << M) - 1)) continue;  // Inf/NaN
      const double mag = field == 0 ? std::ldexp(frac, 1 - bias - M)
                                    : std::ldexp((1u << M) + frac, int(field) - bias - M);
      want.push_back(c & 0x80 ? -mag : mag);
      args += fmt::format(" {}", hex2(c));
    }
    const Run r = run_cli(args);
    REQUIRE(r.status == 0);
    const auto got = lines(r.out);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO(name << " line " << i << ": " << got[i]);
      CHECK(parse_decimal(got[i]) == exact(want[i]));
      CHECK((got[i][0] == '-') == std::signbit(want[i]));
    }
  }
}

TEST_CASE("table lists every code with its exact value", "[table]") {
  // OCP MX v1.0 table for FP4 E2M1: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and negatives.
  const char* mags[] = {"0", "0.5", "1", "1.5", "2", "3", "4", "6"};
  std::vector<std::string> want;
  for (std::uint32_t c = 0; c < 16; ++c)
    want.push_back(fmt::format("{} {}{}", hex2(c), c & 8 ? "-" : "", mags[c & 7]));
  expect_lines("table --format e2m1", want);
  const Run r = run_cli("table --format e4m3");
  REQUIRE(r.status == 0);
  const auto got = lines(r.out);
  REQUIRE(got.size() == 256);
  for (std::uint32_t c = 0; c < 256; ++c) CHECK(got[c].rfind(hex2(c) + " ", 0) == 0);
  CHECK(got[0x7e] == "0x7e 448");
  CHECK(got[0x7f] == "0x7f nan");
  const Run h = run_cli("table --format fp16");
  REQUIRE(h.status == 0);
  CHECK(lines(h.out).size() == 65536);
}

TEST_CASE("every error gives one line on stderr, a non-zero exit and no stdout", "[errors]") {
  expect_error("encode --format e9m3 -- 1", "e9m3");
  expect_error("encode --format nope -- 1", "unknown format 'nope'");
  expect_error("decode --format nope -- 0x00", "unknown format 'nope'");
  expect_error("table --format nope", "unknown format 'nope'");
  expect_error("encode --format e4m3 --rounding up -- 1", "unknown rounding 'up'");
  expect_error("encode --format e4m3 --overflow clamp -- 1", "unknown overflow policy 'clamp'");
  for (const char* bad : {"abc", "1.2.3", "1e", "0x", "''", "1,5", "--1", "' 1'", "'1 '"})
    expect_error(fmt::format("encode --format e4m3 -- 1 {}", bad), "value");
  for (const char* bad : {"zz", "-1", "0x", "1.5", "''", "0x1g"})
    expect_error(fmt::format("decode --format e4m3 -- 0x00 {}", bad), "code");
  expect_error("decode --format e4m3 -- 0x100", "8 bits");
  expect_error("decode --format e2m1 -- 16", "4 bits");
  expect_error("decode --format e4m3 -- 99999999999999999999999", "code");
  expect_error("encode -- 1", "--format");
  expect_error("decode -- 0x00", "--format");
  expect_error("table", "--format");
  expect_error("table --format fp32", "16 bits");
  expect_error("encode --format e2m1 -- nan", "NaN");
  expect_error("encode --format e2m1 --overflow nonsat -- 100", "saturate");
  expect_error("encode --format e4m3 --rounding sr --sr-bits 0 -- 1", "1..64");
  expect_error("encode --format e4m3", "values");
  expect_error("frobnicate", "unknown command 'frobnicate'");
}
