// probe_sum: probe steps 1-4 (probe.hpp), read from the fused sum: the group (and the
// interleaved steps of a block), fraction bits and cut, renormalisation, unpacking, c's alignment.
#include "analysis/prober.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace fp8sim::probe_detail {

// 1. +P at 0, -P at i, s at i+1: s survives iff i+1 starts a step after -P's. A tiny s is
//    below P's grid for any frac_bits < e_P - e_s; the group is the gcd of the surviving i+1.
void Prober::find_group() {
  const double p = std::ldexp(1.0, e_p_);
  // The smallest product first; a normal one if subnormals are flushed; 2^-14 if the output
  // cannot hold smaller values (fp16).
  for (int k_s : {k_min_sub_, k_min_norm_, std::max(k_min_norm_, -14)}) {
    const double s = std::ldexp(1.0, k_s);
    std::vector<Row> rows;
    for (int i = 1; i <= o_.max_group; ++i)
      rows.push_back({{term(0, p), term(i, -p), term(i + 1, s)}, 0.0});
    const auto out = eval(rows);
    int g = 0, survived = 0;
    for (int i = 1; i <= o_.max_group; ++i) {
      if (out[i - 1] == s) g = std::gcd(g, i + 1), ++survived;
      else if (out[i - 1] != 0)
        throw std::runtime_error(fmt::format(
            "probe: group vector i={} (P=2^{}, s=2^{}) gave {}, neither 0 nor s", i, e_p_, k_s,
            format_value(out[i - 1])));
    }
    if (survived == 0) continue;  // s never survived: subnormals flushed? try a normal s
    // Beyond a promotion boundary -P may sit in another chunk than +P; check two steps.
    std::string kept;  // the surviving i+1, for the error message
    for (int i = 1, n = 0; i <= o_.max_group && n < 24; ++i)
      if (out[i - 1] == s) kept += fmt::format("{}{}", n++ ? "," : "", i + 1);
    for (int i = 1; i <= o_.max_group && i + 1 <= std::max(2 * g, 4); ++i)
      if ((out[i - 1] == s) != ((i + 1) % g == 0)) {
        find_interleaved_steps(k_s, out, kept);
        return;
      }
    r_.group = g;
    note(fmt::format("group {}: +2^{} at k=0, -2^{} at k=i, 2^{} at k=i+1 (i=1..{}): the small "
                     "term survives exactly when i+1 is a multiple of {}",
                     g, e_p_, e_p_, k_s, o_.max_group, g));
    return;
  }
  throw std::runtime_error(fmt::format(
      "probe: no step boundary seen up to group {} (the small term never survived)",
      o_.max_group));
}

