// test_format_mldtypes_helper: dumps fp8sim's encodings and decodings as .npy for oracle_ml_dtypes.py.
//
//   test_format_mldtypes_helper encode FORMAT ROUNDING OVERFLOW IN.npy(<f4) OUT.npy(<i4)
//       OUT[i] = encode(IN[i]) through the scalar reference encode(); -1 where encode throws
//       (NaN into a format without NaN, nonsat overflow into a finite-only format).
//   test_format_mldtypes_helper decode FORMAT OUT.npy(<f8)
//       OUT[c] = decode(c) for every code c.
// Errors: one line on stderr, exit 2.
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "format/format.hpp"
#include "io/npy.hpp"
#include "format/rounding.hpp"

using namespace fp8sim;

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> a(argv + 1, argv + argc);
    if (a.size() == 6 && a[0] == "encode") {
      const FormatSpec f = format_by_name(a[1]);
      const RoundingSpec r{parse_rounding(a[2]), parse_overflow(a[3]), 32};
      const auto in = read_npy_checked(a[4], "<f4", {0}).as<float>();
      std::vector<std::int32_t> out(in.size());
      for (std::size_t i = 0; i < in.size(); ++i) {
        try {
          out[i] = static_cast<std::int32_t>(encode(static_cast<double>(in[i]), f, r));
        } catch (const std::domain_error&) {
          out[i] = -1;
        }
      }
      write_npy(a[5], "<i4", {out.size()}, out.data(), out.size() * 4);
      return 0;
    }
    if (a.size() == 3 && a[0] == "decode") {
      const FormatSpec f = format_by_name(a[1]);
      std::vector<double> out;
      for (std::uint32_t c : all_codes(f)) out.push_back(decode(f, c));
      write_npy(a[2], "<f8", {out.size()}, out.data(), out.size() * 8);
      return 0;
    }
    throw std::invalid_argument(
        "usage: encode FORMAT ROUNDING OVERFLOW IN.npy OUT.npy | decode FORMAT OUT.npy");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "test_format_mldtypes_helper: error: %s\n", e.what());
    return 2;
  }
}
