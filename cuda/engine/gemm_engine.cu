// gemm_engine: the CUDA GEMM engine behind GemmSpec::device == cuda (run_device_gemm).
//
// Path choice, from the model's data and the host's step (DeviceGemm::fast_step, decided by
// sim/gemm/gemm_path.cpp's choose_gemm_path for both engines):
//   tiled_gemm_f32  float steps and double steps of up to 25 fraction bits cut toward zero
//                   (gemm_engine_tiled_f32.cuh), and
//   tiled_gemm      the other double steps (gemm_engine_tiled.cuh); both for models with c
//                   join, or c add with an fp32 output, an e8mX output rounded rz/rne and a
//                   step of 16 or 32 products (no zero exponent that matters);
//   tiled_group_sums  the FP4 block-scaled step on group sums (gemm_engine_tiled_gs.cuh:
//                   kind::mxf4, kind::mxf4nvf4) on operands of small integers (e2m1);
//   K-parallel    any of the three tiled kernels, when its grid is too small to fill the GPU
//                 (decode shapes): chunks of K in parallel, then each output's promotion
//                 chain in chunk order (gemm_engine_kpar.cuh); the same bits;
//   dot_kernel    one thread per output through gemm_engine_step.cuh's dot_output (fast
//                 steps where exact, group-sum steps for FP4 block-scaled models, the
//                 reference step with block scales for block-scaled models on wider operands
//                 (gemm_engine_scaled.cuh), reference steps elsewhere): every other model,
//                 every output the tiled kernel hands back (kRedoBits), and batched dot
//                 products.
// Operands are uploaded once as values, or (resident GEMMs: codes already on the device)
// read in place there (the float kernel decodes each slab through a table in shared memory,
// the others each element through the format's table: no decoded copy of the operands, and
// the float kernel makes no prepared one; DeviceLaunch::codes -1 decodes them once instead);
// alignment exponents are derived on the GPU; no M x N x K temporaries. Every output is one
// fixed sequence along K, so results do not depend on the launch configuration or the stream.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gemm/device_gemm.hpp"
#include "engine/device_memory.cuh"
#include "engine/gemm_engine_tiled.cuh"
#include "engine/gemm_engine_tiled_f32.cuh"
#include "engine/gemm_engine_tiled_gs.cuh"
#include "engine/kernel_events.cuh"

namespace fp8sim {
namespace {

using gpu::FastPath;
using gpu::Params;

using gpu::check;
using gpu::device_alloc;
using gpu::DeviceBuffer;
using gpu::upload;

// Resident GEMMs: codes -> values through the format's table, once per element; the smallest
// index of a code beyond the table goes to *bad (initialised to n).
// Values of an n-element operand of K columns: element (r, k) is code r * ld + k0 + k for
// k < cols, +0 beyond (DeviceGemm::code_ld); a bad code's element index goes to `bad`.
// out null: the check alone (codes read in place, Params::codes).
__global__ void decode_kernel(const unsigned char* codes, std::size_t n, int K, int ld, int k0,
                              int cols, const float* lut, int lut_size, float* out,
                              unsigned long long* bad) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t r = i / unsigned(K);
    const int k = int(i - r * unsigned(K));
    if (k >= cols) {
      if (out) out[i] = 0.0f;
      continue;
    }
    const int c = codes[r * unsigned(ld) + unsigned(k0 + k)];
    if (c >= lut_size) {
      atomicMin(bad, static_cast<unsigned long long>(i));
      if (out) out[i] = 0.0f;
    } else if (out) {
      out[i] = lut[c];
    }
  }
}

// Resident operands on the device: both code tables (256 values each, 0 beyond the format's
// codes) in the device's cached copy (cached_constant: uploaded once per format pair); where a
// kernel decodes or checks codes, one allocation of this call holds the two bad-code indices
// (all ones: none) and, unless the codes are read in place (`in_place`: Params::codes), A's
// and B's values decoded. `checked`: a code check ran, to be read after the GEMM (one
// synchronisation); formats with 256 codes have none to check when read in place.
struct ResidentOperands {
  DeviceBuffer keep;
  const float* A = nullptr;
  const float* B = nullptr;
  const float* a_table = nullptr;
  const float* b_table = nullptr;
  unsigned long long* bad = nullptr;  // device: first bad index of A, then of B
  bool checked = false;
};

