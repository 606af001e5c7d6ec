// model: AccumulatorSpec's names and checks, describe(), and accumulator_by_name(): a preset
// (presets.cpp) or a `custom:` model parsed from its key=value text.
#include "accumulator/accumulator.hpp"
#include "base/limits.hpp"
#include "base/parse_number.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace fp8sim {

CEntry parse_c_entry(std::string_view s) {
  if (s == "join") return CEntry::join;
  if (s == "exact") return CEntry::exact;
  if (s == "add") return CEntry::add;
  if (s == "realign") return CEntry::realign;
  throw std::invalid_argument(
      fmt::format("unknown c entry '{}' (known: join, exact, add, realign)", s));
}

std::string_view to_string(CEntry c) {
  switch (c) {
    case CEntry::join: return "join";
    case CEntry::exact: return "exact";
    case CEntry::add: return "add";
    case CEntry::realign: return "realign";
  }
  return "?";
}

StepArithmetic parse_step_arithmetic(std::string_view s) {
  if (s == "fused") return StepArithmetic::fused;
  if (s == "pairwise") return StepArithmetic::pairwise;
  throw std::invalid_argument(fmt::format("unknown step arithmetic '{}' (known: fused, pairwise)", s));
}

std::string_view to_string(StepArithmetic a) {
  return a == StepArithmetic::pairwise ? "pairwise" : "fused";
}

// The preset table: the only place hardware parameters live. Each row names the instruction
// it models and cites its evidence; tests/test_gemm_hwdata.cpp replays the public measured
// vectors and tests/python/test_mmasim.py MMA-Sim against the rows.

void validate(const AccumulatorSpec& m) {
  auto bad = [&](std::string what) {
    throw std::invalid_argument(fmt::format("model '{}': {}", m.name, what));
  };
  if (m.group < 0 || (m.group == 0 && !m.exact))
    bad(fmt::format("group {} must be >= 1 (0 only for exact)", m.group));
  if (!m.exact && (m.frac_bits < 0 || m.frac_bits > 62))
    bad(fmt::format("frac bits {} not in 0..62", m.frac_bits));
  if (m.term_cut != Rounding::rz && m.term_cut != Rounding::rne && m.term_cut != Rounding::rd)
    bad("cut must be rz, rne or rd");
  if (m.output_rounding == Rounding::sr) bad("stochastic output rounding is not modelled");
  if (m.block != 0 && (m.group < 1 || m.block % m.group != 0 || m.block < 0))
    bad(fmt::format("block {} must be a multiple of the group {}", m.block, m.group));
  if (m.block != 0 && m.c_entry != CEntry::add && m.c_entry != CEntry::join)
    bad(fmt::format("block {} needs c=add (a block's result enters c with one add) or c=join "
                    "(c joins the block's first step)", m.block));
  if (m.block != 0 && (m.lanes != 1 || m.group_sum != 1 || m.block_scale))
    bad("block (chained steps) does not combine with lanes, group sums or block scales");
  if (m.interleave && (m.block != 2 * m.group || m.group % 2 != 0))
    bad("interleave needs block = 2 x group (an even group)");
  if (m.group_sum < 1 || (m.group_sum > 1 && (m.group < 1 || m.group % m.group_sum != 0)))
    bad(fmt::format("group sum {} must divide the group {}", m.group_sum, m.group));
  if (m.group_sum > 1 && !m.block_scale)
    bad("group sums need block scales (a group's alignment exponent is its scales')");
  if (m.lanes < 1 || (m.lanes > 1 && (m.group < 1 || m.group % m.lanes != 0)))
    bad(fmt::format("lanes {} must divide the group {}", m.lanes, m.group));
  if (m.lanes > 1 && m.c_entry == CEntry::join)
    bad("lanes need c to enter after the lanes' sum (c=exact, add or realign)");
  if ((m.realign_frac != 0 || m.realign_drop_far) != (m.c_entry == CEntry::realign))
    bad("realign=<frac> goes with c=realign, and c=realign needs it");
  if (m.c_entry == CEntry::realign && (m.realign_frac < m.frac_bits || m.realign_frac > 62))
    bad(fmt::format("realign frac {} must lie in frac ({})..62", m.realign_frac, m.frac_bits));
  if (m.exact && (m.lanes != 1 || m.group_sum != 1 || m.block_scale ||
                  m.c_entry == CEntry::realign))
    bad("an exact model has no lanes, group sums, block scales or realigned c");
  if (m.arithmetic == StepArithmetic::pairwise &&
      ((m.group != 2 && m.group != 4) || m.exact || m.block != 0 || m.lanes != 1 ||
       m.group_sum != 1 || m.block_scale || m.unpack || m.zero_exponent ||
       m.c_entry != CEntry::join || m.output.name != "fp32"))
    bad("arith=pairwise takes a group of 2 or 4 and an fp32 output, and nothing else");
  if (m.block_scale) {
    validate(m.block_scale->format);
    const int bs = m.block_scale->block;
    if (bs < 1 || bs % m.group_sum != 0 || (m.group % bs != 0 && bs % m.group != 0))
      bad(fmt::format("scale block {} must hold whole group sums ({}) and tile the group {}",
                      bs, m.group_sum, m.group));
    if (m.group_sum == 1 && m.block_scale->format.mantissa_bits != 0)
      bad("scales with significands (" + m.block_scale->format.name +
          ") need group sums: a product times two significands may not be exact");
  }
  validate(m.output);
  if (!has_inf(m.output))
    bad(fmt::format("output format {} needs Inf (an IEEE format)", m.output.name));
}

