// cmd_convert: `fp8sim encode`, `decode` and `table`, the format conversions on the command line.
#include <fmt/format.h>

#include <cctype>
#include <cfenv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.hpp"
#include "cli/options.hpp"
#include "format/format.hpp"
#include "base/parse_number.hpp"
#include "base/rng.hpp"
#include "format/rounding.hpp"

namespace fp8sim::cli {
namespace {

// Encodes a parsed value: exact ones through encode(), the others as their neighbour toward
// zero plus a sticky bit, through round_to_format.
std::uint32_t encode_value(const ParsedValue& v, const FormatSpec& f, const RoundingSpec& r,
                           std::uint64_t random) {
  if (v.exact) return encode(v.lo, f, r, random);
  Unrounded u;
  u.negative = std::signbit(v.lo);
  u.sticky = true;
  if (v.lo != 0.0) {
    int e = 0;
    const double m = std::frexp(std::fabs(v.lo), &e);  // |lo| = m * 2^e, m in [0.5, 1)
    u.significand = static_cast<std::uint64_t>(std::ldexp(m, 53));
    u.exponent = e - 53;
  }
  return round_to_format(u, f, r, random);
}

std::uint32_t parse_code(const FormatSpec& f, const std::string& s) {
  const std::uint64_t c = parse_unsigned(s, "code", ~std::uint64_t{0});
  if (!is_valid_code(f, c))
    throw std::invalid_argument(
        fmt::format("bad code '{}': format '{}' has {} bits", s, f.name, total_bits(f)));
  return static_cast<std::uint32_t>(c);
}

struct ConvertArgs {
  std::string format;
  std::string rounding = "rne";
  std::string overflow = "saturate";
  std::uint64_t seed = 0;
  int sr_bits = 32;
  std::vector<std::string> items;
};

}  // namespace

void add_convert_commands(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();

  auto* enc = app.add_subcommand("encode", "Round values into a format; print one code per line");
  enc->add_option("--format,-f", args->format, "Target format (e4m3, e5m2, e5m6, eXmY, ...)")
      ->required();
  enc->add_option("--rounding,-r", args->rounding, "rne|rz|ru|rd|rna|sr")->capture_default_str();
  enc->add_option("--overflow", args->overflow, "saturate|nonsat")->capture_default_str();
  add_integer_option(enc, "--seed", args->seed, "Seed for stochastic rounding", 0,
                     ~std::uint64_t{0});
  add_integer_option(enc, "--sr-bits", args->sr_bits,
                     "Random bits per stochastic rounding (1..64)", 0, 1u << 30);
  enc->add_option("values", args->items, "Values: decimals, hex floats, inf, -inf, nan")
      ->required();
  enc->callback([args, enc] {
    const FormatSpec f = format_by_name(args->format);
    RoundingSpec r{parse_rounding(args->rounding), parse_overflow(args->overflow), args->sr_bits};
    validate(r);
    for (const char* flag : {"--seed", "--sr-bits"})  // options of stochastic rounding only
      if (enc->count(flag) > 0 && r.mode != Rounding::sr)
        throw std::invalid_argument(
            fmt::format("{} applies to stochastic rounding only (-r sr; rounding is {})", flag,
                        args->rounding));
    std::string out;
    for (std::size_t i = 0; i < args->items.size(); ++i) {
      const ParsedValue v = parse_value(args->items[i]);
      const std::uint32_t code = encode_value(v, f, r, random_u64(args->seed, /*stream=*/0, i));
      out += format_code(f, code) + "\n";
    }
    fmt::print("{}", out);
  });

  auto* dec = app.add_subcommand("decode", "Print the exact value of each code");
  dec->add_option("--format,-f", args->format, "Format of the codes")->required();
  dec->add_option("codes", args->items, "Codes, decimal or 0x hex (no octal): 0x3f, 63, ...")->required();
  dec->callback([args] {
    const FormatSpec f = format_by_name(args->format);
    std::string out;
    for (const auto& s : args->items) out += format_value(decode(f, parse_code(f, s))) + "\n";
    fmt::print("{}", out);
  });

  auto* tab = app.add_subcommand("table", "Print every code of a format with its value");
  tab->add_option("--format,-f", args->format, "Format to list (at most 16 bits)")->required();
  tab->callback([args] {
    const FormatSpec f = format_by_name(args->format);
    if (total_bits(f) > 16)
      throw std::invalid_argument(
          fmt::format("format '{}' has {} bits: table lists formats of at most 16 bits", f.name,
                      total_bits(f)));
    std::string out;
    for (std::uint32_t c : all_codes(f))
      out += fmt::format("{} {}\n", format_code(f, c), format_value(decode(f, c)));
    fmt::print("{}", out);
  });
}

}  // namespace fp8sim::cli