ResidentOperands decode_resident(const DeviceGemm& g, std::size_t a_n, std::size_t b_n,
                                 bool in_place, cudaStream_t st) {
  const std::size_t la = std::size_t(g.a_lut_size), lb = std::size_t(g.b_lut_size);
  std::vector<float> tables(2 * 256, 0.0f);
  std::copy(g.a_lut, g.a_lut + std::min<std::size_t>(la, 256), tables.begin());
  std::copy(g.b_lut, g.b_lut + std::min<std::size_t>(lb, 256), tables.begin() + 256);
  ResidentOperands r;
  const float* dev_tables =
      static_cast<const float*>(gpu::cached_constant(tables.data(), tables.size() * sizeof(float)));
  r.a_table = dev_tables;
  r.b_table = dev_tables + 256;
  // A kernel runs for an operand that is decoded (not in place) or whose format has fewer
  // than 256 codes (a byte may be no code: checked).
  const bool run_a = a_n > 0 && (!in_place || g.a_lut_size < 256);
  const bool run_b = b_n > 0 && (!in_place || g.b_lut_size < 256);
  r.checked = (run_a && g.a_lut_size < 256) || (run_b && g.b_lut_size < 256);
  if (!run_a && !run_b) return r;
  // The two indices first (8-byte aligned), then the values.
  r.keep = device_alloc(4 * sizeof(float) + (in_place ? 0 : (a_n + b_n) * sizeof(float)), st);
  float* base = static_cast<float*>(r.keep.get());
  r.bad = reinterpret_cast<unsigned long long*>(base);
  check(cudaMemsetAsync(r.bad, 0xff, 2 * sizeof(unsigned long long), st), "memset");
  float* values = in_place ? nullptr : base + 4;
  const int ld = g.code_ld > 0 ? g.code_ld : g.K, cols = g.code_ld > 0 ? g.code_cols : g.K;
  auto launch = [&](bool run, const unsigned char* codes, std::size_t n, const float* lut,
                    int size, float* out, unsigned long long* bad) {
    if (!run) return;
    decode_kernel<<<gpu::blocks_for(n), 256, 0, st>>>(codes, n, g.K, ld, g.code_k0, cols, lut,
                                                     size, out, bad);
    check(cudaGetLastError(), "decode kernel launch");
  };
  launch(run_a, g.A_codes, a_n, r.a_table, g.a_lut_size, values, r.bad);
  launch(run_b, g.B_codes, b_n, r.b_table, g.b_lut_size, in_place ? nullptr : values + a_n,
         r.bad + 1);
  r.A = values;
  r.B = in_place ? nullptr : values + a_n;
  return r;
}

// After the GEMM's synchronisation: a code beyond its table throws std::invalid_argument
// naming the code, its (row, col) and the format.
void check_resident_codes(const DeviceGemm& g, std::size_t a_n, std::size_t b_n,
                          const unsigned long long first[2]) {
  const std::size_t n[2] = {a_n, b_n};
  const unsigned char* codes[2] = {g.A_codes, g.B_codes};
  const char* names[2] = {g.a_name, g.b_name};
  for (int i = 0; i < 2; ++i) {
    if (first[i] >= n[i]) continue;
    const unsigned long long row = first[i] / unsigned(g.K);
    const unsigned long long col = first[i] % unsigned(g.K) + unsigned(g.code_k0);
    const unsigned long long ld = g.code_ld > 0 ? unsigned(g.code_ld) : unsigned(g.K);
    unsigned char code = 0;
    check(cudaMemcpy(&code, codes[i] + row * ld + col, 1, cudaMemcpyDeviceToHost), "download");
    char msg[160];
    std::snprintf(msg, sizeof msg, "code %#x at (%llu, %llu) is not a code of %s",
                  unsigned(code), row, col, names[i]);
    throw std::invalid_argument(msg);
  }
}

template <bool CODES>
__global__ void dot_kernel(const Params p) {
  if (p.redo_only && p.redo_any != nullptr && *p.redo_any == 0u) return;  // nothing handed back
  const std::size_t outputs = std::size_t(p.g.M) * p.g.N;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < outputs;
       i += std::size_t(gridDim.x) * blockDim.x) {
    if (p.redo_only && __float_as_uint(p.g.D[i]) != gpu::kRedoBits) continue;
    const int a_row = p.g.batched ? int(i) : int(i / p.g.N);
    const int b_row = p.g.batched ? int(i) : int(i % p.g.N);
    p.g.D[i] = gpu::dot_output<CODES>(p, a_row, b_row, p.g.C ? p.g.C[i] : 0.0f);
  }
}

// Tile shapes of the tiled kernels:
//   float steps (tiled_gemm_f32): chosen by shape in launch_tiled_f32;
//   double steps (tiled_gemm):     64 x 64 outputs a block, 4 x 4 a thread, 256 threads, two
//                                  blocks an SM (double sums take two registers).
struct TileF64 { static constexpr int BM = 64, BN = 64, BK = 32, TM = 4, TN = 4; };

// Kernel's dynamic shared-memory limit raised to `bytes` once per device (the attribute is
// the instance's own, so is the flag: one per Kernel).
template <auto Kernel>
void allow_shared_memory(int bytes) {
  static std::atomic<std::uint64_t> done{0};
  gpu::once_per_device(done, gpu::current_device(), [bytes] {
    check(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
          "shared memory limit");
  });
}

