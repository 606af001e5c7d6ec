// ptx_wgmma: named wrappers for the sm_90a warpgroup MMA (wgmma) instructions, FP8 inputs.
//
// Every asm() of the wgmma path lives here. Names spell the PTX qualifiers:
// wgmma_m64n8k32_f32_e4m3_e5m2 is `wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e5m2`.
// Source for operand order and register layouts: PTX ISA 8.x, section "Asynchronous Warpgroup
// Level Matrix Multiply-Accumulate" (wgmma.mma_async; FP8 operands must both be K-major and
// take no transpose immediates).
#pragma once

#include <cstdint>

namespace fp8sim::cuda {

// ---- ordering ------------------------------------------------------------------------------

// wgmma.fence: orders prior register/shared accesses before the next wgmma.mma_async.
__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ inline void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until no committed wgmma group is pending (accumulators readable, smem reusable).
__device__ inline void wgmma_wait_group_0() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
// Makes generic-proxy shared-memory stores visible to the async proxy (wgmma operand reads).
__device__ inline void fence_proxy_async_shared_cta() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// ---- shared-memory matrix descriptor ---------------------------------------------------------

// 64-bit wgmma matrix descriptor, no swizzle (PTX "Matrix Descriptor Format"):
//   bits 0-13 start address >> 4, bits 16-29 leading-dimension byte offset >> 4,
//   bits 32-45 stride-dimension byte offset >> 4, bits 49-51 base offset (0),
//   bits 62-63 swizzle mode (0 = none). A core matrix is 8 rows x 16 bytes, contiguous.
__device__ inline std::uint64_t make_smem_desc_noswizzle(const void* smem, std::uint32_t lbo_bytes,
                                                         std::uint32_t sbo_bytes) {
  const auto addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  std::uint64_t d = (addr & 0x3FFFFu) >> 4;
  d |= static_cast<std::uint64_t>((lbo_bytes & 0x3FFFFu) >> 4) << 16;
  d |= static_cast<std::uint64_t>((sbo_bytes & 0x3FFFFu) >> 4) << 32;
  return d;
}

// ---- wgmma.mma_async m64nNk32, FP8 x FP8 ---------------------------------------------------
// d: the accumulator fragment (f32: N/2 floats per thread; f16: N/4 .f16x2 words per thread).
// scale_d = 0: D = A*B (the accumulator input is ignored); 1: D = A*B + D.
// Fragment layout (PTX "Register fragment for D", m64nNk*): thread t of the warpgroup,
// warp w = t/32, lane l: element i sits at row 16w + l/4 + 8*((i/2)%2), col 8*(i/4) + 2*(l%4) + i%2.

#define FP8SIM_WGMMA_F32_N8(ATYPE, BTYPE)                                                        \
  __device__ inline void wgmma_m64n8k32_f32_##ATYPE##_##BTYPE(float (&d)[4], std::uint64_t da,  \
                                                              std::uint64_t db, int scale_d) {  \
    asm volatile(                                                                                \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"                                              \
        "wgmma.mma_async.sync.aligned.m64n8k32.f32." #ATYPE "." #BTYPE                           \
        " {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}\n"                                               \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                         \
        : "l"(da), "l"(db), "r"(scale_d));                                                       \
  }

#define FP8SIM_WGMMA_F16_N8(ATYPE, BTYPE)                                                        \
  __device__ inline void wgmma_m64n8k32_f16_##ATYPE##_##BTYPE(std::uint32_t (&d)[2],            \
                                                              std::uint64_t da,                  \
                                                              std::uint64_t db, int scale_d) {  \
    asm volatile(                                                                                \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"                                              \
        "wgmma.mma_async.sync.aligned.m64n8k32.f16." #ATYPE "." #BTYPE                           \
        " {%0, %1}, %2, %3, p, 1, 1;\n}\n"                                                       \
        : "+r"(d[0]), "+r"(d[1])                                                                 \
        : "l"(da), "l"(db), "r"(scale_d));                                                       \
  }

// m64n64k32: 32 f32 registers per thread (used by bench for a larger tile).
#define FP8SIM_WGMMA_F32_N64(ATYPE, BTYPE)                                                       \
  __device__ inline void wgmma_m64n64k32_f32_##ATYPE##_##BTYPE(float (&d)[32], std::uint64_t da, \
                                                               std::uint64_t db, int scale_d) { \
    asm volatile(                                                                                \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                             \
        "wgmma.mma_async.sync.aligned.m64n64k32.f32." #ATYPE "." #BTYPE                          \
        " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "               \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31},"       \
        " %32, %33, p, 1, 1;\n}\n"                                                               \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),    \
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),             \
          "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),          \
          "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),          \
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),          \
          "+f"(d[31])                                                                            \
        : "l"(da), "l"(db), "r"(scale_d));                                                       \
  }

FP8SIM_WGMMA_F32_N8(e4m3, e4m3)
FP8SIM_WGMMA_F32_N8(e4m3, e5m2)
FP8SIM_WGMMA_F32_N8(e5m2, e4m3)
FP8SIM_WGMMA_F32_N8(e5m2, e5m2)
FP8SIM_WGMMA_F16_N8(e4m3, e4m3)
FP8SIM_WGMMA_F16_N8(e4m3, e5m2)
FP8SIM_WGMMA_F16_N8(e5m2, e4m3)
FP8SIM_WGMMA_F16_N8(e5m2, e5m2)
FP8SIM_WGMMA_F32_N64(e4m3, e4m3)

#undef FP8SIM_WGMMA_F32_N8
#undef FP8SIM_WGMMA_F16_N8
#undef FP8SIM_WGMMA_F32_N64

}  // namespace fp8sim::cuda
