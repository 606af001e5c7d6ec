// bench_gemm: emulated MAC/s of the GEMM engine, and the same dot products through
// Microsoft's MMA-Sim (PyPI `mmasim`) for a side-by-side rate and a bit-for-bit comparison.
//
//   fp8sim-bench-gemm [--m 256 --n 256 --k 4096 --promote-every 128 --model hopper-wgmma]
//                     [--python PY] [--mmasim-rows 64] [--mmasim-macs 8589934592]
//                     [--device cpu|cuda]
//                     [--scaling none|block --block 128] [--cpu-m 256 --cpu-n 256]
//                     [--format e4m3]
// A block-scaled model (mxf8f6f4, mxf4, nvfp4: scales inside the MMA) runs with random
// scales of its scale format on operands of --format (e2m1 for the FP4 ones).
// Prints one line per configuration. MMA-Sim (experiments/bench_mmasim.py: its vectorised
// torch path, whole tiles of D per call) runs on the first --mmasim-rows rows of A on the CPU;
// with --device cuda on the first rows of A (all of N and K) whose outputs take at most
// --mmasim-macs MACs, all of M where they fit (its rate is per emulated MAC, so a subset of
// rows does not bias the ratio), its outputs bit-compared with fp8sim's.
// --device cuda: the CUDA engine timed through the library's entries at M x N x K (gemm() with
// Device::cuda, gemm_resident on device codes and its kernels' share), its bits against the
// CPU engine's on the first cpu-m x cpu-n outputs, its peak device memory (device_memory_peak)
// against the operands' codes plus D, cuBLASLt's real FP8 GEMM at M x N x K (the slowdown
// factor) and MMA-Sim on the GPU, side by side.
// --device cuda --table: all of that at issue 28's shapes and models, one Markdown table.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <bit>
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

#include "cli/options.hpp"
#include "gemm/gemm.hpp"
#include "gemm/gemm_device.hpp"
#include "io/npy.hpp"
#include "base/parallel.hpp"
#include "base/rng.hpp"
#ifdef FP8SIM_HAVE_CUBLASLT_BENCH
#include "hw/cublaslt_bench.hpp"
#endif

using namespace fp8sim;
namespace fs = std::filesystem;

namespace {

std::vector<std::uint8_t> random_e4m3(std::size_t n, std::uint64_t stream) {
  // Normal(0,1)-like magnitudes: codes with exponent fields spread around 1.0, no NaN.
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint8_t c = static_cast<std::uint8_t>(random_u64(42, stream, i));
    if ((c & 0x7f) == 0x7f) c &= 0xfe;
    v[i] = c;
  }
  return v;
}

// Random codes of a format of at most 8 bits (no NaN), for the block-scaled models.
std::vector<std::uint8_t> random_codes(const FormatSpec& f, std::size_t n, std::uint64_t stream) {
  std::vector<std::uint8_t> v(n);
  const unsigned mask = (1u << total_bits(f)) - 1;
  for (std::size_t i = 0, draw = 0; i < n; ++draw) {
    const auto c = static_cast<std::uint8_t>(random_u64(42, stream, draw) & mask);
    if (!std::isnan(decode(f, c))) v[i++] = c;
  }
  return v;
}

// Block scales: random values of the scale format between 2^-4 and 2^4.
std::vector<float> random_scales(const FormatSpec& f, std::size_t n, std::uint64_t stream) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(quantize(std::ldexp(1.0 + double(random_u64(43, stream, i) % 1024) / 1024,
                                                  int(random_u64(44, stream, i) % 9) - 4), f));
  return v;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Same bits, or both NaN (a NaN's sign and payload are the arithmetic's, not the model's).
bool same_result(float x, float y) {
  return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y) ||
         (std::isnan(x) && std::isnan(y));
}

// Random power-of-two scales of a spec's shapes (block scaling), none otherwise.
std::pair<std::vector<float>, std::vector<float>> scales(const GemmSpec& s, int M, int N, int K) {
  const ScaleShapes sh = scale_shapes(s, M, N, K);
  std::vector<float> sa(sh.a_rows * sh.a_cols), sb(sh.b_rows * sh.b_cols);
  for (std::size_t i = 0; i < sa.size(); ++i) sa[i] = std::ldexp(1.0f, int(random_u64(7, 3, i) % 9) - 4);
  for (std::size_t i = 0; i < sb.size(); ++i) sb[i] = std::ldexp(1.0f, int(random_u64(7, 4, i) % 9) - 4);
  return {sa, sb};
}