// The float kernel: both operands prepared (transposed, padded, exponents, sign bits) once
// per GEMM, then the tiles. The prepared copies live on the stream until the kernel is done.
template <int G, bool RNE, int MODE, int TM, int TN, int BM, int BN, int MINB, bool WIDE = false,
          int WX = BN / TN, bool CHAIN = false>
void launch_f32_shape(const Params& p, cudaStream_t st) {
  gpu::TileParams tp;
  tp.p = p;
  const int K = p.g.K;
  DeviceBuffer keep;
  // Folded block scales (DeviceGemm::fold): A's and B's in a_scale's and b_scale's layout.
  gpu::TileFold fold_a, fold_b;
  if (p.g.fold) {
    const DeviceGemm& g = p.g;
    fold_a = {g.sa, g.a_cols, 1, g.scale_block, g.a_bcast};
    fold_b = {g.sb, g.b_cols, g.b_div, g.scale_block, g.b_bcast};
  }
  constexpr int kValueBytes = WIDE ? 8 : 4;  // the tiles' values (gpu::tile_value)
  int smem = gpu::tiled_f32_smem_bytes(BM, BN, TM, TN, kValueBytes);
  static_assert(gpu::tiled_f32_smem_bytes(BM, BN, TM, TN, kValueBytes) % 16 == 0,
                "code tables' alignment");
  if (p.codes) {  // read in place: the operands as codes, the tables after the tiles
    const DeviceGemm& g = p.g;
    const int ld = g.code_ld > 0 ? g.code_ld : K, cols = g.code_ld > 0 ? g.code_cols : K;
    auto operand = [&](const unsigned char* code, const float* table, int rows, int align_min) {
      gpu::TileOperand o;
      o.code = code + g.code_k0;
      o.table = table;
      o.rows = rows;
      o.ld = ld;
      o.cols = cols;
      o.align_min = align_min;
      o.vec16 = ld % 16 == 0 && reinterpret_cast<std::uintptr_t>(o.code) % 16 == 0;
      return o;
    };
    tp.ta = operand(g.A_codes, p.a_table, g.M, g.a_align_min);
    tp.tb = operand(g.B_codes, p.b_table, g.N, g.b_align_min);
    tp.ta.fold = fold_a;
    tp.tb.fold = fold_b;
    smem += gpu::kTileLutBytes;
  } else {
    // Rows padded to whole tiles and to whole 32-row blocks of prepare_tile_operand, K to
    // whole slabs.
    const int kp = (K + gpu::kTileBk - 1) / gpu::kTileBk * gpu::kTileBk;
    constexpr int RM = BM > 32 ? BM : 32, RN = BN > 32 ? BN : 32;
    static_assert(RM % BM == 0 && RN % BN == 0 && RM % 32 == 0 && RN % 32 == 0);
    const int mp = (p.g.M + RM - 1) / RM * RM, np = (p.g.N + RN - 1) / RN * RN;
    const std::size_t a_n = std::size_t(mp) * kp, b_n = std::size_t(np) * kp;
    const std::size_t bytes = a_n * (4 + 2) + b_n * (4 + 4) + (a_n + b_n) / 32 * 4;
    keep = device_alloc(bytes, st);
    unsigned char* at = static_cast<unsigned char*>(keep.get());
    auto take = [&](std::size_t n) {
      void* q = at;
      at += (n + 15) / 16 * 16;
      return q;
    };
    float* av = static_cast<float*>(take(a_n * 4));
    float* bv = static_cast<float*>(take(b_n * 4));
    void* ae = take(a_n * 2);
    void* be = take(b_n * 4);
    unsigned* ab = static_cast<unsigned*>(take(a_n / 8));
    unsigned* bb = static_cast<unsigned*>(take(b_n / 8));
    gpu::prepare_tile_operand<false><<<dim3(mp / 32, kp / 32), dim3(32, 8), 0, st>>>(
        p.g.A, p.g.M, K, p.g.a_align_min, fold_a, av, ae, ab, mp, kp);
    gpu::prepare_tile_operand<true><<<dim3(np / 32, kp / 32), dim3(32, 8), 0, st>>>(
        p.g.B, p.g.N, K, p.g.b_align_min, fold_b, bv, be, bb, np, kp);
    check(cudaGetLastError(), "operand preparation launch");
    tp.ta = {av, ae, ab, mp, kp};
    tp.tb = {bv, be, bb, np, kp};
  }
  constexpr auto kernel = gpu::tiled_gemm_f32<G, RNE, MODE, TM, TN, BM, BN, MINB, WIDE, WX, CHAIN>;
  allow_shared_memory<kernel>(gpu::tiled_f32_smem_bytes(BM, BN, TM, TN, kValueBytes) +
                              gpu::kTileLutBytes);
  const dim3 grid((p.g.N + BN - 1) / BN, (p.g.M + BM - 1) / BM);
  const long long blocks = static_cast<long long>(grid.x) * grid.y;
  if (const int pass = gpu::k_parallel_pass(p, blocks, MINB, gpu::kTileBk)) {
    gpu::run_k_parallel(p, pass, blocks, MINB, [&](const gpu::ChunkParts& cp, int slices) {
      gpu::TileParams sliced = tp;
      sliced.p.chunks = cp;
      kernel<<<dim3(grid.x, grid.y, slices), (BM / TM) * (BN / TN), smem, st>>>(sliced);
    }, st);
    return;
  }
  kernel<<<grid, (BM / TM) * (BN / TN), smem, st>>>(tp);
  check(cudaGetLastError(), "tiled kernel launch");
}

