// sweep: nested loops over data, quantisation and engine; exact references; CSV output.
#include "analysis/sweep.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <ostream>
#include <stdexcept>

#include "accumulator/exact.hpp"
#include "gemm/gemm.hpp"
#include "kernel/recipe.hpp"
#include "base/parallel.hpp"
#include "base/rng.hpp"

namespace fp8sim {

void validate(const SweepSpec& s) {
  const auto nonempty = [](std::size_t n, const char* axis) {
    if (n == 0) throw std::invalid_argument(fmt::format("sweep axis {} is empty", axis));
  };
  nonempty(s.distributions.size(), "distribution");
  nonempty(s.k.size(), "K");
  nonempty(s.rho.size(), "rho");
  nonempty(s.formats.size(), "format");
  nonempty(s.scalings.size(), "scaling");
  nonempty(s.promote_every.size(), "promote_every");
  nonempty(s.models.size(), "model");
  check_threads(s.threads);
  for (int k : s.k)
    if (k < 1) throw std::invalid_argument(fmt::format("sweep K = {} must be >= 1", k));
  for (double r : s.rho)
    if (!(r >= -1 && r <= 1))
      throw std::invalid_argument(fmt::format("sweep rho = {} is outside [-1, 1]", r));
  for (int p : s.promote_every)
    if (p < 0) throw std::invalid_argument(fmt::format("sweep promote_every = {} is negative", p));
  for (const auto& f : s.formats) {
    validate(f);
    if (total_bits(f) > 16 || f.specials == Specials::e8m0 || !f.is_signed)
      throw std::invalid_argument(fmt::format(
          "sweep format {}: elements must be signed formats of at most 16 bits", f.name));
  }
  for (const auto& m : s.models) validate(m);
  for (const SweepSpec::Combination& c : s.only)
    if (c.format < 0 || c.format >= int(s.formats.size()) || c.scaling < 0 ||
        c.scaling >= int(s.scalings.size()) || c.promote < 0 ||
        c.promote >= int(s.promote_every.size()) || c.model < 0 || c.model >= int(s.models.size()))
      throw std::invalid_argument("sweep combination indexes past an axis");
  if (s.trials < 1) throw std::invalid_argument(fmt::format("sweep trials = {} must be >= 1", s.trials));
  if (s.tensor_rows < 1)
    throw std::invalid_argument(fmt::format("sweep tensor_rows = {} must be >= 1", s.tensor_rows));
}

namespace {

// A configuration's GEMM as the library's analyses all build one (kernel/recipe.hpp).
GemmSpec engine_spec(const SweepSpec& s, const SweepConfig& c) {
  Recipe r;
  r.a_format = r.b_format = s.formats[c.format];
  r.model = s.models[c.model];
  r.promote_every = s.promote_every[c.promote];
  r.scaling = s.scalings[c.scaling];
  return fp8sim::engine_spec(r, s.threads, s.device);
}

std::string config_label(const SweepSpec& s, const SweepConfig& c) {
  return fmt::format("distribution={} K={} rho={} format={} scaling={} promote_every={} model={}",
                     s.distributions[c.distribution].name, s.k[c.k], s.rho[c.rho],
                     s.formats[c.format].name, s.scalings[c.scaling].name,
                     s.promote_every[c.promote], s.models[c.model].name);
}

}  // namespace

SweepResult run_sweep(const SweepSpec& s, const SweepProgress& progress) {
  validate(s);
  SweepResult r;
  r.spec = s;
  const int T = s.trials;

  // 1. Decide which configurations run (the engine's own validate() says what is invalid).
  double total = 0;
  {
    SweepConfig c;
    for (c.distribution = 0; c.distribution < int(s.distributions.size()); ++c.distribution)
      for (c.k = 0; c.k < int(s.k.size()); ++c.k)
        for (c.rho = 0; c.rho < int(s.rho.size()); ++c.rho)
          for (c.format = 0; c.format < int(s.formats.size()); ++c.format)
            for (c.scaling = 0; c.scaling < int(s.scalings.size()); ++c.scaling)
              for (c.promote = 0; c.promote < int(s.promote_every.size()); ++c.promote)
                for (c.model = 0; c.model < int(s.models.size()); ++c.model) {
                  if (!s.only.empty() &&
                      std::find(s.only.begin(), s.only.end(),
                                SweepSpec::Combination{c.format, c.scaling, c.promote, c.model}) ==
                          s.only.end())
                    continue;
                  const int K = s.k[c.k];
                  try {
                    const ScalingSpec& sc = s.scalings[c.scaling];
                    if (sc.nc > 0 && K % sc.nc != 0)
                      throw std::invalid_argument(fmt::format(
                          "K is not a multiple of the scale block {}", sc.nc));
                    validate(engine_spec(s, c), T, 1, K);
                  } catch (const std::invalid_argument& e) {
                    if (!s.skip_invalid)
                      throw std::invalid_argument(fmt::format("{}: {}", config_label(s, c), e.what()));
                    r.skipped.push_back(fmt::format("{}: {}", config_label(s, c), e.what()));
                    continue;
                  }
                  r.configs.push_back(c);
                  total += double(T) * K;
                }
  }
  r.trials.resize(r.configs.size() * T);
  r.saturated.assign(r.configs.size(), 0);

  // 2. Walk runs of configurations sharing their data (distribution, K, rho: the outermost
  //    axes, so such runs are contiguous), in chunks of whole row groups.
  double done = 0;
  std::vector<double> a, b, ref, ref_q;
  std::vector<float> ref_q32, got;
  QuantisedOperand qa, qb;
  const auto same_data = [](const SweepConfig& x, const SweepConfig& y) {
    return x.distribution == y.distribution && x.k == y.k && x.rho == y.rho;
  };
  // Rows sharing a scale must stay in one chunk: tensor groups and B's Nc x Nc blocks.
  std::size_t group_rows = static_cast<std::size_t>(s.tensor_rows);
  for (const ScalingSpec& sc : s.scalings)
    if (sc.granularity == ScaleGranularity::block)
      group_rows = std::lcm(group_rows, static_cast<std::size_t>(sc.nc));
  for (std::size_t g0 = 0, g1 = 0; g0 < r.configs.size(); g0 = g1) {
    while (g1 < r.configs.size() && same_data(r.configs[g1], r.configs[g0])) ++g1;
    const SweepConfig& c0 = r.configs[g0];
    const int K = s.k[c0.k];
    const std::size_t want_rows = std::max<std::size_t>(1, s.chunk_elements / K);
    const std::size_t chunk_rows = std::max<std::size_t>(1, want_rows / group_rows) * group_rows;
    for (std::size_t t0 = 0; t0 < std::size_t(T); t0 += chunk_rows) {
      const int Tc = static_cast<int>(std::min<std::size_t>(chunk_rows, T - t0));
      const std::size_t n = std::size_t(Tc) * K;
      a.resize(n);
      b.resize(n);
      ref.resize(Tc);
      ref_q.resize(Tc);
      ref_q32.resize(Tc);
      got.resize(Tc);
      generate_pairs(s.distributions[c0.distribution], s.rho[c0.rho], s.seed, Tc, K, a, b,
                     s.threads, t0);
      parallel_for(Tc, s.threads, [&](std::size_t begin, std::size_t end) {
        for (std::size_t t = begin; t < end; ++t)
          ref[t] = exact_dot_fast(std::span<const double>(a.data() + t * K, K),
                                  std::span<const double>(b.data() + t * K, K)).nearest_double;
      });
      int quant_format = -1, quant_scaling = -1;
      for (std::size_t ci = g0; ci < g1; ++ci) {
        const SweepConfig& c = r.configs[ci];
        if (c.format != quant_format || c.scaling != quant_scaling) {
          const ScalingSpec& sc = s.scalings[c.scaling];
          const FormatSpec& f = s.formats[c.format];
          qa = quantise_operand(sc, OperandRole::a, f, Tc, K, a, s.tensor_rows, s.threads);
          qb = quantise_operand(sc, OperandRole::b, f, Tc, K, b, s.tensor_rows, s.threads);
          parallel_for(Tc, s.threads, [&](std::size_t begin, std::size_t end) {
            std::vector<double> da(K), db(K);
            for (std::size_t t = begin; t < end; ++t) {
              for (int k = 0; k < K; ++k) {
                da[k] = dequantised(qa, K, t, k, sc.nc);
                db[k] = dequantised(qb, K, t, k, sc.nc);
              }
              const ExactDot e = exact_dot_fast(da, db);
              ref_q[t] = e.nearest_double;
              ref_q32[t] = e.nearest_float;
            }
          });
          quant_format = c.format;
          quant_scaling = c.scaling;
        }
        r.saturated[ci] += qa.saturated + qb.saturated;
        const GemmSpec g = engine_spec(s, c);
        const bool scaled = g.scaling != Scaling::none;
        batched_dot(g, qa.operand, qb.operand, {},
                    scaled ? std::span<const float>(qa.scales) : std::span<const float>(),
                    scaled ? std::span<const float>(qb.scales) : std::span<const float>(), got);
        if (!qa.tensor_scales.empty())
          for (int t = 0; t < Tc; ++t)
            got[t] = tensor_scaled(got[t], qa.tensor_scales[t], qb.tensor_scales[t]);
        for (int t = 0; t < Tc; ++t) {
          TrialResult& tr = r.trials[ci * T + t0 + t];
          tr.config = static_cast<int>(ci);
          tr.trial = static_cast<int>(t0) + t;
          tr.ref = ref[t];
          tr.ref_q = ref_q[t];
          tr.ref_q32 = ref_q32[t];
          tr.got = got[t];
          tr.snr_db = snr_db(ref[t], got[t]);
          tr.rel_err = rel_err(ref[t], got[t]);
          tr.ulp_err = ulp_err(ref[t], got[t]);
          tr.snr_accum_db = snr_db(ref_q32[t], got[t]);
          tr.rel_err_accum = rel_err(ref_q32[t], got[t]);
          tr.ulp_err_accum = ulp_err(ref_q32[t], got[t]);
        }
        done += double(Tc) * K;
        if (progress) progress(done, total);
      }
    }
  }
  return r;
}

std::vector<std::pair<std::string, std::string>> config_columns(const SweepResult& r,
                                                                const SweepConfig& c) {
  const SweepSpec& s = r.spec;
  const ScalingSpec& sc = s.scalings[c.scaling];
  const AccumulatorSpec& m = s.models[c.model];
  return {{"distribution", s.distributions[c.distribution].name},
          {"k", std::to_string(s.k[c.k])},
          {"rho", fmt::format("{}", s.rho[c.rho])},
          {"format", s.formats[c.format].name},
          {"scaling", sc.name},
          {"scale_encoding", std::string(encoding_name(sc))},
          {"promote_every", std::to_string(s.promote_every[c.promote])},
          {"model", m.name},
          {"group", std::to_string(m.group)},
          {"frac_bits", m.exact ? std::string("") : std::to_string(m.frac_bits)}};
}

std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\n") == std::string::npos) return v;
  std::string q = "\"";
  for (char ch : v) {
    if (ch == '"') q += '"';
    q += ch;
  }
  return q + "\"";
}

