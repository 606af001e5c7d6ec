// code_check: one-byte codes checked on the device against their format's code count
// (device_gemm.hpp's find_bad_codes_on_device), so that gemm()'s bands check formats of fewer
// than 256 codes (FP4, FP6) as each band's codes arrive, without a wait per band.
#include <cuda_runtime.h>

#include "engine/device_memory.cuh"

namespace fp8sim {
namespace {

// The smallest index (plus base) of a code at or beyond `count`, folded into *first: each
// thread its own smallest over its grid stride, then one atomic where it found one.
__global__ void bad_code_kernel(const unsigned char* codes, std::size_t n, unsigned count,
                                unsigned long long base, unsigned long long* first) {
  unsigned long long mine = ~0ull;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    if (codes[i] >= count) {
      mine = base + i;
      break;  // later indices of this thread's stride are larger
    }
  if (mine != ~0ull) atomicMin(first, mine);
}

}  // namespace

void find_bad_codes_on_device(const std::uint8_t* codes, std::size_t n, unsigned count,
                              std::size_t base, unsigned long long* first, void* stream) {
  if (n == 0 || count >= 256) return;  // every byte is a code
  const auto st = static_cast<cudaStream_t>(stream);
  bad_code_kernel<<<gpu::blocks_for(n), 256, 0, st>>>(codes, n, count, base, first);
  gpu::check(cudaGetLastError(), "code check kernel launch");
}

}  // namespace fp8sim