template <int G, bool RNE, int MODE>
void launch_tiled_f32(const Params& p, cudaStream_t st) {
  // The 64 x 64 tiles (8 x 4 outputs a thread, three blocks an SM) where they give every SM
  // a block; for fewer outputs (small M: skinny, decode-like GEMMs) smaller tiles and thread
  // tiles, for more threads (H100, 2026-11-25: 16x4096x7168 at 5.5e11 MAC/s with 16 x 64
  // tiles against 2.9e11 with 64 x 64; 64x7168x16384 at 2.4e12 with 32 x 64 against 1.9e12).
  // Where the 64 x 64 tiles run K-parallel (gemm_engine_kpar.cuh: chunks of K fill the GPU),
  // smaller tiles only where M is at most 32 (less of the tile wasted on rows beyond M). For
  // M <= 16, 4 x 2 outputs a thread, six blocks an SM (H100, 2026-11-26, K-parallel:
  // 16x4096x7168 at 2.21e12 against 1.86e12 with 2 x 2 and four; 2 x 4 on 16 x 128 tiles
  // 1.99e12; 4 x 1 1.98e12; 4 x 2 with eight blocks 2.22e12 but slower at 8 and 16 x 14336
  // rows). Between one and six 64 x 64 blocks an SM the 64 x 64 tiles, not the 32 x 64 ones
  // (H100, 2026-11-27, promoted never / every 128 with block scales, kernels: 3072x1024x4096
  // 4.53e12 / 4.39e12 against 3.69e12 / 3.60e12, 1024x1024x4096 4.06e12 / 3.92e12 against
  // 3.46e12 / 3.37e12; below one, 4096x128x1024, 2.73e12 / 2.58e12 against 3.03e12 /
  // 2.99e12). Every tile shape gives the same bits. The 64 x 64 tiles' warps each run the
  // thread tiles of 8 columns by 4 rows (32 x 32 outputs: tiled_gemm_f32's WX), whose operands
  // take fewer shared-memory wavefronts than 16 columns by 2 rows' (64 x 16 outputs). H100,
  // 2026-11-27, kernels, never promoted, hopper-wgmma, twice each: 4096^3 4.72e12 / 4.76e12 to
  // 4.77e12 / 4.80e12, 4096x1024x4096 4.59e12 / 4.60e12 to 4.62e12 / 4.63e12, 4096x4096x1024
  // 4.67e12 / 4.66e12 to 4.69e12 / 4.70e12, 1024x1024x4096 the same.
  const long long big_blocks = (p.g.M + 63LL) / 64 * ((p.g.N + 63LL) / 64);
  if (big_blocks < 2LL * 3 * gpu::sm_count()) {
    if (p.g.M <= 16) return launch_f32_shape<G, RNE, MODE, 4, 2, 16, 64, 6>(p, st);
    if (p.g.M <= 32 || (big_blocks < gpu::sm_count() &&
                        gpu::k_parallel_pass(p, big_blocks, 3, gpu::kTileBk) == 0))
      return launch_f32_shape<G, RNE, MODE, 4, 2, 32, 64, 3>(p, st);
  }
  // Terms cut toward zero whose step sums fit 22 bits ((G + 1) 2^(frac + 2): hopper-wgmma's
  // frac 13) on chains (gemm_engine_tiled_f32.cuh, float_chain).
  if constexpr (!RNE)
    if ((G + 1LL) << (p.g.model.frac_bits + 2) <= (1LL << 22))
      return launch_f32_shape<G, RNE, MODE, 8, 4, 64, 64, 3, false, 8, true>(p, st);
  launch_f32_shape<G, RNE, MODE, 8, 4, 64, 64, 3, false, 8>(p, st);
}

// The float kernel's instance: the step length, the cut, and how c enters (gpu::TileMode).
template <int G>
void launch_tiled_f32_for(const Params& p, bool rne, cudaStream_t st) {
  const DeviceModel& m = p.g.model;
  const int mode = m.c_entry == 2 ? gpu::kAddFp32 : m.output_rounding == kRne ? gpu::kJoinRne
                                                                              : gpu::kJoinRz;
  if (rne) {
    if (mode == gpu::kJoinRz) launch_tiled_f32<G, true, gpu::kJoinRz>(p, st);
    else if (mode == gpu::kJoinRne) launch_tiled_f32<G, true, gpu::kJoinRne>(p, st);
    else launch_tiled_f32<G, true, gpu::kAddFp32>(p, st);
  } else {
    if (mode == gpu::kJoinRz) launch_tiled_f32<G, false, gpu::kJoinRz>(p, st);
    else if (mode == gpu::kJoinRne) launch_tiled_f32<G, false, gpu::kJoinRne>(p, st);
    else launch_tiled_f32<G, false, gpu::kAddFp32>(p, st);
  }
}

