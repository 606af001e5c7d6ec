// probe: feature-discovery vectors for a black-box dot-product kernel (see probe.hpp).
#include "analysis/probe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>

#include "gemm/gemm.hpp"

namespace fp8sim {
namespace {

constexpr int kUnbounded = std::numeric_limits<int>::max();
constexpr int kMaxProbeK = 1 << 20;     // ProbeOptions::max_k and k_multiple at most
constexpr int kMaxProbeGroup = 1 << 12; // ProbeOptions::max_group at most

int floor_log2(double v) {
  int e = 0;
  std::frexp(std::fabs(v), &e);
  return e - 1;
}

// Significant bits of an exact nonzero double: msb position - lsb position + 1.
int span_bits(double v) {
  int e = 0;
  const double fr = std::frexp(std::fabs(v), &e);
  auto m = static_cast<std::uint64_t>(std::ldexp(fr, 53));
  return 53 - std::countr_zero(m);
}

// One product a*b placed at position k of a row.
struct Term {
  int k;
  double a, b;
};

// One dot product: terms (all other positions zero) and the c entering it.
struct Row {
  std::vector<Term> terms;
  double c = 0.0;
};

class Prober {
 public:
  Prober(const DotKernel& kernel, const ProbeOptions& o)
      : kernel_(kernel), o_(o), fa_(o.format), fb_(o.b_format.value_or(o.format)) {
    for (const FormatSpec* f : {&fa_, &fb_}) {
      validate(*f);
      if (total_bits(*f) > 8)
        throw std::invalid_argument(
            fmt::format("probe: format {} is wider than 8 bits", f->name));
    }
    // Bounded: each batch holds at most a few dozen rows of max_k (or 2 * max_group) codes.
    if (o_.k_multiple < 1 || o_.k_multiple > kMaxProbeK)
      throw std::invalid_argument(
          fmt::format("probe: k_multiple = {} is not in 1..{}", o_.k_multiple, kMaxProbeK));
    if (o_.max_k < 1 || o_.max_k > kMaxProbeK)
      throw std::invalid_argument(
          fmt::format("probe: max_k = {} is not in 1..{}", o_.max_k, kMaxProbeK));
    if (o_.max_group < 2 || o_.max_group > kMaxProbeGroup)
      throw std::invalid_argument(
          fmt::format("probe: max_group = {} is not in 2..{}", o_.max_group, kMaxProbeGroup));
    // P = 2^15 stays finite in an fp16 output.
    e_p_ = std::min(max_exponent(fa_) + max_exponent(fb_), 15);
    k_min_sub_ = floor_log2(min_subnormal(fa_)) + floor_log2(min_subnormal(fb_));
    k_min_norm_ = min_normal_exponent(fa_) + min_normal_exponent(fb_);
    zero_a_ = static_cast<std::uint8_t>(encode(0.0, fa_));
    zero_b_ = static_cast<std::uint8_t>(encode(0.0, fb_));
  }

  ProbeReport run();

 private:
  static bool representable(double v, const FormatSpec& f) {
    if (v == 0.0 || !std::isfinite(v)) return false;
    const std::uint32_t code = encode(v, f, {Rounding::rne, Overflow::nonsat});
    return decode(f, code) == v;
  }

  // A pair of A and B values whose product is exactly v: both normal where possible, with
  // significands multiplying to less than 2 (so e_a + e_b is the product's own exponent),
  // exponents as even as possible. Throws when v is no product of two format values.
  std::pair<double, double> product(double v) {
    auto it = pairs_.find(v);
    if (it != pairs_.end()) return it->second;
    std::pair<double, double> best{0, 0};
    int best_score = kUnbounded;
    for (std::uint32_t code : all_codes(fa_)) {
      const double a = decode(fa_, code);
      if (!(a > 0) || !std::isfinite(a)) continue;
      const double b = std::fabs(v) / a;
      if (!representable(b, fb_)) continue;
      const bool sub = classify(fa_, code) == ValueClass::subnormal ||
                       classify(fb_, encode(b, fb_)) == ValueClass::subnormal;
      const int ea = floor_log2(a), eb = floor_log2(b);
      const bool wide = ea + eb != floor_log2(std::fabs(v));
      const int score = (sub ? 1000 : 0) + (wide ? 100 : 0) + std::abs(ea - eb);
      if (score < best_score) best_score = score, best = {v < 0 ? -a : a, b};
    }
    if (best_score == kUnbounded)
      throw std::logic_error(fmt::format("probe: {} is no product of a {} and a {} value",
                                         format_value(v), fa_.name, fb_.name));
    return pairs_[v] = best;
  }
  Term term(int k, double v) {
    const auto [a, b] = product(v);
    return {k, a, b};
  }
  bool is_product(double v) const { return v != 0 && floor_log2(v) >= k_min_sub_; }

