// gemm_engine_kpar: K-parallel chunks, for GEMMs whose tiles cannot fill the GPU (decode
// shapes: a few rows of A against a large B).
//
// Every output is the same sequence as sim's Engine::dot: chunk j of promote_every products
// accumulates from zero (chunk 0 from C) in the MMA model, its partial result is promoted
// into the FP32 main accumulator, chunk after chunk. A chunk's partial never reads the main
// accumulator, so the partials of all chunks can be computed at once by different blocks
// (the tiled kernels' blockIdx.z: a slice of consecutive chunks each) and written to a
// workspace; promote_parts_kernel then runs each output's promotion chain over them in
// chunk order with the same promote() and output rounding as the per-output kernel. The
// bits are those of the tiled kernels (and so of the CPU engine) whatever the slicing.
// An output the tiled kernel cannot finish writes kRedoBits for its chunk's partial; the
// chain then writes kRedoBits into D and the per-output kernel redoes the whole output.
// The workspace is bounded (parts_budget): longer K runs in passes of chunks, the main
// accumulators kept in D between passes.
#pragma once

#include "engine/device_memory.cuh"
#include "engine/gemm_engine_step.cuh"

namespace fp8sim::gpu {

// The workspace's bound (4 bytes per output per chunk of a pass): at most 64 MiB, and at most
// half of the GEMM's own memory, its operands' 8-bit codes plus D in fp32 (issue 38 bounds a
// GEMM's peak device memory in proportion to them).
constexpr std::size_t kPartsCapBytes = std::size_t(64) << 20;
inline std::size_t parts_budget(const DeviceGemm& g) {
  const std::size_t codes = (std::size_t(g.M) + unsigned(g.N)) * unsigned(g.K);
  const std::size_t d = std::size_t(g.M) * unsigned(g.N) * sizeof(float);
  return std::min(kPartsCapBytes, (codes + d) / 2);
}
// Target of the K-parallel grid, in waves of resident blocks (fewer chunks per slice spread
// the work evenly; a slice holds at least one chunk).
constexpr int kPartsWaves = 4;

// This block's K range [begin, end): all of K, or (Params::chunks set) the chunks of slice
// blockIdx.z, promote_every elements each (K's tail in the last).
struct KRange {
  int begin, end;
};
__device__ __forceinline__ KRange slice_range(const ChunkParts& cp, int chunk, int K) {
  if (cp.out == nullptr) return {0, K};
  const int c0 = cp.first + int(blockIdx.z) * cp.per_slice;
  const int c1 = min(c0 + cp.per_slice, cp.first + cp.count);
  return {c0 * chunk, min(K, c1 * chunk)};
}

// A tile's C registers where the slice starts at K = 0 (load_c_tile), else zeros (a later
// chunk accumulates from zero); returns the outputs to redo.
template <int TM, int TN>
__device__ __forceinline__ unsigned load_c_slice(const DeviceGemm& g, const KRange& kr, int row0,
                                                 int col0, float (&acc)[TM][TN]) {
  if (kr.begin == 0) return load_c_tile(g, row0, col0, acc);
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
  return 0;
}

// The partial of output (row, col) for the chunk starting at K index k0 (kRedoBits: redo).
__device__ __forceinline__ void store_part(const ChunkParts& cp, const DeviceGemm& g, int row,
                                           int col, int k0, int chunk, float part, bool redo) {
  if (row >= g.M || col >= g.N) return;
  const std::size_t outputs = std::size_t(g.M) * unsigned(g.N);
  cp.out[std::size_t(k0 / chunk - cp.first) * outputs + std::size_t(row) * unsigned(g.N) + col] =
      redo ? __uint_as_float(kRedoBits) : part;
}

// The promotion chain of one pass: each output's main accumulator (main_start on the first
// pass, else D's, which the previous pass left unrounded) takes chunks first..first+count-1
// in order; the last pass writes it in the output type. A chunk that must be redone sends
// the output to the per-output kernel (kRedoBits in D, which later passes leave).
__global__ void promote_parts_kernel(const Params p, const float* parts, int first, int count,
                                     bool last) {
  const DeviceGemm& g = p.g;
  const std::size_t outputs = std::size_t(g.M) * unsigned(g.N);
  const int chunk = g.promote_every;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < outputs;
       i += std::size_t(gridDim.x) * blockDim.x) {
    float main = first == 0 ? main_start(g) : g.D[i];
    if (__float_as_uint(main) == kRedoBits) continue;
    const int row = int(i / unsigned(g.N)), col = int(i % unsigned(g.N));
    bool redo = false;
#pragma unroll 8
    for (int j = 0; j < count; ++j) {  // no early exit: the loads run ahead of the chain
      const float part = parts[std::size_t(j) * outputs + i];
      redo = redo || __float_as_uint(part) == kRedoBits;
      main = promote(p, main, part, row, col, (first + j) * chunk);
    }
    g.D[i] = redo ? __uint_as_float(kRedoBits) : last ? to_out_type(p, main) : main;
    if (redo && p.redo_any != nullptr) *p.redo_any = 1u;
  }
}