// Double steps of at most 25 fraction bits (26 in steps of 16) on the float kernel, each
// product cut by one DFMA (WIDE: gemm_engine_tiled_f32.cuh): 8 x 2 outputs a thread on 64 x 64
// tiles, two blocks an SM (four registers an output; H100, 2026-11-26, 4096^3: mxf8f6f4 2.22e12
// MAC/s, blackwell-fp8 2.43e12, hopper-mma-f16 1.80e12 in kernels; each product's cut split
// into two FFMAs instead, 1.95e12, 2.12e12 and 1.59e12; the generic double kernel 1.07e12 for
// mxf8f6f4; with 8 x 4 outputs a thread mxf8f6f4 1.72e12, with 4 x 4 2.28e12, within 3%); for
// M <= 32 where those tiles do not fill the GPU twice, 4 x 2 on 32 x 64 tiles (at every M:
// 2.48e12, 2.65e12 and 2.19e12 against 2.63e12, 2.83e12 and 2.27e12 since the step's end
// below, H100, 2026-11-26). On the 32 x 64 tiles a warp runs the thread tiles of 16 columns
// by 2 rows (tiled_gemm_f32's WX), not one row of 32: mxf8f6f4, kernels, twice each (H100,
// 2026-11-27), 32x7168x4096 1.43e12 / 1.44e12 to 1.53e12 both, 16x4096x7168 3.71e11 /
// 3.72e11 to 3.80e11 both (8 columns by 4 rows the same); c's add mode (blackwell-fp8) makes
// the same loads. The 64 x 64 tiles keep whole rows (gemm_engine_tiled_f32.cuh). Those 32 x
// 64 tiles at every M, 16 columns, are still slower (the same day, twice each, kernels:
// mxf8f6f4 4096^3 2.74e12 against 2.96e12, 4224x4096x4096 2.78e12 against 3.05e12,
// 8192x8192x2048 2.78e12 against 3.04e12; blackwell-fp8 and hopper-mma-f16 at 4096^3 2.93e12
// and 2.47e12 against 3.15e12 and 2.71e12).
// Terms and outputs cut toward zero only (every preset's: a custom model that rounds either
// to nearest, or has more fraction bits, keeps the generic double-step kernel), so c's entry
// is the only mode: eight instances, not sixteen. The step's end (wide_step_output) is branch
// free: 4096^3 kernels 2.38e12 to 2.63e12, 2.63e12 to 2.83e12 and 1.91e12 to 2.27e12, 7.9 to
// 6.8 thread instructions an emulated MAC for mxf8f6f4 (ncu, H100, 2026-11-26).
template <int G>
void launch_tiled_wide(const Params& p, cudaStream_t st) {
  constexpr bool W = true;
  constexpr bool RNE = false;
  constexpr int J = gpu::kJoinRz, A = gpu::kAddFp32;
  const bool join = p.g.model.c_entry == 0;
  const long long big_blocks = (p.g.M + 63LL) / 64 * ((p.g.N + 63LL) / 64);
  if (p.g.M <= 32 && big_blocks < 2LL * 2 * gpu::sm_count())
    return join ? launch_f32_shape<G, RNE, J, 4, 2, 32, 64, 3, W, 16>(p, st)
                : launch_f32_shape<G, RNE, A, 4, 2, 32, 64, 3, W, 16>(p, st);
  join ? launch_f32_shape<G, RNE, J, 8, 2, 64, 64, 2, W>(p, st)
       : launch_f32_shape<G, RNE, A, 8, 2, 64, 64, 2, W>(p, st);
}

template <int G, bool RNE, bool CODES>
void launch_tiled_f64_as(const Params& p, cudaStream_t st) {
  using T = TileF64;
  constexpr auto kernel =
      gpu::tiled_gemm<double, G, RNE, T::TM, T::TN, T::BM, T::BN, T::BK, CODES>;
  constexpr int smem = gpu::tiled_smem_bytes(T::BM, T::BN, T::BK, T::TM, T::TN);
  allow_shared_memory<kernel>(smem);
  const dim3 grid((p.g.N + T::BN - 1) / T::BN, (p.g.M + T::BM - 1) / T::BM);
  constexpr int threads = (T::BM / T::TM) * (T::BN / T::TN), per_sm = 2;  // __launch_bounds__
  const long long blocks = static_cast<long long>(grid.x) * grid.y;
  if (const int pass = gpu::k_parallel_pass(p, blocks, per_sm, T::BK)) {
    gpu::run_k_parallel(p, pass, blocks, per_sm, [&](const gpu::ChunkParts& cp, int slices) {
      Params sliced = p;
      sliced.chunks = cp;
      kernel<<<dim3(grid.x, grid.y, slices), threads, smem, st>>>(sliced);
    }, st);
    return;
  }
  kernel<<<grid, threads, smem, st>>>(p);
  check(cudaGetLastError(), "tiled kernel launch");
}

