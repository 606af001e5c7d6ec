// transpose_engine: run_device_transpose_codes (sim/scaling/device_quantize.hpp), the transpose
// of one-byte codes in device memory, for a quantised operand a later GEMM reads transposed
// (fp8sim.torch's reused operands). torch's copy of a transposed uint8 tensor moved about 0.3
// TB/s on an H100 (1.1 ms of the wide training step); through shared memory, each tile is read
// along the source's rows and written along the destination's.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

#include "engine/device_memory.cuh"
#include "scaling/device_quantize.hpp"

namespace fp8sim {
namespace {

using gpu::check;

constexpr int kTile = 64;        // a block's tile: kTile x kTile codes
constexpr int kThreads = 256;

// dst (cols x rows) = src (rows x cols)^T, a kTile x kTile tile a block at a time. The shared
// rows are kTile + 4 bytes apart (17 words: the column reads fall in 32 different banks).
__global__ void transpose_codes_kernel(const unsigned char* src, int rows, int cols,
                                       unsigned char* dst) {
  __shared__ unsigned char tile[kTile][kTile + 4];
  const int tiles_c = (cols + kTile - 1) / kTile;
  const long long tiles = static_cast<long long>((rows + kTile - 1) / kTile) * tiles_c;
  for (long long b = blockIdx.x; b < tiles; b += gridDim.x) {
    const int r0 = static_cast<int>(b / tiles_c) * kTile, c0 = static_cast<int>(b % tiles_c) * kTile;
    for (int i = threadIdx.x; i < kTile * kTile; i += kThreads) {
      const int r = r0 + i / kTile, c = c0 + i % kTile;
      if (r < rows && c < cols) tile[i / kTile][i % kTile] = src[std::size_t(r) * cols + c];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < kTile * kTile; i += kThreads) {
      const int c = c0 + i / kTile, r = r0 + i % kTile;
      if (r < rows && c < cols) dst[std::size_t(c) * rows + r] = tile[i % kTile][i / kTile];
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
  transpose_codes_kernel<<<blocks, kThreads, 0, stream.get()>>>(src, rows, cols, dst);
  check(cudaGetLastError(), "transpose kernel launch");
}

}  // namespace fp8sim
