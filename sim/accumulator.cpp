// accumulator: model presets, custom-model parsing and the reference fused step.
#include "accumulator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "exact.hpp"

namespace fp8sim {
namespace {

using i128 = __int128;

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

CEntry parse_c_entry(std::string_view s) {
  if (s == "join") return CEntry::join;
  if (s == "exact") return CEntry::exact;
  if (s == "add") return CEntry::add;
  if (s == "realign") return CEntry::realign;
  throw std::invalid_argument(
      fmt::format("unknown c entry '{}' (known: join, exact, add, realign)", s));
}

std::string_view to_string(CEntry c) {
  switch (c) {
    case CEntry::join: return "join";
    case CEntry::exact: return "exact";
    case CEntry::add: return "add";
    case CEntry::realign: return "realign";
  }
  return "?";
}

StepArithmetic parse_step_arithmetic(std::string_view s) {
  if (s == "fused") return StepArithmetic::fused;
  if (s == "pairwise") return StepArithmetic::pairwise;
  throw std::invalid_argument(fmt::format("unknown step arithmetic '{}' (known: fused, pairwise)", s));
}

std::string_view to_string(StepArithmetic a) {
  return a == StepArithmetic::pairwise ? "pairwise" : "fused";
}

// The preset table: the only place hardware parameters live. Each row names the instruction
// it models and cites its evidence; tests/test_gemm_hwdata.cpp replays the public measured
// vectors and tests/python/test_mmasim.py MMA-Sim against the rows.
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

void validate(const AccumulatorSpec& m) {
  auto bad = [&](std::string what) {
    throw std::invalid_argument(fmt::format("model '{}': {}", m.name, what));
  };
  if (m.group < 0 || (m.group == 0 && !m.exact))
    bad(fmt::format("group {} must be >= 1 (0 only for exact)", m.group));
  if (!m.exact && (m.frac_bits < 0 || m.frac_bits > 62))
    bad(fmt::format("frac bits {} not in 0..62", m.frac_bits));
  if (m.term_cut != Rounding::rz && m.term_cut != Rounding::rne && m.term_cut != Rounding::rd)
    bad("cut must be rz, rne or rd");
  if (m.output_rounding == Rounding::sr) bad("stochastic output rounding is not modelled");
  if (m.block != 0 && (m.group < 1 || m.block % m.group != 0 || m.block < 0))
    bad(fmt::format("block {} must be a multiple of the group {}", m.block, m.group));
  if (m.block != 0 && m.c_entry != CEntry::add)
    bad(fmt::format("block {} needs c=add (a block's result enters c with one add)", m.block));
  if (m.block != 0 && (m.lanes != 1 || m.group_sum != 1 || m.block_scale))
    bad("block (chained steps) does not combine with lanes, group sums or block scales");
  if (m.interleave && (m.block != 2 * m.group || m.group % 2 != 0))
    bad("interleave needs block = 2 x group (an even group)");
  if (m.group_sum < 1 || (m.group_sum > 1 && (m.group < 1 || m.group % m.group_sum != 0)))
    bad(fmt::format("group sum {} must divide the group {}", m.group_sum, m.group));
  if (m.group_sum > 1 && !m.block_scale)
    bad("group sums need block scales (a group's alignment exponent is its scales')");
  if (m.lanes < 1 || (m.lanes > 1 && (m.group < 1 || m.group % m.lanes != 0)))
    bad(fmt::format("lanes {} must divide the group {}", m.lanes, m.group));
  if (m.lanes > 1 && m.c_entry == CEntry::join)
    bad("lanes need c to enter after the lanes' sum (c=exact, add or realign)");
  if ((m.realign_frac != 0 || m.realign_drop_far) != (m.c_entry == CEntry::realign))
    bad("realign=<frac> goes with c=realign, and c=realign needs it");
  if (m.c_entry == CEntry::realign && (m.realign_frac < m.frac_bits || m.realign_frac > 62))
    bad(fmt::format("realign frac {} must lie in frac ({})..62", m.realign_frac, m.frac_bits));
  if (m.exact && (m.lanes != 1 || m.group_sum != 1 || m.block_scale ||
                  m.c_entry == CEntry::realign))
    bad("an exact model has no lanes, group sums, block scales or realigned c");
  if (m.arithmetic == StepArithmetic::pairwise &&
      ((m.group != 2 && m.group != 4) || m.exact || m.block != 0 || m.lanes != 1 ||
       m.group_sum != 1 || m.block_scale || m.unpack || m.zero_exponent ||
       m.c_entry != CEntry::join || m.output.name != "fp32"))
    bad("arith=pairwise takes a group of 2 or 4 and an fp32 output, and nothing else");
  if (m.block_scale) {
    validate(m.block_scale->format);
    const int bs = m.block_scale->block;
    if (bs < 1 || bs % m.group_sum != 0 || (m.group % bs != 0 && bs % m.group != 0))
      bad(fmt::format("scale block {} must hold whole group sums ({}) and tile the group {}",
                      bs, m.group_sum, m.group));
    if (m.group_sum == 1 && m.block_scale->format.mantissa_bits != 0)
      bad("scales with significands (" + m.block_scale->format.name +
          ") need group sums: a product times two significands may not be exact");
  }
  validate(m.output);
  if (!has_inf(m.output))
    bad(fmt::format("output format {} needs Inf (an IEEE format)", m.output.name));
}

std::string describe(const AccumulatorSpec& m) {
  const std::string group = m.group == 0 ? "all" : std::to_string(m.group);
  const std::string frac = m.exact ? "exact" : std::to_string(m.frac_bits);
  std::string s = fmt::format("group={} frac={} cut={} c={} renorm={} out={} outround={}", group,
                              frac, to_string(m.term_cut), to_string(m.c_entry),
                              m.renormalise_products ? 1 : 0, m.output.name,
                              to_string(m.output_rounding));
  if (m.block != 0) s += fmt::format(" block={} interleave={}", m.block, m.interleave ? 1 : 0);
  if (m.unpack) s += " unpack=" + m.unpack->name;
  if (m.zero_exponent) s += fmt::format(" zero={}", *m.zero_exponent);
  if (m.group_sum != 1) s += fmt::format(" groupsum={}", m.group_sum);
  if (m.lanes != 1) s += fmt::format(" lanes={}", m.lanes);
  if (m.c_entry == CEntry::realign)
    s += fmt::format(" realign={} dropfar={}", m.realign_frac, m.realign_drop_far ? 1 : 0);
  if (m.block_scale)
    s += fmt::format(" scale={}:{}", m.block_scale->format.name, m.block_scale->block);
  if (m.product_overflow) s += " overflow=1";
  if (m.signed_zero) s += " signedzero=1";
  if (m.arithmetic != StepArithmetic::fused) s += fmt::format(" arith={}", to_string(m.arithmetic));
  return s;
}

AccumulatorSpec accumulator_by_name(std::string_view name) {
  for (const auto& p : accumulator_presets()) {
    if (p.name == name) return p;
    for (const auto& a : p.aliases)
      if (a == name) {
        AccumulatorSpec m = p;
        m.name = a;  // reports carry the name the model was asked by
        return m;
      }
  }
  constexpr std::string_view kCustom = "custom:";
  if (name.substr(0, kCustom.size()) != kCustom) {
    throw std::invalid_argument(fmt::format(
        "unknown model '{}' (`fp8sim models` lists the {} presets and their aliases, e.g. "
        "hopper-wgmma, nvfp4; or custom:group=32,frac=13,out=14,cut=rz)",
        name, accumulator_presets().size()));
  }
  AccumulatorSpec m = accumulator_by_name("hopper-wgmma");
  m.name = std::string(name);
  m.aliases.clear();
  m.instruction = "custom";
  m.zero_exponent.reset();
  m.evidence = "custom model from the command line";
  std::string_view rest = name.substr(kCustom.size());
  auto to_int = [&](std::string_view key, std::string_view v) {
    int x = 0;
    bool ok = !v.empty() && v.size() < 4;
    for (char ch : v) {  // at most 3 digits: no overflow
      ok = ok && ch >= '0' && ch <= '9';
      if (!ok) break;
      x = x * 10 + (ch - '0');
    }
    if (!ok)
      throw std::invalid_argument(
          fmt::format("model '{}': {}='{}' is not a non-negative integer", name, key, v));
    return x;
  };
  // A 0/1 switch: 2 is an error, not "on".
  auto to_bool = [&](std::string_view key, std::string_view v) {
    if (v != "0" && v != "1")
      throw std::invalid_argument(fmt::format("model '{}': {}='{}' is not 0 or 1", name, key, v));
    return v == "1";
  };
  std::vector<std::string_view> seen;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos)
      throw std::invalid_argument(fmt::format("model '{}': '{}' is not key=value", name, item));
    const std::string_view key = item.substr(0, eq), v = item.substr(eq + 1);
    // Each setting once: a repeated key (or out and outfmt, which both set the output) is
    // an error, never "the last wins".
    const std::string_view slot = key == "outfmt" ? "out" : key;
    if (std::find(seen.begin(), seen.end(), slot) != seen.end())
      throw std::invalid_argument(
          fmt::format("model '{}': key '{}' given twice{}", name, key,
                      slot != key ? " (out and outfmt both set the output)" : ""));
    seen.push_back(slot);
    if (key == "group") {
      m.group = to_int(key, v);
    } else if (key == "frac") {
      if (v == "exact") {
        m.exact = true;
      } else {
        m.frac_bits = to_int(key, v);
        m.exact = false;
      }
    } else if (key == "out") {
      const int bits = to_int(key, v);
      if (bits < 1 || bits > 24)
        throw std::invalid_argument(
            fmt::format("model '{}': out={} significant bits not in 1..24", name, bits));
      m.output = format_by_name(fmt::format("e8m{}", bits - 1));
    } else if (key == "outfmt") {
      m.output = format_by_name(v);
    } else if (key == "cut") {
      m.term_cut = parse_rounding(v);
    } else if (key == "outround") {
      m.output_rounding = parse_rounding(v);
    } else if (key == "c") {
      m.c_entry = parse_c_entry(v);
    } else if (key == "block") {
      m.block = to_int(key, v);
    } else if (key == "interleave") {
      m.interleave = to_bool(key, v);
    } else if (key == "unpack") {
      if (v == "none") m.unpack.reset();
      else m.unpack = format_by_name(v);
    } else if (key == "renorm") {
      m.renormalise_products = to_bool(key, v);
    } else if (key == "zero") {
      if (v == "none") {
        m.zero_exponent.reset();
      } else {
        const bool neg = !v.empty() && v[0] == '-';
        const int e = to_int(key, neg ? v.substr(1) : v);
        m.zero_exponent = neg ? -e : e;
      }
    } else if (key == "groupsum") {
      m.group_sum = to_int(key, v);
    } else if (key == "lanes") {
      m.lanes = to_int(key, v);
    } else if (key == "realign") {
      m.realign_frac = to_int(key, v);
    } else if (key == "arith") {
      m.arithmetic = parse_step_arithmetic(v);
    } else if (key == "signedzero") {
      m.signed_zero = to_bool(key, v);
    } else if (key == "overflow") {
      m.product_overflow = to_bool(key, v);
    } else if (key == "dropfar") {
      m.realign_drop_far = to_bool(key, v);
    } else if (key == "scale") {
      const auto colon = v.find(':');
      if (v == "none") {
        m.block_scale.reset();
      } else if (colon == std::string_view::npos) {
        throw std::invalid_argument(
            fmt::format("model '{}': scale='{}' is not <format>:<block> or none", name, v));
      } else {
        m.block_scale = BlockScale{format_by_name(v.substr(0, colon)),
                                   to_int("scale block", v.substr(colon + 1))};
      }
    } else {
      throw std::invalid_argument(fmt::format(
          "model '{}': unknown key '{}' (group, frac, out, outfmt, cut, outround, c, renorm, "
          "block, interleave, unpack, zero, groupsum, lanes, realign, dropfar, scale, overflow, signedzero)",
          name, key));
    }
  }
  validate(m);
  return m;
}

