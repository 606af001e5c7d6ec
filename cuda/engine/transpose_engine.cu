// transpose_engine: run_device_transpose_codes (sim/scaling/device_quantize.hpp), the transpose
// of one-byte codes in device memory, for a quantised operand a later GEMM reads transposed
// (fp8sim.torch's reused operands). torch's copy of a transposed uint8 tensor moved about 0.3
// TB/s on an H100 (1.1 ms of the wide training step); through shared memory, each tile is read
// along the source's rows and written along the destination's.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "engine/device_memory.cuh"
#include "scaling/device_quantize.hpp"

namespace fp8sim {
namespace {

using gpu::check;

constexpr int kTile = 64;        // a block's tile: kTile x kTile codes
constexpr int kThreads = 256;

// dst (cols x rows) = src (rows x cols)^T, a kTile x kTile tile a block at a time. The shared
// rows are kTile + 4 bytes apart (17 words: a warp's column reads fall in different banks).
// WORDS (rows and cols multiples of 4, src and dst on 4 bytes): each thread reads and writes
// 4-byte words, a word of dst made of four rows' bytes of the tile; else single bytes.
template <bool WORDS>
__global__ void transpose_codes_kernel(const unsigned char* src, int rows, int cols,
                                       unsigned char* dst) {
  __shared__ alignas(4) unsigned char tile[kTile][kTile + 4];
  constexpr int W = WORDS ? 4 : 1, PER_ROW = kTile / W;
  const int tiles_c = (cols + kTile - 1) / kTile;
  const long long tiles = static_cast<long long>((rows + kTile - 1) / kTile) * tiles_c;
  for (long long b = blockIdx.x; b < tiles; b += gridDim.x) {
    const int r0 = static_cast<int>(b / tiles_c) * kTile;
    const int c0 = static_cast<int>(b % tiles_c) * kTile;
    for (int i = threadIdx.x; i < kTile * PER_ROW; i += kThreads) {
      const int r = i / PER_ROW, c = i % PER_ROW * W;  // in the tile
      if (r0 + r >= rows || c0 + c >= cols) continue;
      const std::size_t at = std::size_t(r0 + r) * cols + c0 + c;
      if constexpr (WORDS)
        *reinterpret_cast<unsigned*>(&tile[r][c]) = *reinterpret_cast<const unsigned*>(src + at);
      else
        tile[r][c] = src[at];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < kTile * PER_ROW; i += kThreads) {
      const int c = i / PER_ROW, r = i % PER_ROW * W;  // dst's row c0 + c, columns r0 + r..
      if (c0 + c >= cols || r0 + r >= rows) continue;
      const std::size_t at = std::size_t(c0 + c) * rows + r0 + r;
      if constexpr (WORDS)
        *reinterpret_cast<unsigned*>(dst + at) =
            unsigned(tile[r][c]) | unsigned(tile[r + 1][c]) << 8 |
            unsigned(tile[r + 2][c]) << 16 | unsigned(tile[r + 3][c]) << 24;
      else
        dst[at] = tile[r][c];
    }
    __syncthreads();  // the tile read before the next one is written
  }
}

}  // namespace

void run_device_transpose_codes(const unsigned char* src, int rows, int cols,
                                unsigned char* dst, const DeviceLaunch& launch) {
  if (rows <= 0 || cols <= 0) return;
  const gpu::LaunchStream stream(launch);
  const long long tiles = static_cast<long long>((rows + kTile - 1) / kTile) *
                          ((cols + kTile - 1) / kTile);
  const auto blocks = static_cast<unsigned>(
      std::min<long long>(tiles, 16LL * gpu::sm_count()));
  const bool words = rows % 4 == 0 && cols % 4 == 0 &&
                     reinterpret_cast<std::uintptr_t>(src) % 4 == 0 &&
                     reinterpret_cast<std::uintptr_t>(dst) % 4 == 0;
  const cudaStream_t st = stream.get();
  if (words) transpose_codes_kernel<true><<<blocks, kThreads, 0, st>>>(src, rows, cols, dst);
  else transpose_codes_kernel<false><<<blocks, kThreads, 0, st>>>(src, rows, cols, dst);
  check(cudaGetLastError(), "transpose kernel launch");
}

}  // namespace fp8sim
