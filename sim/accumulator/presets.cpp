// presets: the accumulator preset table (accumulator_presets()), every MMA with public
// evidence as one AccumulatorSpec row.
#include "accumulator/accumulator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace fp8sim {
namespace {

constexpr const char* kMmaSimNv = "MMA-Sim 2.1.1 (PyPI mmasim), mmasim/nv_ptx/sim.py";
constexpr const char* kMmaSimAmd = "MMA-Sim 2.1.1 (PyPI mmasim), mmasim/amd/sim.py";

// An accumulator output: "f32" (fp32 rounded toward zero), "e8m13" (14 significant bits,
// toward zero) or "f16" (fp16, nearest even).
void set_output(AccumulatorSpec& m, std::string_view out) {
  m.output = format_by_name(out == "f32" ? "fp32" : out == "f16" ? "fp16" : std::string(out));
  m.output_rounding = out == "f16" ? Rounding::rne : Rounding::rz;
}

// The fused-dot-product-add step NVIDIA's tensor cores share (MMA-Sim's T_FDPA): `group`
// products and c aligned together, each cut toward zero `frac` bits below, zero terms at
// exponent `zero`, one rounding into `out`.
AccumulatorSpec nv(std::string name, std::string aliases, std::string instruction, int group,
                   int frac, std::string_view out, int zero, std::string evidence) {
  AccumulatorSpec m;
  m.name = std::move(name);
  for (std::size_t at = 0; !aliases.empty() && at != std::string::npos;) {
    const std::size_t sp = aliases.find(' ', at);
    m.aliases.push_back(aliases.substr(at, sp == std::string::npos ? sp : sp - at));
    at = sp == std::string::npos ? sp : sp + 1;
  }
  m.instruction = std::move(instruction);
  m.group = group;
  m.frac_bits = frac;
  m.zero_exponent = zero;
  set_output(m, out);
  m.evidence = std::move(evidence);
  return m;
}

// MMA-Sim's T_FDPA parameters, cited: F, L and e_zero for the output type.
std::string t_fdpa(int frac, int group, int zero) {
  return fmt::format("{} (MMA_T_FDPA: F={}, L={}, e_zero={})", kMmaSimNv, frac, group, zero);
}

// sm_90 mma.sync on FP8: unpacked to fp16, two chained steps over interleaved K per block of
// 2 x group, the block's result added into C.
AccumulatorSpec sm90_mma_sync(AccumulatorSpec m) {
  m.c_entry = CEntry::add;
  m.block = 2 * m.group;
  m.interleave = true;
  m.unpack = format_by_name("fp16");
  m.zero_exponent.reset();
  return m;
}

// Block scales inside the step (block-scaled MMAs).
AccumulatorSpec scaled(AccumulatorSpec m, const char* scale_format, int block, int group_sum) {
  m.block_scale = BlockScale{format_by_name(scale_format), block};
  m.group_sum = group_sum;
  return m;
}

// The FP4 block-scaled step (MMA-Sim's GST_FDPA, kind::mxf4 and mxf4nvf4): 64 products in
// exact group sums of 16, each times its two scales' significands and aligned on their
// exponents, cut toward zero 35 bits below, zero terms at 2^-139, fp32 output cut toward zero.
AccumulatorSpec gst(std::string name, std::string aliases, std::string instruction,
                    const char* scale_format, int block, const char* note = "") {
  return scaled(nv(std::move(name), std::move(aliases), std::move(instruction), 64, 35, "f32",
                   -139,
                   fmt::format("{} (MMA_GST_FDPA: G=16, F=35, L=64, e_zero=-139{})", kMmaSimNv,
                               note)),
                scale_format, block, 16);
}

// AMD CDNA2's 16-bit MFMA step (MMA-Sim's MMA_FTZ_MUL_ADD with P = group): fp32 products
// summed pairwise, subnormals flushed.
AccumulatorSpec cdna2(std::string name, std::string aliases, std::string instruction, int group) {
  AccumulatorSpec m = nv(std::move(name), std::move(aliases), std::move(instruction), group, 23,
                         "f32", 0, "");
  m.zero_exponent.reset();
  m.arithmetic = StepArithmetic::pairwise;
  m.output_rounding = Rounding::rne;
  m.signed_zero = true;
  m.evidence = fmt::format("{} (MMA_FTZ_MUL_ADD: P={})", kMmaSimAmd, group);
  return m;
}

// AMD CDNA3's MFMA step (MMA-Sim's TR_FDPA / GTR_FDPA): products cut toward zero 24 bits
// below their largest exponent, then realigned with c (31 + 1 and 24 bits, cut down), cut
// down to 31 bits and rounded to fp32, nearest even; FP8 in even and odd lanes.
AccumulatorSpec cdna3(std::string name, std::string aliases, std::string instruction, int group,
                      bool fp8) {
  AccumulatorSpec m = nv(std::move(name), std::move(aliases), std::move(instruction), group, 24,
                         "f32", 0, "");
  m.zero_exponent.reset();
  m.output_rounding = Rounding::rne;
  m.c_entry = CEntry::realign;
  m.realign_frac = 31;
  m.realign_drop_far = fp8;
  m.lanes = fp8 ? 2 : 1;
  m.product_overflow = !fp8;
  m.signed_zero = true;
  m.evidence = fmt::format("{} ({}: F=24, F2=31, L={}, RNE-FP32)", kMmaSimAmd,
                           fp8 ? "MMA_GTR_FDPA" : "MMA_TR_FDPA", group);
  return m;
}

// An exact model: c and `group` products summed exactly, rounded once to fp32, nearest even.
AccumulatorSpec exact_fp32(std::string name, std::string aliases, std::string instruction,
                           int group, std::string evidence) {
  AccumulatorSpec m = nv(std::move(name), std::move(aliases), std::move(instruction), group, 0,
                         "f32", 0, std::move(evidence));
  m.zero_exponent.reset();
  m.output_rounding = Rounding::rne;
  m.signed_zero = true;
  m.exact = true;
  return m;
}

}  // namespace

