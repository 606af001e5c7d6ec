// device_bands: gemm() on host codes with device cuda, in bands. The GEMM is cut into bands
// of rows of D (for few rows, of columns), and each band's codes go to the device, its kernels
// run and its part of D comes back while the next band's kernels run (run_device_bands), so
// that the copies overlap the kernels instead of bracketing them. Every output is the CUDA
// engine's for its row of A, column of B, C and scales whatever the launch (no output reads
// another's), so the bits are those of one call over the whole GEMM. What one call would
// check is checked on the device before anything comes back: block scales inside the MMA and
// the group-sum route's C before any band runs (resident_block_scales.hpp), codes of formats
// of fewer than 256 codes (FP4, FP6) as each band's arrive; their errors are one call's.
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

// Whether gemm()'s route on host codes of K columns runs in bands: formats of at most 8 bits,
// no library GEMM (split-K slices, epilogue scales, a bias) around the chain, and block scales
// inside the MMA only on gemm_resident's device routes (block_route: group sums or folded)
// in a scale format that the device checks (ScaleValues::high_half: e4m3, ue8m0, ...).
bool gemm_bands_fit(const GemmSpec& s, int K, bool bias);

// The bands of an M x N x K GEMM on a GPU of `sms` multiprocessors. Bands of rows where each
// still fills the GPU twice with the float kernel's 64 x 64 tiles at three blocks an SM (at
// most 16 bands); else, where B's codes are 8 MiB or more, bands of columns of at least
// 4 MiB of B's codes each (at most 8), whole blocks of B's block scales; else none.
GemmBands gemm_bands(const GemmSpec& s, int M, int N, int K, int sms);

// gemm(s, M, N, K, A, B, C, sa, sb, D) on host codes in `bands` (gemm_bands_fit holds, the
// spec and every size checked): the codes, C and the scales copied to the device as they are,
// D copied back band by band. Block scales inside the MMA go first, once, and are checked
// there (block_scales_on_device); on the group-sum route C goes whole after them and is
// checked for finiteness; then each band reads its rows of the scales in place. Returns
// false, D untouched, where those checks send the GEMM off gemm_resident's device routes
// (non-finite scales or C on the group-sum route, scales that do not fold exactly): the host
// route is then gemm()'s. Throws as gemm_resident does (a bad scale, then a bad code: A's
// first, by index, then B's), D untouched.
bool gemm_codes_in_bands(const GemmSpec& s, int M, int N, int K,
                         std::span<const std::uint8_t> A, std::span<const std::uint8_t> B,
                         std::span<const float> C, std::span<const float> sa,
                         std::span<const float> sb, std::span<float> D, const GemmBands& bands);

}  // namespace fp8sim
