// device_bands: gemm() on host codes in bands of D on the CUDA engine (device_bands.hpp).
#include "gemm/device_bands.hpp"

#include <algorithm>
#include <numeric>

#include "format/format.hpp"
#include "gemm/device_gemm.hpp"
#include "gemm/gemm_device.hpp"
#include "gemm/gemm_split.hpp"

namespace fp8sim {

bool gemm_bands_fit(const GemmSpec& s, bool bias) {
  return total_bits(s.a_format) == 8 && total_bits(s.b_format) == 8 && !s.model.block_scale &&
         !needs_library_gemm(s, bias);
}

namespace {
constexpr long long kTile = 64;              // the float kernel's 64 x 64 tiles
constexpr long long kBandBytes = 4LL << 20;  // B's codes a column band, at least
constexpr int kMaxRowBands = 16, kMaxColumnBands = 8;

long long round_up(long long x, long long unit) { return (x + unit - 1) / unit * unit; }

GemmBands bands_of(bool rows, long long extent, long long count, long long unit) {
  if (count < 2) return {};
  const long long size = round_up((extent + count - 1) / count, unit);
  const long long n = (extent + size - 1) / size;
  if (n < 2) return {};
  return {rows, static_cast<int>(size), static_cast<int>(n)};
}
}  // namespace

GemmBands gemm_bands(const GemmSpec& s, int M, int N, int K, int sms) {
  // Rows: each band at least two waves of tiles, so that no band starves the GPU.
  const long long waves2 = 2LL * 3 * sms, col_tiles = (N + kTile - 1) / kTile;
  const long long rows_min = kTile * ((waves2 + col_tiles - 1) / col_tiles);
  if (M >= 2 * rows_min)
    return bands_of(true, M, std::min<long long>(kMaxRowBands, M / rows_min), kTile);
  // Columns: few rows (decode), where copying B is most of the time; a band holds whole
  // blocks of B's block scales (block x block elements each).
  const long long b_bytes = static_cast<long long>(N) * K;
  if (b_bytes >= 2 * kBandBytes) {
    const long long unit = s.scaling == Scaling::block ? std::lcm<long long>(kTile, s.block)
                                                       : kTile;
    return bands_of(false, N, std::min<long long>(kMaxColumnBands, b_bytes / kBandBytes), unit);
  }
  return {};
}

void gemm_codes_in_bands(const GemmSpec& s, int M, int N, int K,
                         std::span<const std::uint8_t> A, std::span<const std::uint8_t> B,
                         std::span<const float> C, std::span<const float> sa,
                         std::span<const float> sb, std::span<float> D, const GemmBands& bands) {
  const std::size_t outputs = std::size_t(M) * N, k = std::size_t(K);
  DeviceBlock da, db, dc, dd, ds;
  da.p = device_pool_malloc(A.size());
  db.p = device_pool_malloc(B.size());
  dd.p = device_pool_malloc(outputs * sizeof(float));
  if (!C.empty()) dc.p = device_pool_malloc(outputs * sizeof(float));
  const bool scaled = s.scaling != Scaling::none;
  if (scaled) ds.p = device_pool_malloc((sa.size() + sb.size()) * sizeof(float));
  auto* a = static_cast<std::uint8_t*>(da.p);
  auto* b = static_cast<std::uint8_t*>(db.p);
  auto* c = static_cast<float*>(dc.p);
  auto* d = static_cast<float*>(dd.p);
  auto* dsa = static_cast<float*>(ds.p);
  float* dsb = scaled ? dsa + sa.size() : nullptr;
  // Scales: one (tensor) for all, else a row of them per row of A (a_cols each) and per row
  // of B, or per block of `b_div` rows of B (block scaling).
  const ScaleShapes sh = scale_shapes(s, M, N, K);
  const std::size_t b_div = s.scaling == Scaling::block ? std::size_t(s.block) : 1;
  const int Kp = padded_k(s, K);
  const bool rows = bands.rows;
  const int extent = rows ? M : N;
  auto range = [&](int i) {
    const int b0 = i * bands.size;
    return std::pair<int, int>{b0, std::min(extent, b0 + bands.size)};
  };
  // In row bands a band's rows of A, C and D are contiguous. In column bands its rows of B
  // are, and its M x w part of C and D is kept packed on the device at M * b0, so that the
  // kernels see a GEMM of its own; the copies to and from the host are strided.
  auto in = [&](int i, void* st) {
    if (i == 0) {
      if (scaled) {
        copy_device_async(dsa, 0, sa.data(), 0, sa.size_bytes(), 1, true, st);
        copy_device_async(dsb, 0, sb.data(), 0, sb.size_bytes(), 1, true, st);
      }
      if (rows) copy_device_async(b, 0, B.data(), 0, B.size(), 1, true, st);
      else copy_device_async(a, 0, A.data(), 0, A.size(), 1, true, st);
    }
    const auto [b0, b1] = range(i);
    const std::size_t w = std::size_t(b1 - b0);
    if (rows) {
      copy_device_async(a + b0 * k, 0, A.data() + b0 * k, 0, w * k, 1, true, st);
      if (c) copy_device_async(c + std::size_t(b0) * N, 0, C.data() + std::size_t(b0) * N, 0,
                               w * N * sizeof(float), 1, true, st);
    } else {
      copy_device_async(b + b0 * k, 0, B.data() + b0 * k, 0, w * k, 1, true, st);
      if (c) copy_device_async(c + std::size_t(M) * b0, w * sizeof(float), C.data() + b0,
                               std::size_t(N) * sizeof(float), w * sizeof(float), M, true, st);
    }
  };
  DeviceLaunch launch;
  launch.scales_on_device = true;  // read in place (none: null)
  auto run = [&](int i, void* st) {
    const auto [b0, b1] = range(i);
    const int w = b1 - b0;
    std::span<const float> xa, xb;
    if (scaled) {
      xa = {dsa, sa.size()};
      xb = {dsb, sb.size()};
      if (rows && sh.a_rows > 1) xa = xa.subspan(b0 * sh.a_cols, w * sh.a_cols);
      if (!rows && sh.b_rows > 1)
        xb = xb.subspan(b0 / b_div * sh.b_cols, (w + b_div - 1) / b_div * sh.b_cols);
    }
    if (rows)
      resident_on_device(s, w, N, K, 0, Kp, K, a + b0 * k, b,
                         c ? c + std::size_t(b0) * N : nullptr, xa, xb, d + std::size_t(b0) * N,
                         st, -1, launch);
    else
      resident_on_device(s, M, w, K, 0, Kp, K, a, b + b0 * k, c ? c + std::size_t(M) * b0 : nullptr,
                         xa, xb, d + std::size_t(M) * b0, st, -1, launch);
  };
  auto out = [&](int i, void* st) {
    const auto [b0, b1] = range(i);
    const std::size_t w = std::size_t(b1 - b0);
    if (rows)
      copy_device_async(D.data() + std::size_t(b0) * N, 0, d + std::size_t(b0) * N, 0,
                        w * N * sizeof(float), 1, false, st);
    else
      copy_device_async(D.data() + b0, std::size_t(N) * sizeof(float), d + std::size_t(M) * b0,
                        w * sizeof(float), w * sizeof(float), M, false, st);
  };
  run_device_bands(bands.count, in, run, out);
}

}  // namespace fp8sim