const std::vector<AccumulatorSpec>& accumulator_presets() {
  static const std::vector<AccumulatorSpec> presets = [] {
    const std::string h100 =
        "measured with fp8sim-hw on an H100 (2026-11-23, tests/data/hw): bit-exact in every "
        "suite";
    std::vector<AccumulatorSpec> v = {
        // ---- NVIDIA Volta and Turing: mma.m8n8k4 f16 ----
        nv("sm_70.mma.m8n8k4.f32.f16", "volta-f16", "mma.sync.aligned.m8n8k4.f32.f16.f16 "
           "(sm_70; sm_75 runs it the same way)", 4, 23, "f32", -131, t_fdpa(23, 4, -131)),
        nv("sm_70.mma.m8n8k4.f16.f16", "volta-f16-f16", "mma.sync.aligned.m8n8k4.f16.f16.f16 "
           "(sm_70, sm_75)", 4, 23, "f16", -19, t_fdpa(23, 4, -19)),
        // ---- Turing to Ada: 16-bit mma (16 bytes of A per step) ----
        nv("sm_80.mma.m16n8k16.f32.f16", "ampere-f16 ampere-bf16",
           "mma.sync.aligned.m16n8k{8,16}.f32.{f16,bf16} (sm_75 f16, sm_80, sm_86, sm_89)", 8,
           24, "f32", -132, t_fdpa(24, 8, -132)),
        nv("sm_80.mma.m16n8k16.f16.f16", "ampere-f16-f16",
           "mma.sync.aligned.m16n8k{8,16}.f16.f16.f16 (sm_75, sm_80, sm_86, sm_89)", 8, 24,
           "f16", -20, t_fdpa(24, 8, -20)),
        nv("sm_80.mma.m16n8k8.f32.tf32", "ampere-tf32",
           "mma.sync.aligned.m16n8k{4,8}.f32.tf32.tf32.f32 (sm_80, sm_86, sm_89)", 4, 24, "f32",
           -132, t_fdpa(24, 4, -132)),
        // ---- Ada: FP8 mma ----
        nv("sm_89.mma.m16n8k32.f32.f8", "ada-fp8",
           "mma.sync.aligned.m16n8k{16,32}.f32.{e4m3,e5m2}.{e4m3,e5m2}.f32 (sm_89)", 16, 13,
           "e8m13", -132,
           "Ada (L40S): steps of 16 products + c, each cut toward zero 13 bits below the "
           "largest exponent, output cut to 14 bits; fitted: reproduces all 10000 Ada FP8 "
           "fp32 rows of the public validation data (c applied); " + t_fdpa(13, 16, -132)),
        nv("sm_89.mma.m16n8k32.f16.f8", "ada-fp8-f16",
           "mma.sync.aligned.m16n8k{16,32}.f16.{e4m3,e5m2}.{e4m3,e5m2}.f16 (sm_89)", 16, 13,
           "f16", -20,
           "Ada (L40S), FP16 accumulate: as ada-fp8 with the step rounded to fp16 (nearest "
           "even) and c held in fp16; fitted: reproduces all 10000 Ada FP8 d_fp16 rows of the "
           "public validation data; " + t_fdpa(13, 16, -20)),
        // ---- Hopper and Blackwell: 16-bit mma (32 bytes of A per step) ----
        nv("sm_90.mma.m16n8k16.f32.f16", "hopper-mma-f16 hopper-mma-bf16",
           "mma.sync.aligned.m16n8k16.f32.{f16,bf16} (sm_90, sm_100)", 16, 25, "f32", -133,
           t_fdpa(25, 16, -133)),
        nv("sm_90.mma.m16n8k16.f16.f16", "hopper-mma-f16-f16",
           "mma.sync.aligned.m16n8k16.f16.f16.f16 (sm_90, sm_100)", 16, 25, "f16", -21,
           t_fdpa(25, 16, -21)),
        nv("sm_90.mma.m16n8k8.f32.f16", "",
           "mma.sync.aligned.m16n8k8.f32.{f16,bf16} (sm_90, sm_100; k8 is one step of 8)", 8,
           25, "f32", -133, t_fdpa(25, 8, -133)),
        nv("sm_90.mma.m16n8k8.f16.f16", "",
           "mma.sync.aligned.m16n8k8.f16.f16.f16 (sm_90, sm_100)", 8, 25, "f16", -21,
           t_fdpa(25, 8, -21)),
        nv("sm_90.mma.m16n8k8.f32.tf32", "hopper-mma-tf32",
           "mma.sync.aligned.m16n8k8.f32.tf32.tf32.f32 (sm_90, sm_100)", 8, 25, "f32", -133,
           t_fdpa(25, 8, -133)),
        nv("sm_90.mma.m16n8k4.f32.tf32", "",
           "mma.sync.aligned.m16n8k4.f32.tf32.tf32.f32 (sm_90, sm_100)", 4, 25, "f32", -133,
           t_fdpa(25, 4, -133)),
        // ---- Hopper: FP8 mma.sync (measured; MMA-Sim has no Hopper FP8 mma) ----
        sm90_mma_sync(nv(
            "sm_90.mma.m16n8k32.f32.f8", "hopper-mma-sync",
            "mma.sync.aligned.m16n8k32.row.col.f32.{e4m3,e5m2}.{e4m3,e5m2}.f32 (sm_90)", 16, 25,
            "f32", 0,
            "H100: FP8 is unpacked to FP16 (SASS F2FP.F16.E4M3.UNPACK_B, so an e4m3 subnormal "
            "aligns as the fp16 normal it becomes) and each k32 is two chained "
            "HMMA.16816.F32 from zero over interleaved K (k mod 4 in {0,1}, then {2,3}), 16 "
            "products each, 25 fraction bits cut toward zero, fp32 output cut toward zero, "
            "then FADD into C; " + h100 + " for all four input type pairs")),
        sm90_mma_sync(nv(
            "sm_90.mma.m16n8k32.f16.f8", "hopper-mma-sync-f16",
            "mma.sync.aligned.m16n8k32.row.col.f16.{e4m3,e5m2}.{e4m3,e5m2}.f16 (sm_90)", 16, 25,
            "f16", 0,
            "H100/H200 FP8 mma.sync, FP16 accumulate: as hopper-mma-sync with each "
            "HMMA.16816.F16 step rounded to fp16 (nearest even) and the k32 result added to "
            "the fp16 C with one fp16 add (MMA-Sim's Hopper HMMA parameters); fitted: "
            "reproduces all 20000 H100/H200 FP8 d_fp16 rows of the public validation data")),
        // Triton's FP8 tl.dot where it does not use wgmma on sm_90 (a CTA M that is not a
        // multiple of 64, warps not a multiple of 4, max_num_imprecise_acc < 32): FP8 upcast in
        // registers, then the FP16 HMMA chain with the dot's accumulator as C.
        [] {
          AccumulatorSpec m = sm90_mma_sync(nv(
              "sm_90.mma.m16n8k16.f32.f16.f8-upcast", "triton-mma-f16",
              "cvt.rn.f16x2.e4m3x2 then mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
              "(sm_90, Triton 3.6 FP8 MMAv2)", 16, 25, "f32", -133,
              "H100, Triton 3.6.0 (2026-11-26): PTX of tl.dot on e4m3 at BLOCK_M 16/32, at "
              "BLOCK_M 128 with 2 warps and at max_num_imprecise_acc 0/16 is cvt.rn.f16x2.e4m3x2 "
              "and mma.sync m16n8k16 f32.f16 with the accumulator as C; the HMMA step as "
              "hopper-mma-f16 (MMA-Sim's F=25, L=16, e_zero=-133), K in Triton's FP8 operand "
              "order (per 32: k mod 4 in {0,1}, then {2,3}), c joining the first step of each "
              "32 and every step after: every output of tests/data/hw/kernels/"
              "triton_fp8_dot_mma_f16 (147,360, every code and Gaussian operands, K tails); "
              "contiguous K leaves 0.1% (Gaussian) to 80% (every code) different"));
          m.c_entry = CEntry::join;
          m.zero_exponent = -133;
          return m;
        }(),
        // ---- Hopper: wgmma ----
        nv("sm_90a.wgmma.m64nNk32.f32.f8", "hopper-wgmma",
           "wgmma.mma_async.sync.aligned.m64nNk32.f32.{e4m3,e5m2}.{e4m3,e5m2} (sm_90a)", 32, 13,
           "e8m13", -133,
           "H100/H200: 32 products + c aligned to the largest exponent, each cut toward zero "
           "13 bits below it, output cut to 14 bits (DeepSeek-V3 s3.5.2; Khattak & Mikaitis "
           "arXiv 2512.07004); reproduces all 20000 H100/H200 FP8 rows of the public "
           "validation data; " + h100 + " (wgmma and cuBLASLt); " + t_fdpa(13, 32, -133)),
        nv("sm_90a.wgmma.m64nNk32.f16.f8", "hopper-wgmma-f16",
           "wgmma.mma_async.sync.aligned.m64nNk32.f16.{e4m3,e5m2}.{e4m3,e5m2} (sm_90a)", 32, 13,
           "f16", -21,
           "H100, FP16 accumulate: the FP32 path's fused step (C held in fp16, a subnormal C "
           "aligned on 2^-14) rounded once to fp16, nearest even; " + h100 +
           " for all four input pairs (the public H100/H200 d_fp16 rows are the mma.sync "
           "path); " + t_fdpa(13, 32, -21)),
        nv("sm_90a.wgmma.m64nNk16.f32.f16", "hopper-wgmma-f16in hopper-wgmma-bf16",
           "wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16} (sm_90a)", 16, 25, "f32", -133,
           t_fdpa(25, 16, -133)),
        nv("sm_90a.wgmma.m64nNk16.f16.f16", "",
           "wgmma.mma_async.sync.aligned.m64nNk16.f16.f16.f16 (sm_90a)", 16, 25, "f16", -21,
           t_fdpa(25, 16, -21)),
        nv("sm_90a.wgmma.m64nNk8.f32.tf32", "hopper-wgmma-tf32",
           "wgmma.mma_async.sync.aligned.m64nNk8.f32.tf32.tf32 (sm_90a)", 8, 25, "f32", -133,
           t_fdpa(25, 8, -133)),
        // ---- Blackwell: tcgen05.mma ----
        nv("sm_100a.tcgen05.mma.kind::f8f6f4.f32", "blackwell-f8f6f4",
           "tcgen05.mma.cta_group::1.kind::f8f6f4 with f32 D, A/B any of e4m3, e5m2, e3m2, "
           "e2m3, e2m1 (sm_100a)", 32, 25, "f32", -133,
           t_fdpa(25, 32, -133) + "; disagrees with the public B200 FP8 rows (instruction "
           "not recorded): c joining the step reproduces 6443 of 10000, c added after the "
           "rounded step (blackwell-fp8) all 10000 (fp8sim, 2026-11-23)"),
        nv("sm_100a.tcgen05.mma.kind::f8f6f4.f16", "",
           "tcgen05.mma.cta_group::1.kind::f8f6f4 with f16 D (sm_100a)", 32, 25, "f16", -21,
           t_fdpa(25, 32, -21)),
        nv("sm_100a.tcgen05.mma.kind::f16.f32", "blackwell-f16 blackwell-bf16",
           "tcgen05.mma.cta_group::1.kind::f16 with f32 D, A/B f16 or bf16 (sm_100a)", 16, 25,
           "f32", -133, t_fdpa(25, 16, -133)),
        nv("sm_100a.tcgen05.mma.kind::f16.f16", "",
           "tcgen05.mma.cta_group::1.kind::f16 with f16 D (sm_100a)", 16, 25, "f16", -21,
           t_fdpa(25, 16, -21)),
        nv("sm_100a.tcgen05.mma.kind::tf32.f32", "blackwell-tf32",
           "tcgen05.mma.cta_group::1.kind::tf32 (sm_100a)", 8, 25, "f32", -133,
           t_fdpa(25, 8, -133)),
        [] {
          AccumulatorSpec m = nv(
              "b200.fp8.fitted", "blackwell-fp8", "tcgen05.mma kind::f8f6f4 e4m3/e5m2, f32 D, "
              "as fitted to the public B200 vectors (sm_100a)", 32, 25, "f32", 0,
              "B200: 32 products summed with 25 fraction bits below the largest (cut toward "
              "zero), rounded toward zero to fp32, then c added with one IEEE fp32 add "
              "(nearest even); fitted: reproduces all 10000 B200 FP8 fp32 rows of the public "
              "validation data for any frac >= 23 (the data bound it only below)");
          m.zero_exponent.reset();
          m.c_entry = CEntry::add;
          return m;
        }(),
        // ---- Blackwell: block-scaled MMAs (tcgen05.mma on sm_100a, mma.sync on sm_120a) ----
        scaled(nv("sm_100a.tcgen05.mma.kind::mxf8f6f4.block32", "mxf8f6f4 blackwell-mxf8",
                  "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X, UE8M0 "
                  "scales per 32 (sm_100a; mma.sync m16n8k32 kind::mxf8f6f4 on sm_120a)",
                  32, 25, "f32", -133,
                  fmt::format("{} (MMA_ST_FDPA: F=25, L=32, e_zero=-133; scale exponents "
                              "added to the product exponents)", kMmaSimNv)),
               "ue8m0", 32, 1),
        gst("sm_100a.tcgen05.mma.kind::mxf4.block32", "mxf4 blackwell-mxf4",
            "tcgen05.mma.cta_group::1.kind::mxf4.block_scale.scale_vec::2X, e2m1, UE8M0 "
            "scales per 32 (sm_100a; mma.sync m16n8k64 on sm_120a)", "ue8m0", 32),
        gst("sm_100a.tcgen05.mma.kind::mxf4nvf4.block32", "",
            "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::2X, e2m1, UE8M0 "
            "scales per 32 (sm_100a, sm_120a)", "ue8m0", 32),
        gst("sm_100a.tcgen05.mma.kind::mxf4nvf4.block16.ue8m0", "",
            "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X, e2m1, UE8M0 "
            "scales per 16 (sm_100a, sm_120a)", "ue8m0", 16),
        gst("sm_100a.tcgen05.mma.kind::mxf4nvf4.block16", "nvf4 nvfp4 blackwell-nvfp4",
            "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X, e2m1, UE4M3 "
            "scales per 16: NVFP4 (sm_100a; mma.sync m16n8k64 on sm_120a)", "ue4m3", 16,
            "; group sums times the UE4M3 significands"),
        // ---- RTX Blackwell: mma.sync ----
        nv("sm_120a.mma.m16n8k32.f32.f8f6f4", "rtx-blackwell-fp8",
           "mma.sync.aligned.m16n8k32.f32.{e4m3,e5m2} and kind::f8f6f4 (sm_120a)", 32, 25,
           "f32", -133, t_fdpa(25, 32, -133)),
        nv("sm_120a.mma.m16n8k32.f16.f8f6f4", "",
           "mma.sync.aligned.m16n8k32.f16 FP8 and kind::f8f6f4 (sm_120a)", 32, 25, "f16", -21,
           t_fdpa(25, 32, -21)),
        nv("sm_120a.mma.m16n8k16.f32.f8", "",
           "mma.sync.aligned.m16n8k16.f32.{e4m3,e5m2}.{e4m3,e5m2}.f32 (sm_120a)", 16, 25, "f32",
           -133, t_fdpa(25, 16, -133)),
        nv("sm_120a.mma.m16n8k16.f16.f8", "",
           "mma.sync.aligned.m16n8k16.f16.{e4m3,e5m2}.{e4m3,e5m2}.f16 (sm_120a)", 16, 25, "f16",
           -21, t_fdpa(25, 16, -21)),
        // ---- AMD CDNA1 (MI100) and CDNA3 (MI300) MFMA ----
        exact_fp32("cdna1.mfma.f32.f16", "mi100-f16", "v_mfma_f32_*f16 (gfx908)", 4,
                   fmt::format("{} (MMA_E_FDPA: exact sum of 4 products and c, one rounding "
                               "to fp32)", kMmaSimAmd)),
        exact_fp32("cdna1.mfma.f32.bf16", "mi100-bf16", "v_mfma_f32_*bf16 (gfx908)", 2,
                   fmt::format("{} (MMA_E_FDPA: exact sum of 2 products and c)", kMmaSimAmd)),
        cdna2("cdna2.mfma.f32.f16", "mi200-f16", "v_mfma_f32_*f16 (gfx90a)", 4),
        cdna2("cdna2.mfma.f32.bf16", "", "v_mfma_f32_{32x32x4,32x32x2,16x16x8,16x16x2,4x4x2}bf16 "
              "(gfx90a: the CDNA1 bf16 instructions)", 2),
        cdna2("cdna2.mfma.f32.bf16_1k", "mi200-bf16", "v_mfma_f32_*bf16_1k (gfx90a)", 4),
        cdna3("cdna3.mfma.f32.f16", "mi300-f16 mi300-bf16",
              "v_mfma_f32_{32x32x8,16x16x16}_{f16,bf16} (gfx942)", 8, false),
        cdna3("cdna3.mfma.f32.f16.k4", "",
              "v_mfma_f32_{32x32x4_2b,16x16x4_4b,4x4x4_16b}_{f16,bf16} (gfx942)", 4, false),
        cdna3("cdna3.mfma.f32.xf32", "mi300-xf32", "v_mfma_f32_{16x16x8,32x32x4}_xf32 (gfx942)",
              4, false),
        cdna3("cdna3.mfma.f32.fp8", "mi300-fp8",
              "v_mfma_f32_{16x16x32,32x32x16}_{fp8,bf8}_{fp8,bf8} (gfx942; FNUZ operands)", 16,
              true),
        // ---- plain models ----
        exact_fp32("fp32", "cdna1.mfma.f32.f32 cdna3.mfma.f32.f32", "one fmaf per product",
                   1,
                   "IEEE single precision: one product added per step, rounded to nearest even "
                   "(products of FP8 values are exact in fp32, so this is also fmaf; MMA-Sim "
                   "2.1.1's MMA_FMA for AMD f32 MFMA)"),
        exact_fp32("exact", "", "none: the exact dot product", 0,
                   "exact sum of c and every product of the chunk, rounded once to fp32"),
    };
    return v;
  }();
  return presets;
}

}  // namespace fp8sim
