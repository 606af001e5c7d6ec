// bench_gemm: emulated MAC/s of the GEMM engine, and the same dot products through
// Microsoft's MMA-Sim (PyPI `mmasim`) for a side-by-side rate and a bit-for-bit comparison.
//
//   fp8sim-bench-gemm [--m 256 --n 256 --k 4096 --promote-every 128 --model hopper-wgmma]
//                     [--python PY] [--mmasim-rows 64] [--device cpu|cuda]
//                     [--scaling none|block --block 128] [--cpu-m 256 --cpu-n 256]
//                     [--format e4m3]
// A block-scaled model (mxf8f6f4, mxf4, nvfp4: scales inside the MMA) runs with random
// scales of its scale format on operands of --format (e2m1 for the FP4 ones), CPU only.
// Prints one line per configuration. MMA-Sim runs on the first --mmasim-rows rows of A
// (its rate is per emulated MAC, so the subset does not bias the ratio).
// --device cuda: the CUDA engine's kernels at M x N x K, the CPU engine on all cores at
// cpu-m x cpu-n x K, cuBLASLt's real FP8 GEMM at M x N x K (the slowdown factor) and MMA-Sim
// on the GPU, side by side, and the CUDA engine's bits against the CPU engine's.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>
#include <tuple>

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

// MMA-Sim (bench_mmasim.py) on the first rows of A and columns of B: {seconds, its D}, or
// seconds < 0 when it did not run.
std::pair<double, std::vector<float>> run_mmasim(const std::string& python, int Mr, int Nr, int K,
                                                 int promote, const std::vector<std::uint8_t>& a,
                                                 const std::vector<std::uint8_t>& b) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("fp8sim-bench-{}", ::getpid());
  fs::create_directories(dir);
  write_npy((dir / "A.npy").string(), "|u1", {std::size_t(Mr), std::size_t(K)}, a.data(),
            std::size_t(Mr) * K);
  write_npy((dir / "B.npy").string(), "|u1", {std::size_t(Nr), std::size_t(K)}, b.data(),
            std::size_t(Nr) * K);
  const char* src = std::getenv("FP8SIM_SOURCE_DIR");  // a build moved to another machine
  const fs::path script = fs::path(src ? src : FP8SIM_SOURCE_DIR) / "experiments" / "bench_mmasim.py";
  const std::string cmd = fmt::format("'{}' '{}' '{}' {}", python, script.string(), dir.string(), promote);
  std::pair<double, std::vector<float>> out{-1.0, {}};
  if (std::system(cmd.c_str()) == 0 && fs::exists(dir / "D.npy")) {
    out.second = read_npy_checked((dir / "D.npy").string(), "<f4", {std::size_t(Mr), std::size_t(Nr)}).as<float>();
    out.first = read_npy_checked((dir / "seconds.npy").string(), "<f8", {1}).as<double>()[0];
  }
  fs::remove_all(dir);
  return out;
}