// 1b. Steps that are not consecutive runs of K (sm_90 mma.sync: two chained steps per block,
//     over k mod 4 in {0,1} and then {2,3}). With +P at 0 and -P at b, s at z is cut iff z's
//     step is no later than the later of 0's and b's; once b lies in a later block, every z
//     of that block is cut (its steps start from zero and P waits in c). Taking b as the
//     first position outside the last such set gives the chain step 1, step 1 + 2, ... over a
//     window of two blocks; the block is the first period of K at which s always survives.
void Prober::find_interleaved_steps(int k_s, const std::vector<double>& out,
                                    const std::string& kept) {
  const double p = std::ldexp(1.0, e_p_), s = std::ldexp(1.0, k_s);
  auto fail = [&](const std::string& why) {
    return std::runtime_error(fmt::format(
        "probe: the steps are not consecutive runs of K (s=2^{} survived at i+1 = {}) and {}",
        k_s, kept, why));
  };
  int period = 0;
  for (int q = 2; q <= o_.max_group / 2 && period == 0; ++q) {
    bool all = true;
    for (int j = q; j <= o_.max_group && all; j += q) all = out[j - 2] == s;
    if (all) period = q;
  }
  if (period == 0) throw fail("no period of K after which the small term always survives");
  const int window = 2 * period;
  std::vector<std::vector<int>> chain;  // nested sets of positions, each a union of steps
  std::vector<bool> in(window, false);
  in[0] = true;
  for (;;) {
    const int b = static_cast<int>(std::find(in.begin(), in.end(), false) - in.begin());
    if (b == window) break;
    std::vector<Row> rows;
    std::vector<int> zs;
    for (int z = 1; z < window; ++z)
      if (z != b) rows.push_back({{term(0, p), term(b, -p), term(z, s)}, 0.0}), zs.push_back(z);
    const auto cut = eval(rows, window);
    std::vector<int> set = {0, b};
    for (std::size_t i = 0; i < zs.size(); ++i)
      if (cut[i] != s) set.push_back(zs[i]);
    std::sort(set.begin(), set.end());
    for (int z = 0; z < window; ++z)
      if (in[z] && !std::binary_search(set.begin(), set.end(), z))
        throw fail(fmt::format("the cut sets of -P at k={} are not nested", b));
    for (int z : set) in[z] = true;
    chain.push_back(std::move(set));
  }
  // The shape the models know (AccumulatorSpec::block, interleave): step 1, step 2 filling
  // the first block, then the whole second block as one set.
  const int g = static_cast<int>(chain[0].size());
  std::vector<int> interleaved;
  for (int k = 0; k < 2 * g; ++k)
    if (k % 4 < 2) interleaved.push_back(k);
  const bool shape = chain.size() == 3 && 2 * g == period && chain[1].size() == std::size_t(period) &&
                     chain[1].back() == period - 1 && chain[2].size() == std::size_t(window);
  if (!shape || chain[0] != interleaved)
    throw fail(fmt::format("the first step is k = {} (sets of {} positions): no model's step order",
                           fmt::join(chain[0], ","), chain.size()));
  r_.group = g;
  r_.block = period;
  r_.interleave = true;
  slot_ = chain[0];
  note(fmt::format("group {} block {} interleave 1: +2^{} at k=0, -2^{} at k=b, 2^{} at k=z "
                   "(z < {}): the first step is k = {}{} (k mod 4 in {{0,1}}), the second the "
                   "rest of k < {}, and k = {}..{} go as one block (2 chained steps per {})",
                   g, period, e_p_, e_p_, k_s, window,
                   fmt::join(chain[0].begin(), chain[0].begin() + std::min(g, 6), ","),
                   g > 6 ? ",..." : "", period, period, window - 1, period));
}

// 2. frac_bits and the term cut.
void Prober::find_frac_bits() {
  const double p = std::ldexp(1.0, e_p_);
  const int g = r_.group;
  if (g >= 3) {
    // +P, -P, 2^(e_P - t) in one step: kept iff t <= frac_bits.
    std::vector<Row> rows;
    std::vector<double> s;
    for (int t = 1; e_p_ - t >= k_min_sub_; ++t) {
      s.push_back(std::ldexp(1.0, e_p_ - t));
      rows.push_back({{term(at(0), p), term(at(1), -p), term(at(2), s.back())}, 0.0});
    }
    const auto out = eval(rows);
    int first_lost = 0;
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (out[i] != s[i]) { first_lost = int(i) + 1; break; }
    if (first_lost == 0) {
      r_.frac_bits = -1;
      note(fmt::format("frac exact: +2^{0} -2^{0} 2^({0}-t) in one step kept the small term for "
                       "every t up to {1}: no cut seen", e_p_, rows.size()));
      return;
    }
    r_.frac_bits = first_lost - 1;
    for (std::size_t i = first_lost; i < rows.size(); ++i)
      if (out[i] == s[i])
        throw std::runtime_error(fmt::format(
            "probe: frac vector t={} kept the small term after t={} lost it", i + 1, first_lost));
    note(fmt::format("frac {}: +2^{} -2^{} 2^({}-t) in one step: the small term survives for "
                     "t <= {} and is 0 from t = {}", r_.frac_bits, e_p_, e_p_, e_p_, r_.frac_bits,
                     first_lost));
  } else {
    // Group 1 or 2: c = P + 2^(e_P - t), one product -P: with c in the alignment, c's own
    // low bits are cut at frac_bits; with c outside it, c - P is exact (no cut seen).
    std::vector<Row> rows;
    std::vector<double> s;
    for (int t = 1; t <= 23; ++t) {
      s.push_back(std::ldexp(1.0, e_p_ - t));
      rows.push_back({{term(0, -p)}, p + s.back()});
    }
    const auto out = eval(rows);
    int first_lost = 0;
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (out[i] != s[i]) { first_lost = int(i) + 1; break; }
    r_.frac_bits = first_lost == 0 ? -1 : first_lost - 1;
    note(first_lost == 0
             ? fmt::format("frac exact: c = 2^{0} + 2^({0}-t), product -2^{0}: c's low bit "
                           "survived for t = 1..23 (group {1}: no cut seen)", e_p_, g)
             : fmt::format("frac {0}: c = 2^{1} + 2^({1}-t), product -2^{1}: c's low bit "
                           "survives for t <= {0} (group {2}: c is cut, so c joins)",
                           r_.frac_bits, e_p_, g));
  }
  if (r_.frac_bits < 0) return;

  // Cut: a term of 3/4 of the grid step goes to 0 (rz) or to one step (rne).
  const int grid = e_p_ - r_.frac_bits;
  const double q = 1.5 * std::ldexp(1.0, grid - 1);
  if (!is_product(q) && g >= 3) {
    note("cut rz: assumed (3/4 of the grid step is below the format's range)");
    return;
  }
  std::vector<Row> rows;
  if (g >= 3) {
    rows.push_back({{term(at(0), p), term(at(1), -p), term(at(2), q)}, 0.0});
    rows.push_back({{term(at(0), -p), term(at(1), p), term(at(2), -q)}, 0.0});
  } else {
    rows.push_back({{term(0, -p)}, p + q});
    rows.push_back({{term(0, p)}, -(p + q)});
  }
  const auto out = eval(rows);
  const double step = std::ldexp(1.0, grid);
  if (out[0] == 0 && out[1] == 0) {
    r_.term_cut = Rounding::rz;
  } else if (out[0] == step && out[1] == -step) {
    r_.term_cut = Rounding::rne;
  } else {
    throw std::runtime_error(fmt::format(
        "probe: cut vectors +-(3/4 of 2^{}) gave {} and {}: neither rz nor rne", grid,
        format_value(out[0]), format_value(out[1])));
  }
  note(fmt::format("cut {}: +-(1.5*2^{}) (3/4 of the grid step 2^{}) beside +-2^{} gave {} and {}",
                   to_string(r_.term_cut), grid - 1, grid, e_p_, format_value(out[0]),
                   format_value(out[1])));
}