namespace {

int exponent_of(double v) {
  int e = 0;
  std::frexp(v, &e);
  return e - 1;  // floor(log2|v|)
}

// x / 2^grid cut to an integer by `cut` (rz, rne or rd). x finite.
i128 cut_to_grid(double x, int grid, Rounding cut) {
  if (x == 0.0) return 0;
  int e = 0;
  const double fr = std::frexp(std::fabs(x), &e);
  const std::int64_t m = static_cast<std::int64_t>(std::ldexp(fr, 53));  // |x| = m * 2^(e-53)
  const int shift = e - 53 - grid;
  const bool away_down = cut == Rounding::rd && x < 0;  // rd: a negative x's magnitude rounds up
  i128 n;
  if (shift >= 0) {
    if (shift > 126 - 53) throw std::overflow_error("accumulator term beyond 128 bits");
    n = i128(m) << shift;
  } else if (-shift >= 64) {
    n = away_down ? 1 : 0;  // m < 2^53: below 2^-11 of a unit
  } else {
    const int s = -shift;
    n = m >> s;
    const std::uint64_t rest = std::uint64_t(m) & ((std::uint64_t{1} << s) - 1);
    if (cut == Rounding::rne) {
      const std::uint64_t half = std::uint64_t{1} << (s - 1);
      if (rest > half || (rest == half && (n & 1))) n += 1;
    } else if (away_down && rest != 0) {
      n += 1;
    }
  }
  return x < 0 ? -n : n;
}

// x * 2^from re-expressed on the grid 2^to, cut toward -inf where bits drop.
i128 floor_to_grid(i128 x, int from, int to) {
  if (to <= from) return x << (from - to);
  if (to - from >= 127) return x < 0 ? -1 : 0;
  return x >> (to - from);  // arithmetic shift: toward -inf
}

}  // namespace