int bench_cuda(GemmSpec s, int M, int N, int K, const std::vector<std::uint8_t>& a,
               const std::vector<std::uint8_t>& b, const std::vector<float>& sa,
               const std::vector<float>& sb, int cpu_m, int cpu_n, int reps, int mmasim_rows,
               const std::string& python) {
  const double macs = double(M) * N * K;
  fmt::print("GEMM {}x{}x{} {}, model {} ({}), promote every {}, scaling {}\n", M, N, K,
             s.a_format.name, s.model.name, describe(s.model), s.promote_every,
             to_string(s.scaling));
  // 1. The CUDA engine: kernels only (operands decoded once, block scales folded into them
  //    once where they fold, uploads not counted).
  const Operand A = decode_operand(s.a_format, M, K, a), B = decode_operand(s.b_format, N, K, b);
  std::optional<FoldedOperands> folded;
  const bool group_sums = s.model.block_scale && group_sums_on_device_fit(s, A, B, {}, sa, sb);
  if (s.model.block_scale && !group_sums) {
    const ScaleShapes sh = scale_shapes(s, M, N, K);
    folded = fold_block_scales(s, A, B, sa, sb, sh.a_cols, sh.b_cols);
    if (!folded)
      throw std::invalid_argument(fmt::format(
          "model {}: its block scales neither fold into the operands nor fit the group-sum "
          "step, so the CPU engine runs it: use device cpu", s.model.name));
  }
  std::vector<float> D(std::size_t(M) * N);
  double gpu = 1e300;
  for (int r = 0; r < std::max(reps, 1); ++r) {
    double t = 0;
    const DeviceLaunch launch{0, false, &t};
    if (folded) folded_on_device(s, *folded, {}, sa, sb, D, false, launch);
    else if (group_sums) group_sums_on_device(s, A, B, {}, sa, sb, D, false, launch);
    else gemm_on_device(s, A, B, {}, sa, sb, D, launch);
    gpu = std::min(gpu, t);
  }
  fmt::print("fp8sim cuda     {:>16} {:10.4f} s  {:.3g} emulated MAC/s\n",
             fmt::format("{}x{}x{}", M, N, K), gpu, macs / gpu);
  // 2. The CPU engine on every core, on the first cpu_m rows of A and cpu_n of B; bits
  //    compared with the CUDA engine's.
  const int cm = std::min(M, cpu_m), cn = std::min(N, cpu_n);
  GemmSpec c = s;
  c.device = Device::cpu;
  c.threads = 0;
  // The same scales: the first rows of A's, the first block rows of B's (scale_shapes).
  const ScaleShapes sh = scale_shapes(c, cm, cn, K);
  const std::span<const float> csa = std::span(sa).first(sh.a_rows * sh.a_cols);
  const std::span<const float> csb = std::span(sb).first(sh.b_rows * sh.b_cols);
  std::vector<float> Dc(std::size_t(cm) * cn);
  const auto t0 = std::chrono::steady_clock::now();
  gemm(c, cm, cn, K, std::span(a).first(std::size_t(cm) * K), std::span(b).first(std::size_t(cn) * K),
       {}, csa, csb, Dc);
  const double cpu = seconds_since(t0);
  std::size_t same = 0;
  for (int m = 0; m < cm; ++m)
    for (int n = 0; n < cn; ++n)
      same += same_result(Dc[std::size_t(m) * cn + n], D[std::size_t(m) * N + n]);
  fmt::print("fp8sim cpu x{:<3}  {:>15} {:10.4f} s  {:.3g} emulated MAC/s   (cuda is {:.0f}x); same results as cuda: {}/{}\n",
             resolve_threads(0), fmt::format("{}x{}x{}", cm, cn, K), cpu, double(cm) * cn * K / cpu,
             (macs / gpu) / (double(cm) * cn * K / cpu), same, Dc.size());
  // 3. The real FP8 GEMM.
#ifdef FP8SIM_HAVE_CUBLASLT_BENCH
  std::string err;
  const double lt = cuda::cublaslt_fp8_seconds(M, N, K, std::max(reps, 5), &err);
  if (lt > 0)
    fmt::print("cuBLASLt fp8    {:>16} {:10.6f} s  {:.3g} MAC/s ({:.3g} FLOP/s); emulation is {:.0f}x slower\n",
               fmt::format("{}x{}x{}", M, N, K), lt, macs / lt, 2 * macs / lt, gpu / lt);
  else
    fmt::print("cuBLASLt fp8    not run: {}\n", err);
#else
  fmt::print("cuBLASLt fp8    not built (no CUDA in this build)\n");
#endif
  // 4. MMA-Sim on the same GPU (hopper-wgmma, no scales only).
  if (mmasim_rows > 0 && s.scaling == Scaling::none) {
    const int Mr = std::min(M, mmasim_rows), Nr = std::min(N, 256);
    const auto [mm, Dm] = run_mmasim(python, Mr, Nr, K, s.promote_every, a, b);
    if (mm < 0) {
      fmt::print("mmasim          not run (needs `pip install mmasim`, which pulls in torch)\n");
    } else {
      std::size_t eq = 0;
      for (int m = 0; m < Mr; ++m)
        for (int n = 0; n < Nr; ++n)
          eq += same_result(Dm[std::size_t(m) * Nr + n], D[std::size_t(m) * N + n]);
      const double rate = double(Mr) * Nr * K / mm;
      fmt::print("mmasim (gpu)    {:>16} {:10.4f} s  {:.3g} emulated MAC/s   (cuda is {:.0f}x); same results as cuda: {}/{}\n",
                 fmt::format("{}x{}x{}", Mr, Nr, K), mm, rate, (macs / gpu) / rate, eq, Dm.size());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fp8sim-bench-gemm: emulated MAC/s of the GEMM engine, side by side with MMA-Sim"};
  int M = 256, N = 256, K = 4096, promote = 128, mmasim_rows = 64, reps = 3;
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
  if (const int code = cli::parse_command_line(app, argc, argv, "fp8sim-bench-gemm"); code >= 0) return code;

  try {
    GemmSpec s;
    s.a_format = s.b_format = format_by_name("e4m3");
    s.model = accumulator_by_name(model);
    s.promote_every = promote;
    s.out_type = format_by_name("fp32");
    s.device = parse_device(device);
    s.scaling = parse_scaling(scaling);
    s.block = block;
    auto a = random_e4m3(std::size_t(M) * K, 1), b = random_e4m3(std::size_t(N) * K, 2);
    const double macs = double(M) * N * K;
    std::vector<float> D(std::size_t(M) * N);
    std::vector<float> sa, sb;
    if (s.scaling != Scaling::none) std::tie(sa, sb) = scales(s, M, N, K);
    if (const auto& in = s.model.block_scale) {  // scales inside the MMA
      s.a_format = s.b_format = format_by_name(format);
      if (total_bits(s.a_format) > 8)
        throw std::invalid_argument(fmt::format("--format {}: at most 8 bits", format));
      use_model_block_scales(s);
      s.promote_every = 0;
      a = random_codes(s.a_format, a.size(), 1);
      b = random_codes(s.a_format, b.size(), 2);
      sa = random_scales(in->format, std::size_t(M) * (K / in->block), 3);
      sb = random_scales(in->format, std::size_t(N) * (K / in->block), 4);
      mmasim_rows = 0;
    }
    if (s.device == Device::cuda)
      return bench_cuda(s, M, N, K, a, b, sa, sb, cpu_m, cpu_n, reps, mmasim_rows, python);
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
    fmt::print(stderr, "fp8sim-bench-gemm: error: {}\n", e.what());
    return 2;
  }
}