// MMA-Sim (bench_mmasim.py) on the first rows of A and columns of B: {seconds, the best of
// `reps` passes, its D}, or seconds < 0 when it did not run.
std::pair<double, std::vector<float>> run_mmasim(const std::string& python, int Mr, int Nr, int K,
                                                 int promote, int reps,
                                                 const std::vector<std::uint8_t>& a,
                                                 const std::vector<std::uint8_t>& b) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("fp8sim-bench-{}", ::getpid());
  fs::create_directories(dir);
  write_npy((dir / "A.npy").string(), "|u1", {std::size_t(Mr), std::size_t(K)}, a.data(),
            std::size_t(Mr) * K);
  write_npy((dir / "B.npy").string(), "|u1", {std::size_t(Nr), std::size_t(K)}, b.data(),
            std::size_t(Nr) * K);
  const char* src = std::getenv("FP8SIM_SOURCE_DIR");  // a build moved to another machine
  const fs::path script = fs::path(src ? src : FP8SIM_SOURCE_DIR) / "experiments" / "bench_mmasim.py";
  const std::string cmd =
      fmt::format("'{}' '{}' '{}' {} {}", python, script.string(), dir.string(), promote, reps);
  std::pair<double, std::vector<float>> out{-1.0, {}};
  if (std::system(cmd.c_str()) == 0 && fs::exists(dir / "D.npy")) {
    out.second = read_npy_checked((dir / "D.npy").string(), "<f4", {std::size_t(Mr), std::size_t(Nr)}).as<float>();
    out.first = read_npy_checked((dir / "seconds.npy").string(), "<f8", {1}).as<double>()[0];
  }
  fs::remove_all(dir);
  return out;
}

// One configuration on the CUDA engine, timed through the library's own entries:
//   gemm() with Device::cuda on the host's codes (the route sim/gemm/dispatch.cpp picks: plain
//   (large GEMMs in bands), block scales folded into the operands, or the group-sum step), and
//   gemm_resident on codes already on the device, and its kernels' share (device_kernel_seconds
//   across the call: gemm()'s bands run their kernels on two streams at once, so their events
//   do not add up to a kernel time; gemm()'s where gemm_resident refuses the spec); bits
//   checked against the CPU engine on the first cpu_m x cpu_n outputs. Rates are emulated
//   MAC/s, best of `reps`.
struct CudaRates {
  double kernels = -1, resident = -1, gemm = -1;  // MAC/s, < 0: not run
  std::size_t same = 0, checked = 0;
  std::string resident_note;
  std::size_t peak_gemm = 0, peak_resident = 0;  // device memory high-water marks, bytes
  double own_bytes = 0;                          // the operands' codes plus D (fp32)
  std::vector<float> D;                          // gemm()'s D (M x N)
};

// "1.23 GB (1.1x)": peak device memory and its ratio to the operands' codes plus D.
std::string peak_text(std::size_t peak, double own) {
  if (peak == 0) return "-";
  return fmt::format("{:.3g} GB ({:.2g}x)", double(peak) * 1e-9, double(peak) / own);
}

