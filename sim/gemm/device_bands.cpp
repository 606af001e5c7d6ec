// device_bands: gemm() on host codes in bands of D on the CUDA engine (device_bands.hpp).
#include "gemm/device_bands.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <stdexcept>

#include "format/format.hpp"
#include "gemm/device_gemm.hpp"
#include "gemm/gemm_device.hpp"
#include "gemm/gemm_split.hpp"
#include "gemm/operand.hpp"
#include "gemm/resident_block_scales.hpp"

namespace fp8sim {

bool gemm_bands_fit(const GemmSpec& s, int K, bool bias) {
  if (total_bits(s.a_format) > 8 || total_bits(s.b_format) > 8 || needs_library_gemm(s, bias))
    return false;
  const auto& in = s.model.block_scale;
  return !in || (block_route(s, K, bias) != BlockRoute::host && scale_values(in->format).high_half);
}

namespace {
constexpr long long kTile = 64;              // the float kernel's 64 x 64 tiles
// B's codes a column band, at least: each band's upload staged (kStagedBytes). With 4 MiB
// bands, copied directly, 16x4096x7168 ran at 7.5e10 to 1.4e11 MAC/s (H100, 2026-11-27).
constexpr long long kBandBytes = static_cast<long long>(kStagedBytes);
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

bool gemm_codes_in_bands(const GemmSpec& s, int M, int N, int K,
                         std::span<const std::uint8_t> A, std::span<const std::uint8_t> B,
                         std::span<const float> C, std::span<const float> sa,
                         std::span<const float> sb, std::span<float> D, const GemmBands& bands) {
  const std::size_t outputs = std::size_t(M) * N, k = std::size_t(K);
  DeviceBlock da, db, dc, dd, ds, dbad;
  da.p = device_pool_malloc(A.size());
  db.p = device_pool_malloc(B.size());
  dd.p = device_pool_malloc(outputs * sizeof(float));
  if (!C.empty()) dc.p = device_pool_malloc(outputs * sizeof(float));
  auto* a = static_cast<std::uint8_t*>(da.p);
  auto* b = static_cast<std::uint8_t*>(db.p);
  auto* c = static_cast<float*>(dc.p);
  auto* d = static_cast<float*>(dd.p);
  // Scales: one (tensor) for all, else a row of them per row of A (a_cols each) and per row
  // of B, or per block of `b_div` rows of B (block scaling). Block scales inside the MMA go
  // first and are checked there, with C on the group-sum route (whole: its finiteness decides
  // the route); other scales go with band 0's uploads. Every band reads them in place.
  const bool scaled = s.scaling != Scaling::none;
  DeviceLaunch launch;
  launch.scales_on_device = true;  // read in place (none: null)
  launch.codes_checked = true;     // below, as they arrive
  const float *dsa = nullptr, *dsb = nullptr;
  bool c_uploaded = false;  // C whole in place already (row bands: each band's rows of it)
  DeviceBlock c_whole;      // column bands: C whole for the check (each band's C is packed)
  if (const auto& block = s.model.block_scale) {
    const BlockRoute route = block_route(s, K, false);
    float* c_check = nullptr;
    if (c && route == BlockRoute::group_sums) {
      c_uploaded = bands.rows;
      if (!c_uploaded) c_whole.p = device_pool_malloc(outputs * sizeof(float));
      c_check = c_uploaded ? c : static_cast<float*>(c_whole.p);
      copy_device(c_check, C.data(), outputs * sizeof(float), true);
    }
    const auto on_device = block_scales_on_device(s, route, scale_values(block->format), sa, sb,
                                                  c_check, outputs, ds, nullptr, -1);
    if (!on_device) return false;
    dsa = on_device->a.data();
    dsb = on_device->b.data();
    launch.scale_log2[0] = on_device->launch.scale_log2[0];
    launch.scale_log2[1] = on_device->launch.scale_log2[1];
  } else if (scaled) {
    ds.p = device_pool_malloc((sa.size() + sb.size()) * sizeof(float));
    dsa = static_cast<float*>(ds.p);
    dsb = dsa + sa.size();
  }
  const ScaleShapes sh = scale_shapes(s, M, N, K);
  const std::size_t b_div = s.scaling == Scaling::block ? std::size_t(s.block) : 1;
  const int Kp = padded_k(s, K);
  const bool rows = bands.rows;
  const int extent = rows ? M : N;
  // The operand cut into bands (A's rows or B's) and the one every band reads whole.
  const std::uint8_t* cut_host = rows ? A.data() : B.data();
  const std::span<const std::uint8_t> whole_host = rows ? B : A;
  std::uint8_t* cut = rows ? a : b;
  std::uint8_t* whole = rows ? b : a;
  // Codes of formats of fewer than 256 codes: each upload searched for bytes that are no
  // code, the smallest index of A's and of B's kept in bad[0] and bad[1] (all ones: none).
  const unsigned counts[2] = {code_count(s.a_format), code_count(s.b_format)};
  unsigned long long* bad = nullptr;
  if (counts[0] < 256 || counts[1] < 256) {
    const unsigned long long none[2] = {~0ull, ~0ull};
    dbad.p = device_pool_malloc(sizeof none);
    bad = static_cast<unsigned long long*>(dbad.p);
    copy_device(bad, none, sizeof none, true);
  }
  auto find_bad = [&](bool of_a, const std::uint8_t* codes, std::size_t n, std::size_t base,
                      void* st) {
    if (bad) find_bad_codes_on_device(codes, n, counts[of_a ? 0 : 1], base, bad + !of_a, st);
  };
  // Band i, rows or columns [b0, b0 + w) of D: a GEMM of its own of m x n outputs (w x N or
  // M x w) on its rows of the cut operand (contiguous). Its part of C and D is packed on the
  // device from element dev0 = b0 n (rows) or b0 m (columns); on the host it is m lines of n
  // from element host0, N apart.
  struct Band {
    int b0, w, m, n;
    std::size_t host0, dev0;
  };
  auto band = [&](int i) {
    const int b0 = i * bands.size, w = std::min(extent, b0 + bands.size) - b0;
    return rows ? Band{b0, w, w, N, std::size_t(b0) * N, std::size_t(b0) * N}
                : Band{b0, w, M, w, std::size_t(b0), std::size_t(M) * b0};
  };
  const std::size_t pitch = std::size_t(N) * sizeof(float);
  auto in = [&](int i, void* st) {
    if (i == 0) {
      if (scaled && !s.model.block_scale) {
        copy_device_async(ds.p, 0, sa.data(), 0, sa.size_bytes(), 1, true, st);
        copy_device_async(static_cast<float*>(ds.p) + sa.size(), 0, sb.data(), 0,
                          sb.size_bytes(), 1, true, st);
      }
      copy_device_async(whole, 0, whole_host.data(), 0, whole_host.size(), 1, true, st);
      find_bad(!rows, whole, whole_host.size(), 0, st);
    }
    const Band p = band(i);
    copy_device_async(cut + p.b0 * k, 0, cut_host + p.b0 * k, 0, p.w * k, 1, true, st);
    find_bad(rows, cut + p.b0 * k, p.w * k, p.b0 * k, st);
    if (c && !c_uploaded)
      copy_device_async(c + p.dev0, p.n * sizeof(float), C.data() + p.host0, pitch,
                        p.n * sizeof(float), p.m, true, st);
  };
  auto run = [&](int i, void* st) {
    const Band p = band(i);
    std::span<const float> xa, xb;
    if (scaled) {
      xa = {dsa, sa.size()};
      xb = {dsb, sb.size()};
      if (rows && sh.a_rows > 1) xa = xa.subspan(p.b0 * sh.a_cols, p.w * sh.a_cols);
      if (!rows && sh.b_rows > 1)
        xb = xb.subspan(p.b0 / b_div * sh.b_cols, (p.w + b_div - 1) / b_div * sh.b_cols);
    }
    resident_on_device(s, p.m, p.n, K, 0, Kp, K, a + (rows ? p.b0 * k : 0),
                       b + (rows ? 0 : p.b0 * k), c ? c + p.dev0 : nullptr, xa, xb, d + p.dev0,
                       st, -1, launch);
  };
  auto out = [&](int i, void* st) {
    const Band p = band(i);
    copy_device_async(D.data() + p.host0, pitch, d + p.dev0, p.n * sizeof(float),
                      p.n * sizeof(float), p.m, false, st);
  };
  // Before anything comes back: a bad code throws the host decoder's line (A's first).
  auto checked = [&](void* st) {
    unsigned long long first[2];
    copy_device(first, bad, sizeof first, false, st);
    const std::span<const std::uint8_t> host[2] = {A, B};
    const FormatSpec* formats[2] = {&s.a_format, &s.b_format};
    for (int j = 0; j < 2; ++j)
      if (first[j] != ~0ull)
        throw std::invalid_argument(bad_code_message(*formats[j], host[j][first[j]],
                                                     first[j] / k, first[j] % k));
  };
  run_device_bands(bands.count, in, run, out, bad ? std::function<void(void*)>(checked)
                                                  : std::function<void(void*)>());
  return true;
}

}  // namespace fp8sim
