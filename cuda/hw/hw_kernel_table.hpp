// hw_kernel_table: the kernel variants fp8sim-hw runs, one data row each (instruction,
// formats, accumulate type, preset, capture suites); adding a kernel is adding a row.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "format/format.hpp"
#include "gemm/gemm.hpp"
#include "hw/hw_harness.hpp"
#include "hw/kernels.hpp"

namespace fp8sim::hw {

// The instruction family a kernel runs on (its launcher in kernels.hpp / cublaslt_fp8.hpp).
enum class Path : std::uint8_t { wgmma, mma_sync, cublaslt };
std::string_view to_string(Path p);  // wgmma | mma_sync | cublaslt

// One folder of `fp8sim-hw capture`: the suites of one variant, cases with K > max_k left out.
struct CaptureSet {
  std::string dir;                    // folder under --out
  std::string variant;                // Variant::name (filled from the row)
  std::vector<std::string> suites;
  int max_k;
};

// One row of the table.
struct KernelRow {
  Path path;
  cuda::Fp8 a, b;                    // operand formats
  cuda::Accum accum;                 // wgmma accumulate type (f32 for the other paths)
  int promote_every;                 // K per promotion into FP32 (0: never)
  bool block_scales;                 // DeepGEMM 1x128 / 128x128 block scales
  const char* out_type;              // fp32 | fp16 | bf16
  bool fastaccum;                    // cuBLASLt CUBLASLT_MATMUL_DESC_FAST_ACCUM
  const char* preset;                // accumulator preset it must match; "" = unknown ("measure")
  bool probe;                        // in `fp8sim-hw probe`'s default list
  std::vector<CaptureSet> captures;  // `fp8sim-hw capture` folders
};

// Every row, in the order check prints them.
const std::vector<KernelRow>& kernel_table();

// A row made runnable.
struct Variant {
  std::string name;     // row label: kernel[.pN][.block128]
  std::string kernel;   // PTX-qualifier name, e.g. wgmma_m64n8k32_f32_e4m3_e4m3
  Path path = Path::wgmma;
  cuda::Fp8 a = cuda::Fp8::e4m3, b = cuda::Fp8::e4m3;
  std::string model;    // accumulator preset it must match; "" = unknown ("measure")
  int promote_every = 0;
  bool block_scales = false;
  std::string out_type = "fp32";
  bool takes_c = true;  // C enters the accumulator (cuBLASLt: no, C is never passed)
  bool probe = false;   // in probe's default list
  std::vector<CaptureSet> captures;
  std::vector<std::string> candidates;  // models tried for "closest" (measure or mismatch)
  std::vector<int> candidate_promote;   // promotion intervals tried with each candidate
  // Runs the case on the GPU: returns D (M x N fp32 values).
  std::function<std::vector<float>(const Case&)> run;
  // cuBLASLt only: the case's C added by the library's epilogue (beta = 1), for probe.
  std::function<std::vector<float>(const Case&)> run_epilogue_c;
};

// Every row of kernel_table() as a Variant.
std::vector<Variant> make_variants();

// make_variants() less those the environment leaves out (hw_env.hpp).
std::vector<Variant> variants_to_run();

// The case as the variant sees it (C dropped where the kernel takes none).
Case adapt_case(const Variant& v, const Case& c);

// The GemmSpec for a variant with model `model` and interval `promote_every`.
GemmSpec variant_spec(const Variant& v, const Case& c, const std::string& model, int promote_every);

// The FormatSpec of a kernel operand type.
FormatSpec fmt_of(cuda::Fp8 t);

}  // namespace fp8sim::hw