namespace {

void write_header(std::ostream& out, const SweepResult& r,
                  const std::vector<std::pair<std::string, std::string>>& extra,
                  const char* tail) {
  std::string h;
  for (const auto& [name, value] : extra) h += csv_field(name) + ",";
  SweepConfig c0;
  for (const auto& [name, value] : config_columns(r, r.configs.empty() ? c0 : r.configs[0]))
    h += name + ",";
  out << h << tail << "\n";
}

std::string prefix(const SweepResult& r, const SweepConfig& c,
                   const std::vector<std::pair<std::string, std::string>>& extra) {
  std::string p;
  for (const auto& [name, value] : extra) p += csv_field(value) + ",";
  for (const auto& [name, value] : config_columns(r, c)) p += csv_field(value) + ",";
  return p;
}

}  // namespace

void write_trials_csv(std::ostream& out, const SweepResult& r,
                      const std::vector<std::pair<std::string, std::string>>& extra) {
  write_header(out, r, extra,
               "trial,ref,ref_q,ref_q32,got,snr_db,snr_accum_db,rel_err,rel_err_accum,ulp_err,"
               "ulp_err_accum");
  const int T = r.spec.trials;
  for (std::size_t ci = 0; ci < r.configs.size(); ++ci) {
    const std::string p = prefix(r, r.configs[ci], extra);
    for (int t = 0; t < T; ++t) {
      const TrialResult& x = r.trials[ci * T + t];
      fmt::print(out, "{}{},{:.17g},{:.17g},{:.9g},{:.9g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g}\n",
                 p, x.trial, x.ref, x.ref_q, x.ref_q32, x.got, x.snr_db, x.snr_accum_db,
                 x.rel_err, x.rel_err_accum, x.ulp_err, x.ulp_err_accum);
    }
  }
}