CudaRates bench_cuda_entries(const GemmSpec& s, int M, int N, int K,
                             const std::vector<std::uint8_t>& a,
                             const std::vector<std::uint8_t>& b, const std::vector<float>& sa,
                             const std::vector<float>& sb, int cpu_m, int cpu_n, int reps) {
  const double macs = double(M) * N * K;
  CudaRates r;
  r.D.resize(std::size_t(M) * N);
  std::vector<float>& D = r.D;
  r.own_bytes = double(a.size()) + double(b.size()) + 4.0 * double(D.size());
  // The best of `reps` calls: their wall time and their kernels' (device_kernel_seconds).
  auto best_of = [&](auto&& call) {
    double wall = 1e300, kern = 1e300;
    for (int i = 0; i < std::max(reps, 1); ++i) {
      const double k0 = device_kernel_seconds();
      const auto t0 = std::chrono::steady_clock::now();
      call();
      wall = std::min(wall, seconds_since(t0));
      kern = std::min(kern, device_kernel_seconds() - k0);
    }
    return std::pair{wall, kern};
  };
  // 1. gemm(): host codes in, D out (decode, uploads, kernels, download).
  device_memory_peak(true);
  const auto [wall, kern] = best_of([&] { gemm(s, M, N, K, a, b, {}, sa, sb, D); });
  r.gemm = macs / wall;
  r.kernels = macs / kern;
  r.peak_gemm = device_memory_peak(true);
  // 2. gemm_resident(): codes on the device, D written there.
  void *dA = nullptr, *dB = nullptr, *dD = nullptr;
  try {
    dA = device_malloc(a.size());
    dB = device_malloc(b.size());
    dD = device_malloc(D.size() * sizeof(float));
    copy_device(dA, a.data(), a.size(), true);
    copy_device(dB, b.data(), b.size(), true);
    device_memory_peak(true);  // the window starts with the codes and D on the device
    const auto [best, resident_kern] = best_of([&] {
      gemm_resident(s, M, N, K, static_cast<const std::uint8_t*>(dA),
                    static_cast<const std::uint8_t*>(dB), nullptr, sa, sb,
                    static_cast<float*>(dD));
    });
    r.kernels = macs / resident_kern;
    r.peak_resident = device_memory_peak(true);
    std::vector<float> Dr(D.size());
    copy_device(Dr.data(), dD, Dr.size() * sizeof(float), false);
    for (std::size_t i = 0; i < D.size(); ++i)
      if (!same_result(D[i], Dr[i])) throw std::runtime_error("gemm_resident and gemm() differ");
    r.resident = macs / best;
  } catch (const std::invalid_argument& e) {
    r.resident_note = e.what();  // a spec gemm_resident refuses
  }
  for (void* p : {dA, dB, dD}) device_free(p);
  // 3. The CPU engine on the first rows of A and of B, bits compared.
  const int cm = std::min(M, cpu_m), cn = std::min(N, cpu_n);
  GemmSpec c = s;
  c.device = Device::cpu;
  c.threads = 0;
  // The same scales: the first rows of A's, the first (block) rows of B's (scale_shapes).
  const ScaleShapes sh = scale_shapes(c, cm, cn, K);
  std::vector<float> Dc(std::size_t(cm) * cn);
  gemm(c, cm, cn, K, std::span(a).first(std::size_t(cm) * K), std::span(b).first(std::size_t(cn) * K),
       {}, std::span(sa).first(sa.empty() ? 0 : sh.a_rows * sh.a_cols),
       std::span(sb).first(sb.empty() ? 0 : sh.b_rows * sh.b_cols), Dc);
  for (int m = 0; m < cm; ++m)
    for (int n = 0; n < cn; ++n)
      r.same += same_result(Dc[std::size_t(m) * cn + n], D[std::size_t(m) * N + n]);
  r.checked = Dc.size();
  return r;
}

// The real FP8 GEMM's rate (MAC/s) at M x N x K, or < 0 with `why` set.
double cublaslt_rate(int M, int N, int K, int reps, std::string* why) {
#ifdef FP8SIM_HAVE_CUBLASLT_BENCH
  const double lt = cuda::cublaslt_fp8_seconds(M, N, K, std::max(reps, 5), why);
  return lt > 0 ? double(M) * N * K / lt : -1.0;
#else
  *why = "not built (no CUDA in this build)";
  return -1.0;
#endif
}

// MMA-Sim at its best on the GPU beside a CUDA configuration: the first rows of A (all of N
// and K) whose outputs take at most max_macs MACs (at least one row, at most M), the best of
// `reps` passes as fp8sim's rates are, its outputs bit-compared with fp8sim's D (M x N) on
// them. rate < 0: it did not run.
struct MmaSimRun {
  double rate = -1;  // emulated MAC/s
  int rows = 0;
  std::size_t same = 0, checked = 0;
};