Unrounded unrounded_from_int(i128 s, int grid) {
  Unrounded u;
  u.negative = s < 0;
  unsigned __int128 mag = u.negative ? static_cast<unsigned __int128>(-s)
                                     : static_cast<unsigned __int128>(s);
  u.exponent = grid;
  const auto hi = static_cast<std::uint64_t>(mag >> 64);
  if (hi != 0) {
    const int drop = 64 - std::countl_zero(hi);
    u.sticky = (mag & ((static_cast<unsigned __int128>(1) << drop) - 1)) != 0;
    mag >>= drop;
    u.exponent += drop;
  }
  u.significand = static_cast<std::uint64_t>(mag);
  return u;
}

namespace {

// s += sum * 2^grid exactly, in pieces of 40 bits (each exact in a double).
void add_i128(ExactSum& s, i128 sum, int grid) {
  const bool neg = sum < 0;
  unsigned __int128 mag = neg ? static_cast<unsigned __int128>(-sum)
                              : static_cast<unsigned __int128>(sum);
  for (int shift = 0; mag != 0; shift += 40, mag >>= 40) {
    const double piece = std::ldexp(static_cast<double>(std::uint64_t(mag) & ((1ull << 40) - 1)),
                                    grid + shift);
    s.add(neg ? -piece : piece);
  }
}

double quiet_nan() { return std::numeric_limits<double>::quiet_NaN(); }

constexpr int kNone = std::numeric_limits<int>::min();

// One term of a step: its exact value, alignment exponent, and whether it is a zero term.
struct Term {
  double v;
  int e;
  bool zero;
};

// The alignment exponent of a block scale s > 0 (a subnormal UE4M3 scale aligns on its
// format's smallest normal exponent).
int scale_exponent(const AccumulatorSpec& m, double s) {
  return std::max(exponent_of(s), min_normal_exponent(m.block_scale->format));
}

// The step's terms: products (times their block scales), or exact group sums.
std::vector<Term> step_terms(const AccumulatorSpec& m, const double* a, const int* ea,
                             const double* b, const int* eb, int n, StepScales sc) {
  std::vector<Term> t;
  if (m.group_sum == 1) {
    for (int i = 0; i < n; ++i) {
      const double p = a[i] * b[i];  // exact: operands have at most 24-bit significands
      Term x{p, m.renormalise_products && p != 0.0 ? exponent_of(p) : ea[i] + eb[i], p == 0.0};
      if (sc.sa != nullptr) {
        x.zero = x.zero || sc.sa[i] == 0.0 || sc.sb[i] == 0.0;
        if (!x.zero) {
          x.v = p * sc.sa[i] * sc.sb[i];  // exact: power-of-two scales (validate())
          x.e += scale_exponent(m, sc.sa[i]) + scale_exponent(m, sc.sb[i]);
        }
      }
      t.push_back(x);
    }
    return t;
  }
  for (int i = 0; i < n; i += m.group_sum) {
    const int end = std::min(n, i + m.group_sum);
    ExactSum s;
    bool all_zero = true;
    for (int j = i; j < end; ++j) {
      s.add_product(a[j], b[j]);
      all_zero = all_zero && a[j] * b[j] == 0.0;
    }
    const double sum = s.to_double();
    ExactSum rest = s;
    rest.add(-sum);
    if (!rest.is_zero())
      throw std::domain_error(fmt::format(
          "model '{}': a group sum of {} products is not exact in a double (operands too wide "
          "for group sums)", m.name, m.group_sum));
    const double xa = sc.sa[i], xb = sc.sb[i];
    Term x{0.0, 0, all_zero || xa == 0.0 || xb == 0.0};
    if (!x.zero) {
      x.v = sum * xa * xb;  // exact: a group sum of FP4 products times two 4-bit significands
      x.e = scale_exponent(m, xa) + scale_exponent(m, xb);
    }
    t.push_back(x);
  }
  return t;
}

// The largest alignment exponent of the terms t[i] with i % lanes == lane (kNone if none
// counts): nonzero terms, and zero terms at m.zero_exponent where set.
int lane_exponent(const AccumulatorSpec& m, const std::vector<Term>& t, int lane) {
  int emax = kNone;
  for (std::size_t i = lane; i < t.size(); i += m.lanes) {
    if (t[i].zero && !m.zero_exponent) continue;
    const int e = t[i].zero ? *m.zero_exponent : t[i].e;
    emax = std::max(emax, e);
  }
  return emax;
}

// CEntry::realign (AMD CDNA3): the cut sum `dot` (on the grid 2^gd, e_dot its alignment
// exponent, kNone when every product was zero) and c realigned, cut down, added, normalised,
// cut down to realign_frac bits and rounded to the output.
double realign_with_c(const AccumulatorSpec& m, i128 dot, int gd, int e_dot, double c) {
  const int cmin = c_min_exponent(m);
  const int e_c = c == 0.0 ? cmin : std::max(exponent_of(c), cmin);
  const int e_m = e_dot == kNone ? e_c : std::max(e_dot, e_c);
  const int g1 = e_m - (m.realign_frac + 1), g2 = e_m - m.frac_bits;
  i128 total = e_dot == kNone ? 0 : floor_to_grid(dot, gd, g1);
  if (!(m.realign_drop_far && e_c < e_m - m.frac_bits - 1))
    total += cut_to_grid(c, g2, Rounding::rd) << (g2 - g1);
  if (total == 0) return 0.0;
  const unsigned __int128 mag = total < 0 ? -static_cast<unsigned __int128>(total)
                                          : static_cast<unsigned __int128>(total);
  const auto top = static_cast<std::uint64_t>(mag >> 64);
  const int hi = top != 0 ? 127 - std::countl_zero(top)
                          : 63 - std::countl_zero(static_cast<std::uint64_t>(mag));
  const int E = std::max(g1 + hi, cmin);
  const int g3 = E - m.realign_frac;
  return round_accumulator_output(m, unrounded_from_int(floor_to_grid(total, g1, g3), g3));
}

// StepArithmetic::pairwise in fp32 arithmetic (round to nearest even, no flush by the
// hardware of this machine: the flushes are explicit).
double pairwise_step(const AccumulatorSpec& m, const double* a, const int* ea, const double* b,
                     const int* eb, int n, double c) {
  const float tiny = std::numeric_limits<float>::min();
  const auto flush_signed = [&](float x) { return std::fabs(x) < tiny ? x * 0.0f : x; };
  // An operand below its format's normal range (ea: that range's exponent), -0 included,
  // enters as +0.
  const auto input = [&](double v, int e) {
    return std::isfinite(v) && std::fabs(v) < std::ldexp(1.0, e) ? 0.0f : float(v);
  };
  float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int i = 0; i < n; ++i) p[i] = flush_signed(input(a[i], ea[i]) * input(b[i], eb[i]));
  float s = flush_signed(p[0] + p[1]);
  if (m.group == 4) s = flush_signed(s + flush_signed(p[2] + p[3]));
  return flush_signed(float(c) + s);  // c: entering_c, or a previous step's result
}

}  // namespace