void write_summary_csv(std::ostream& out, const SweepResult& r,
                       const std::vector<std::pair<std::string, std::string>>& extra) {
  write_header(out, r, extra,
               "metric,n,n_inf,mean,mean_lo,mean_hi,std,min,q05,q25,median,median_lo,median_hi,"
               "q75,q95,max,saturated");
  const int T = r.spec.trials;
  const char* names[] = {"snr_db", "snr_accum_db", "rel_err", "rel_err_accum", "ulp_err",
                         "ulp_err_accum"};
  // Summaries in parallel (each seeded by its configuration and metric), written in order.
  std::vector<Summary> sums(r.configs.size() * 6);
  parallel_for(sums.size(), r.spec.threads, [&](std::size_t begin, std::size_t end) {
    std::vector<double> v(T);
    for (std::size_t i = begin; i < end; ++i) {
      const std::size_t ci = i / 6, m = i % 6;
      for (int t = 0; t < T; ++t) {
        const TrialResult& x = r.trials[ci * T + t];
        const double vals[] = {x.snr_db, x.snr_accum_db, x.rel_err, x.rel_err_accum, x.ulp_err,
                               x.ulp_err_accum};
        v[t] = vals[m];
      }
      sums[i] = summarize(v, mix64(r.spec.seed ^ mix64(ci * 8 + m)));
    }
  });
  for (std::size_t ci = 0; ci < r.configs.size(); ++ci) {
    const std::string p = prefix(r, r.configs[ci], extra);
    for (int m = 0; m < 6; ++m) {
      const Summary& s = sums[ci * 6 + m];
      fmt::print(out, "{}{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{}\n",
                 p, names[m], s.n, s.n_inf, s.mean, s.mean_lo, s.mean_hi, s.std, s.min, s.q05,
                 s.q25, s.median, s.median_lo, s.median_hi, s.q75, s.q95, s.max,
                 r.saturated[ci]);
    }
  }
}

}  // namespace fp8sim
