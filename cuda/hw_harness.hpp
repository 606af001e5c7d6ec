// hw_harness: fp8sim-hw's test vectors (suites), the kernel variants under test and their
// models, shared by the check, capture, probe and bench subcommands.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bits.hpp"  // same_bits
#include "format.hpp"
#include "gemm.hpp"
#include "kernels.hpp"

namespace fp8sim::hw {

// One GEMM problem: D = A * B^T (+ C in the accumulator), sim/gemm.hpp conventions.
struct Case {
  std::string suite;
  FormatSpec a_format, b_format;
  int M = 64, N = 16, K = 0;
  std::vector<std::uint8_t> A, B;  // M x K, N x K codes
  std::vector<float> C;            // M x N or empty
  std::vector<float> sa, sb;       // block scales (1 x 128 for A, 128 x 128 for B) or empty
  std::uint64_t seed = 0;
};

// Suite names, in table order.
const std::vector<std::string>& suite_names();

// The cases of one suite for a format pair (deterministic in seed). `block_scales` adds
// sa / sb; K values where the variant cannot run are still generated (the caller skips).
std::vector<Case> make_suite(const std::string& suite, const FormatSpec& a, const FormatSpec& b,
                             std::uint64_t seed, bool block_scales, int max_k);

// A kernel under test with one configuration.
struct Variant {
  std::string name;     // row label: kernel[.pN][.block]
  std::string kernel;   // PTX-qualifier name, e.g. wgmma_m64n8k32_f32_e4m3_e4m3
  std::string path;     // wgmma | mma_sync | cublaslt
  cuda::Fp8 a = cuda::Fp8::e4m3, b = cuda::Fp8::e4m3;
  std::string model;    // accumulator preset it must match; "" = unknown ("measure")
  int promote_every = 0;
  bool block_scales = false;
  std::string out_type = "fp32";
  bool takes_c = true;  // C enters the accumulator (cuBLASLt: no, C is never passed)
  std::vector<std::string> candidates;  // models tried for "closest" (measure or mismatch)
  std::vector<int> candidate_promote;   // promotion intervals tried with each candidate
  // Runs the case on the GPU: returns D (M x N fp32 values).
  std::function<std::vector<float>(const Case&)> run;
  // cuBLASLt only: the case's C added by the library's epilogue (beta = 1), for probe.
  std::function<std::vector<float>(const Case&)> run_epilogue_c;
};

// Every variant (wgmma layout picked by the self-test: desc_layout).
std::vector<Variant> make_variants(int desc_layout);

// The case as the variant sees it (C dropped where the kernel takes none).
Case adapt_case(const Variant& v, const Case& c);

// The GemmSpec for a variant with model `model` and interval `promote_every`.
GemmSpec variant_spec(const Variant& v, const Case& c, const std::string& model, int promote_every);

// Model output for a case (throws std::invalid_argument when the spec cannot run it).
std::vector<float> run_model(const GemmSpec& s, const Case& c);

// "0x3f800000".
std::string hex32(float v);

}  // namespace fp8sim::hw