MmaSimRun mmasim_on_gpu(const std::string& python, int M, int N, int K, int promote, int reps,
                        const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b,
                        const std::vector<float>& D, double max_macs) {
  MmaSimRun r;
  r.rows = static_cast<int>(std::clamp(std::floor(max_macs / (double(N) * K)), 1.0, double(M)));
  const auto [sec, Dm] = run_mmasim(python, r.rows, N, K, promote, reps, a, b);
  if (sec < 0) return r;
  r.rate = double(r.rows) * N * K / sec;
  for (std::size_t i = 0; i < Dm.size(); ++i) r.same += same_result(Dm[i], D[i]);
  r.checked = Dm.size();
  return r;
}

int bench_cuda(GemmSpec s, int M, int N, int K, const std::vector<std::uint8_t>& a,
               const std::vector<std::uint8_t>& b, const std::vector<float>& sa,
               const std::vector<float>& sb, int cpu_m, int cpu_n, int reps, double mmasim_macs,
               const std::string& python) {
  const double macs = double(M) * N * K;
  fmt::print("GEMM {}x{}x{} {}, model {} ({}), promote every {}, scaling {}\n", M, N, K,
             s.a_format.name, s.model.name, describe(s.model), s.promote_every,
             to_string(s.scaling));
  const std::string shape = fmt::format("{}x{}x{}", M, N, K);
  const CudaRates r = bench_cuda_entries(s, M, N, K, a, b, sa, sb, cpu_m, cpu_n, reps);
  fmt::print("fp8sim cuda     {:>16} kernels {:.3g} emulated MAC/s; gemm_resident {}; gemm() {:.3g} "
             "(host codes: decode, copies); same bits as the CPU engine on {}x{}: {}/{}\n",
             shape, r.kernels,
             r.resident > 0 ? fmt::format("{:.3g}", r.resident) : "not run (" + r.resident_note + ")",
             r.gemm, std::min(M, cpu_m), std::min(N, cpu_n), r.same, r.checked);
  fmt::print("peak device memory: gemm() {}, gemm_resident {} (x: of the operands' codes plus "
             "D, {:.3g} GB)\n", peak_text(r.peak_gemm, r.own_bytes),
             peak_text(r.peak_resident, r.own_bytes), r.own_bytes * 1e-9);
  std::string why;
  const double lt = cublaslt_rate(M, N, K, reps, &why);
  if (lt > 0)
    fmt::print("cuBLASLt fp8    {:>16} {:.3g} MAC/s ({:.3g} FLOP/s); emulation is {:.0f}x slower\n",
               shape, lt, 2 * lt, lt / r.kernels);
  else
    fmt::print("cuBLASLt fp8    not run: {}\n", why);
  // MMA-Sim on the same GPU, vectorised (hopper-wgmma, no scales only).
  bool mmasim_ok = true;
  if (mmasim_macs > 0 && s.scaling == Scaling::none && !s.model.block_scale) {
    const MmaSimRun mm =
        mmasim_on_gpu(python, M, N, K, s.promote_every, reps, a, b, r.D, mmasim_macs);
    if (mm.rate < 0) {
      fmt::print("mmasim          not run (needs `pip install mmasim`, which pulls in torch)\n");
    } else {
      fmt::print("mmasim (gpu)    {:>16} {:.3g} emulated MAC/s, vectorised (fp8sim cuda kernels "
                 "are {:.0f}x); same results as fp8sim: {}/{}\n",
                 fmt::format("{}x{}x{}", mm.rows, N, K), mm.rate, r.kernels / mm.rate, mm.same,
                 mm.checked);
      mmasim_ok = mm.same == mm.checked;
    }
  }
  (void)macs;
  return r.same == r.checked && mmasim_ok ? 0 : 1;
}

// One benchmark configuration: the spec, random codes of A (M x K) and B (N x K), scales.
struct Config {
  GemmSpec s;
  std::vector<std::uint8_t> a, b;
  std::vector<float> sa, sb;
};

