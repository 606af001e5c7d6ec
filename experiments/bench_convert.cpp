// bench_convert: float32 -> e4m3 (rne, saturate) encoding rate per core, side by side with ml_dtypes.
//
//   fp8sim-bench-convert [--n 16777216] [--reps 5] [--threads 0] [--python PY] [--seed S]
// One array of n float32 (seeded: normal-like values of standard deviation 64, |x| < 222)
// is encoded by
//   1. encode_batch on one thread (values/s per core) and on --threads threads;
//   2. the scalar reference encode() on the first n/16 values;
//   3. ml_dtypes' NumPy conversion x.astype(ml_dtypes.float8_e4m3fn) on the same array, timed
//      inside a Python subprocess (NumPy's astype runs on one thread).
// The best of --reps runs is reported. The codes of 1 and 3 are compared wherever
// |x| <= 464 (beyond that ml_dtypes gives NaN where saturate gives 448: its e4m3fn overflow
// convention is fp8sim's nonsat).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>

#include "cli/options.hpp"
#include "io/output_file.hpp"
#include "format/convert_batch.hpp"
#include "io/npy.hpp"
#include "base/parallel.hpp"
#include "io/revision.hpp"
#include "base/rng.hpp"

using namespace fp8sim;
namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <class F>
double best_seconds(int reps, F&& f) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

std::string default_python() {
  if (const char* p = std::getenv("FP8SIM_PYTHON")) return p;
  const fs::path venv = fs::path(FP8SIM_SOURCE_DIR) / ".venv" / "bin" / "python";
  return fs::exists(venv) ? venv.string() : "python3";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fp8sim-bench-convert: float32 -> e4m3 encoding rate, side by side with ml_dtypes"};
  std::size_t n = std::size_t{1} << 24;
  int reps = 5, threads = 0;
  std::uint64_t seed = 1;
  std::string python = default_python();
  app.add_option("--n", n, "Array length")->capture_default_str();
  cli::add_integer_option(&app, "--reps", reps, "Timed repetitions (best is reported; >= 1)", 1,
                          1000000);
  cli::add_threads_option(&app, threads);
  app.add_option("--python", python, "Python with numpy and ml_dtypes (skipped if it fails)")
      ->capture_default_str();
  cli::add_integer_option(&app, "--seed", seed, "Seed of the input array", 0, ~std::uint64_t{0});
  if (const int code = cli::parse_command_line(app, argc, argv, "fp8sim-bench-convert"); code >= 0) return code;

  try {
    if (n == 0 || reps < 1) throw std::invalid_argument("--n and --reps must be positive");
    const FormatSpec f = format_by_name("e4m3");
    const RoundingSpec r{Rounding::rne, Overflow::saturate, 32};
    // Input: sum of four uniforms (Irwin-Hall, near normal) scaled to standard deviation 64.
    std::vector<float> x(n);
    parallel_for(n, 0, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) {
        double s = 0;
        for (int k = 0; k < 4; ++k) s += to_unit_double(random_u64(seed, k, i));
        x[i] = static_cast<float>((s - 2.0) * std::sqrt(3.0) * 64.0);
      }
    });
    std::vector<std::uint8_t> codes(n);
    fmt::print("fp8sim-bench-convert: n={} seed={} reps={} isa={} commit={}\n", n, seed, reps,
               encode_batch_isa(), git_revision());

    const double t1 = best_seconds(reps, [&] { encode_batch(f, r, x, codes, 1); });
    const double rate1 = n / t1;
    fmt::print("encode_batch  1 thread : {:8.1f} M values/s per core\n", rate1 / 1e6);
    const int nt = resolve_threads(threads);
    const double tn = best_seconds(reps, [&] { encode_batch(f, r, x, codes, nt); });
    fmt::print("encode_batch {:2d} threads: {:8.1f} M values/s ({:.1f} per thread)\n", nt,
               n / tn / 1e6, n / tn / nt / 1e6);

    const std::size_t ns = std::max<std::size_t>(n / 16, 1);
    volatile std::uint32_t sink = 0;
    const double ts = best_seconds(std::min(reps, 2), [&] {
      std::uint32_t acc = 0;
      for (std::size_t i = 0; i < ns; ++i) acc += encode(static_cast<double>(x[i]), f, r);
      sink = acc;
    });
    const double rate_s = ns / ts;
    fmt::print("encode (scalar reference): {:8.1f} M values/s per core\n", rate_s / 1e6);

    // ml_dtypes on the same array, in a subprocess.
    const fs::path dir = fs::temp_directory_path() / fmt::format("fp8sim-bench-convert-{}", ::getpid());
    fs::create_directories(dir);
    const fs::path in = dir / "x.npy", out = dir / "ml.npy", py = dir / "ml.py";
    write_npy(in.string(), "<f4", {n}, x.data(), n * 4);
    write_file(py.string(),
               "import sys, time, numpy as np, ml_dtypes\n"
               "x = np.load(sys.argv[1]); reps = int(sys.argv[3]); best = 1e300\n"
               "for _ in range(reps):\n"
               "    t0 = time.perf_counter(); y = x.astype(ml_dtypes.float8_e4m3fn)\n"
               "    best = min(best, time.perf_counter() - t0)\n"
               "np.save(sys.argv[2], y.view(np.uint8))\n"
               "print(best, ml_dtypes.__version__, np.__version__)\n");
    const std::string cmd = fmt::format("'{}' '{}' '{}' '{}' {} 2>&1", python, py.string(),
                                        in.string(), out.string(), reps);
    std::string reply;
    if (std::FILE* p = popen(cmd.c_str(), "r")) {
      char buf[512];
      while (std::fgets(buf, sizeof buf, p)) reply += buf;
      if (pclose(p) != 0) reply = "error: " + reply;
    }
    double tm = 0;
    char ver[64] = {0}, npver[64] = {0};
    if (reply.rfind("error", 0) != 0 &&
        std::sscanf(reply.c_str(), "%lf %63s %63s", &tm, ver, npver) == 3 && tm > 0) {
      const double rate_m = n / tm;
      fmt::print("ml_dtypes {} astype (numpy {}): {:8.1f} M values/s per core\n", ver, npver,
                 rate_m / 1e6);
      fmt::print("ratio encode_batch / ml_dtypes (1 core each): {:.2f}x\n", rate1 / rate_m);
      const auto ml = read_npy_checked(out.string(), "|u1", {n}).as<std::uint8_t>();
      std::size_t compared = 0, differ = 0;
      for (std::size_t i = 0; i < n; ++i)
        if (std::fabs(x[i]) <= 464.0f) {
          ++compared;
          differ += ml[i] != codes[i];
        }
      fmt::print("codes compared with ml_dtypes where |x| <= 464: {} of {} differ\n", differ,
                 compared);
      if (differ) {
        fs::remove_all(dir);
        return 1;
      }
    } else {
      fmt::print("ml_dtypes: skipped ({})\n", reply.substr(0, reply.find('\n')));
    }
    fs::remove_all(dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fp8sim-bench-convert: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
