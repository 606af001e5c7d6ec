// gemm: the FP8 GEMM engine — accumulator model stepped along K, chunked promotion to an
// FP32 main accumulator, and per-tensor / per-row / block / MX scaling applied at promotion.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "accumulator/accumulator.hpp"
#include "format/format.hpp"
#include "gemm/device.hpp"
#include "gemm/operand.hpp"

namespace fp8sim {

enum class Scaling : std::uint8_t {
  none,    // no scales
  tensor,  // one scale for A, one for B: sa[1], sb[1]
  row,     // per row of A and per column of B: sa[M], sb[N]
  block,   // A tiles 1 x g along K, B blocks g x g: sa[M][ceil(K/g)], sb[ceil(N/g)][ceil(K/g)]
  mx,      // MX / NVFP4: 1 x mx_block blocks along K for A and B, scales of mx_scale:
           // sa[M][K/mx_block], sb[N][K/mx_block]; inside the MMA when the model has block
           // scales (AccumulatorSpec::block_scale), else at promotion
};
Scaling parse_scaling(std::string_view s);  // none|tensor|row|block|mx
std::string_view to_string(Scaling s);

// Where and in what order scales are applied.
enum class ScaleOrder : std::uint8_t {
  deepgemm,  // at each promoted chunk: acc = fmaf(sa*sb, partial, acc) (DeepGEMM
             // sm90_fp8_gemm_1d2d), for every scaling
  cublaslt,  // cuBLASLt on sm_90 as measured (torch._scaled_mm, H100 and H200, CUDA 13):
             // tensor and row scales once, in the epilogue after the whole K (and after the
             // split-K reduction): tensor D = acc * fp32(sa*sb), row D = (acc * sb[n]) * sa[m];
             // block and MX scales at each chunk as deepgemm
  triton,    // at each promoted chunk: acc = fmaf(partial * sa, sb, acc), Triton's
             // `acc += tl.dot(a, b) * a_s[:, None] * b_s[None, :]` (products left to right,
             // the add contracted into the second); for every scaling
};
ScaleOrder parse_scale_order(std::string_view s);  // deepgemm|cublaslt|triton
std::string_view to_string(ScaleOrder s);

struct GemmSpec {
  FormatSpec a_format;            // e4m3 or e5m2 (any <= 8-bit format works)
  FormatSpec b_format;
  AccumulatorSpec model;
  int promote_every = 0;          // K elements per chunk; 0 = never; multiple of model.group
  Scaling scaling = Scaling::none;
  int block = 128;                // g for Scaling::block (MX is always 32)
  ScaleOrder order = ScaleOrder::deepgemm;
  FormatSpec out_type;            // fp32, bf16 or fp16 (round to nearest even from fp32)
  int threads = 0;                // 0: all hardware threads; results never depend on it
  Device device = Device::cpu;    // where it runs; every device gives the same bits. A
                                  // block-scaled model runs on cuda with its scales folded
                                  // into the operands (sim/gemm/block_fold.hpp), on group
                                  // sums, or in the reference step with block scales; only
                                  // custom ones with c exact or realigned (or > 8 lanes) on
                                  // the CPU engine (gemm_device.hpp)
  int split_k = 1;                // K slices (cuBLASLt's numSplitsK; sim/gemm/gemm_split.hpp)
  int split_k_align = 128;        // slice lengths round up to a multiple of this
  int mx_block = 32;              // K elements per scale for Scaling::mx (NVFP4: 16)
  FormatSpec mx_scale = format_by_name("ue8m0");  // Scaling::mx scales' format (NVFP4: ue4m3)
  int k_tile = 0;                 // K zero-padded to a multiple of this before the chain, as a
                                  // kernel's masked tail loads do (sim/kernel/kernel.hpp); 0: none
};

// Scale block length along K: s.block for Scaling::block, s.mx_block for Scaling::mx, 0 when
// one scale covers all of K.
int scale_block(const GemmSpec& s);

// K as the chain sees it: K rounded up to a multiple of s.k_tile (K itself without one).
int padded_k(const GemmSpec& s, int K);

// Shapes of the scale arrays for a spec and problem size: {rows, cols} of sa and sb.
struct ScaleShapes {
  std::size_t a_rows, a_cols, b_rows, b_cols;
};
ScaleShapes scale_shapes(const GemmSpec& s, int M, int N, int K);
// batched_dot()'s scale shapes for T rows: per row of A and of B (a g x g block of B reduces
// to the 1 x g scales of its one column), one scale per block along K (one for all of K
// without blocks).
ScaleShapes batched_scale_shapes(const GemmSpec& s, int T, int K);

// For a model that applies block scales inside the MMA (AccumulatorSpec::block_scale): MX
// scaling with the model's own block and scale format. Other models: s unchanged.
void use_model_block_scales(GemmSpec& s);

// Checks the spec against the problem size: K >= 1 (M or N may be 0: an empty D, as torch
// gives), threads and every integer setting in range, K a multiple of the group, promote_every a
// multiple of the group, scale blocks holding whole chunks (or, for a model with block
// scales, Scaling::mx with the model's scale block and format). Throws
// std::invalid_argument.
void validate(const GemmSpec& s, int M, int N, int K);

// The engine's last step: its fp32 result v rounded to the output type `out` (fp32: v itself;
// bf16 / fp16: round to nearest even, overflow to Inf).
float to_out_type(const FormatSpec& out, float v);

// D = A * B^T on decoded operands (A: M x K, B: N x K); see gemm() below for the semantics.
// bias (N values, may be empty) is added in fp32 before the output rounding (gemm_split.hpp).
void gemm(const GemmSpec& s, const Operand& A, const Operand& B, std::span<const float> C,
          std::span<const float> sa, std::span<const float> sb, std::span<float> D,
          std::span<const float> bias = {});

// gemm() and, in the same pass, the outputs at prefixes of K: D_prefix[p] (M x N, at
// p * M * N) is bit for bit what gemm() gives on the first prefix_k[p] columns of A and B
// (with the scale columns covering them), read off the running accumulator state, so P
// prefixes cost one GEMM, not P (a model whose step is a whole chunk, group 0, recomputes
// the cut chunk of each prefix). prefix_k increases, lies in 1..K, and each prefix must pass
// validate() as a K of its own; else std::invalid_argument.
void gemm_prefixes(const GemmSpec& s, const Operand& A, const Operand& B,
                   std::span<const float> C, std::span<const float> sa,
                   std::span<const float> sb, std::span<const int> prefix_k, std::span<float> D,
                   std::span<float> D_prefix);

// D (M x N, row-major, as float values of s.out_type) = A (M x K codes, row-major) times
// B^T (B is N x K codes, row-major: each row one column of B, cuBLASLt's "TN"), with C
// (M x N fp32, may be empty) entering the tensor-core accumulator at the start of the first
// chunk. Each chunk's result is added into an FP32 main accumulator starting at +0 with the
// scales of that chunk (order s.order; unscaled chunks add with one round-to-nearest add);
// never promoted (promote_every = 0) it starts at -0, so an unscaled result is the MMA's
// own, a -0 included.
// sa / sb: scale values (MX: already decoded E8M0 powers of two) in the shapes above.
// With s.split_k > 1, scales in the epilogue (ScaleOrder::cublaslt) or a bias, the library
// GEMM of sim/gemm/gemm_split.hpp runs around this engine. With s.device cuda (and no
// block scales inside the MMA, or block scales where gemm_resident keeps the codes on the
// device) the codes go to the device as they are and gemm_resident's route decodes them
// there; D comes back.
void gemm(const GemmSpec& s, int M, int N, int K, std::span<const std::uint8_t> A,
          std::span<const std::uint8_t> B, std::span<const float> C, std::span<const float> sa,
          std::span<const float> sb, std::span<float> D, std::span<const float> bias = {});

// gemm() on operands already in CUDA device memory (e.g. torch CUDA tensors): A (M x K) and B
// (N x K) one-byte codes of s.a_format / s.b_format, C (M x N float32, or null) and D (M x N
// float32) on CUDA device `device` (-1: the current one); scales and bias (host) as gemm()
// takes them. The same routes as gemm() (gemm/dispatch.cpp): the CUDA engine decodes each code
// once on the device and writes D in place on `stream` (a cudaStream_t; null: the default
// stream); split-K slices and a kernel's zero-padded K tail read the codes in place, the
// slices' fp32 results summed and the epilogue run on the device; a block-scaled model on
// group sums (nvfp4, mxf4) reads its codes in place where its elements, scales and C are
// finite (its scales checked on the device), one with power-of-two scales on single products
// (mxf8f6f4) where every element times its scale is an exact float (the scales folded into
// the values as the kernels read them), and any other block-scaled model's operands go
// through the host once each way. Returns when D is written. Checks as gemm()
// does (bad codes too); throws std::invalid_argument naming the problem.
void gemm_resident(const GemmSpec& s, int M, int N, int K, const std::uint8_t* A,
                   const std::uint8_t* B, const float* C, std::span<const float> sa,
                   std::span<const float> sb, float* D, void* stream = nullptr,
                   int device = -1, std::span<const float> bias = {});

// gemm_resident with scales in CUDA device memory too (sa, sb: spans over device memory on
// `device`), as quantise_resident_deferred leaves them: taken as they are (not checked: a
// NaN scale makes its outputs NaN), and the host does not wait for the device. Where the
// host must read the scales (a block-scaled model's routes, split-K slices of block scales)
// they come down once (the host waits then) and gemm_resident runs. No bias.
void gemm_resident_scales_on_device(const GemmSpec& s, int M, int N, int K,
                                    const std::uint8_t* A, const std::uint8_t* B,
                                    const float* C, std::span<const float> sa,
                                    std::span<const float> sb, float* D, void* stream,
                                    int device);

// T independent dot products: D[t] = dot(A row t, B row t) through the same engine, with C[t]
// (may be empty) entering the first chunk. A and B both have T rows and K columns. Scales
// are per row of A and B: tensor/row: sa[T], sb[T]; block/mx: sa[T][K/g], sb[T][K/g] (for
// a single dot product a g x g block of B reduces to the 1 x g scales of its one column).
// For sweeps: one trial per row.
void batched_dot(const GemmSpec& s, const Operand& A, const Operand& B, std::span<const float> C,
                 std::span<const float> sa, std::span<const float> sb, std::span<float> D);

}  // namespace fp8sim