double round_accumulator_output(const AccumulatorSpec& m, const Unrounded& u) {
  // Past the output's largest binade the accumulator overflows to Inf, whatever the
  // rounding direction; inside it, round once.
  if (u.significand != 0) {
    const int msb = 63 - std::countl_zero(u.significand);
    if (u.exponent + msb > max_exponent(m.output))
      return u.negative ? -std::numeric_limits<double>::infinity()
                        : std::numeric_limits<double>::infinity();
  }
  RoundingSpec r{m.output_rounding, Overflow::nonsat, 32};
  const std::uint32_t code = round_to_format(u, m.output, r);
  const double v = decode(m.output, code);
  // A +-0 result of a fused sum is +0 (as IEEE addition of opposite signs gives); with
  // signed_zero a nonzero sum that rounds to zero keeps its sign (IEEE underflow).
  if (v != 0.0) return v;
  return m.signed_zero && u.negative && (u.significand != 0 || u.sticky) ? -0.0 : 0.0;
}

double fused_step_exponents(const AccumulatorSpec& m, const double* a, const int* ea,
                            const double* b, const int* eb, int n, double c, StepScales sc) {
  if (m.arithmetic == StepArithmetic::pairwise) return pairwise_step(m, a, ea, b, eb, n, c);
  // 1. Special values.
  bool nan = std::isnan(c), pos_inf = c == INFINITY, neg_inf = c == -INFINITY;
  for (int i = 0; i < n; ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) nan = true;
    if (sc.sa != nullptr && (std::isnan(sc.sa[i]) || std::isnan(sc.sb[i]))) nan = true;
    bool ainf = std::isinf(a[i]), binf = std::isinf(b[i]);
    if (m.product_overflow && !ainf && !binf &&
        std::fabs(a[i] * b[i]) >= std::ldexp(1.0, max_exponent(m.output) + 1))
      ainf = true;  // the product itself overflows: an Inf of its sign
    if (ainf || binf) {
      if (a[i] == 0.0 || b[i] == 0.0) {
        nan = true;
      } else if ((a[i] < 0) != (b[i] < 0)) {
        neg_inf = true;
      } else {
        pos_inf = true;
      }
    }
  }
  if (nan || (pos_inf && neg_inf)) return quiet_nan();
  if (pos_inf) return INFINITY;
  if (neg_inf) return -INFINITY;
  if (m.c_entry == CEntry::add) {
    AccumulatorSpec products_only = m;
    products_only.c_entry = CEntry::exact;  // c = 0 below: the products alone
    return add_c_after(m, fused_step_exponents(products_only, a, ea, b, eb, n, 0.0, sc), c);
  }

  // 2. Exact model: one exact sum, one rounding.
  if (m.exact) {
    ExactSum s;
    s.add(c);
    for (int i = 0; i < n; ++i) s.add_product(a[i], b[i]);
    return round_accumulator_output(m, s.unrounded());
  }

  // 3. The terms and each lane's alignment exponent; c joins lane 0 of a one-lane step.
  const std::vector<Term> terms = step_terms(m, a, ea, b, eb, n, sc);
  const bool join = m.c_entry == CEntry::join;
  std::vector<int> emax(m.lanes);
  for (int l = 0; l < m.lanes; ++l) emax[l] = lane_exponent(m, terms, l);
  if (join && (c != 0.0 || m.zero_exponent)) {
    // c is a value of the accumulator's register format; a subnormal c aligns on that
    // format's smallest normal exponent, as a subnormal operand does (measured: H100 wgmma
    // with an fp16 accumulator, tests/data/hw/wgmma_f16_e5m2_subnormals).
    const int e = c != 0.0 ? std::max(exponent_of(c), c_min_exponent(m)) : *m.zero_exponent;
    emax[0] = std::max(emax[0], e);
  }

  // 4. Each lane's terms cut to its grid 2^(emax - frac_bits) and added exactly; lanes
  //    realigned on the largest of them, cut toward -inf.
  const int e_dot = *std::max_element(emax.begin(), emax.end());
  if (e_dot == kNone && m.c_entry != CEntry::realign) {  // nothing aligns: c alone
    ExactSum s;
    s.add(c);
    return round_accumulator_output(m, s.unrounded());
  }
  const int grid = e_dot == kNone ? 0 : e_dot - m.frac_bits;
  i128 sum = 0;
  for (int l = 0; l < m.lanes; ++l) {
    if (emax[l] == kNone) continue;
    const int g = emax[l] - m.frac_bits;
    i128 lane = 0;
    for (std::size_t i = l; i < terms.size(); i += m.lanes)
      lane += cut_to_grid(terms[i].v, g, m.term_cut);
    if (join) lane += cut_to_grid(c, g, m.term_cut);
    sum += floor_to_grid(lane, g, grid);
  }
  switch (m.c_entry) {
    case CEntry::join: return round_accumulator_output(m, unrounded_from_int(sum, grid));
    case CEntry::realign: return realign_with_c(m, sum, grid, e_dot, c);
    default: break;
  }
  // 5. c outside the alignment: added exactly to the cut sum before the output rounding.
  ExactSum s;
  s.add(c);
  add_i128(s, sum, grid);
  return round_accumulator_output(m, s.unrounded());
}

