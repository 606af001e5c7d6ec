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
#include "format.hpp"
#include "rng.hpp"
#include "rounding.hpp"

namespace fp8sim::cli {
namespace {

// A value read from text: exactly `lo` when exact, else strictly between `lo` (its neighbour
// toward zero among doubles, possibly 0 or +-DBL_MAX) and the next double away from zero.
struct ParsedValue {
  double lo;
  bool exact;
};

// Decimal, hex float (0x1.8p3), inf, -inf, nan; the whole text must be a number.
// A decimal need not be a double: parsing it twice, rounded down and up (glibc's strtod
// honours the rounding mode), brackets it between adjacent doubles, so the value is rounded
// into the target once, not first to a double (1.0625000000000000000001 is above e4m3's tie
// at 1.0625; 1e-400 is a positive number; 1e400 is finite, not Inf).
ParsedValue parse_value(const std::string& s) {
  if (s.empty()) throw std::invalid_argument("empty value");
  auto parse = [&](int mode) {
    std::fesetround(mode);
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    std::fesetround(FE_TONEAREST);
    if (end == s.c_str() || *end != '\0' || std::isspace(static_cast<unsigned char>(s[0])))
      throw std::invalid_argument(fmt::format("bad value '{}': not a number", s));
    return v;
  };
  const double down = parse(FE_DOWNWARD), up = parse(FE_UPWARD);
  if (std::isnan(down) || (down == up && std::signbit(down) == std::signbit(up)))
    return {down, true};
  return {std::signbit(down) ? up : down, false};  // the bracket's end nearer zero
}

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
  std::size_t pos = 0;
  unsigned long long c = 0;
  try {
    c = std::stoull(s, &pos, 0);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos == 0 || pos != s.size() || s[0] == '-')
    throw std::invalid_argument(fmt::format("bad code '{}': not a non-negative integer", s));
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
  enc->add_option("--seed", args->seed, "Seed for stochastic rounding")->capture_default_str();
  enc->add_option("--sr-bits", args->sr_bits, "Random bits per stochastic rounding (1..64)")
      ->capture_default_str();
  enc->add_option("values", args->items, "Values: decimals, hex floats, inf, -inf, nan")
      ->required();
  enc->callback([args] {
    const FormatSpec f = format_by_name(args->format);
    RoundingSpec r{parse_rounding(args->rounding), parse_overflow(args->overflow), args->sr_bits};
    validate(r);
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
  dec->add_option("codes", args->items, "Codes: 0x3f, 63, ...")->required();
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