// 3. +Q, -Q, s with Q = (1.5*2^a)(1.5*2^b) = 2.25*2^(a+b): s = 2^(a+b-F) lies on the grid
//    when Q aligns on a+b, and is half a step (cut to 0 by rz and rne) when on a+b+1.
void Prober::find_renormalise() {
  if (r_.group < 3 || r_.frac_bits < 0) {
    note(r_.group < 3 ? "renorm 0: not testable with fewer than 3 products per step (assumed)"
                      : "renorm 0: no cut, so alignment does not matter (assumed)");
    return;
  }
  const int e = e_p_ - 2;
  const double s = std::ldexp(1.0, e - r_.frac_bits);
  const double ha = 1.5 * std::ldexp(1.0, e / 2), hb = 1.5 * std::ldexp(1.0, e - e / 2);
  if (!representable(ha, fa_) || !representable(hb, fb_) || !is_product(s)) {
    note("renorm 0: the vector does not fit the format (assumed)");
    return;
  }
  std::vector<Row> rows = {{{{at(0), ha, hb}, {at(1), -ha, hb}, term(at(2), s)}, 0.0}};
  const auto out = eval(rows);
  if (out[0] != s && out[0] != 0)
    throw std::runtime_error(fmt::format("probe: renorm vector gave {}, neither 0 nor 2^{}",
                                         format_value(out[0]), e - r_.frac_bits));
  r_.renormalise = out[0] == 0;
  note(fmt::format("renorm {}: +-(1.5*2^{})(1.5*2^{}) and 2^{} in one step: the small term {} "
                   "(so products align on {})",
                   r_.renormalise ? 1 : 0, e / 2, e - e / 2, e - r_.frac_bits,
                   r_.renormalise ? "was cut" : "survived",
                   r_.renormalise ? "the exact product's exponent" : "e_a + e_b"));
}