template <int G, bool RNE>
void launch_tiled_f64(const Params& p, cudaStream_t st) {
  if (p.codes) launch_tiled_f64_as<G, RNE, true>(p, st);
  else launch_tiled_f64_as<G, RNE, false>(p, st);
}

// The group-sum kernel: both operands prepared once per GEMM (int8 codes and per-group
// words), then the tiles. The prepared copies live on the stream until the kernel is done.
template <int TM, int TN, int BM, int BN, int MINB>
void launch_group_sums_shape(const Params& p, cudaStream_t st) {
  const DeviceGemm& g = p.g;
  const int kp = (g.K + gpu::kGsStep - 1) / gpu::kGsStep * gpu::kGsStep;
  const int mp = (g.M + BM - 1) / BM * BM, np = (g.N + BN - 1) / BN * BN;
  const std::size_t a_words = std::size_t(mp) * (kp / 4 + kp / gpu::kGsGroup);
  const std::size_t b_words = std::size_t(np) * (kp / 4 + kp / gpu::kGsGroup);
  const DeviceBuffer keep = device_alloc((a_words + b_words) * 4, st);
  unsigned* at = static_cast<unsigned*>(keep.get());
  gpu::GroupParams gp;
  gp.p = p;
  gp.shift = g.a_unit + g.b_unit - 2 * g.scale_mantissa_bits;
  auto prepare = [&](auto kernel, const float* src, int rows, int unit, int rows_p,
                     gpu::GroupOperand& o) {
    unsigned* code = at;
    unsigned* info = code + std::size_t(rows_p) * (kp / 4);
    at = info + std::size_t(rows_p) * (kp / gpu::kGsGroup);
    const std::size_t n = std::size_t(rows_p) * (kp / gpu::kGsGroup);
    kernel<<<gpu::blocks_for(n), 256, 0, st>>>(p, src, rows, unit, code, info, rows_p, kp);
    o = {code, info, rows_p};
  };
  prepare(gpu::prepare_group_operand<false>, g.A, g.M, g.a_unit, mp, gp.a);
  prepare(gpu::prepare_group_operand<true>, g.B, g.N, g.b_unit, np, gp.b);
  check(cudaGetLastError(), "operand preparation launch");
  const dim3 grid((g.N + BN - 1) / BN, (g.M + BM - 1) / BM);
  const long long blocks = static_cast<long long>(grid.x) * grid.y;
  if (const int pass = gpu::k_parallel_pass(p, blocks, MINB, gpu::kGsStep)) {
    auto kernel = gpu::tiled_group_sums<TM, TN, BM, BN, MINB, true>;
    gpu::run_k_parallel(p, pass, blocks, MINB, [&](const gpu::ChunkParts& cp, int slices) {
      gpu::GroupParams sliced = gp;
      sliced.p.chunks = cp;
      kernel<<<dim3(grid.x, grid.y, slices), (BM / TM) * (BN / TN), 0, st>>>(sliced);
    }, st);
    return;
  }
  gpu::tiled_group_sums<TM, TN, BM, BN, MINB, false><<<grid, (BM / TM) * (BN / TN), 0, st>>>(gp);
  check(cudaGetLastError(), "tiled kernel launch");
}

// Whether the group-sum kernel runs this GEMM (group_sum_step's model: a fused step of 64
// products in group sums of 16, c joining an fp32 register, cut toward zero; steps that
// promotion never splits); false: dot_kernel only.
bool launch_group_sums_for(const Params& p, cudaStream_t st) {
  const DeviceGemm& g = p.g;
  const DeviceModel& m = g.model;
  if (g.batched || !g.int8_groups || g.group_sum != gpu::kGsGroup || m.group != gpu::kGsStep ||
      m.block != 0 || m.c_entry != 0 || m.term_cut != kRz || !m.c_register_fp32 ||
      m.c_min_exponent != -126 || g.promote_every % gpu::kGsStep != 0)
    return false;
  if ((g.M + 63LL) / 64 * ((g.N + 63LL) / 64) < 2LL * 2 * gpu::sm_count())
    launch_group_sums_shape<4, 4, 32, 32, 4>(p, st);
  else
    launch_group_sums_shape<4, 4, 64, 64, 2>(p, st);
  return true;
}

