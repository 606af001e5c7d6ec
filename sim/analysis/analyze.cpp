// analyze: the exact reference, each recipe's pipeline with one stage made exact at a time,
// error energies per row and column, and the sampled pairs' correlation.
#include "analysis/analyze.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <cmath>
#include <ostream>
#include <stdexcept>

#include "accumulator/exact.hpp"
#include "gemm/device_gemm.hpp"
#include "kernel/gemm_inputs.hpp"
#include "base/limits.hpp"
#include "analysis/metrics.hpp"
#include "io/npy.hpp"
#include "base/parallel.hpp"
#include "base/rng.hpp"
#include "analysis/sweep.hpp"

namespace fp8sim {

InputDtype parse_input_dtype(std::string_view s) {
  if (s == "auto") return InputDtype::automatic;
  if (s == "f32" || s == "fp32" || s == "float32") return InputDtype::f32;
  if (s == "bf16" || s == "bfloat16") return InputDtype::bf16;
  if (s == "f16" || s == "fp16" || s == "float16") return InputDtype::f16;
  throw std::invalid_argument(fmt::format("unknown input dtype '{}' (auto, f32, bf16, f16)", s));
}

namespace {

// 1. Which dtype the file holds, checked against the one asked for; 2. the shape: a
// non-empty matrix. From the header alone.
InputDtype check_input_header(const NpyReader& r, InputDtype dtype) {
  const std::string& d = r.descr();
  const auto fail = [&](const std::string& what) {
    throw std::runtime_error(fmt::format("{}: {}", r.path(), what));
  };
  InputDtype got = InputDtype::automatic;
  if (d == "<f4") got = InputDtype::f32;
  else if (d == "<f2") got = InputDtype::f16;
  else if (d == "<V2" || d == "|V2") got = InputDtype::bf16;
  else if (d == "<u2" && dtype == InputDtype::bf16) got = InputDtype::bf16;
  else if (d == "<u2")
    fail("dtype <u2 (uint16): pass --dtype bf16 if these are bfloat16 bit patterns");
  else
    fail(fmt::format("dtype {} is not float32, bfloat16 or float16", d));
  if (dtype != InputDtype::automatic && dtype != got) {
    const char* names[] = {"auto", "f32", "bf16", "f16"};
    fail(fmt::format("dtype {} is not {} as asked", d, names[int(dtype)]));
  }
  if (r.shape().size() != 2)
    fail(fmt::format("expected a 2-D array, got {} dimensions", r.shape().size()));
  if (r.shape()[0] == 0 || r.shape()[1] == 0) fail("empty matrix");
  if (r.shape()[0] > std::size_t(limits::kMaxDim) || r.shape()[1] > std::size_t(limits::kMaxDim))
    fail(fmt::format("matrix {} x {} is too large {}", r.shape()[0], r.shape()[1],
                     limits::named("kMaxDim", limits::kMaxDim)));
  return got;
}

// 3. Values as doubles (exact: every f32 / bf16 / f16 value is a double), all finite.
InputMatrix read_input_data(NpyReader& r, InputDtype got) {
  const NpyArray a = r.read();
  InputMatrix m;
  m.rows = static_cast<int>(a.shape[0]);
  m.cols = static_cast<int>(a.shape[1]);
  m.values.resize(a.size());
  if (got == InputDtype::f32) {
    m.dtype = "f32";
    const std::vector<float> v = a.as<float>();
    std::copy(v.begin(), v.end(), m.values.begin());
  } else {
    m.dtype = got == InputDtype::bf16 ? "bf16" : "f16";
    const FormatSpec f = format_by_name(m.dtype);
    const std::vector<std::uint16_t> v = a.as<std::uint16_t>();
    for (std::size_t i = 0; i < v.size(); ++i) m.values[i] = decode(f, v[i]);
  }
  for (std::size_t i = 0; i < m.values.size(); ++i)
    if (!std::isfinite(m.values[i]))
      throw std::runtime_error(fmt::format("{}: element ({}, {}) is {}", r.path(), i / m.cols,
                                           i % m.cols, m.values[i]));
  return m;
}

}  // namespace

InputMatrix read_input_npy(const std::string& path, InputDtype dtype) {
  NpyReader r(path);
  const InputDtype got = check_input_header(r, dtype);
  return read_input_data(r, got);
}

std::pair<InputMatrix, InputMatrix> read_input_pair(const std::string& a, const std::string& b,
                                                    InputDtype dtype) {
  NpyReader ra(a), rb(b);
  const InputDtype ga = check_input_header(ra, dtype), gb = check_input_header(rb, dtype);
  check_gemm_problem(a, b, ra.shape()[0], ra.shape()[1], rb.shape()[0], rb.shape()[1]);
  InputMatrix A = read_input_data(ra, ga);
  return {std::move(A), read_input_data(rb, gb)};
}

Quantiles quantiles(std::vector<double> v) {
  std::erase_if(v, [](double x) { return std::isnan(x); });
  if (v.empty()) {
    const double nan = std::nan("");
    return {nan, nan, nan, nan, nan, nan, nan};
  }
  std::sort(v.begin(), v.end());
  return {v.front(),
          quantile_sorted(v, 0.05),
          quantile_sorted(v, 0.25),
          quantile_sorted(v, 0.5),
          quantile_sorted(v, 0.75),
          quantile_sorted(v, 0.95),
          v.back()};
}

int gemm_count(const Recipe& r, bool stages) {
  if (!stages) return 1;
  const bool enc = r.scaling.granularity != ScaleGranularity::none &&
                   r.scaling.encoding != ScaleEncoding::fp32;
  return 3 + (enc ? 1 : 0) + (r.model.exact ? 0 : 1);
}

namespace {

// 10 log10(signal / error): +inf for no error, -inf for error on a zero signal.
double energy_db(double signal, double error) {
  if (error == 0) return std::numeric_limits<double>::infinity();
  if (signal == 0) return -std::numeric_limits<double>::infinity();
  return 10 * std::log10(signal / error);
}

// Squared values of an M x N matrix summed per row and per column (column sums in row
// order), so every sum has one fixed order whatever the thread count. value(i) is called
// once an element a pass (it may round: to_out_type); the column pass runs over a thread's
// block of columns row by row (each column's sum still in row order), in cache order.
struct Energies {
  std::vector<double> row, col;
  double total = 0;
};
template <class Value>
Energies energies(int M, int N, int threads, Value&& value) {
  Energies e;
  e.row.assign(M, 0.0);
  e.col.assign(N, 0.0);
  parallel_for(std::size_t(M), threads, [&](std::size_t b, std::size_t end) {
    for (std::size_t m = b; m < end; ++m) {
      double s = 0;
      for (int n = 0; n < N; ++n) {
        const double v = value(m * N + n);
        s += v * v;
      }
      e.row[m] = s;
    }
  });
  parallel_for(std::size_t(N), threads, [&](std::size_t b, std::size_t end) {
    for (std::size_t m = 0; m < std::size_t(M); ++m)
      for (std::size_t n = b; n < end; ++n) {
        const double v = value(m * N + n);
        e.col[n] += v * v;
      }
  });
  for (double r : e.row) e.total += r;
  return e;
}

struct Operands {
  QuantisedOperand a, b;
};

Operands quantise(const ScalingSpec& sc, const Recipe& r, const InputMatrix& A,
                  const InputMatrix& B, int threads) {
  // "tensor" scaling: one scale for all of A (tensor_rows = M) and one for all of B.
  return {quantise_operand(sc, OperandRole::a, r.a_format, A.rows, A.cols, A.values, A.rows, threads),
          quantise_operand(sc, OperandRole::b, r.b_format, B.rows, B.cols, B.values, B.rows, threads)};
}

// The engine's fp32 result of A (M x K) times B^T, times the two-level scales' tensor scales
// ga (per row of A) and gb (per row of B) where they are given.
std::vector<float> run_gemm(const GemmSpec& g, const Operand& A, std::span<const float> sa,
                            std::span<const float> ga, const Operand& B,
                            std::span<const float> sb, std::span<const float> gb) {
  const std::size_t N = B.rows;
  std::vector<float> D(std::size_t(A.rows) * N);
  const bool scaled = g.scaling != Scaling::none;
  gemm(g, A, B, {}, scaled ? sa : std::span<const float>(), scaled ? sb : std::span<const float>(), D);
  if (!ga.empty() || !gb.empty())
    for (std::size_t i = 0; i < D.size(); ++i)
      D[i] = tensor_scaled(D[i], ga.empty() ? 1.0f : ga[i / N], gb.empty() ? 1.0f : gb[i % N]);
  return D;
}

// A block-scaled MMA's GEMM with the scales moved out of the MMA: each block's partial sum
// promoted into fp32 with its scales (the model without block scales, in steps of at most
// one block).
GemmSpec scales_at_promotion(GemmSpec g) {
  if (!g.model.block_scale) return g;
  g.model.block_scale.reset();
  g.model.group_sum = 1;
  g.model.group = std::min(g.model.group, g.mx_block);
  g.model.name += " (scales at promotion)";
  g.promote_every = g.mx_block;
  return g;
}

}  // namespace

AnalyzeResult analyze(const AnalyzeSpec& spec, const InputMatrix& A, const InputMatrix& B,
                      const AnalyzeProgress& progress) {
  using clock = std::chrono::steady_clock;
  const auto seconds_since = [](clock::time_point t0) {
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  if (spec.recipes.empty()) throw std::invalid_argument("analyze: no recipes");
  check_threads(spec.threads);
  if (spec.pairs > std::size_t(limits::kMaxOutputElements))
    throw std::invalid_argument(fmt::format(
        "pairs = {} is too many {}", spec.pairs,
        limits::named("kMaxOutputElements", limits::kMaxOutputElements)));
  if (A.cols != B.cols)
    throw std::invalid_argument(fmt::format("A is {} x {} but B is {} x {}: K differs (B is N x K)",
                                            A.rows, A.cols, B.rows, B.cols));
  for (const InputMatrix* x : {&A, &B})
    if (x->rows < 1 || x->cols < 1 || x->values.size() != std::size_t(x->rows) * x->cols)
      throw std::invalid_argument(fmt::format("input of {} values is not a non-empty {} x {} matrix",
                                              x->values.size(), x->rows, x->cols));
  const int M = A.rows, N = B.rows, K = A.cols;
  if (std::size_t(M) * N > (std::size_t{1} << 31))
    throw std::invalid_argument(fmt::format("output {} x {} is too large", M, N));
  AnalyzeResult res;
  res.spec = spec;
  res.M = M;
  res.N = N;
  res.K = K;
  // 0. Every recipe valid for this shape before any work (or skipped, with why).
  std::vector<Recipe> recipes;
  for (const Recipe& r : spec.recipes) {
    try {
      validate(engine_spec(r, spec.threads, spec.device), M, N, K);
      if (r.scaling.nc > 0 && K % r.scaling.nc != 0)
        throw std::invalid_argument(fmt::format("K = {} is not a multiple of the scale block {}", K,
                                                r.scaling.nc));
      recipes.push_back(r);
    } catch (const std::invalid_argument& e) {
      const std::string why = fmt::format("recipe {}: {}", r.name, e.what());
      if (!spec.skip_invalid) throw std::invalid_argument(why);
      res.skipped.push_back(why);
    }
  }
  if (recipes.empty())
    throw std::invalid_argument(fmt::format("no recipe can run on this shape ({})", res.skipped[0]));

  // 1. The unquantised operands (fp32 values: checked here, before any work), the exact
  //    reference R and its energies.
  const FormatSpec fp32 = format_by_name("fp32");
  const Operand a_exact = operand_from_values(fp32, M, K, A.values);
  const Operand b_exact = operand_from_values(fp32, N, K, B.values);

  auto t0 = clock::now();
  std::vector<double> R(std::size_t(M) * N);
  // In tiles of kTile x kTile outputs, so the tile's rows of A and B stay in cache.
  constexpr std::size_t kTile = 16;
  const std::size_t mt = (M + kTile - 1) / kTile, nt = (N + kTile - 1) / kTile;
  parallel_for(mt * nt, spec.threads, [&](std::size_t b, std::size_t end) {
    for (std::size_t t = b; t < end; ++t) {
      const std::size_t m0 = t / nt * kTile, n0 = t % nt * kTile;
      for (std::size_t m = m0; m < std::min<std::size_t>(m0 + kTile, M); ++m)
        for (std::size_t n = n0; n < std::min<std::size_t>(n0 + kTile, N); ++n)
          R[m * N + n] = exact_dot_nearest_double(
              std::span<const double>(A.values.data() + m * K, K),
              std::span<const double>(B.values.data() + n * K, K));
    }
  });
  const Energies signal = energies(M, N, spec.threads, [&](std::size_t i) { return R[i]; });
  res.reference_seconds = seconds_since(t0);
  if (progress) progress(fmt::format("exact reference: {:.1f} s", res.reference_seconds));

  // 2. The sampled pairs and their correlation.
  const std::size_t outputs = std::size_t(M) * N;
  const bool every_pair = spec.pairs >= outputs;
  const std::size_t P = every_pair ? outputs : spec.pairs;
  res.pair_m.resize(P);
  res.pair_n.resize(P);
  res.pair_cosine.resize(P);
  res.pair_pearson.resize(P);
  res.pair_ref.resize(P);
  parallel_for(P, spec.threads, [&](std::size_t b, std::size_t end) {
    for (std::size_t p = b; p < end; ++p) {
      const std::size_t i =
          every_pair ? p : random_u64(spec.seed, stream_of("analyze-pairs"), p) % outputs;
      const std::size_t m = i / N, n = i % N;
      const double* x = A.values.data() + m * K;
      const double* y = B.values.data() + n * K;
      double sx = 0, sy = 0;
      for (int k = 0; k < K; ++k) {
        sx += x[k];
        sy += y[k];
      }
      const double mx = sx / K, my = sy / K;
      double xy = 0, xx = 0, yy = 0, cxy = 0, cxx = 0, cyy = 0;
      for (int k = 0; k < K; ++k) {
        xy += x[k] * y[k];
        xx += x[k] * x[k];
        yy += y[k] * y[k];
        cxy += (x[k] - mx) * (y[k] - my);
        cxx += (x[k] - mx) * (x[k] - mx);
        cyy += (y[k] - my) * (y[k] - my);
      }
      const double nan = std::nan("");
      res.pair_m[p] = int(m);
      res.pair_n[p] = int(n);
      res.pair_cosine[p] = xx > 0 && yy > 0 ? xy / std::sqrt(xx * yy) : nan;
      res.pair_pearson[p] = cxx > 0 && cyy > 0 ? cxy / std::sqrt(cxx * cyy) : nan;
      res.pair_ref[p] = R[i];
    }
  });
  res.cosine = quantiles(res.pair_cosine);
  res.pearson = quantiles(res.pair_pearson);

  // 3. Each recipe: the full pipeline, then one stage made exact at a time.
  for (const Recipe& r : recipes) {
    t0 = clock::now();
    RecipeResult rr;
    rr.recipe = r;
    rr.gemms = gemm_count(r, spec.stages);
    const GemmSpec g = engine_spec(r, spec.threads, spec.device);
    // run_gemm, its wall time and the CUDA engine's kernel time added to the recipe's.
    const auto run = [&](const GemmSpec& gs, const Operand& a, std::span<const float> sa,
                         std::span<const float> ga, const Operand& b, std::span<const float> sb,
                         std::span<const float> gb) {
      const double k0 = device_kernel_seconds();
      const auto g0 = clock::now();
      std::vector<float> D = run_gemm(gs, a, sa, ga, b, sb, gb);
      rr.gemm_seconds += seconds_since(g0);
      rr.kernel_seconds += device_kernel_seconds() - k0;
      return D;
    };
    // The error energies of an fp32 engine result, rounded to out_type unless `keep_fp32`.
    const auto error_of = [&](const std::vector<float>& D32, bool keep_fp32) {
      return energies(M, N, spec.threads, [&](std::size_t i) {
        const float d = keep_fp32 ? D32[i] : to_out_type(r.out_type, D32[i]);
        return double(d) - R[i];
      });
    };
    // Stage s: the error energy of `run`'s fp32 result (rounded to out_type unless
    // keep_fp32), or unmeasured when the model cannot run it.
    const auto stage = [&](int s, const auto& run, bool keep_fp32 = false) {
      rr.stages[s].ran = true;
      try {
        rr.stages[s].error_energy = error_of(run(), keep_fp32).total;
      } catch (const std::invalid_argument& e) {  // the engine rejects the stage's GEMM
        rr.stages[s].unmeasured = e.what();
      } catch (const std::domain_error& e) {  // e.g. group sums an fp32 operand does not fit
        rr.stages[s].unmeasured = e.what();
      }
    };

    Operands q = quantise(r.scaling, r, A, B, spec.threads);
    rr.saturated_a = q.a.saturated;
    rr.saturated_b = q.b.saturated;
    const std::vector<float> sb = gemm_scales(r.scaling, OperandRole::b, q.b);
    const std::vector<float> D32 =
        run(g, q.a.operand, q.a.scales, q.a.tensor_scales, q.b.operand, sb, q.b.tensor_scales);
    const Energies err = error_of(D32, false);
    rr.signal_energy = signal.total;
    rr.error_energy = err.total;
    rr.sqnr_db = energy_db(signal.total, err.total);
    for (int m = 0; m < M; ++m) rr.row_sqnr_db.push_back(energy_db(signal.row[m], err.row[m]));
    for (int n = 0; n < N; ++n) rr.col_sqnr_db.push_back(energy_db(signal.col[n], err.col[n]));
    rr.row_quantiles = quantiles(rr.row_sqnr_db);
    rr.col_quantiles = quantiles(rr.col_sqnr_db);
    for (std::size_t p = 0; p < P; ++p)
      rr.pair_got.push_back(to_out_type(r.out_type, D32[std::size_t(res.pair_m[p]) * N + res.pair_n[p]]));

    if (spec.stages) {
      // quant_a / quant_b: that operand unquantised (fp32 values, scales 1).
      const std::vector<float> ones_a(q.a.scales.size(), 1.0f), ones_b(sb.size(), 1.0f);
      stage(0, [&] { return run(g, a_exact, ones_a, {}, q.b.operand, sb, q.b.tensor_scales); });
      stage(1, [&] { return run(g, q.a.operand, q.a.scales, q.a.tensor_scales, b_exact, ones_b, {}); });
      // scale_enc: the same granularity with fp32 scales (applied at promotion when the
      // MMA applied the recipe's).
      if (r.scaling.granularity != ScaleGranularity::none &&
          r.scaling.encoding != ScaleEncoding::fp32) {
        ScalingSpec sc = r.scaling;
        sc.encoding = ScaleEncoding::fp32;
        GemmSpec g32 = scales_at_promotion(g);
        set_engine_scaling(g32, sc);
        stage(2, [&] {
          const Operands q32 = quantise(sc, r, A, B, spec.threads);
          return run(g32, q32.a.operand, q32.a.scales, {}, q32.b.operand,
                          gemm_scales(sc, OperandRole::b, q32.b), {});
        });
      }
      // accum: the exact model, same promotion and scales (at promotion, block by block,
      // when the MMA applied them).
      if (!r.model.exact) {
        GemmSpec ge = scales_at_promotion(g);
        ge.model = accumulator_by_name("exact");
        stage(3, [&] {
          return run(ge, q.a.operand, q.a.scales, q.a.tensor_scales, q.b.operand, sb,
                          q.b.tensor_scales);
        });
      }
      // out_round: the fp32 result as it is.
      if (r.out_type != fp32) stage(4, [&] { return D32; }, true);
    }
    for (StageResult& s : rr.stages) {
      if (!s.ran) s.error_energy = rr.error_energy;
      s.sqnr_db = energy_db(signal.total, s.error_energy);
      s.share = rr.error_energy > 0 ? (rr.error_energy - s.error_energy) / rr.error_energy : 0.0;
      if (!s.unmeasured.empty()) s.error_energy = s.sqnr_db = s.share = std::nan("");
    }
    rr.seconds = seconds_since(t0);
    if (progress)
      progress(fmt::format("{}: SQNR {:.2f} dB, {} GEMMs, {:.1f} s", r.name, rr.sqnr_db, rr.gemms,
                           rr.seconds));
    res.recipes.push_back(std::move(rr));
  }
  return res;
}

namespace {

std::string num(double v) { return fmt::format("{:.17g}", v); }

std::string quantile_fields(const Quantiles& q) {
  return fmt::format("{},{},{},{},{},{},{}", num(q.min), num(q.q05), num(q.q25), num(q.median),
                     num(q.q75), num(q.q95), num(q.max));
}

}  // namespace

void write_analyze_csv(std::ostream& out, const AnalyzeResult& r) {
  std::string h = "recipe,a_format,b_format,scaling,scale_encoding,model,promote_every,"
                  "scale_order,out_type,m,n,k,gemms,signal_energy,error_energy,sqnr_db";
  for (const char* axis : {"row", "col"})
    for (const char* q : {"min", "q05", "q25", "median", "q75", "q95", "max"})
      h += fmt::format(",{}_sqnr_{}", axis, q);
  for (const char* st : kAnalyzeStages) h += fmt::format(",{}_exact_sqnr_db,{}_share", st, st);
  h += ",saturated_a,saturated_b,cosine_q05,cosine_median,cosine_q95,pearson_q05,"
       "pearson_median,pearson_q95";
  out << h << "\n";
  for (const RecipeResult& x : r.recipes) {
    const Recipe& re = x.recipe;
    std::string row = fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}", csv_field(re.name),
        re.a_format.name, re.b_format.name, re.scaling.name, encoding_name(re.scaling),
        csv_field(re.model.name), re.promote_every, to_string(re.order), re.out_type.name, r.M,
        r.N, r.K, x.gemms, num(x.signal_energy), num(x.error_energy), num(x.sqnr_db),
        quantile_fields(x.row_quantiles), quantile_fields(x.col_quantiles));
    for (const StageResult& s : x.stages)
      row += r.spec.stages ? fmt::format(",{},{}", num(s.sqnr_db), num(s.share)) : std::string(",,");
    row += fmt::format(",{},{},{},{},{},{},{},{}", x.saturated_a, x.saturated_b, num(r.cosine.q05),
                       num(r.cosine.median), num(r.cosine.q95), num(r.pearson.q05),
                       num(r.pearson.median), num(r.pearson.q95));
    out << row << "\n";
  }
}

