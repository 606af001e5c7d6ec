// test_gemm_cuda_bands: gemm() on host codes in bands (sim/gemm/device_bands.hpp), bit for bit.
//
// The CUDA engine's bands against the CPU engine, over models of every kernel the bands reach
// (the float kernel's float and double steps, the generic double kernel, the per-output
// kernel), E4M3 and E5M2 with NaN and Inf codes, no, tensor, row and block scales in both
// scale orders, C or none, fp32, bf16 and fp16 outputs, K with a tail after the last chunk:
// bands of rows and of columns forced at sizes that leave a short last band (and, for block
// scales, columns in whole blocks of B's scales). Then gemm() itself at shapes where it
// chooses bands (gemm_bands at an H100's or H200's 132 SMs: 2 bands of rows at 8192 x 1024 x
// 128, 4 of columns at 16 x 4096 x 4096); FP4 and FP6 codes too. FP8SIM_SEED overrides the
// seed; the first mismatch
// is printed as one line. Then block scales inside the MMA in bands (block_test): nvfp4 and
// mxf4 (the group-sum step on E2M1 codes) and mxf8f6f4 (UE8M0 scales folded into E4M3, E5M2,
// FP6 and FP4 codes), seeded valid scales, C or none, in forced bands of rows and columns and
// at the shapes where gemm() chooses bands; C or scales that one call would send to the host
// route must send the bands there too (D untouched), and a bad scale or a bad code must give
// one call's error (the CPU engine's and gemm_resident's line), D untouched. Then the uploads
// behind them: pageable memory through the library's pinned staging buffers.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "gemm/device_bands.hpp"
#include "gemm/device_gemm.hpp"
#include "gemm/gemm.hpp"
#include "error_of.hpp"
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
      if (!gemm_bands_fit(c.s, K, false)) continue;
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
  // FP4 and FP6 codes (fewer than 256: checked on the device as each band's arrive), against
  // E4M3 or each other.
  const char* narrow[][2] = {{"e2m1", "e3m2"}, {"e4m3", "e2m3"}, {"e3m2", "e5m2"}};
  for (int v = 0; v < 6; ++v, ++config) {
    const int M = 300, N = 280, K = 4 * 128 + 64;
    BandCase c = band_case(v % 2 ? "hopper-wgmma" : "blackwell-fp8", config, M, N, K, stream);
    c.s.a_format = format_by_name(narrow[v % 3][0]);
    c.s.b_format = format_by_name(narrow[v % 3][1]);
    c.A = random_codes(c.s.a_format, std::size_t(M) * K, stream++, 20);
    c.B = random_codes(c.s.b_format, std::size_t(N) * K, stream++, 20);
    if (!gemm_bands_fit(c.s, K, false)) continue;
    const std::vector<float> cpu = on_cpu(c);
    const GemmBands bands = v < 3 ? GemmBands{true, 64, 5} : GemmBands{false, 128, 3};
    if (!bands.rows && c.s.scaling == Scaling::block && bands.size % c.s.block) continue;
    std::vector<float> gpu(cpu.size());
    c.s.device = Device::cuda;
    gemm_codes_in_bands(c.s, M, N, K, c.A, c.B, c.C, c.sa, c.sb, gpu, bands);
    tally(cpu, gpu, N, t,
          fmt::format("bands: model={} a={} b={} M={} N={} K={} scaling={} C={} {} of {}",
                      c.s.model.name, c.s.a_format.name, c.s.b_format.name, M, N, K,
                      to_string(c.s.scaling), c.C.empty() ? 0 : 1,
                      bands.rows ? "rows" : "columns", bands.size));
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

// n seeded scales of format sf: the values of its finite nonzero codes within 2^-20..2^20
// (UE8M0: 41 powers of two; UE4M3: every finite nonzero code), equally likely.
std::vector<float> valid_scales(const FormatSpec& sf, std::size_t n, std::uint64_t stream) {
  std::vector<float> values;
  for (std::uint32_t c = 0; c < code_count(sf); ++c) {
    const double x = decode(sf, c);
    if (std::isfinite(x) && x != 0.0 && std::fabs(std::log2(x)) <= 20) values.push_back(float(x));
  }
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = values[random_u64(seed(), stream, i) % values.size()];
  return v;
}

// A GEMM of a block-scaled model (its own MX scaling): nvfp4 and mxf4 on E2M1 codes,
// mxf8f6f4 on pairs of E4M3, E5M2 (NaN and Inf codes in some), FP6 and FP4 codes; fp32 or
// bf16 outputs, promotion never or every 128, C (random; adversarial for some mxf8f6f4: Inf,
// NaN, zeros, subnormals) by `with_c`.
BandCase block_case(const char* model, int config, int M, int N, int K, bool with_c,
                    std::uint64_t& stream) {
  BandCase c{GemmSpec{}, M, N, K, {}, {}, {}, {}, {}};
  GemmSpec& s = c.s;
  s.model = accumulator_by_name(model);
  use_model_block_scales(s);
  const char* pairs[][2] = {{"e4m3", "e4m3"}, {"e5m2", "e2m1"}, {"e3m2", "e2m3"},
                            {"e2m1", "e4m3"}};
  const bool group_sums = s.model.group_sum > 1;
  s.a_format = format_by_name(group_sums ? "e2m1" : pairs[config % 4][0]);
  s.b_format = format_by_name(group_sums ? "e2m1" : pairs[config % 4][1]);
  s.out_type = format_by_name(config % 3 == 2 ? "bf16" : "fp32");
  s.promote_every = config % 2 ? 0 : 128;
  const int special = config % 4 == 0 ? 20 : 0;
  c.A = random_codes(s.a_format, std::size_t(M) * K, stream++, special);
  c.B = random_codes(s.b_format, std::size_t(N) * K, stream++, special);
  const ScaleShapes sh = scale_shapes(s, M, N, K);
  const FormatSpec& sf = s.model.block_scale->format;
  c.sa = valid_scales(sf, sh.a_rows * sh.a_cols, stream++);
  c.sb = valid_scales(sf, sh.b_rows * sh.b_cols, stream++);
  if (with_c)
    c.C = !group_sums && config % 4 == 3 ? adversarial_c(std::size_t(M) * N, stream++)
                                         : random_floats(std::size_t(M) * N, stream++, -20, 12);
  return c;
}

std::string block_what(const char* model, const BandCase& c, const GemmBands& bands) {
  return fmt::format("bands: model={} a={} b={} M={} N={} K={} promote={} out={} C={} {} of {}",
                     model, c.s.a_format.name, c.s.b_format.name, c.M, c.N, c.K,
                     c.s.promote_every, c.s.out_type.name, c.C.empty() ? 0 : 1,
                     bands.rows ? "rows" : "columns", bands.size);
}

// The outcome of gemm_codes_in_bands on c: whether it ran (false: the host route's), its
// error, and whether D is as it was where it did not run or threw.
struct BandOutcome {
  bool ran = false;
  std::string error;
  bool untouched = true;
  std::vector<float> d;
};

BandOutcome in_bands(BandCase c, const GemmBands& bands) {
  BandOutcome o;
  constexpr float kSentinel = 1234.5f;
  o.d.assign(std::size_t(c.M) * c.N, kSentinel);
  c.s.device = Device::cuda;
  o.error = test::error_of<std::invalid_argument>([&] {
    o.ran = gemm_codes_in_bands(c.s, c.M, c.N, c.K, c.A, c.B, c.C, c.sa, c.sb, o.d, bands);
  });
  o.untouched = std::all_of(o.d.begin(), o.d.end(), [](float x) { return x == kSentinel; });
  return o;
}

// gemm_resident's error on device copies of c's codes (no C): one call's.
std::string resident_error(BandCase c) {
  DeviceBlock a, b, d;
  a.p = device_pool_malloc(c.A.size());
  b.p = device_pool_malloc(c.B.size());
  d.p = device_pool_malloc(std::size_t(c.M) * c.N * sizeof(float));
  copy_device(a.p, c.A.data(), c.A.size(), true);
  copy_device(b.p, c.B.data(), c.B.size(), true);
  c.s.device = Device::cuda;
  return test::error_of<std::invalid_argument>([&] {
    gemm_resident(c.s, c.M, c.N, c.K, static_cast<const std::uint8_t*>(a.p),
                  static_cast<const std::uint8_t*>(b.p), nullptr, c.sa, c.sb,
                  static_cast<float*>(d.p));
  });
}

// gemm() on c's host codes on the device at c's shape (too small for bands): D and its error.
struct UnbandedOutcome {
  std::vector<float> d;
  std::string error;
};
UnbandedOutcome unbanded(BandCase c) {
  UnbandedOutcome u;
  u.d.assign(std::size_t(c.M) * c.N, 0.0f);
  c.s.device = Device::cuda;
  REQUIRE(gemm_bands(c.s, c.M, c.N, c.K, device_sm_count()).count < 2);
  u.error = test::error_of<std::invalid_argument>(
      [&] { gemm(c.s, c.M, c.N, c.K, c.A, c.B, c.C, c.sa, c.sb, u.d); });
  return u;
}

std::string cpu_error(BandCase c) {
  std::vector<float> D(std::size_t(c.M) * c.N);
  c.s.device = Device::cpu;
  return test::error_of<std::invalid_argument>(
      [&] { gemm(c.s, c.M, c.N, c.K, c.A, c.B, c.C, c.sa, c.sb, D); });
}

int block_test() {
  Tally t;
  std::uint64_t stream = 1200000;
  const char* models[] = {"nvfp4", "mxf4", "mxf8f6f4"};
  int banded = 0, expected = 0, config = 0;
  // 1. Forced bands of rows and columns, short last bands: every run in bands, the CPU's bits.
  const GemmBands forced[] = {{true, 64, 5}, {true, 128, 3}, {false, 64, 5}, {false, 128, 3}};
  for (const char* model : models)
    for (int v = 0; v < 4; ++v, ++config) {
      const int M = 300, N = 280, K = 4 * 128 + 64;
      const BandCase c = block_case(model, config, M, N, K, v % 2 == 1, stream);
      const std::vector<float> cpu = on_cpu(c);
      for (const GemmBands& bands : forced) {
        ++expected;
        const BandOutcome o = in_bands(c, bands);
        banded += o.ran && o.error.empty();
        tally(cpu, o.d, N, t, block_what(model, c, bands) + (o.ran ? "" : " (did not run)") +
                                 (o.error.empty() ? "" : " error: " + o.error));
      }
    }
  // 2. gemm() choosing its own bands (gemm_bands at this GPU's SMs): rows and decode columns.
  const int sms = device_sm_count();
  int chosen = 0, shapes = 0;
  for (const char* model : models)
    for (const auto& [M, N, K] : {std::tuple{8192, 1024, 64}, std::tuple{16, 4096, 4096}}) {
      const BandCase c = block_case(model, config, M, N, K, (shapes + config) % 2 == 1, stream);
      ++config;
      ++shapes;
      const GemmBands b = gemm_bands(c.s, M, N, K, sms);
      const bool fit = gemm_bands_fit(c.s, K, false) && b.count >= 2;
      const std::vector<float> cpu = on_cpu(c);
      if (fit) {
        ++expected;
        const BandOutcome o = in_bands(c, b);
        banded += o.ran && o.error.empty();
        chosen += o.ran && o.error.empty();
        tally(cpu, o.d, N, t, block_what(model, c, b) + (o.ran ? "" : " (did not run)"));
      }
      std::vector<float> gpu(cpu.size());
      BandCase g = c;
      g.s.device = Device::cuda;
      gemm(g.s, M, N, K, g.A, g.B, g.C, g.sa, g.sb, gpu);
      tally(cpu, gpu, N, t, fmt::format("bands: gemm() {}: {} bands of {} {}",
                                        block_what(model, c, b), b.count, b.size,
                                        b.rows ? "rows" : "columns"));
    }
  // 3. Where one call goes to the host route, so do the bands, D untouched: an Inf in C on
  // the group-sum route, a NaN scale (a UE4M3 and UE8M0 value) there, UE8M0 scales too
  // large to fold exactly into E4M3 (2^127).
  int host_route = 0;
  const GemmBands rows_of_64{true, 64, 5};
  for (int v = 0; v < 3; ++v) {
    BandCase c = block_case(v == 2 ? "mxf8f6f4" : v == 0 ? "nvfp4" : "mxf4", 0, 300, 280, 576,
                            v == 0, stream);
    if (v == 0) c.C[c.C.size() / 2] = INFINITY;
    if (v == 1) c.sb[7] = NAN;
    if (v == 2) c.sa[c.sa.size() - 1] = 0x1p127f;
    const BandOutcome o = in_bands(c, rows_of_64);
    host_route += !o.ran && o.error.empty() && o.untouched;
    // gemm() at this shape (too small for bands at any GPU): the device's check of its scales
    // and C sends it to the host route too, with the CPU's bits.
    const UnbandedOutcome u = unbanded(c);
    tally(on_cpu(c), u.d, c.N, t, fmt::format("unbanded gemm() {}x{}x{} case {}{}", c.M, c.N,
                                              c.K, v, u.error.empty() ? "" : ": " + u.error));
  }
  // 4. Bad inputs: one call's error (gemm_resident's, and gemm()'s unbanded), D untouched. A scale that is not a value (1 + 2^-4: no
  // UE4M3 or UE8M0 value) among A's (bands of rows) or B's (of columns); codes beyond their
  // format's (FP4, FP6): in B's third band of columns, or in A's fourth band of rows and in B
  // (A's reported).
  int errors = 0, error_cases = 0;
  for (const char* model : models)
    for (int v = 0; v < 4; ++v) {
      BandCase c = block_case(model, config++, 300, 280, 576, false, stream);
      const GemmBands bands = v % 2 ? GemmBands{false, 64, 5} : rows_of_64;
      const std::size_t at = random_u64(seed(), stream++, 0) % c.sa.size();
      if (v == 0) c.sa[at] = 1.0625f;
      if (v == 1) c.sb[at % c.sb.size()] = 1.0625f;
      const bool bad_b = v >= 2 && total_bits(c.s.b_format) < 8;
      const bool bad_a = v == 3 && total_bits(c.s.a_format) < 8;
      if (bad_b) c.B[std::size_t(150) * c.K + 17] = 0xf7;
      if (bad_a) c.A[std::size_t(200) * c.K + 5] = 0x80;
      if (v >= 2 && !bad_a && !bad_b) continue;  // every byte a code
      ++error_cases;
      const std::string want = cpu_error(c), resident = resident_error(c);
      const BandOutcome o = in_bands(c, bands);
      const UnbandedOutcome u = unbanded(c);
      const bool same = !want.empty() && o.error == want && resident == want && o.untouched &&
                        u.error == want;
      errors += same;
      if (!same && t.bad++ == 0)
        t.first = fmt::format(
            "seed={} {}: cpu error '{}', gemm_resident '{}', bands '{}'{}, unbanded gemm() '{}'",
            seed(), block_what(model, c, bands), want, resident, o.error,
            o.untouched ? "" : ", D written", u.error);
    }
  fmt::print("bands, block scales: {} configurations, {} outputs, {} differ; {} of {} ran in "
             "bands; gemm() chose bands at {} of {} shapes; {} of 3 to the host route; {} of {} "
             "errors as one call's{}\n", t.configs, t.outputs, t.bad, banded, expected, chosen,
             shapes, host_route, errors, error_cases, t.bad ? "; first: " + t.first : "");
  return t.bad == 0 && banded == expected && chosen == shapes && host_route == 3 &&
                 errors == error_cases && error_cases >= 10
             ? 0
             : 1;
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
  CHECK(block_test() == 0);
}

TEST_CASE("copies through the pinned staging buffers arrive byte for byte", "[gpu]") {
  CHECK(staging_test() == 0);
}