std::string describe(const AccumulatorSpec& m) {
  const std::string group = m.group == 0 ? "all" : std::to_string(m.group);
  const std::string frac = m.exact ? "exact" : std::to_string(m.frac_bits);
  std::string s = fmt::format("group={} frac={} cut={} c={} renorm={} out={} outround={}", group,
                              frac, to_string(m.term_cut), to_string(m.c_entry),
                              m.renormalise_products ? 1 : 0, m.output.name,
                              to_string(m.output_rounding));
  if (m.block != 0) s += fmt::format(" block={} interleave={}", m.block, m.interleave ? 1 : 0);
  if (m.unpack) s += " unpack=" + m.unpack->name;
  if (m.zero_exponent) s += fmt::format(" zero={}", *m.zero_exponent);
  if (m.group_sum != 1) s += fmt::format(" groupsum={}", m.group_sum);
  if (m.lanes != 1) s += fmt::format(" lanes={}", m.lanes);
  if (m.c_entry == CEntry::realign)
    s += fmt::format(" realign={} dropfar={}", m.realign_frac, m.realign_drop_far ? 1 : 0);
  if (m.block_scale)
    s += fmt::format(" scale={}:{}", m.block_scale->format.name, m.block_scale->block);
  if (m.product_overflow) s += " overflow=1";
  if (m.signed_zero) s += " signedzero=1";
  if (m.arithmetic != StepArithmetic::fused) s += fmt::format(" arith={}", to_string(m.arithmetic));
  return s;
}