  // Runs the rows through the kernel (K at least k_min, padded to k_multiple).
  std::vector<double> eval(const std::vector<Row>& rows, int k_min = 1) {
    int K = k_min;
    for (const Row& r : rows)
      for (const Term& t : r.terms) K = std::max(K, t.k + 1);
    K = (K + o_.k_multiple - 1) / o_.k_multiple * o_.k_multiple;
    DotBatch batch;
    batch.a_format = fa_;
    batch.b_format = fb_;
    batch.T = static_cast<int>(rows.size());
    batch.K = K;
    batch.a.assign(std::size_t(batch.T) * K, zero_a_);
    batch.b.assign(std::size_t(batch.T) * K, zero_b_);
    batch.c.assign(batch.T, 0.0f);
    bool any_c = false;
    for (int t = 0; t < batch.T; ++t) {
      for (const Term& term : rows[t].terms) {
        batch.a[std::size_t(t) * K + term.k] = static_cast<std::uint8_t>(encode(term.a, fa_));
        batch.b[std::size_t(t) * K + term.k] = static_cast<std::uint8_t>(encode(term.b, fb_));
      }
      batch.c[t] = static_cast<float>(rows[t].c);
      if (static_cast<double>(batch.c[t]) != rows[t].c)
        throw std::logic_error("probe: c is not an fp32 value");
      any_c = any_c || rows[t].c != 0.0;
    }
    if (!any_c) batch.c.clear();
    const std::vector<float> out = kernel_(batch);
    if (out.size() != rows.size())
      throw std::runtime_error(fmt::format("probe: kernel returned {} results for {} rows",
                                           out.size(), rows.size()));
    ++batches_;
    rows_ += rows.size();
    return {out.begin(), out.end()};
  }

  void note(std::string line) { r_.evidence.push_back(std::move(line)); }

  // Position of the i-th product of the first step (i < group): i itself when steps are
  // consecutive runs of K, else the i-th element of the measured first step.
  int at(int i) const { return slot_.empty() ? i : slot_[i]; }
  // Products one instruction takes: the block when there is one, else the group.
  int unit() const { return r_.block > 0 ? r_.block : r_.group; }

  void find_group();
  void find_interleaved_steps(int k_s, const std::vector<double>& out, const std::string& kept);
  void find_frac_bits();
  void find_renormalise();
  void find_unpack();
  void find_c_alignment();
  void find_out_bits();
  void find_c_added_after();
  void find_output_rounding();
  void find_output_range();
  void find_promotion();

