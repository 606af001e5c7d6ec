// device_bands: gemm() on host codes with device cuda, in bands. The GEMM is cut into bands
// of rows of D (for few rows, of columns), and each band's codes go to the device, its kernels
// run and its part of D comes back while the next band's kernels run (run_device_bands), so
// that the copies overlap the kernels instead of bracketing them. Every output is the CUDA
// engine's for its row of A, column of B, C and scales whatever the launch (no output reads
// another's), so the bits are those of one call over the whole GEMM.
#pragma once

#include <cstdint>
#include <span>

#include "gemm/gemm.hpp"

namespace fp8sim {

struct GemmBands {
  bool rows = true;  // bands of rows of D (A's rows), else of columns (B's rows)
  int size = 0;      // rows (columns) a band, the last band the rest
  int count = 0;     // fewer than 2: one call, no bands
};

// Whether gemm()'s route on host codes runs in bands: formats of 256 codes (none to check for
// validity, which would stop every band to report), no block scales inside the MMA and no
// library GEMM (split-K slices, epilogue scales, a bias) around the chain.
bool gemm_bands_fit(const GemmSpec& s, bool bias);

// The bands of an M x N x K GEMM on a GPU of `sms` multiprocessors. Bands of rows where each
// still fills the GPU twice with the float kernel's 64 x 64 tiles at three blocks an SM (at
// most 16 bands); else, where B's codes are 8 MiB or more, bands of columns of at least
// 4 MiB of B's codes each (at most 8), whole blocks of B's block scales; else none.
GemmBands gemm_bands(const GemmSpec& s, int M, int N, int K, int sms);

// gemm(s, M, N, K, A, B, C, sa, sb, D) on host codes in `bands` (gemm_bands_fit holds, the
// spec and every size checked): the codes, C and the scales copied to the device as they are,
// D copied back band by band. Throws as gemm_resident does.
void gemm_codes_in_bands(const GemmSpec& s, int M, int N, int K,
                         std::span<const std::uint8_t> A, std::span<const std::uint8_t> B,
                         std::span<const float> C, std::span<const float> sa,
                         std::span<const float> sb, std::span<float> D, const GemmBands& bands);

}  // namespace fp8sim
