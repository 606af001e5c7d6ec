// ptx_mma_sync: named wrappers for the warp-level FP8 mma.sync (sm_89+) used on sm_90a.
//
// mma_m16n8k32_row_col_f32_e4m3_e4m3_f32 is
// `mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32`. Fragments (PTX ISA "mma.m16n8k32",
// 8-bit A/B): groupID g = lane/4, t = lane%4;
//   a[0] = A[g][4t..4t+3], a[1] = A[g+8][4t..], a[2] = A[g][16+4t..], a[3] = A[g+8][16+4t..]
//   b[0] = B[k=4t..4t+3][n=g], b[1] = B[k=16+4t..][n=g]   (lowest k in the lowest byte)
//   c/d[0..1] = C[g][2t, 2t+1], c/d[2..3] = C[g+8][2t, 2t+1].
#pragma once

#include <cstdint>

namespace fp8sim::cuda {

#define FP8SIM_MMA_SYNC_F32(ATYPE, BTYPE)                                                        \
  __device__ inline void mma_m16n8k32_row_col_f32_##ATYPE##_##BTYPE##_f32(                     \
      float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {                 \
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." #ATYPE "." #BTYPE                     \
                 ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"       \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));             \
  }

FP8SIM_MMA_SYNC_F32(e4m3, e4m3)
FP8SIM_MMA_SYNC_F32(e4m3, e5m2)
FP8SIM_MMA_SYNC_F32(e5m2, e4m3)
FP8SIM_MMA_SYNC_F32(e5m2, e5m2)

#undef FP8SIM_MMA_SYNC_F32

}  // namespace fp8sim::cuda