// The chunks a pass of the tiled kernel with `blocks` blocks (blocks_per_sm resident on an
// SM) runs K-parallel, 0 where it runs as it is: K-parallel needs chunks that slabs of
// `align` K elements tile exactly, at least two of them, and (Params::k_parallel 0) fewer
// blocks than two waves of the GPU and room for two chunks in the workspace's budget;
// k_parallel 1: wherever the chunks allow it (passes of Params::k_group chunks where set);
// -1: never.
inline int k_parallel_pass(const Params& p, long long blocks, int blocks_per_sm, int align) {
  const DeviceGemm& g = p.g;
  if (p.k_parallel < 0 || g.batched || g.M == 0 || g.N == 0 || g.promote_every <= 0 ||
      g.promote_every % align != 0 || g.K <= g.promote_every)
    return 0;
  const long long chunks = (g.K + g.promote_every - 1LL) / g.promote_every;
  const std::size_t chunk_bytes = std::size_t(g.M) * unsigned(g.N) * sizeof(float);
  long long pass = std::min<long long>(chunks, parts_budget(g) / chunk_bytes);
  if (p.k_parallel > 0)
    return int(p.k_group > 0 ? std::min<long long>(chunks, p.k_group) : std::max(pass, 1LL));
  if (pass < 2 || blocks >= 2LL * blocks_per_sm * sm_count()) return 0;
  return int(pass);
}

// Runs the GEMM K-parallel in passes of `pass` chunks (k_parallel_pass): launch(cp, slices)
// launches the tiled kernel's grid with blockIdx.z over `slices` slices of cp; then each
// pass's promotion chain.
template <class Launch>
void run_k_parallel(const Params& p, int pass, long long blocks, int blocks_per_sm,
                    Launch launch, cudaStream_t st) {
  const DeviceGemm& g = p.g;
  const int chunks = (g.K + g.promote_every - 1) / g.promote_every;
  const std::size_t outputs = std::size_t(g.M) * unsigned(g.N);
  const DeviceBuffer keep = device_alloc(std::size_t(pass) * outputs * sizeof(float), st);
  float* parts = static_cast<float*>(keep.get());
  const long long want =
      (kPartsWaves * static_cast<long long>(blocks_per_sm) * sm_count() + blocks - 1) / blocks;
  for (int first = 0; first < chunks; first += int(pass)) {
    const int count = std::min(int(pass), chunks - first);
    const int slices0 = int(std::clamp<long long>(want, 1, count));
    const int per_slice = (count + slices0 - 1) / slices0;
    const int slices = (count + per_slice - 1) / per_slice;
    launch(ChunkParts{parts, first, count, per_slice}, slices);
    check(cudaGetLastError(), "tiled kernel launch");
    promote_parts_kernel<<<blocks_for(outputs), 256, 0, st>>>(p, parts, first, count,
                                                             first + count == chunks);
    check(cudaGetLastError(), "promotion kernel launch");
  }
}

}  // namespace fp8sim::gpu
