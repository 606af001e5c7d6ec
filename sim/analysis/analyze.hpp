// analyze: FP8 error analysis of a user's own high-precision tensors (A: M x K, B: N x K,
// D = A B^T) under a list of recipes (recipe.hpp): SQNR of the whole output and its spread
// over rows and columns, the error attributed to each stage of the recipe, and the
// correlation of the row pairs that were multiplied.
//
// Definitions (R = the exact product of the unquantised inputs, each output rounded once to
// the nearest double by exact_dot_nearest_double (exact.hpp); D = the recipe's result):
//   sqnr_db      = 10 log10(sum R^2 / sum (D - R)^2) over all M x N outputs; +inf when
//                  D == R everywhere, -inf when R == 0 everywhere and D != R somewhere.
//   row / column = the same ratio over one row (n = 0..N-1) or one column of the output.
// The recipe's pipeline: quantise A and B (scaling.hpp's quantise_operand: scales per the
// granularity, encoded as the recipe says, elements RNE with saturation), multiply in the
// GEMM engine (gemm.hpp: accumulator model stepped along K, promotion every promote_every
// into the fp32 main accumulator, scales applied there), round the fp32 result to out_type.
// Stage attribution: the pipeline is rerun with ONE stage made exact, everything else as in
// the recipe; E_s is its error energy and share_s = (E - E_s) / E, the fraction of the
// error energy that stage accounts for (stages interact, so shares need not sum to 1 and
// one can be negative when errors of two stages partly cancel):
//   quant_a   A enters the engine unquantised (its input values as an fp32 operand, every A
//             scale 1); B quantised as in the recipe.
//   quant_b   the same for B.
//   scale_enc A and B quantised with the recipe's granularity but fp32 scales
//             (s = fl32(amax / fmax), scaling.hpp); already exact (no GEMM, share 0) for a
//             recipe with fp32 scales or none.
//   accum     the `exact` accumulator model in place of the recipe's: each promotion chunk's
//             products summed exactly and rounded once to fp32 (promotion and scale
//             application unchanged); already exact for a recipe whose model is exact.
//   out_round the engine's fp32 result kept instead of rounded to out_type; already exact
//             for out_type fp32. Costs no GEMM (the full run's fp32 result is kept).
// Recipes whose MMA applies block scales itself (a model with block_scale: MXFP8, NVFP4):
// scale_enc and accum move the scales out of the MMA, applied as each block's partial sum
// is promoted into fp32 (the model without its block scales, in steps of at most one
// block, promote_every = the block);
// a stage the model cannot run (quant_a / quant_b on a model with exact group sums of FP4
// products, which an fp32 operand does not fit) is unmeasured (StageResult::unmeasured).
// Two-level scales (ue4m3) multiply the engine's fp32 result by fl32(g_a g_b) (scaling.hpp).
// GEMMs per recipe: 1 (full) + 1 (quant_a) + 1 (quant_b) + 1 (scale_enc, if not fp32) +
// 1 (accum, if the model is not exact); gemm_count() says it. The exact reference R is one
// exact GEMM shared by all recipes.
// Correlation: for `pairs` (row m of A, row n of B) pairs drawn uniformly, with replacement,
// with rng.hpp from `seed` (every pair, in order, when pairs >= M * N), the cosine a.b / (|a| |b|) and the Pearson correlation
// (cosine of the mean-centred rows), in double; pairs with a zero (centred) row are left out.
// Results never depend on `threads` or `device`.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gemm/device.hpp"
#include "kernel/recipe.hpp"