AccumulatorSpec accumulator_by_name(std::string_view name) {
  for (const auto& p : accumulator_presets()) {
    if (p.name == name) return p;
    for (const auto& a : p.aliases)
      if (a == name) {
        AccumulatorSpec m = p;
        m.name = a;  // reports carry the name the model was asked by
        return m;
      }
  }
  constexpr std::string_view kCustom = "custom:";
  if (name.substr(0, kCustom.size()) != kCustom) {
    throw std::invalid_argument(fmt::format(
        "unknown model '{}' (`fp8sim models` lists the {} presets and their aliases, e.g. "
        "hopper-wgmma, nvfp4; or custom:group=32,frac=13,out=14,cut=rz)",
        name, accumulator_presets().size()));
  }
  AccumulatorSpec m = accumulator_by_name("hopper-wgmma");
  m.name = std::string(name);
  m.aliases.clear();
  m.instruction = "custom";
  m.zero_exponent.reset();
  m.evidence = "custom model from the command line";
  std::string_view rest = name.substr(kCustom.size());
  // The strict integer reader every front-end uses (no octal "032", no sign, no spaces);
  // its range is the limits' kMaxDim, and validate() below says what a setting allows.
  auto to_int = [&](std::string_view key, std::string_view v) {
    try {
      return static_cast<int>(parse_unsigned(v, "value", limits::kMaxDim));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("model '{}': {}: {}", name, key, e.what()));
    }
  };
  // A 0/1 switch: 2 is an error, not "on".
  auto to_bool = [&](std::string_view key, std::string_view v) {
    if (v != "0" && v != "1")
      throw std::invalid_argument(fmt::format("model '{}': {}='{}' is not 0 or 1", name, key, v));
    return v == "1";
  };
  std::vector<std::string_view> seen;
  for (bool more = !rest.empty(); more;) {  // every item between commas, an empty one too
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    more = comma != std::string_view::npos;
    rest = more ? rest.substr(comma + 1) : std::string_view{};
    if (item.empty())
      throw std::invalid_argument(fmt::format(
          "model '{}': an empty item (a comma at the start, the end or twice)", name));
    const auto eq = item.find('=');
    if (eq == std::string_view::npos)
      throw std::invalid_argument(fmt::format("model '{}': '{}' is not key=value", name, item));
    const std::string_view key = item.substr(0, eq), v = item.substr(eq + 1);
    // Each setting once: a repeated key (or out and outfmt, which both set the output) is
    // an error, never "the last wins".
    const std::string_view slot = key == "outfmt" ? "out" : key;
    if (std::find(seen.begin(), seen.end(), slot) != seen.end())
      throw std::invalid_argument(
          fmt::format("model '{}': key '{}' given twice{}", name, key,
                      slot != key ? " (out and outfmt both set the output)" : ""));
    seen.push_back(slot);
    if (key == "group") {
      m.group = to_int(key, v);
    } else if (key == "frac") {
      if (v == "exact") {
        m.exact = true;
      } else {
        m.frac_bits = to_int(key, v);
        m.exact = false;
      }
    } else if (key == "out") {
      const int bits = to_int(key, v);
      if (bits < 1 || bits > 24)
        throw std::invalid_argument(
            fmt::format("model '{}': out={} significant bits not in 1..24", name, bits));
      m.output = format_by_name(fmt::format("e8m{}", bits - 1));
    } else if (key == "outfmt") {
      m.output = format_by_name(v);
    } else if (key == "cut") {
      m.term_cut = parse_rounding(v);
    } else if (key == "outround") {
      m.output_rounding = parse_rounding(v);
    } else if (key == "c") {
      m.c_entry = parse_c_entry(v);
    } else if (key == "block") {
      m.block = to_int(key, v);
    } else if (key == "interleave") {
      m.interleave = to_bool(key, v);
    } else if (key == "unpack") {
      if (v == "none") m.unpack.reset();
      else m.unpack = format_by_name(v);
    } else if (key == "renorm") {
      m.renormalise_products = to_bool(key, v);
    } else if (key == "zero") {
      if (v == "none") {
        m.zero_exponent.reset();
      } else {
        const bool neg = !v.empty() && v[0] == '-';
        const int e = to_int(key, neg ? v.substr(1) : v);
        m.zero_exponent = neg ? -e : e;
      }
    } else if (key == "groupsum") {
      m.group_sum = to_int(key, v);
    } else if (key == "lanes") {
      m.lanes = to_int(key, v);
    } else if (key == "realign") {
      m.realign_frac = to_int(key, v);
    } else if (key == "arith") {
      m.arithmetic = parse_step_arithmetic(v);
    } else if (key == "signedzero") {
      m.signed_zero = to_bool(key, v);
    } else if (key == "overflow") {
      m.product_overflow = to_bool(key, v);
    } else if (key == "dropfar") {
      m.realign_drop_far = to_bool(key, v);
    } else if (key == "scale") {
      const auto colon = v.find(':');
      if (v == "none") {
        m.block_scale.reset();
      } else if (colon == std::string_view::npos) {
        throw std::invalid_argument(
            fmt::format("model '{}': scale='{}' is not <format>:<block> or none", name, v));
      } else {
        m.block_scale = BlockScale{format_by_name(v.substr(0, colon)),
                                   to_int("scale block", v.substr(colon + 1))};
      }
    } else {
      throw std::invalid_argument(fmt::format(
          "model '{}': unknown key '{}' (group, frac, out, outfmt, cut, outround, c, renorm, "
          "block, interleave, unpack, zero, groupsum, lanes, realign, dropfar, scale, overflow, signedzero)",
          name, key));
    }
  }
  validate(m);
  return m;
}

}  // namespace fp8sim