  const DotKernel& kernel_;
  ProbeOptions o_;
  FormatSpec fa_, fb_;  // code formats of A and B
  ProbeReport r_;
  int e_p_ = 15, k_min_sub_ = 0, k_min_norm_ = 0;
  std::uint8_t zero_a_ = 0, zero_b_ = 0;
  std::map<double, std::pair<double, double>> pairs_;
  std::vector<int> slot_;  // positions of the first step, when not 0..group-1
  int out_lo_ = 1, out_hi_ = kUnbounded;  // out_bits bounds
  int batches_ = 0;
  std::size_t rows_ = 0;
};

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

// 5. big + x for many spans: x survives iff the exact sum fits the output. Each try bounds
//    out_bits from one side; configurations: one product, g-1 large products, c + product.
void Prober::find_out_bits() {
  const int g = r_.group, F = r_.frac_bits;
  std::vector<Row> rows;
  std::vector<double> want;
  std::vector<std::string> what;
  auto add = [&](Row row, double exact, std::string how) {
    rows.push_back(std::move(row));
    want.push_back(exact);
    what.push_back(std::move(how));
  };
  // A: one product 2^Eb and x = 2^(Eb - t) in one step.
  if (g >= 2) {
    const int eb = e_p_ - 1;
    const double big = std::ldexp(1.0, eb);
    for (int t = 1; eb - t >= k_min_sub_ && (F < 0 || t <= F); ++t) {
      const double x = std::ldexp(1.0, eb - t);
      add({{term(at(0), big), term(at(1), x)}, 0.0}, big + x, "2^Eb + 2^(Eb-t)");
    }
  }
  // B: g-1 products of the largest significand and x at t below their alignment exponent.
  if (g >= 3) {
    const int m = g - 1;
    const double sig_a = 2.0 - std::ldexp(1.0, -fa_.mantissa_bits);
    const double sig_b = 2.0 - std::ldexp(1.0, -fb_.mantissa_bits);
    const int bitlen = floor_log2(m) + 1;
    const int e = e_p_ - 2 - bitlen;
    const double va = sig_a * std::ldexp(1.0, e / 2), vb = sig_b * std::ldexp(1.0, e - e / 2);
    if (representable(va, fa_) && representable(vb, fb_)) {
      const int align = r_.renormalise ? floor_log2(va * vb) : e;
      const double big = m * (va * vb);
      for (int t = 1; align - t >= k_min_sub_ && (F < 0 || t <= F); ++t) {
        const double x = std::ldexp(1.0, align - t);
        Row row;
        for (int k = 0; k < m; ++k) row.terms.push_back({at(k), va, vb});
        row.terms.push_back(term(at(m), x));
        add(std::move(row), big + x, fmt::format("{} x largest products + 2^(e-t)", m));
      }
    }
  }
  // C: c = 2^Ec and one product x = 2^(Ec - t) (cut only when c joins).
  {
    const int ec = e_p_ - 1;
    const double c = std::ldexp(1.0, ec);
    const bool cut = r_.c_joins && F >= 0;
    for (int t = 1; ec - t >= k_min_sub_ && (!cut || t <= F); ++t) {
      const double x = std::ldexp(1.0, ec - t);
      add({{term(0, x)}, c}, c + x, "c = 2^Ec + product 2^(Ec-t)");
    }
  }
  const auto out = eval(rows);
  // Bounds from the product sums (rows without c) and from c + product, kept apart: a kernel
  // that adds c outside the accumulator (a library epilogue) shows a wider c adder.
  int lo = 1, hi = kUnbounded, c_lo = 1, c_hi = kUnbounded;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const int bits = span_bits(want[i]);
    const bool with_c = rows[i].c != 0.0;
    int& l = with_c ? c_lo : lo;
    int& h = with_c ? c_hi : hi;
    if (out[i] == want[i]) l = std::max(l, bits);
    else h = std::min(h, bits - 1);
  }
  if (lo > hi || c_lo > c_hi)
    throw std::runtime_error(fmt::format(
        "probe: output-width vectors disagree (a {}-bit sum survived, a {}-bit sum did not)",
        lo > hi ? lo : c_lo, (lo > hi ? hi : c_hi) + 1));
  if (std::max(lo, c_lo) > std::min(hi, c_hi)) {
    // Products round to `lo` bits, c + product keeps more: c is added after the rounding,
    // in a wider adder (e.g. cuBLASLt's fp32 epilogue D = acc + C).
    r_.c_added_after = true;
    r_.c_joins = false;
    r_.c_adder_bits = c_lo;
    note(fmt::format("c add: product sums keep {}..{} bits but c + product keeps {}..{}: c is "
                     "added after the accumulator's rounding, in a {}-bit adder",
                     lo, hi == kUnbounded ? std::string("inf") : std::to_string(hi), c_lo,
                     c_hi == kUnbounded ? std::string("inf") : std::to_string(c_hi), c_lo));
  } else {
    lo = std::max(lo, c_lo);
    hi = std::min(hi, c_hi);
  }
  out_lo_ = lo;
  out_hi_ = hi;
  r_.out_bits_identified = lo == hi;
  r_.out_bits = lo == hi ? lo : std::max(lo, 24);
  note(lo == hi ? fmt::format("out {}: of {} sums big + small needing 2..{} bits, every sum of "
                              "<= {} bits came back exact and every longer one did not",
                              lo, rows.size(), span_bits(*std::max_element(
                                  want.begin(), want.end(),
                                  [](double a, double b) { return span_bits(a) < span_bits(b); })),
                              lo)
                : fmt::format("out {}: not identified: every one of {} sums up to {} bits came "
                              "back exact ({}; the cut never lets a longer sum reach the "
                              "output), so {} is assumed",
                              r_.out_bits, rows.size(), lo,
                              hi == kUnbounded ? "no upper bound" : fmt::format("<= {}", hi),
                              r_.out_bits));
}

// 4b. c = -big, products big + x whose sum needs one bit more than the output: x survives
//     iff c is added before the output rounding (exactly), not after it (B200).
void Prober::find_c_added_after() {
  if (r_.c_joins || r_.c_added_after) return;
  if (!r_.out_bits_identified) {
    note("c exact: output width unknown, so c after the rounding cannot be told apart (assumed "
         "before)");
    return;
  }
  const int B = r_.out_bits, F = r_.frac_bits;
  // One product 2^Eb and x = 2^(Eb - B): a (B+1)-bit sum, x kept by the cut when B <= F.
  const int eb = e_p_ - 1;
  const double big = std::ldexp(1.0, eb), x = std::ldexp(1.0, eb - B);
  if (r_.group < 2 || (F >= 0 && B > F) || !is_product(x)) {
    note("c exact: no vector separates c before from c after the output rounding (assumed "
         "before)");
    return;
  }
  const auto out = eval({{{term(at(0), big), term(at(1), x)}, -big}});
  r_.c_added_after = out[0] != x;
  note(fmt::format("c {}: c = -2^{} with products 2^{} + 2^{} (a {}-bit sum) gave {}: c is added "
                   "{} the output rounding",
                   r_.c_added_after ? "add" : "exact", eb, eb, eb - B, B + 1,
                   format_value(out[0]), r_.c_added_after ? "after" : "before"));
}

// 5b. big + {1/4, 1/2, 3/4} ulp and -(big + 1/4 ulp): which of them round up in magnitude.
void Prober::find_output_rounding() {
  if (!r_.out_bits_identified) {
    r_.output_rounding = Rounding::rz;
    note("outround rz: the output never rounds in any vector, so its rounding is unobservable "
         "(assumed)");
    return;
  }
  const int B = r_.out_bits, F = r_.frac_bits, g = r_.group;
  // Products first (B200 adds c after with its own rounding); c when products cannot.
  // Products: m = 2^L copies of 2^E (sum 2^(E+L)) so a quarter ulp lies on the cut grid.
  struct Config {
    bool use_c;
    int copies;
  };
  std::vector<Config> configs;
  const int L = F < 0 ? 0 : std::max(0, B + 1 - F);
  if (L < 20 && (1 << L) + 1 <= g) configs.push_back({false, 1 << L});
  configs.push_back({true, 0});
  const int e = e_p_ - 1;  // big = 2^e
  const double big = std::ldexp(1.0, e);
  const int eq = e - B - 1;  // exponent of a quarter ulp
  const double quarter = std::ldexp(1.0, eq);
  for (const Config& cf : configs) {
    const int align = cf.use_c ? e : e - L;
    const bool cut = !cf.use_c || r_.c_joins;
    if (!is_product(quarter) || (cut && F >= 0 && align - eq > F)) continue;
    std::vector<Row> rows;
    for (int i = 0; i < 4; ++i) {
      const double sign = i == 3 ? -1.0 : 1.0;
      const double frac = i == 3 ? 1 : i + 1;  // quarters
      Row row;
      if (cf.use_c) row.c = sign * big;
      for (int k = 0; k < cf.copies; ++k) row.terms.push_back(term(at(k), sign * std::ldexp(1.0, e - L)));
      row.terms.push_back(term(at(cf.copies), sign * frac * quarter));
      rows.push_back(std::move(row));
    }
    const auto out = eval(rows);
    bool up[4];
    for (int i = 0; i < 4; ++i) up[i] = std::fabs(out[i]) > big;
    const int code = up[0] * 8 + up[1] * 4 + up[2] * 2 + up[3];
    Rounding r;
    switch (code) {
      case 0b0000: r = Rounding::rz; break;
      case 0b0010: r = Rounding::rne; break;  // big is even at B bits: the tie stays down
      case 0b0110: r = Rounding::rna; break;
      case 0b1110: r = Rounding::ru; break;
      case 0b0001: r = Rounding::rd; break;
      default:
        throw std::runtime_error(fmt::format(
            "probe: output rounding vectors gave up/down pattern {}{}{}{}: no known rounding",
            int(up[0]), int(up[1]), int(up[2]), int(up[3])));
    }
    r_.output_rounding = r;
    r_.output_rounding_identified = true;
    note(fmt::format("outround {}: {} 2^{} + {{1/4, 1/2, 3/4}} ulp and -(2^{} + 1/4 ulp) at {} "
                     "bits rounded up in magnitude: {}{}{}{}",
                     to_string(r),
                     cf.use_c ? std::string("c =")
                              : fmt::format("{} products summing to", cf.copies),
                     e, e, B, int(up[0]), int(up[1]), int(up[2]), int(up[3])));
    return;
  }
  r_.output_rounding = Rounding::rz;
  note("outround rz: no vector reaches a fraction of the output ulp (assumed)");
}

// 5c. Two products 2^15 in one step (or c = 2^15 and one product): 2^16 is Inf in fp16.
void Prober::find_output_range() {
  const double p = std::ldexp(1.0, 15);
  if (e_p_ < 15) return;
  Row row = r_.group >= 2 ? Row{{term(at(0), p), term(at(1), p)}, 0.0} : Row{{term(0, p)}, p};
  const auto out = eval({row});
  if (std::isinf(out[0])) r_.out_max_exponent = 15;
  note(fmt::format("range: 2^15 + 2^15 in one step gave {} ({})", format_value(out[0]),
                   std::isinf(out[0]) ? "largest output exponent 15, as fp16"
                                      : "an fp32-range output"));
}

// 6. P at 0 and x = 2^(e_P - 23) at k=j: x is lost inside a limited accumulator and kept by
//    an FP32 main accumulator, so it survives iff j lies in a later chunk than P.
void Prober::find_promotion() {
  const int g = unit(), F = r_.frac_bits;
  const bool lossy = r_.out_bits < 24 || r_.out_max_exponent < 127 || (r_.c_joins && F >= 0 && F < 23);
  if (!lossy) {
    note("promote 0: the accumulator keeps fp32's 24 bits, so promotion is unobservable");
    return;
  }
  const double p = std::ldexp(1.0, e_p_), x = std::ldexp(1.0, e_p_ - 23);
  const int K = (o_.max_k + o_.k_multiple - 1) / o_.k_multiple * o_.k_multiple;
  auto test = [&](const std::vector<int>& js) {
    std::vector<Row> rows;
    for (int j : js) rows.push_back({{term(0, p), term(j, x)}, 0.0});
    const auto out = eval(rows, K);
    std::vector<bool> kept;
    for (double v : out) kept.push_back(v == p + x);
    return kept;
  };
  // Coarse: j = g * 2^i; then every multiple of g between the last loss and the first keep.
  std::vector<int> coarse;
  for (int j = g; j < K; j *= 2) coarse.push_back(j);
  if (coarse.empty())  // no chunk after the first within K: promotion cannot be seen
    throw std::invalid_argument(fmt::format(
        "probe: max_k = {} leaves no room after the first step of {} products to see a "
        "promotion; pass max_k > {}", o_.max_k, g, g));
  const auto kept = test(coarse);
  std::size_t first = 0;
  while (first < coarse.size() && !kept[first]) ++first;
  for (std::size_t i = first; i < coarse.size(); ++i)
    if (!kept[i])
      throw std::runtime_error(fmt::format(
          "probe: promotion vector j={} lost x after j={} kept it", coarse[i], coarse[first]));
  if (first == coarse.size()) {
    note(fmt::format("promote 0: 2^{} at k=0 and 2^{} at k=j = {}..{} (x{}): x was lost every "
                     "time, so no promotion within K = {}",
                     e_p_, e_p_ - 23, g, coarse.back(), 2, K));
    return;
  }
  int n = coarse[first];
  if (first > 0) {
    std::vector<int> fine;
    for (int j = coarse[first - 1] + g; j < coarse[first]; j += g) fine.push_back(j);
    if (!fine.empty()) {
      const auto kf = test(fine);
      for (std::size_t i = fine.size(); i-- > 0;)
        if (kf[i]) n = fine[i];
        else break;
      for (std::size_t i = 0; i < fine.size(); ++i)
        if (kf[i] != (fine[i] >= n))
          throw std::runtime_error(
              fmt::format("probe: promotion vector j={} is not monotone", fine[i]));
    }
  }
  r_.promote_every = n;
  note(fmt::format("promote {}: 2^{} at k=0 and 2^{} at k=j (K = {}): x is lost for j < {} and "
                   "kept for j >= {} (an FP32 main accumulator from there on)",
                   n, e_p_, e_p_ - 23, K, n, n));
}

ProbeReport Prober::run() {
  find_group();
  find_frac_bits();
  find_renormalise();
  find_unpack();
  find_c_alignment();
  find_out_bits();
  find_c_added_after();
  find_output_rounding();
  find_output_range();
  find_promotion();
  note(fmt::format("{} batches, {} dot products", batches_, rows_));
  return r_;
}

}  // namespace