// A block-scaled model (scales inside the MMA) runs on codes of `format` with random scales
// of its scale format, never promoted; other models on e4m3 codes with `scaling`.
Config make_config(const std::string& model, const std::string& format, int M, int N, int K,
                   int promote, Scaling scaling, int block, Device device) {
  Config c;
  GemmSpec& s = c.s;
  s.a_format = s.b_format = format_by_name("e4m3");
  s.model = accumulator_by_name(model);
  s.promote_every = promote;
  s.out_type = format_by_name("fp32");
  s.device = device;
  s.scaling = scaling;
  s.block = block;
  c.a = random_e4m3(std::size_t(M) * K, 1);
  c.b = random_e4m3(std::size_t(N) * K, 2);
  if (s.scaling != Scaling::none) std::tie(c.sa, c.sb) = scales(s, M, N, K);
  if (const auto& in = s.model.block_scale) {
    s.a_format = s.b_format = format_by_name(format);
    if (total_bits(s.a_format) > 8)
      throw std::invalid_argument(fmt::format("--format {}: at most 8 bits", format));
    use_model_block_scales(s);
    s.promote_every = 0;
    c.a = random_codes(s.a_format, c.a.size(), 1);
    c.b = random_codes(s.a_format, c.b.size(), 2);
    c.sa = random_scales(in->format, std::size_t(M) * (K / in->block), 3);
    c.sb = random_scales(in->format, std::size_t(N) * (K / in->block), 4);
  }
  return c;
}

