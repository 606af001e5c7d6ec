// sweep: the SNR sweep engine. Crosses input distributions, vector lengths K, correlations,
// element formats, scalings, promotion intervals and accumulator models; runs every trial
// through the GEMM engine (batched_dot, one trial per row) and measures it against exact
// references.
//
// Per trial (row t of a configuration), with a, b the unquantised inputs and qa, qb their
// dequantised values (scale * element, scaling.hpp):
//   ref     = exact sum a_k b_k, rounded to the nearest double
//   ref_q   = exact sum qa_k qb_k, rounded to the nearest double
//   ref_q32 = the same exact sum rounded to the nearest fp32: the best an fp32 result can be
//   got     = the engine's fp32 result
//   snr_db, rel_err, ulp_err                  = metrics(ref, got): all error (quantisation
//                                               and accumulation) against the true dot product
//   snr_accum_db, rel_err_accum, ulp_err_accum = metrics(ref_q32, got): accumulation error
//                                               only, beyond the unavoidable final rounding
//                                               to fp32. So the `exact` model without
//                                               promotion and without fp32 scale products
//                                               has snr_accum_db = +inf (written "inf") and
//                                               ulp_err_accum = 0.
// Data are common random numbers: a configuration's inputs depend on (seed, distribution,
// rho, trial, column) only, so formats, scalings and models are compared on the same data.
#pragma once

#include <cstdint>
#include <functional>
#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

#include "accumulator/accumulator.hpp"
#include "gemm/device.hpp"
#include "analysis/distributions.hpp"
#include "format/format.hpp"
#include "analysis/metrics.hpp"
#include "scaling/scaling.hpp"

namespace fp8sim {

struct SweepSpec {
  std::vector<DistributionSpec> distributions{distribution_by_name("gaussian")};
  std::vector<int> k{4096};
  std::vector<double> rho{0.0};
  std::vector<FormatSpec> formats{format_by_name("e4m3")};
  std::vector<ScalingSpec> scalings{scaling_by_name("none")};
  std::vector<int> promote_every{0};          // 0 = never
  std::vector<AccumulatorSpec> models{accumulator_by_name("hopper-wgmma")};
  // Optional: only these (format, scaling, promote_every, model) combinations of the axes'
  // indices run, instead of their cross product (recipes compared on the same data).
  struct Combination {
    int format = 0, scaling = 0, promote = 0, model = 0;
    friend bool operator==(const Combination&, const Combination&) = default;
  };
  std::vector<Combination> only;
  int trials = 64;              // rows per configuration
  int tensor_rows = 128;        // rows sharing one "tensor" scale (scaling.hpp)
  std::uint64_t seed = 1;
  int threads = 0;              // 0: all hardware threads; results never depend on it
  Device device = Device::cpu;  // where the GEMM engine runs; results never depend on it
  bool skip_invalid = false;    // skip engine-invalid combinations (listed in the result)
                                // instead of throwing
  std::size_t chunk_elements = std::size_t(1) << 23;  // trials run in chunks of about this
                                // many elements per operand (memory bound); results do not
                                // depend on it (chunks hold whole tensor / block row groups)
};

// Throws std::invalid_argument naming an empty axis or a bad value.
void validate(const SweepSpec& s);

// One configuration: an index into each axis.
struct SweepConfig {
  int distribution = 0, k = 0, rho = 0, format = 0, scaling = 0, promote = 0, model = 0;
};

struct TrialResult {
  int config = 0;   // index into SweepResult::configs
  int trial = 0;
  double ref = 0, ref_q = 0;
  float ref_q32 = 0, got = 0;
  double snr_db = 0, rel_err = 0, ulp_err = 0;
  double snr_accum_db = 0, rel_err_accum = 0, ulp_err_accum = 0;
};

struct SweepResult {
  SweepSpec spec;
  std::vector<SweepConfig> configs;       // run configurations, in CSV order
  std::vector<std::string> skipped;       // "K=128 scaling=block128 promote=0: <why>"
  std::vector<std::size_t> saturated;     // per config: elements of A and B saturated
  std::vector<TrialResult> trials;        // configs.size() * spec.trials, config-major
};

// Progress: called with (work done, total work) in element-configurations.
using SweepProgress = std::function<void(double done, double total)>;

// Runs the sweep. Loops nest data (distribution, K, rho) > chunk of trials > quantisation
// (format, scaling) > engine (promotion, model), so each input set is generated and
// quantised once.
SweepResult run_sweep(const SweepSpec& s, const SweepProgress& progress = {});

// The tidy CSV: one row per configuration and trial; `extra` columns (name, value) are
// prepended to every row (e.g. the experiment's name). Columns:
//   [extra...], distribution, k, rho, format, scaling, scale_encoding, promote_every,
//   model, group, frac_bits, trial, ref, ref_q, ref_q32, got, snr_db, snr_accum_db,
//   rel_err, rel_err_accum, ulp_err, ulp_err_accum
// Doubles are written with 17 significant digits; infinities as inf / -inf.
void write_trials_csv(std::ostream& out, const SweepResult& r,
                      const std::vector<std::pair<std::string, std::string>>& extra = {});

// One row per configuration and metric (snr_db, snr_accum_db, rel_err, rel_err_accum,
// ulp_err, ulp_err_accum) with Summary's fields; bootstraps seeded from spec.seed and the
// configuration index (1000 resamples, 95%).
void write_summary_csv(std::ostream& out, const SweepResult& r,
                       const std::vector<std::pair<std::string, std::string>>& extra = {});

// A CSV field: quoted (RFC 4180) when it holds a comma, quote or newline (custom model names
// hold commas).
std::string csv_field(const std::string& v);

// Axis values of a configuration as strings, in the CSV's column order (for plots, labels).
std::vector<std::pair<std::string, std::string>> config_columns(const SweepResult& r,
                                                                const SweepConfig& c);

}  // namespace fp8sim