AccumulatorSpec ProbeReport::as_model() const {
  const int bits = std::clamp(out_bits, 1, 24);
  AccumulatorSpec m;
  m.name = "probed";
  m.group = group;
  m.exact = frac_bits < 0;  // no cut seen: frac_bits keeps its default, unused
  if (!m.exact) m.frac_bits = frac_bits;
  m.term_cut = term_cut;
  m.c_entry = c_added_after ? CEntry::add : c_joins ? CEntry::join : CEntry::exact;
  m.renormalise_products = renormalise;
  // The output: `bits` significant bits with fp32's range, or fp16's when it overflows there.
  const bool fp16_range = out_max_exponent == 15;
  m.output = format_by_name(fp16_range && bits == 11 ? std::string("fp16")
                                                     : fmt::format("e{}m{}", fp16_range ? 5 : 8, bits - 1));
  m.output_rounding = output_rounding;
  m.block = block;
  m.interleave = block > 0 && interleave;
  if (!unpack.empty()) m.unpack = format_by_name(unpack);
  m.evidence = "fp8sim probe";
  validate(m);
  return m;
}

std::string ProbeReport::describe() const {
  return fmt::format("{} promote_every={}{}{}{}", fp8sim::describe(as_model()), promote_every,
                     c_adder_bits > 0 ? fmt::format(" c_adder_bits={}", c_adder_bits) : "",
                     out_bits_identified ? "" : " (out bits not identified)",
                     output_rounding_identified ? "" : " (outround not identified)");
}