namespace fp8sim {

// A high-precision input matrix (row-major; finite fp32 values held as doubles: f32, bf16 and
// f16 values all are).
struct InputMatrix {
  int rows = 0, cols = 0;
  std::string dtype;          // "f32", "bf16" or "f16": what the values were
  std::vector<double> values;
};

// The dtypes an input file may hold. auto: <f4 is f32, <f2 is f16, <V2 (what np.save writes
// for an ml_dtypes.bfloat16 array) is bf16; bf16 also accepts <u2 (raw bfloat16 bits).
enum class InputDtype : std::uint8_t { automatic, f32, bf16, f16 };
InputDtype parse_input_dtype(std::string_view s);  // auto|f32|bf16|f16

// Reads a 2-D .npy of float32, bfloat16 or float16 values. Throws std::runtime_error
// "<path>: <problem>" for another dtype or rank, an empty matrix, or a NaN / Inf element.
InputMatrix read_input_npy(const std::string& path, InputDtype dtype);

// A (M x K) and B (N x K) for an analysis: both headers checked (dtype, rank, K equal, the
// GEMM limits of check_gemm_problem) before either's data is read, then as read_input_npy.
std::pair<InputMatrix, InputMatrix> read_input_pair(const std::string& a, const std::string& b,
                                                    InputDtype dtype);

struct AnalyzeSpec {
  std::vector<Recipe> recipes;
  bool stages = true;         // run the stage attribution (GEMMs per recipe: gemm_count)
  std::size_t pairs = 4096;   // row pairs sampled for the correlation (0: none)
  std::uint64_t seed = 1;     // draws the sampled pairs
  int threads = 0;            // 0: all hardware threads; results never depend on it
  Device device = Device::cpu;  // where the engine's GEMMs run (the reference runs on CPU)
  bool skip_invalid = false;  // skip recipes the engine rejects for this shape (listed in
                              // AnalyzeResult::skipped) instead of throwing
};

inline constexpr std::array<const char*, 5> kAnalyzeStages = {"quant_a", "quant_b", "scale_enc",
                                                              "accum", "out_round"};

struct Quantiles {
  double min = 0, q05 = 0, q25 = 0, median = 0, q75 = 0, q95 = 0, max = 0;
};
// Quantiles of values (NaN left out; +-inf sort to the ends); all NaN when none is left.
Quantiles quantiles(std::vector<double> values);

struct StageResult {
  bool ran = false;           // false: already exact in this recipe (E_s = E, share 0)
  std::string unmeasured;     // non-empty: the recipe's MMA cannot run this stage (why);
                              // sqnr_db and share are then NaN
  double error_energy = 0;    // E_s
  double sqnr_db = 0;         // SQNR with this stage exact
  double share = 0;           // (E - E_s) / E (0 when E = 0)
};

struct RecipeResult {
  Recipe recipe;
  int gemms = 0;
  double signal_energy = 0, error_energy = 0, sqnr_db = 0;
  std::vector<double> row_sqnr_db, col_sqnr_db;  // M and N values
  Quantiles row_quantiles, col_quantiles;
  std::array<StageResult, kAnalyzeStages.size()> stages{};
  std::size_t saturated_a = 0, saturated_b = 0;  // elements clipped to the format's max
  std::vector<float> pair_got;  // D at the sampled pairs (AnalyzeResult::pair_m / pair_n)
  double seconds = 0;           // wall time (not part of any CSV)
  double gemm_seconds = 0;      // of it, inside the engine's GEMMs (the emulation)
  double kernel_seconds = 0;    // of those, the CUDA engine's kernels (device cuda; else 0)
};

struct AnalyzeResult {
  AnalyzeSpec spec;
  int M = 0, N = 0, K = 0;
  std::vector<int> pair_m, pair_n;          // the sampled pairs
  std::vector<double> pair_cosine, pair_pearson, pair_ref;
  Quantiles cosine, pearson;                // over the sampled pairs
  std::vector<RecipeResult> recipes;          // the recipes run, in spec order
  std::vector<std::string> skipped;           // "<recipe>: <why>" (skip_invalid)
  double reference_seconds = 0;
};

// GEMMs the analysis of recipe r runs (the shared exact reference not counted).
int gemm_count(const Recipe& r, bool stages);

// Progress: called with a line naming what was just finished.
using AnalyzeProgress = std::function<void(const std::string&)>;

// Runs the analysis. A is M x K, B is N x K. Throws std::invalid_argument for mismatched
// shapes, a value that is not an fp32 value, an empty recipe list, or a recipe the engine
// rejects for this shape (naming it; unless skip_invalid, when none is left).
AnalyzeResult analyze(const AnalyzeSpec& spec, const InputMatrix& A, const InputMatrix& B,
                      const AnalyzeProgress& progress = {});

// CSV outputs (doubles with 17 significant digits, infinities as inf / -inf, NaN as nan):
//   write_analyze_csv        one row per recipe: recipe, a_format, b_format, scaling,
//     scale_encoding, model, promote_every, scale_order, out_type, m, n, k, gemms,
//     signal_energy, error_energy, sqnr_db, row_sqnr_{min,q05,q25,median,q75,q95,max},
//     col_sqnr_{...}, <stage>_exact_sqnr_db and <stage>_share per stage (empty without the
//     stage attribution), saturated_a, saturated_b, cosine_{q05,median,q95},
//     pearson_{q05,median,q95}
//   write_analyze_rows_csv   recipe, axis (row | col), index, sqnr_db
//   write_analyze_pairs_csv  recipe, m, n, cosine, pearson, ref, got (the sampled pairs)
void write_analyze_csv(std::ostream& out, const AnalyzeResult& r);
void write_analyze_rows_csv(std::ostream& out, const AnalyzeResult& r);
void write_analyze_pairs_csv(std::ostream& out, const AnalyzeResult& r);

}  // namespace fp8sim
