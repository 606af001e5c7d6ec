// probe: feature-discovery vectors for a black-box dot-product kernel (see probe.hpp); the
// steps live in probe_sum.cpp and probe_output.cpp (the Prober: prober.hpp).
#include "analysis/probe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "analysis/prober.hpp"
#include "gemm/gemm.hpp"

namespace fp8sim {
namespace probe_detail {

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

}  // namespace probe_detail

using probe_detail::Prober;

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