std::string disagreements(const ProbeReport& r, const AccumulatorSpec& m, int promote_every) {
  std::string bad;
  auto want = [&](bool ok, const char* what) {
    if (!ok) bad += std::string(bad.empty() ? "" : ", ") + what;
  };
  want(r.group == std::max(m.group, 1), "group");
  want(r.block == m.block, "block");
  want(r.interleave == m.interleave, "interleave");
  if (r.unpack_identified) want(r.unpack == (m.unpack ? m.unpack->name : ""), "unpack");
  if (m.exact) {
    want(r.frac_bits == -1, "frac");
  } else {
    want(r.frac_bits == m.frac_bits, "frac");
    want(r.term_cut == m.term_cut, "cut");
    want(r.renormalise == m.renormalise_products, "renorm");
    if (m.c_entry != CEntry::add) want(r.c_joins == (m.c_entry == CEntry::join), "c");
  }
  want(r.c_added_after == (m.c_entry == CEntry::add), "c added after");
  const int out_bits = m.output.mantissa_bits + 1;
  if (r.out_bits_identified) want(r.out_bits == out_bits, "out bits");
  else want(r.out_bits >= out_bits || r.out_bits == 24, "out bits bound");
  if (r.output_rounding_identified) want(r.output_rounding == m.output_rounding, "outround");
  want((r.out_max_exponent == 15) == (max_exponent(m.output) == 15), "out range");
  want(r.promote_every == promote_every, "promote_every");
  return bad;
}