void write_analyze_rows_csv(std::ostream& out, const AnalyzeResult& r) {
  out << "recipe,axis,index,sqnr_db\n";
  for (const RecipeResult& x : r.recipes) {
    const std::string name = csv_field(x.recipe.name);
    for (std::size_t i = 0; i < x.row_sqnr_db.size(); ++i)
      fmt::print(out, "{},row,{},{}\n", name, i, num(x.row_sqnr_db[i]));
    for (std::size_t i = 0; i < x.col_sqnr_db.size(); ++i)
      fmt::print(out, "{},col,{},{}\n", name, i, num(x.col_sqnr_db[i]));
  }
}

void write_analyze_pairs_csv(std::ostream& out, const AnalyzeResult& r) {
  out << "recipe,m,n,cosine,pearson,ref,got\n";
  for (const RecipeResult& x : r.recipes) {
    const std::string name = csv_field(x.recipe.name);
    for (std::size_t p = 0; p < r.pair_m.size(); ++p)
      fmt::print(out, "{},{},{},{},{},{},{:.9g}\n", name, r.pair_m[p], r.pair_n[p],
                 num(r.pair_cosine[p]), num(r.pair_pearson[p]), num(r.pair_ref[p]), x.pair_got[p]);
  }
}

}  // namespace fp8sim
