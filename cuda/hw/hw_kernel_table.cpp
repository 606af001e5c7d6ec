// hw_kernel_table: the kernel variants fp8sim-hw runs, one data row each.
#include "hw/hw_kernel_table.hpp"

#include <fmt/format.h>

#include "hw/cublaslt_fp8.hpp"
#include "hw/hw_device.hpp"
#include "hw/hw_env.hpp"

namespace fp8sim::hw {
namespace {

using cuda::Accum;
using cuda::Fp8;

// The suites most capture folders take.
const std::vector<std::string> kBase = {"random-normal", "nonzero-c", "one-large", "cancellation",
                                        "specials", "subnormals", "k-sweep"};

}  // namespace

std::string_view to_string(Path p) {
  switch (p) {
    case Path::wgmma: return "wgmma";
    case Path::mma_sync: return "mma_sync";
    case Path::cublaslt: return "cublaslt";
  }
  return "?";
}

const std::vector<KernelRow>& kernel_table() {
  constexpr Path W = Path::wgmma, S = Path::mma_sync, L = Path::cublaslt;
  constexpr Fp8 e4 = Fp8::e4m3, e5 = Fp8::e5m2;
  // Captures are kept small for the repository (cases with K > max_k are left out).
  static const std::vector<KernelRow> rows = {
      // path a  b   accum      p  block  out     fast   preset              probe  captures
      {W, e4, e4, Accum::f32, 0, false, "fp32", false, "hopper-wgmma", true, {{"wgmma_f32_e4m3", "", kBase, 512}}},
      {W, e5, e5, Accum::f32, 0, false, "fp32", false, "hopper-wgmma", true, {{"wgmma_f32_e5m2", "", kBase, 512}}},
      {W, e4, e5, Accum::f32, 0, false, "fp32", false, "hopper-wgmma", false,
       {{"wgmma_f32_e4m3_e5m2", "", {"random-normal", "nonzero-c", "specials"}, 256}}},
      {W, e5, e4, Accum::f32, 0, false, "fp32", false, "hopper-wgmma", false, {}},
      {W, e4, e4, Accum::f32, 32, false, "fp32", false, "hopper-wgmma", false, {}},
      {W, e4, e4, Accum::f32, 128, false, "fp32", false, "hopper-wgmma", false, {}},
      {W, e4, e4, Accum::f32, 128, true, "fp32", false, "hopper-wgmma", false,
       {{"wgmma_f32_p128_block", "", {"random-normal", "one-large", "k-sweep"}, 1024}}},
      {W, e5, e5, Accum::f32, 128, true, "fp32", false, "hopper-wgmma", false,
       {{"wgmma_f32_p128_block_e5m2", "", {"random-normal", "k-sweep"}, 512}}},
      {W, e4, e4, Accum::f32, 64, true, "fp32", false, "hopper-wgmma", false, {}},
      {W, e4, e4, Accum::f16, 0, false, "fp16", false, "hopper-wgmma-f16", true, {{"wgmma_f16_e4m3", "", kBase, 512}}},
      {W, e5, e5, Accum::f16, 0, false, "fp16", false, "hopper-wgmma-f16", false,
       {{"wgmma_f16_e5m2", "", {"random-normal", "nonzero-c", "specials", "k-sweep"}, 512},
        {"wgmma_f16_e5m2_subnormals", "", {"subnormals"}, 512}}},
      {W, e4, e5, Accum::f16, 0, false, "fp16", false, "hopper-wgmma-f16", false, {}},
      {W, e5, e4, Accum::f16, 0, false, "fp16", false, "hopper-wgmma-f16", false, {}},
      // f16 accumulation promoted into FP32 every 128: the output is fp32.
      {W, e4, e4, Accum::f16, 128, false, "fp32", false, "hopper-wgmma-f16", false, {}},
      // mma.sync: the SASS structure is a permuted k16 HMMA pair + FADD into C.
      {S, e4, e4, Accum::f32, 0, false, "fp32", false, "hopper-mma-sync", true, {{"mma_sync_e4m3", "", kBase, 512}}},
      {S, e5, e5, Accum::f32, 0, false, "fp32", false, "hopper-mma-sync", false, {}},
      {S, e4, e5, Accum::f32, 0, false, "fp32", false, "hopper-mma-sync", false, {}},
      {S, e5, e4, Accum::f32, 0, false, "fp32", false, "hopper-mma-sync", true,
       {{"mma_sync_e5m2_e4m3", "", {"random-normal", "one-large"}, 512}}},
      // cuBLASLt: no preset (measured; its C enters through the epilogue, not the accumulator).
      {L, e4, e4, Accum::f32, 0, false, "fp32", false, "", true,
       {{"cublaslt_default", "", {"random-normal", "one-large", "k-sweep"}, 2048}}},
      {L, e4, e4, Accum::f32, 0, false, "bf16", false, "", false, {}},
      {L, e4, e4, Accum::f32, 0, false, "fp32", true, "", true,
       {{"cublaslt_fastaccum", "", {"random-normal", "one-large", "k-sweep"}, 2048}}},
      {L, e4, e4, Accum::f32, 0, false, "bf16", true, "", false, {}},
  };
  return rows;
}

FormatSpec fmt_of(cuda::Fp8 t) { return format_by_name(t == cuda::Fp8::e4m3 ? "e4m3" : "e5m2"); }

Case adapt_case(const Variant& v, const Case& c) {
  Case a = c;
  if (!v.takes_c) a.C.clear();
  if (!v.block_scales) a.sa.clear(), a.sb.clear();
  return a;
}

GemmSpec variant_spec(const Variant& v, const Case& c, const std::string& model, int promote_every) {
  GemmSpec s;
  s.a_format = c.a_format;
  s.b_format = c.b_format;
  s.model = accumulator_by_name(model);
  s.promote_every = promote_every;
  s.scaling = v.block_scales ? Scaling::block : Scaling::none;
  s.block = 128;
  s.order = ScaleOrder::deepgemm;
  s.out_type = format_by_name(v.out_type);
  s.threads = 0;
  return s;
}

namespace {

cuda::Fp8 fp8_of(const FormatSpec& f) { return f.exponent_bits == 4 ? cuda::Fp8::e4m3 : cuda::Fp8::e5m2; }
const char* name_of(cuda::Fp8 t) { return t == cuda::Fp8::e4m3 ? "e4m3" : "e5m2"; }

std::vector<float> run_wgmma(const cuda::WgmmaGemm& g, const Case& c) {
  DevBuf<std::uint8_t> A(c.A), B(c.B);
  DevBuf<float> C(c.C), sa(c.sa), sb(c.sb), D(static_cast<std::size_t>(c.M) * c.N);
  cuda::WgmmaGemm gg = g;
  gg.a = fp8_of(c.a_format), gg.b = fp8_of(c.b_format);
  launch_check(cuda::wgmma_gemm(gg, c.M, c.N, c.K, A.get(), B.get(), C.get_or_null(),
                                sa.get_or_null(), sb.get_or_null(), D.get()));
  cuda_check(cudaDeviceSynchronize(), "wgmma kernel");
  return D.download();
}

std::vector<float> run_mma(const Case& c) {
  DevBuf<std::uint8_t> A(c.A), B(c.B);
  DevBuf<float> C(c.C), D(static_cast<std::size_t>(c.M) * c.N);
  launch_check(cuda::mma_sync_gemm(fp8_of(c.a_format), fp8_of(c.b_format), c.M, c.N, c.K, A.get(),
                                   B.get(), C.get_or_null(), D.get()));
  cuda_check(cudaDeviceSynchronize(), "mma.sync kernel");
  return D.download();
}

std::vector<float> run_lt(const cuda::CublasLtGemm& g, const Case& c) {
  static DevBuf<std::uint8_t> work(32u << 20);
  DevBuf<std::uint8_t> A(c.A), B(c.B);
  DevBuf<float> D(static_cast<std::size_t>(c.M) * c.N);
  DevBuf<float> C(c.C);
  launch_check(cuda::cublaslt_gemm(g, c.M, c.N, c.K, A.get(), B.get(), C.get_or_null(), D.get(), work.get(), work.size()));
  cuda_check(cudaDeviceSynchronize(), "cuBLASLt");
  return D.download();
}

// Candidate models for a path whose model is unknown or contradicted.
std::vector<std::string> f16_candidates() {
  std::vector<std::string> c = {"hopper-wgmma-f16"};
  for (int frac : {13, 23})
    for (const char* r : {"rne", "rz"})
      for (const char* cm : {"join", "exact"})
        c.push_back(fmt::format("custom:group=32,frac={},cut=rz,outfmt=fp16,outround={},c={}", frac, r, cm));
  return c;
}
// mma.sync on sm_90a: its preset first, then the plainer models it could be mistaken for
// (a promotion every 32 of a 16-wide fused step comes close to its HMMA pair + FADD).
std::vector<std::string> mma_candidates() {
  std::vector<std::string> c = {"hopper-mma-sync", "hopper-wgmma", "ada-fp8", "fp32", "exact", "blackwell-fp8"};
  for (int g : {8, 16})
    for (int frac : {13, 22, 23, 24, 25, 26})
      for (const char* out : {"out=14,outround=rz", "out=24,outround=rz", "out=24,outround=rne"})
        c.push_back(fmt::format("custom:group={},frac={},cut=rz,{}", g, frac, out));
  return c;
}
const std::vector<std::string> kF32Candidates = {"hopper-wgmma", "fp32", "exact", "ada-fp8"};

Variant make_variant(const KernelRow& r) {
  Variant v;
  v.path = r.path;
  v.a = r.a, v.b = r.b;
  v.model = r.preset;
  v.promote_every = r.promote_every;
  v.block_scales = r.block_scales;
  v.out_type = r.out_type;
  v.probe = r.probe;
  switch (r.path) {
    case Path::wgmma: {
      v.kernel = fmt::format("wgmma_m64n8k32_{}_{}_{}", r.accum == Accum::f32 ? "f32" : "f16", name_of(r.a), name_of(r.b));
      v.name = v.kernel + (r.promote_every > 0 ? fmt::format(".p{}", r.promote_every) : "") +
               (r.block_scales ? ".block128" : "");
      v.candidates = r.accum == Accum::f32 ? kF32Candidates : f16_candidates();
      v.candidate_promote = {r.promote_every};
      cuda::WgmmaGemm g;
      g.accum = r.accum, g.promote_every = r.promote_every, g.block_scales = r.block_scales;
      g.out_f16 = v.out_type == "fp16";
      v.run = [g](const Case& c) { return run_wgmma(g, c); };
      break;
    }
    case Path::mma_sync:
      v.kernel = fmt::format("mma_m16n8k32_row_col_f32_{}_{}_f32", name_of(r.a), name_of(r.b));
      v.name = v.kernel;
      v.candidates = mma_candidates();
      v.candidate_promote = {0, 32};
      v.run = [](const Case& c) { return run_mma(c); };
      break;
    case Path::cublaslt: {
      const bool bf16 = v.out_type == "bf16";
      v.kernel = fmt::format("cublaslt_e4m3_e4m3_{}_{}", bf16 ? "bf16" : "f32", r.fastaccum ? "fastaccum" : "default");
      v.name = v.kernel;
      v.takes_c = false;
      v.candidates = kF32Candidates;
      v.candidate_promote = {0, 32, 64, 128, 256, 512, 1024, 2048, 4096};
      const cuda::CublasLtGemm g{r.fastaccum, bf16};
      v.run = [g](const Case& c) {
        Case nc = c;
        nc.C.clear();
        return run_lt(g, nc);
      };
      if (!bf16) v.run_epilogue_c = [g](const Case& c) { return run_lt(g, c); };
      break;
    }
  }
  v.captures = r.captures;
  for (auto& s : v.captures) s.variant = v.name;
  return v;
}

}  // namespace

std::vector<Variant> make_variants() {
  std::vector<Variant> vs;
  for (const KernelRow& r : kernel_table()) vs.push_back(make_variant(r));
  return vs;
}

std::vector<Variant> variants_to_run() {
  std::vector<Variant> vs;
  for (auto& v : make_variants())
    if (!(skip_wgmma() && v.path == Path::wgmma)) vs.push_back(std::move(v));
  return vs;
}

}  // namespace fp8sim::hw
