// prober: the Prober behind probe() (probe.hpp), shared by the files of its steps: the
// designed rows (Term, Row), the batches it sends the kernel (eval), and the evidence it keeps.
// probe_sum.cpp holds the steps that read the fused sum (1-4: group, fraction bits and cut,
// renormalisation, unpacking, c's alignment), probe_output.cpp those that read the output and
// the promotion (5-6); probe.cpp runs them in order. Internal to sim/analysis/.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "analysis/probe.hpp"
#include "gemm/gemm.hpp"

namespace fp8sim::probe_detail {

constexpr int kUnbounded = std::numeric_limits<int>::max();
constexpr int kMaxProbeK = 1 << 20;     // ProbeOptions::max_k and k_multiple at most
constexpr int kMaxProbeGroup = 1 << 12; // ProbeOptions::max_group at most

inline int floor_log2(double v) {
  int e = 0;
  std::frexp(std::fabs(v), &e);
  return e - 1;
}

// Significant bits of an exact nonzero double: msb position - lsb position + 1.
inline int span_bits(double v) {
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

}  // namespace fp8sim::probe_detail
