// test_gemm_cuda_bands: gemm() on host codes in bands (sim/gemm/device_bands.hpp), bit for bit.
//
// The CUDA engine's bands against the CPU engine, over models of every kernel the bands reach
// (the float kernel's float and double steps, the generic double kernel, the per-output
// kernel), E4M3 and E5M2 with NaN and Inf codes, no, tensor, row and block scales in both
// scale orders, C or none, fp32, bf16 and fp16 outputs, K with a tail after the last chunk:
// bands of rows and of columns forced at sizes that leave a short last band (and, for block
// scales, columns in whole blocks of B's scales). Then gemm() itself at shapes where it
// chooses bands (gemm_bands at an H100's or H200's 132 SMs: 2 bands of rows at 8192 x 1024 x
// 128, 4 of columns at 16 x 4096 x 4096). FP8SIM_SEED overrides the seed; the first mismatch
// is printed as one line. Then the uploads behind them: pageable memory through the library's
// pinned staging buffers.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "gemm/device_bands.hpp"
#include "gemm/device_gemm.hpp"
#include "gemm/gemm.hpp"
#include "gemm_cuda_util.hpp"

using namespace fp8sim;
using namespace fp8sim::gpu_test;

namespace {

struct BandCase {
  GemmSpec s;
  int M, N, K;
  std::vector<std::uint8_t> A, B;
  std::vector<float> C, sa, sb;
};

BandCase band_case(const char* model, int config, int M, int N, int K, std::uint64_t& stream) {
  const Scaling scalings[] = {Scaling::none, Scaling::tensor, Scaling::row, Scaling::block};
  const char* formats[][2] = {{"e4m3", "e4m3"}, {"e5m2", "e4m3"}, {"e5m2", "e5m2"}};
  const char* outs[] = {"fp32", "bf16", "fp16"};
  BandCase c{GemmSpec{}, M, N, K, {}, {}, {}, {}, {}};
  GemmSpec& s = c.s;
  s.model = accumulator_by_name(model);
  s.a_format = format_by_name(formats[config % 3][0]);
  s.b_format = format_by_name(formats[config % 3][1]);
  s.out_type = format_by_name(outs[(config / 2) % 3]);
  s.scaling = scalings[config % 4];
  s.order = (config / 4) % 2 ? ScaleOrder::cublaslt : ScaleOrder::deepgemm;
  s.promote_every = 128;
  s.block = 128;
  const int special = config % 5 == 2 ? 20 : 0;
  c.A = random_codes(s.a_format, std::size_t(M) * K, stream++, special);
  c.B = random_codes(s.b_format, std::size_t(N) * K, stream++, special);
  const ScaleShapes sh = scale_shapes(s, M, N, K);
  c.sa = random_floats(sh.a_rows * sh.a_cols, stream++, -8, 8);
  c.sb = random_floats(sh.b_rows * sh.b_cols, stream++, -8, 8);
  if (config % 2) c.C = random_floats(std::size_t(M) * N, stream++, -20, 12);
  return c;
}

std::vector<float> on_cpu(BandCase c) {
  std::vector<float> D(std::size_t(c.M) * c.N);
  c.s.device = Device::cpu;
  gemm(c.s, c.M, c.N, c.K, c.A, c.B, c.C, c.sa, c.sb, D);
  return D;
}

int bands_test() {
  Tally t;
  std::uint64_t stream = 1100000;
  int config = 0;
  for (const char* model : {"hopper-wgmma", "blackwell-fp8", "hopper-mma-f16", "ada-fp8",
                            "custom:group=32,frac=30", "hopper-mma-sync"}) {
    for (int v = 0; v < 8; ++v, ++config) {
      // K with a tail after the last whole chunk (promotion every 128).
      const int M = 300, N = 280, K = 4 * 128 + 64;
      BandCase c = band_case(model, config, M, N, K, stream);
      if (!gemm_bands_fit(c.s, false)) continue;
      const std::vector<float> cpu = on_cpu(c);
      const GemmBands forced[] = {{true, 64, 5}, {true, 128, 3}, {false, 64, 5}, {false, 128, 3}};
      for (const GemmBands& bands : forced) {
        if (!bands.rows && c.s.scaling == Scaling::block && bands.size % c.s.block) continue;
        std::vector<float> gpu(cpu.size());
        c.s.device = Device::cuda;
        gemm_codes_in_bands(c.s, M, N, K, c.A, c.B, c.C, c.sa, c.sb, gpu, bands);
        tally(cpu, gpu, N, t,
              fmt::format("bands: model={} a={} b={} M={} N={} K={} scaling={} order={} out={} "
                          "C={} {} of {}", model, c.s.a_format.name, c.s.b_format.name, M, N, K,
                          to_string(c.s.scaling), to_string(c.s.order), c.s.out_type.name,
                          c.C.empty() ? 0 : 1, bands.rows ? "rows" : "columns", bands.size));
      }
    }
  }
  // gemm() choosing its own bands: rows, and columns at a decode shape.
  const int sms = device_sm_count();
  int chosen = 0;
  for (const auto& [M, N, K] : {std::tuple{8192, 1024, 128}, std::tuple{16, 4096, 4096}}) {
    BandCase c = band_case("hopper-wgmma", config++, M, N, K, stream);
    const GemmBands b = gemm_bands(c.s, M, N, K, sms);
    chosen += b.count >= 2;
    const std::vector<float> cpu = on_cpu(c);
    std::vector<float> gpu(cpu.size());
    c.s.device = Device::cuda;
    gemm(c.s, M, N, K, c.A, c.B, c.C, c.sa, c.sb, gpu);
    tally(cpu, gpu, N, t, fmt::format("bands: gemm() M={} N={} K={}: {} bands of {} {}", M, N, K,
                                      b.count, b.size, b.rows ? "rows" : "columns"));
  }
  fmt::print("bands: {} configurations, {} outputs, {} differ; gemm() chose bands at {} of 2 "
             "shapes{}\n", t.configs, t.outputs, t.bad, chosen, t.bad ? "; first: " + t.first : "");
  return t.bad == 0 && t.configs > 100 && chosen == 2 ? 0 : 1;
}

// Copies of pageable memory both ways (copy_device, copy_device_async) that go through the
// pinned staging buffers (cuda/engine/host_staging.cu, 8 MiB and more): sizes that leave
// short slabs and short thread stripes, odd offsets at both ends (host and device), the
// async copies, and eight host threads copying at once (one at a time takes the staging
// threads, the others copy directly). Each upload is read back twice: staged, and directly
// in pieces below the staging threshold (so that neither direction checks only itself).
int staging_test() {
  const std::size_t sizes[] = {(std::size_t(8) << 20) - 1, std::size_t(8) << 20,
                               (std::size_t(17) << 20) + 13, (std::size_t(33) << 20) + 5};
  int bad = 0, copies = 0;
  auto round_trip = [&](std::size_t n, std::size_t offset, std::uint64_t stream, bool async) {
    std::vector<std::uint8_t> host(n + offset), back(n + offset), pieces(n);
    for (std::size_t i = 0; i < host.size(); ++i)
      host[i] = static_cast<std::uint8_t>(random_u64(seed(), stream, i) >> 56);
    DeviceBlock d;
    d.p = device_pool_malloc(n + 1);
    unsigned char* dst = static_cast<unsigned char*>(d.p) + 1;  // odd device address too
    if (async) {
      copy_device_async(dst, n, host.data() + offset, n, n, 1, true, nullptr);
      copy_device_async(back.data() + offset, n, dst, n, n, 1, false, nullptr);
    } else {
      copy_device(dst, host.data() + offset, n, true);
      copy_device(back.data() + offset, dst, n, false);
    }
    constexpr std::size_t kPiece = std::size_t(1) << 20;  // direct: below the threshold
    for (std::size_t at = 0; at < n; at += kPiece)
      copy_device(pieces.data() + at, dst + at, std::min(kPiece, n - at), false);
    const auto sent = host.begin() + std::ptrdiff_t(offset);
    const bool up = std::equal(pieces.begin(), pieces.end(), sent);
    const bool down = std::equal(back.begin() + std::ptrdiff_t(offset), back.end(), sent);
    if (!up || !down)
      fmt::print("staging: {} bytes at offset {} ({}): {} differ\n", n, offset,
                 async ? "async" : "sync", !up ? "the upload" : "the download");
    return up && down ? 0 : 1;
  };
  std::uint64_t stream = 900000;
  for (const std::size_t n : sizes)
    for (const std::size_t offset : {std::size_t(0), std::size_t(3)})
      for (const bool async : {false, true}) {
        bad += round_trip(n, offset, stream++, async);
        ++copies;
      }
  std::vector<int> results(8, 1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      int r = 0;
      try {
        for (int rep = 0; rep < 3; ++rep)
          r += round_trip(sizes[3], std::size_t(t), 950000 + t * 10 + rep, t % 2 == 1);
      } catch (const std::exception& e) {
        fmt::print("staging: thread {}: {}\n", t, e.what());
        r = 1;
      }
      results[t] = r;
    });
  for (auto& th : threads) th.join();
  for (const int r : results) bad += r;
  copies += 24;
  fmt::print("staging: {} uploads and downloads of 8 MiB to 33 MiB (24 from 8 threads at "
             "once), {} differ\n", copies, bad);
  return bad;
}

}  // namespace

TEST_CASE("gemm() on host codes in bands equals the CPU engine", "[gpu]") {
  CHECK(bands_test() == 0);
}

TEST_CASE("copies through the pinned staging buffers arrive byte for byte", "[gpu]") {
  CHECK(staging_test() == 0);
}
