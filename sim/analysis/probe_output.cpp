// probe_output: probe steps 5-6 (probe.hpp), read from the output: its bits and c's adder,
// c added after the rounding, the output rounding and range, and the promotion interval.
#include "analysis/prober.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace fp8sim::probe_detail {

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

}  // namespace fp8sim::probe_detail