double add_c_after(const AccumulatorSpec& m, double r, double c) {
  if (!std::isfinite(r) || !std::isfinite(c)) return r + c;  // IEEE: Inf - Inf is NaN
  ExactSum s;
  s.add(r);
  s.add(c);
  AccumulatorSpec adder = m;
  adder.output_rounding = Rounding::rne;
  return round_accumulator_output(adder, s.unrounded());
}

double fused_step(const AccumulatorSpec& m, const double* a, const double* b, int n, double c) {
  std::vector<int> ea(n), eb(n);
  for (int i = 0; i < n; ++i) {
    ea[i] = a[i] == 0.0 || !std::isfinite(a[i]) ? 0 : exponent_of(a[i]);
    eb[i] = b[i] == 0.0 || !std::isfinite(b[i]) ? 0 : exponent_of(b[i]);
  }
  return fused_step_exponents(m, a, ea.data(), b, eb.data(), n, c);
}

int operand_exponent(const AccumulatorSpec& m, const FormatSpec& f, double v) {
  return std::max(exponent_of(v), min_normal_exponent(m.unpack ? *m.unpack : f));
}

int c_min_exponent(const AccumulatorSpec& m) { return min_normal_exponent(m.output); }

int step_products(const AccumulatorSpec& m) { return m.block ? m.block : m.group; }