// --table: the CUDA engine's rates at the shapes issue 28 names, side by side with cuBLASLt's
// real FP8 GEMM and MMA-Sim on the same GPU, as one Markdown table (GPU, driver and date
// above it; the CPU engine checks the bits of each row's first cpu_m x cpu_n outputs).
int run_table(const std::string& python, int reps, int cpu_m, int cpu_n, double mmasim_macs) {
  struct Row {
    const char* model;
    const char* format;
    int M, N, K, promote;
    Scaling scaling;
  };
  const Row rows[] = {
      {"hopper-wgmma", "e4m3", 8192, 8192, 8192, 128, Scaling::none},
      {"hopper-wgmma", "e4m3", 8192, 8192, 8192, 0, Scaling::none},
      {"hopper-wgmma", "e4m3", 8192, 8192, 8192, 128, Scaling::block},
      {"hopper-wgmma", "e4m3", 16, 4096, 7168, 128, Scaling::none},
      {"hopper-wgmma", "e4m3", 64, 7168, 16384, 128, Scaling::none},
      {"hopper-wgmma", "e4m3", 2048, 2048, 1024, 128, Scaling::none},
      {"nvfp4", "e2m1", 4096, 4096, 4096, 0, Scaling::none},
      {"mxf4", "e2m1", 4096, 4096, 4096, 0, Scaling::none},
      {"mxf8f6f4", "e4m3", 4096, 4096, 4096, 0, Scaling::none},
  };
#ifdef FP8SIM_HAVE_CUBLASLT_BENCH
  const std::string gpu = cuda::device_description();
#else
  const std::string gpu = "GPU not named (built without cuBLASLt)";
#endif
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  fmt::print("fp8sim-bench-gemm --device cuda --table: {}, {}\n\n", gpu, date);
  fmt::print("| GEMM (M x N x K) | model | operands | promote | scales | fp8sim cuda kernels "
             "| gemm_resident | gemm() | same bits as CPU | peak memory, gemm() | cuBLASLt fp8 "
             "| MMA-Sim (gpu, vectorised) | kernels / MMA-Sim |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  int rc = 0;
  for (const Row& w : rows) {
    Config c = make_config(w.model, w.format, w.M, w.N, w.K, w.promote, w.scaling, 128,
                           Device::cuda);
    const CudaRates r = bench_cuda_entries(c.s, w.M, w.N, w.K, c.a, c.b, c.sa, c.sb, cpu_m,
                                           cpu_n, reps);
    std::string why;
    const double lt = cublaslt_rate(w.M, w.N, w.K, reps, &why);
    std::string mm = "-", lead = "-";
    if (mmasim_macs > 0 && !c.s.model.block_scale && w.scaling == Scaling::none) {
      const MmaSimRun run = mmasim_on_gpu(python, w.M, w.N, w.K, w.promote, reps, c.a, c.b, r.D,
                                          mmasim_macs);
      if (run.rate < 0) {
        mm = "not run";
      } else {
        mm = fmt::format("{:.2g}{}, same bits {}/{}", run.rate,
                         run.rows < w.M ? fmt::format(" ({} rows)", run.rows) : "", run.same,
                         run.checked);
        lead = fmt::format("{:.0f}x", r.kernels / run.rate);
        rc |= run.same == run.checked ? 0 : 1;
      }
    }
    const char* scales = c.s.model.block_scale ? "in the MMA"
                         : w.scaling == Scaling::block ? "1x128, 128x128" : "-";
    fmt::print("| {}x{}x{} | {} | {} | {} | {} | {:.3g} | {} | {:.3g} | {}/{} | {} | {} | {} | {} |\n",
               w.M, w.N, w.K, w.model, w.format, c.s.promote_every ? std::to_string(c.s.promote_every) : "never",
               scales, r.kernels, r.resident > 0 ? fmt::format("{:.3g}", r.resident) : "-", r.gemm,
               r.same, r.checked, peak_text(r.peak_gemm, r.own_bytes),
               lt > 0 ? fmt::format("{:.3g}", lt) : "-", mm, lead);
    std::fflush(stdout);
    rc |= r.same == r.checked ? 0 : 1;
  }
  fmt::print("\nRates in emulated MAC/s (cuBLASLt: real MAC/s of its e4m3 GEMM at the same shape); "
             "best of {}. kernels: the CUDA engine's kernels in gemm_resident (CUDA events); "
             "gemm_resident: codes on the device, the whole call; gemm(): host codes, decode and "
             "copies included (large GEMMs in bands, copies overlapping kernels); peak "
             "memory: the device's high-water mark in gemm() (x: of the operands' codes plus D); "
             "MMA-Sim: its vectorised torch path (.dpa over whole tiles of D) on the same GPU and "
             "codes, all of M or the first rows (all of N and K) within {:.3g} MACs, best of {}, "
             "bits compared with fp8sim's outputs.\n", reps, mmasim_macs, reps);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fp8sim-bench-gemm: emulated MAC/s of the GEMM engine, side by side with MMA-Sim"};
  int M = 256, N = 256, K = 4096, promote = 128, mmasim_rows = 64, reps = 3;
  double mmasim_macs = 0x1p33;
  std::string model = "hopper-wgmma", python = "python3";
  app.add_option("--m", M)->capture_default_str();
  app.add_option("--n", N)->capture_default_str();
  app.add_option("--k", K)->capture_default_str();
  app.add_option("--promote-every", promote)->capture_default_str();
  app.add_option("--model", model)->capture_default_str();
  cli::add_integer_option(&app, "--reps", reps, "Timed repetitions (best is reported; >= 1)", 1,
                          1000000);
  app.add_option("--python", python, "Python with mmasim installed (skipped if it has none)")
      ->capture_default_str();
  app.add_option("--mmasim-rows", mmasim_rows, "Rows of A given to MMA-Sim (0: skip it)")
      ->capture_default_str();
  app.add_option("--mmasim-macs", mmasim_macs,
                 "--device cuda: MMA-Sim runs all of M x N x K, or the first rows of A within "
                 "this many MACs (0: skip it)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e15));
  std::string device = "cpu", scaling = "none", format = "e4m3";
  app.add_option("--format", format, "Operand format (block-scaled models only)")->capture_default_str();
  int block = 128, cpu_m = 256, cpu_n = 256;
  cli::add_device_option(&app, device);
  app.add_option("--scaling", scaling, "none|block (1 x block / block x block scales)")
      ->capture_default_str();
  cli::add_integer_option(&app, "--block", block, "Scale block length", 1, 1 << 20);
  cli::add_integer_option(&app, "--cpu-m", cpu_m,
                          "--device cuda: rows of A for the CPU engine's rate", 1, 1 << 20);
  cli::add_integer_option(&app, "--cpu-n", cpu_n,
                          "--device cuda: rows of B for the CPU engine's rate", 1, 1 << 20);
  bool table = false;
  app.add_flag("--table", table,
               "The CUDA engine at issue 28's shapes beside cuBLASLt and MMA-Sim, one Markdown "
               "table (--reps, --python, --mmasim-macs, --cpu-m, --cpu-n apply)");
  if (const int code = cli::parse_command_line(app, argc, argv, "fp8sim-bench-gemm"); code >= 0) return code;

  try {
    if (table) return run_table(python, reps, cpu_m, cpu_n, mmasim_rows > 0 ? mmasim_macs : 0);
    Config cfg = make_config(model, format, M, N, K, promote, parse_scaling(scaling), block,
                             parse_device(device));
    GemmSpec& s = cfg.s;
    auto& a = cfg.a;
    auto& b = cfg.b;
    auto& sa = cfg.sa;
    auto& sb = cfg.sb;
    if (s.model.block_scale) mmasim_rows = 0;
    const double macs = double(M) * N * K;
    std::vector<float> D(std::size_t(M) * N);
    if (s.device == Device::cuda)
      return bench_cuda(s, M, N, K, a, b, sa, sb, cpu_m, cpu_n, reps,
                        mmasim_rows > 0 ? mmasim_macs : 0, python);
    const int hw = resolve_threads(0);
    fmt::print("GEMM {}x{}x{} {}, model {} ({}), promote every {}\n", M, N, K, s.a_format.name,
               model, describe(s.model), s.promote_every);
    for (int threads : {1, hw}) {
      s.threads = threads;
      double best = 1e300;
      for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        gemm(s, M, N, K, a, b, {}, sa, sb, D);  // includes decoding the operands
        best = std::min(best, seconds_since(t0));
      }
      fmt::print("fp8sim  threads={:<2} {:8.3f} s  {:.3g} emulated MAC/s  ({:.3g} per thread)\n",
                 threads, best, macs / best, macs / best / threads);
      if (threads == hw) break;
    }
    if (mmasim_rows <= 0) return 0;

    // MMA-Sim on the first rows: same codes, same promotion; compare bits.
    const int Mr = std::min(M, mmasim_rows);
    const fs::path dir = fs::temp_directory_path() / fmt::format("fp8sim-bench-{}", ::getpid());
    fs::create_directories(dir);
    write_npy((dir / "A.npy").string(), "|u1", {std::size_t(Mr), std::size_t(K)}, a.data(),
              std::size_t(Mr) * K);
    write_npy((dir / "B.npy").string(), "|u1", {std::size_t(N), std::size_t(K)}, b.data(), b.size());
    const fs::path script = fs::path(FP8SIM_SOURCE_DIR) / "experiments" / "bench_mmasim.py";
    const std::string cmd = fmt::format("'{}' '{}' '{}' {}", python, script.string(), dir.string(),
                                        promote);
    const int rc = std::system(cmd.c_str());
    if (rc != 0 || !fs::exists(dir / "D.npy")) {
      fmt::print("mmasim  not run (needs `pip install mmasim`, which pulls in torch)\n");
      fs::remove_all(dir);
      return 0;
    }
    const auto dm = read_npy_checked((dir / "D.npy").string(), "<f4", {std::size_t(Mr), std::size_t(N)})
                        .as<float>();
    const NpyArray t = read_npy_checked((dir / "seconds.npy").string(), "<f8", {1});
    const double mm_seconds = t.as<double>()[0];
    std::size_t same = 0;
    for (std::size_t i = 0; i < dm.size(); ++i)
      same += std::bit_cast<std::uint32_t>(dm[i]) == std::bit_cast<std::uint32_t>(D[i]);
    const double mm_rate = double(Mr) * N * K / mm_seconds;
    s.threads = 1;
    std::vector<float> D1(std::size_t(Mr) * N);
    const auto t0 = std::chrono::steady_clock::now();
    gemm(s, Mr, N, K, std::span(a).first(std::size_t(Mr) * K), b, {}, {}, {}, D1);
    const double ours = double(Mr) * N * K / seconds_since(t0);
    fmt::print("mmasim  {}x{}x{}    {:8.3f} s  {:.3g} emulated MAC/s\n", Mr, N, K, mm_seconds,
               mm_rate);
    fmt::print("ratio   fp8sim (1 thread) / mmasim = {:.0f}x; bit-identical outputs: {}/{}\n",
               ours / mm_rate, same, dm.size());
    fs::remove_all(dir);
    return same == dm.size() ? 0 : 1;
  } catch (const std::exception& e) {
    fp8sim::print_stderr(fmt::format("fp8sim-bench-gemm: error: {}\n", e.what()));
    return 2;
  }
}