// Whether a tiled kernel (float or double steps) can run this GEMM's model.
bool tiled_model(const Params& p) {
  const DeviceModel& m = p.g.model;
  const bool c_ok = m.c_entry == 0 || (m.c_entry == 2 && p.out_fp32_model);
  return p.g.group_sum <= 1 && !p.g.batched && p.fast != FastPath::none && p.out_e8 &&
         m.c_register_fp32 && c_ok && !m.zero_on && (m.group == 32 || m.group == 16);
}

// Whether the float kernel runs this GEMM.
bool runs_tiled_f32(const Params& p) {
  return tiled_model(p) && p.fast == FastPath::f32 && !p.g.fold;  // fold never meets f32
}

// Whether the tiled kernel runs this GEMM, and which instance; false: dot_kernel only.
bool launch_tiled_for(const Params& p, cudaStream_t st) {
  const DeviceModel& m = p.g.model;
  if (p.g.group_sum > 1) return launch_group_sums_for(p, st);
  if (!tiled_model(p)) return false;
  const bool rne = m.term_cut == kRne;
  if (runs_tiled_f32(p)) {
    if (m.group == 32) launch_tiled_f32_for<32>(p, rne, st);
    else launch_tiled_f32_for<16>(p, rne, st);
    return true;
  }
  if (p.fast == FastPath::f32) return false;
  // The float kernel's double step (WIDE): frac + 2 + log2(G / 2) <= 31, at most 25 fraction
  // bits (26 in steps of 16), the bound of the int32 sums it had before its products went
  // onto chains (wide_chain), kept: the models it was checked on against the CPU engine
  // (the chains alone would allow more: |S| < 2^51, c's cut magnitude in a DADD's low word);
  // terms and outputs cut toward zero; folded codes where a scale block holds whole slabs
  // (one scale a thread's part of a slab row).
  const bool whole_slabs = !(p.g.fold && p.codes && p.g.scale_block % gpu::kTileBk != 0);
  if (m.frac_bits + 2 + (m.group == 32 ? 4 : 3) <= 31 && !rne && m.output_rounding == kRz &&
      whole_slabs) {
    if (m.group == 32) launch_tiled_wide<32>(p, st);
    else launch_tiled_wide<16>(p, st);
    return true;
  }
  if (m.group == 32) rne ? launch_tiled_f64<32, true>(p, st) : launch_tiled_f64<32, false>(p, st);
  else rne ? launch_tiled_f64<16, true>(p, st) : launch_tiled_f64<16, false>(p, st);
  return true;
}

// The per-output kernel: every output, or (redo_only, after a tiled kernel) those holding
// kRedoBits, usually none. Those it finds by a pass over D, only where a tiled kernel said it
// wrote some (Params::redo_any; else each block returns at once): there one block an SM, each
// thread striding over D, instead of a block per 128 outputs, whose blocks cost about 100 ns
// an output (the per-output kernel's registers and stack): 1.8 ms of the 18 ms of 4096^3
// nvfp4's kernels (Nsight Compute, H100, 2026-11-27; 2048x2048x1024's kernels 2.95e12 to
// 4.1e12 MAC/s without them). The pass itself took 50 us at 4096 x 1024 outputs and 185 us at
// 4096 x 4096 (torch.profiler, H100, 2026-11-27), 1.9 ms of the wide training step's 71 ms of
// GEMM kernels; a grid that filled the GPU twice cost about 13 us a call where it returned at
// once. The outputs' bits do not depend on the grid.
void launch_dot(Params p, bool redo_only, cudaStream_t st) {
  p.redo_only = redo_only;
  const std::size_t outputs = std::size_t(p.g.M) * p.g.N;
  std::size_t blocks = std::min<std::size_t>((outputs + 127) / 128, 1u << 20);
  if (redo_only)  // usually none to redo: each block returns at once, so few blocks
    blocks = std::min<std::size_t>(blocks, gpu::sm_count());
  if (p.codes) dot_kernel<true><<<static_cast<unsigned>(blocks), 128, 0, st>>>(p);
  else dot_kernel<false><<<static_cast<unsigned>(blocks), 128, 0, st>>>(p);
  check(cudaGetLastError(), "dot kernel launch");
}

}  // namespace

