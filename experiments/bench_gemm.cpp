// bench_gemm: emulated MAC/s of the GEMM engine, and the same dot products through
// Microsoft's MMA-Sim (PyPI `mmasim`) for a side-by-side rate and a bit-for-bit comparison.
//
//   fp8sim-bench-gemm [--m 256 --n 256 --k 4096 --promote-every 128 --model hopper-wgmma]
//                     [--python PY] [--mmasim-rows 64]
// Prints one line per configuration. MMA-Sim runs on the first --mmasim-rows rows of A
// (its rate is per emulated MAC, so the subset does not bias the ratio).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <bit>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "cli/options.hpp"
#include "gemm.hpp"
#include "npy.hpp"
#include "parallel.hpp"
#include "rng.hpp"

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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
  if (const int code = cli::parse_command_line(app, argc, argv, "fp8sim-bench-gemm"); code >= 0) return code;

  try {
    GemmSpec s;
    s.a_format = s.b_format = format_by_name("e4m3");
    s.model = accumulator_by_name(model);
    s.promote_every = promote;
    s.out_type = format_by_name("fp32");
    const auto a = random_e4m3(std::size_t(M) * K, 1), b = random_e4m3(std::size_t(N) * K, 2);
    const double macs = double(M) * N * K;
    std::vector<float> D(std::size_t(M) * N);
    const int hw = resolve_threads(0);
    fmt::print("GEMM {}x{}x{} e4m3, model {} ({}), promote every {}\n", M, N, K, model,
               describe(s.model), promote);
    for (int threads : {1, hw}) {
      s.threads = threads;
      double best = 1e300;
      for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        gemm(s, M, N, K, a, b, {}, {}, {}, D);  // includes decoding the operands
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