bool zero_exponent_matters(const AccumulatorSpec& m, const FormatSpec& a, const FormatSpec& b) {
  if (!m.zero_exponent || m.exact) return false;
  if (m.block_scale || m.renormalise_products) return true;
  const int lowest = min_normal_exponent(m.unpack ? *m.unpack : a) +
                     min_normal_exponent(m.unpack ? *m.unpack : b);
  const bool c_joins = m.c_entry == CEntry::join;
  return *m.zero_exponent > lowest || (c_joins && *m.zero_exponent > c_min_exponent(m));
}

bool needs_reference_step(const AccumulatorSpec& m) {
  return m.arithmetic != StepArithmetic::fused || m.group_sum != 1 || m.lanes != 1 ||
         m.block_scale || m.c_entry == CEntry::realign ||
         m.term_cut == Rounding::rd || m.product_overflow ||
         (m.renormalise_products && m.zero_exponent);
}

double fused_block(const AccumulatorSpec& m, const double* a, const int* ea, const double* b,
                   const int* eb, int n, double c, StepScales scales) {
  if (m.block == 0) return fused_step_exponents(m, a, ea, b, eb, n, c, scales);
  // 1. The block's element order: k mod 4 in {0,1} first, then {2,3}, when interleaved.
  std::vector<int> order;
  for (int pass = 0; pass < (m.interleave ? 2 : 1); ++pass)
    for (int k = 0; k < n; ++k)
      if (!m.interleave || ((k % 4) < 2) == (pass == 0)) order.push_back(k);
  std::vector<double> pa(n), pb(n);
  std::vector<int> pea(n), peb(n);
  for (int i = 0; i < n; ++i) {
    pa[i] = a[order[i]], pb[i] = b[order[i]], pea[i] = ea[order[i]], peb[i] = eb[order[i]];
  }
  // 2. Chained steps from zero, c joining each (the previous step's output).
  AccumulatorSpec step = m;
  step.block = 0;
  step.interleave = false;
  step.c_entry = CEntry::join;
  double s = 0.0;
  for (int i = 0; i < n; i += m.group)
    s = fused_step_exponents(step, pa.data() + i, pea.data() + i, pb.data() + i, peb.data() + i,
                             std::min(m.group, n - i), s);
  // 3. The block's result enters c with one IEEE add.
  return add_c_after(m, s, c);
}

double entering_c(const AccumulatorSpec& m, double c) {
  if (m.arithmetic != StepArithmetic::pairwise) return c;
  return std::fabs(c) < std::numeric_limits<float>::min() ? 0.0 : c;
}

double chained_dot(const AccumulatorSpec& m, const FormatSpec& fa, const double* a,
                   const FormatSpec& fb, const double* b, int k, double c, const double* sa,
                   const double* sb) {
  const int g = m.group == 0 ? k : step_products(m);
  double acc = entering_c(m, c);
  for (int i = 0; i < k; i += g) {
    const int n = std::min(g, k - i);
    std::vector<int> ea(n), eb(n);
    for (int j = 0; j < n; ++j) {
      ea[j] = a[i + j] == 0.0 || !std::isfinite(a[i + j]) ? 0 : operand_exponent(m, fa, a[i + j]);
      eb[j] = b[i + j] == 0.0 || !std::isfinite(b[i + j]) ? 0 : operand_exponent(m, fb, b[i + j]);
    }
    const StepScales sc = sa ? StepScales{sa + i, sb + i} : StepScales{};
    acc = fused_block(m, a + i, ea.data(), b + i, eb.data(), n, acc, sc);
  }
  return acc;
}

}  // namespace fp8sim