void run_device_gemm(const DeviceGemm& g, const DeviceLaunch& launch) {
  const gpu::LaunchStream stream(launch);
  const cudaStream_t st = stream.get();
  // The reference step's frames (WideSum, nested for c=add) outgrow the default stack.
  static std::atomic<std::uint64_t> stack_set{0};
  gpu::once_per_device(stack_set, gpu::current_device(), [] {
    std::size_t stack = 0;
    check(cudaDeviceGetLimit(&stack, cudaLimitStackSize), "stack size");
    if (stack < 8192) check(cudaDeviceSetLimit(cudaLimitStackSize, 8192), "stack size");
  });

  Params p;
  p.g = g;
  const DeviceModel& m = g.model;
  p.fast = static_cast<FastPath>(g.fast_step);  // the host's choice (choose_gemm_path)
  const bool e8 = m.output.min_exponent == -126 && m.output.max_exponent == 127;
  p.out_e8 = e8 && (m.output_rounding == kRz || m.output_rounding == kRne);
  p.out_drop = 52 - m.output.mantissa_bits;
  p.out_fp32_model = e8 && m.output.mantissa_bits == 23;
  p.k_parallel = launch.k_parallel;
  p.k_group = launch.k_group;

  const std::size_t outputs = std::size_t(g.M) * g.N;
  const std::size_t b_rows = g.batched ? std::size_t(g.M) : std::size_t(g.N);
  DeviceBuffer bufA, bufB, bufC, bufSa, bufSb, bufD;
  const std::size_t a_n = std::size_t(g.M) * g.K, b_n = b_rows * g.K;
  ResidentOperands res;
  if (g.resident) {  // codes, C and D on the device already: D written in place
    // Every kernel reads the 8-bit codes in place (the float kernel through its tables in
    // shared memory: no decoded copy and no prepared one); DeviceLaunch::codes -1: the codes
    // decoded once into values.
    p.codes = launch.codes >= 0;
    res = decode_resident(g, a_n, b_n, p.codes, st);
    p.g.A = res.A;
    p.g.B = res.B;
    p.a_table = res.a_table;
    p.b_table = res.b_table;
  } else {
    p.g.A = upload(g.A, std::size_t(g.M) * g.K, st, bufA);
    p.g.B = upload(g.B, b_rows * g.K, st, bufB);
    p.g.C = upload(g.C, g.C ? outputs : 0, st, bufC);
    bufD = device_alloc(outputs * sizeof(float), st);
    p.g.D = static_cast<float*>(bufD.get());
  }
  if (!launch.scales_on_device) {
    p.g.sa = upload(g.sa, g.sa_size, st, bufSa);
    p.g.sb = upload(g.sb, g.sb_size, st, bufSb);
  }
  // Two device words: whether a tiled kernel handed outputs back (Params::redo_any, 0: none),
  // and the reference step's first output with an error where it has block scales
  // (Params::step_errors: all ones, none).
  DeviceBuffer bufWords;
  if (launch.kernel == 0 || g.scaled_reference) {
    bufWords = device_alloc(2 * sizeof(unsigned long long), st);
    auto* words = static_cast<unsigned long long*>(bufWords.get());
    check(cudaMemsetAsync(words, 0, sizeof(unsigned long long), st), "memset");
    p.redo_any = reinterpret_cast<unsigned*>(words);
    if (g.scaled_reference) {
      p.step_errors = words + 1;
      check(cudaMemsetAsync(p.step_errors, 0xff, sizeof(unsigned long long), st), "memset");
    }
  }

  const gpu::KernelTiming timing = gpu::timing_start(st);
  const bool tiled = launch.kernel == 0 && launch_tiled_for(p, st);
  launch_dot(p, tiled, st);
  gpu::timing_stop(timing, st);
  // A resident GEMM on the caller's stream with nothing to report (no code checked, no step
  // errors, no kernel time asked for now) returns without waiting: D is written in stream
  // order, before whatever the caller queues next there, and the kernel time is read later
  // (kernel_events.cuh). A fault of the kernels surfaces as CUDA's sticky error at the next
  // synchronisation (torch's, or the engine's next call). Elsewhere the host waits here: for
  // D downloaded, the codes' check, the step errors, and host scales uploaded from pageable
  // memory (CUDA does not promise that such a copy has read them when it returns).
  const bool host_scales = !launch.scales_on_device && (bufSa || bufSb);  // uploaded above
  if (g.resident && !res.checked && !p.step_errors && !launch.kernel_seconds && launch.stream &&
      !host_scales) {
    gpu::timing_defer(timing);
    return;
  }
  unsigned long long first_bad[2] = {a_n, b_n};
  if (res.checked)
    check(cudaMemcpyAsync(first_bad, res.bad, sizeof first_bad, cudaMemcpyDeviceToHost, st),
          "download");
  if (!g.resident)
    check(cudaMemcpyAsync(g.D, p.g.D, outputs * sizeof(float), cudaMemcpyDeviceToHost, st),
          "download");
  unsigned long long step_errors = ~0ull;
  if (p.step_errors)
    check(cudaMemcpyAsync(&step_errors, p.step_errors, sizeof step_errors,
                          cudaMemcpyDeviceToHost, st), "download");
  check(cudaStreamSynchronize(st), "kernel");
  // The kernel time: now where asked for, else with the deferred ones (finished: reading them
  // later does not wait), so that device_kernel_take hands over every GEMM's.
  if (launch.kernel_seconds) *launch.kernel_seconds = gpu::timing_read(timing);
  else gpu::timing_defer(timing);
  if (g.step_errors) *g.step_errors = step_errors == ~0ull ? 0u : unsigned(step_errors % 8);
  if (g.resident) check_resident_codes(g, a_n, b_n, first_bad);
}

}  // namespace fp8sim