// 3b. Unpacking: +-Q with Q = y * u, u the smallest subnormal of one operand's format and y
//     the other's largest power of two, and s = 2^(e_y + e_u - F) in one step: s lies on the
//     grid when u aligns on its own exponent (the operands are unpacked to a format where u
//     is normal, as sm_90 mma.sync's fp16) and is at most half a step otherwise. Each side
//     tried rules out the candidates (none, fp16, bf16) that predict the other outcome.
void Prober::find_unpack() {
  if (r_.group < 3 || r_.frac_bits < 0 || r_.renormalise) {
    note("unpack none: not observable with this group, cut and alignment (assumed)");
    return;
  }
  const std::vector<std::string> names = {"", "fp16", "bf16"};  // "" = none
  std::vector<bool> alive(names.size(), true);
  std::string tried;
  const bool same = fa_ == fb_;
  for (const bool sub_is_a : {false, true}) {
    if (same && sub_is_a) break;  // one format: the other side is the same vector
    const FormatSpec& sub = sub_is_a ? fa_ : fb_;
    const FormatSpec& other = sub_is_a ? fb_ : fa_;
    const double u = min_subnormal(sub);
    const int e_u = floor_log2(u), e_y = max_exponent(other);
    const double y = std::ldexp(1.0, e_y), s = std::ldexp(1.0, e_y + e_u - r_.frac_bits);
    if (e_u >= min_normal_exponent(sub) || !is_product(s) || e_y + e_u > e_p_) continue;
    auto own = [&](const std::string& name) {  // u aligns on e_u under this candidate
      return min_normal_exponent(name.empty() ? sub : format_by_name(name)) <= e_u;
    };
    bool informative = false;
    for (const auto& n : names) informative = informative || own(n) != own(names[0]);
    if (!informative) continue;
    const Term plus = sub_is_a ? Term{at(0), u, y} : Term{at(0), y, u};
    const Term minus = sub_is_a ? Term{at(1), -u, y} : Term{at(1), -y, u};
    const auto out = eval({{{plus, minus, term(at(2), s)}, 0.0}, {{plus}, 0.0}});
    if (out[1] != y * u) {
      note(fmt::format("unpack none: {} alone gave {} (a flushed subnormal operand?), so "
                       "unpacking is not observable (assumed none)",
                       format_value(y * u), format_value(out[1])));
      return;
    }
    if (out[0] != s && out[0] != 0)
      throw std::runtime_error(fmt::format("probe: unpack vector gave {}, neither 0 nor 2^{}",
                                           format_value(out[0]), e_y + e_u - r_.frac_bits));
    for (std::size_t i = 0; i < names.size(); ++i)
      alive[i] = alive[i] && own(names[i]) == (out[0] == s);
    tried += fmt::format("{}+-(2^{})(2^{}) and 2^{}: the small term {}", tried.empty() ? "" : "; ",
                         e_y, e_u, e_y + e_u - r_.frac_bits, out[0] == s ? "survived" : "was cut");
  }
  std::vector<std::string> left;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (alive[i]) left.push_back(names[i].empty() ? "none" : names[i]);
  if (tried.empty()) {
    note("unpack none: no subnormal operand of these formats can show it (assumed)");
    return;
  }
  if (left.empty())
    throw std::runtime_error("probe: subnormal operands align in a way no unpacked format "
                             "(none, fp16, bf16) explains: " + tried);
  // Identified when "none" is decided; among unpacked formats the narrowest that agrees.
  r_.unpack_identified = !alive[0] || left.size() == 1;
  r_.unpack = alive[0] ? "" : left[0];
  note(fmt::format("unpack {}: {} ({} {})", r_.unpack.empty() ? "none" : r_.unpack, tried,
                   fmt::join(left, ", "), left.size() == 1 ? "alone agrees" : "agree"));
}

// 4. c = 2^(e_P - F - 3) with +P, -P: c survives iff it stays out of the alignment.
void Prober::find_c_alignment() {
  if (r_.frac_bits < 0) {
    note("c join: no cut seen, so aligning c changes nothing (assumed)");
    return;
  }
  if (r_.group < 2) {
    note("c join: group 1 showed c being cut (frac vector on c)");
    return;
  }
  const double p = std::ldexp(1.0, e_p_);
  const double c = std::ldexp(1.0, e_p_ - r_.frac_bits - 3);
  const auto out = eval({{{term(at(0), p), term(at(1), -p)}, c}});
  if (out[0] != c && out[0] != 0)
    throw std::runtime_error(fmt::format("probe: c vector gave {}, neither 0 nor c = {}",
                                         format_value(out[0]), format_value(c)));
  r_.c_joins = out[0] == 0;
  note(fmt::format("c {}: c = 2^{} with +2^{} -2^{} in the first step gave {}",
                   r_.c_joins ? "join" : "exact", e_p_ - r_.frac_bits - 3, e_p_, e_p_,
                   format_value(out[0])));
}

}  // namespace fp8sim::probe_detail