ProbeReport probe(const DotKernel& kernel, const ProbeOptions& opts) {
  return Prober(kernel, opts).run();
}

DotKernel model_kernel(const AccumulatorSpec& model, int promote_every) {
  return [model, promote_every](const DotBatch& batch) {
    const int g = std::max(step_products(model), 1);
    const int K = (batch.K + g - 1) / g * g;
    std::vector<std::uint8_t> a(std::size_t(batch.T) * K, 0), b(std::size_t(batch.T) * K, 0);
    const std::uint8_t za = static_cast<std::uint8_t>(encode(0.0, batch.a_format));
    const std::uint8_t zb = static_cast<std::uint8_t>(encode(0.0, batch.b_format));
    for (int t = 0; t < batch.T; ++t)
      for (int k = 0; k < K; ++k) {
        const bool in = k < batch.K;
        a[std::size_t(t) * K + k] = in ? batch.a[std::size_t(t) * batch.K + k] : za;
        b[std::size_t(t) * K + k] = in ? batch.b[std::size_t(t) * batch.K + k] : zb;
      }
    GemmSpec s;
    s.a_format = batch.a_format;
    s.b_format = batch.b_format;
    s.model = model;
    s.promote_every = promote_every;
    s.out_type = format_by_name("fp32");
    s.threads = 2;
    const Operand A = decode_operand(batch.a_format, batch.T, K, std::span<const std::uint8_t>(a));
    const Operand B = decode_operand(batch.b_format, batch.T, K, std::span<const std::uint8_t>(b));
    std::vector<float> d(batch.T);
    batched_dot(s, A, B, batch.c, {}, {}, d);
    return d;
  };
}

}  // namespace fp8sim
