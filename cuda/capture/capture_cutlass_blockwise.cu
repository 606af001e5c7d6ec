// capture_cutlass_blockwise: runs CUTLASS's Hopper FP8 GEMM with blockwise (group-wise) scaling,
// instantiated exactly as CUTLASS example 67 builds it, on operands read from files, and writes
// D; cuda/capture/capture_cutlass_blockwise.py drives it and writes the fp8sim capture folder.
//
// Not part of fp8sim's build: it needs a CUTLASS checkout (never committed here). Build:
//   bash cuda/capture/capture_cutlass_blockwise.sh CUTLASS_DIR OUT_DIR
// (nvcc -arch=sm_90a with CUTLASS's own NVCC flags; see that script).
//
// The configuration is CUTLASS's, from
//   examples/67_hopper_fp8_warp_specialized_gemm_with_blockwise_scaling/
//     67_hopper_fp8_warp_specialized_gemm_with_groupwise_scaling.cu   (NVIDIA/cutlass 7107b05,
//     lines 93-171: every `using` below is that file's, in the same order):
//   A e4m3 RowMajor (M,K), B e4m3 ColumnMajor (K,N) = our (N,K) rows, alignment 16 elements;
//   C void; D bf16 RowMajor, alignment 8; accumulator, block scale and epilogue compute f32;
//   TileShape 256x128x128, ClusterShape 1x2x1; ScaleGranularity M=1, N=128, K=128 (A scales
//   1x128, M-major; B scales 128x128, K-major: Sm90BlockwiseScaleConfig<1,128,128,MN,K>);
//   KernelTmaWarpSpecializedCooperativeFP8Blockwise (= ...FP8BlockScaledAccum), epilogue
//   TmaWarpSpecializedCooperative with EpilogueTile 128x128 and fusion Sm90EVT<Sm90AccFetch>
//   (D = the f32 accumulator converted to D's type), StageCountAutoCarveout, GemmUniversal
//   with Shape<int,int,int,int>, the default persistent tile scheduler (raster heuristic,
//   swizzle 1: the example's defaults).
// -DFP8SIM_OUT_F32 makes ElementD = float (the example writes bf16 only), to see the main
// accumulator's f32 value unrounded, and (needed for that: with f32 D the 128x128 epilogue tile
// leaves shared memory for only one mainloop stage) EpilogueTileAuto, as the example's
// blockwise file (67_..._blockwise_scaling.cu line 135) has it; the mainloop is unchanged.
//
// Usage: capture_cutlass_blockwise M N K A.bin B.bin SFA.bin SFB.bin D.bin
//   A.bin: M*K bytes (row-major e4m3 codes); B.bin: N*K bytes (row n = column n of B);
//   SFA.bin: f32, CUTLASS's M-major layout: sfa[m + kb*M], kb < ceil(K/128);
//   SFB.bin: f32, K-major: sfb[nb*ceil(K/128) + kb], nb < ceil(N/128);
//   D.bin: written, M*N row-major values of ElementD (bf16 or f32).
// Prints one line "config: ..." and "status: ok" or the CUTLASS status; exit 3 when
// can_implement refuses the problem.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "cutlass/cutlass.h"
#include "cutlass/numeric_types.h"

#include "cute/tensor.hpp"
#include "cutlass/tensor_ref.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler_params.h"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/util/packed_stride.hpp"

using namespace cute;

#if !defined(CUTLASS_ARCH_MMA_SM90_SUPPORTED)
#error "capture_cutlass_blockwise needs nvcc -arch=sm_90a (CUTLASS_ARCH_MMA_SM90_SUPPORTED)"
#endif

// --- example 67 (groupwise) lines 93-171 ---
using ElementA = cutlass::float_e4m3_t;
using LayoutA = cutlass::layout::RowMajor;
constexpr int AlignmentA = 128 / cutlass::sizeof_bits<ElementA>::value;
using ElementB = cutlass::float_e4m3_t;
using LayoutB = cutlass::layout::ColumnMajor;
constexpr int AlignmentB = 128 / cutlass::sizeof_bits<ElementB>::value;
using ElementC = void;
using LayoutC = cutlass::layout::ColumnMajor;
constexpr int AlignmentC = 1;
#if defined(FP8SIM_OUT_F32)
using ElementD = float;  // our one change: f32 output
#else
using ElementD = cutlass::bfloat16_t;
#endif
using LayoutD = cutlass::layout::RowMajor;
constexpr int AlignmentD = 128 / cutlass::sizeof_bits<ElementD>::value;
using ElementAccumulator = float;
using ElementBlockScale = float;
using ElementCompute = float;
using ArchTag = cutlass::arch::Sm90;
using OperatorClass = cutlass::arch::OpClassTensorOp;
using TileShape = Shape<_256, _128, _128>;
using ClusterShape = Shape<_1, _2, _1>;
constexpr int ScaleGranularityM = 1;
constexpr int ScaleGranularityN = 128;
constexpr int ScaleGranularityK = 128;
using ScaleConfig = cutlass::detail::Sm90BlockwiseScaleConfig<
    ScaleGranularityM, ScaleGranularityN, ScaleGranularityK, cute::GMMA::Major::MN,
    cute::GMMA::Major::K>;
using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());
using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8Blockwise;
using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
#if defined(FP8SIM_OUT_F32)
// f32 D with the 128x128 epilogue tile leaves no shared memory for two mainloop stages
// (static_assert Stages >= 2); the blockwise file of the same example uses EpilogueTileAuto.
using EpilogueTileType = cutlass::epilogue::collective::EpilogueTileAuto;
#else
using EpilogueTileType = Shape<_128, _128>;
#endif
using FusionOperation = cutlass::epilogue::fusion::Sm90EVT<cutlass::epilogue::fusion::Sm90AccFetch>;
using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    ArchTag, OperatorClass, TileShape, ClusterShape, EpilogueTileType, ElementAccumulator,
    ElementCompute, ElementC, LayoutC, AlignmentC, ElementD, LayoutD, AlignmentD,
    EpilogueSchedule, FusionOperation>::CollectiveOp;
using CollectiveMainloopWithBlockWiseScaling =
    typename cutlass::gemm::collective::CollectiveBuilder<
    ArchTag, OperatorClass, ElementA, cute::tuple<LayoutA, LayoutSFA>, AlignmentA, ElementB,
    cute::tuple<LayoutB, LayoutSFB>, AlignmentB, ElementAccumulator, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<
        static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
    KernelSchedule>::CollectiveOp;
using GemmKernel = cutlass::gemm::kernel::GemmUniversal<
    Shape<int, int, int, int>, CollectiveMainloopWithBlockWiseScaling, CollectiveEpilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
using StrideA = typename Gemm::GemmKernel::StrideA;
using StrideB = typename Gemm::GemmKernel::StrideB;
using StrideC = typename Gemm::GemmKernel::StrideC;
using StrideD = typename Gemm::GemmKernel::StrideD;
// --- end of example 67's configuration ---

namespace {

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__,      \
                   __LINE__);                                                                  \
      std::exit(2);                                                                            \
    }                                                                                          \
  } while (0)

std::vector<char> read_file(const std::string& path, size_t bytes) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> v(bytes);
  if (!f.read(v.data(), static_cast<std::streamsize>(bytes))) {
    std::fprintf(stderr, "cannot read %zu bytes from %s\n", bytes, path.c_str());
    std::exit(2);
  }
  return v;
}

template <class T>
T* to_device(const std::vector<char>& h) {
  void* p = nullptr;
  CK(cudaMalloc(&p, h.size() ? h.size() : 1));
  CK(cudaMemcpy(p, h.data(), h.size(), cudaMemcpyHostToDevice));
  return static_cast<T*>(p);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 9) {
    std::fprintf(stderr, "usage: %s M N K A.bin B.bin SFA.bin SFB.bin D.bin\n", argv[0]);
    return 2;
  }
  const int M = std::atoi(argv[1]), N = std::atoi(argv[2]), K = std::atoi(argv[3]), L = 1;
  const int kb = (K + ScaleGranularityK - 1) / ScaleGranularityK;
  const int nb = (N + ScaleGranularityN - 1) / ScaleGranularityN;
  auto hA = read_file(argv[4], size_t(M) * K);
  auto hB = read_file(argv[5], size_t(N) * K);
  auto hSFA = read_file(argv[6], size_t(M) * kb * sizeof(float));
  auto hSFB = read_file(argv[7], size_t(nb) * kb * sizeof(float));

  std::printf("config: TileShape 256x128x128 ClusterShape 1x2x1 Stages %d ScaleGranularity "
              "M1 N128 K128 SFA MN-major SFB K-major ScalePromotionInterval %d NumSplitsM %d "
              "schedule KernelTmaWarpSpecializedCooperativeFP8Blockwise epilogue "
              "TmaWarpSpecializedCooperative EpilogueTile %s Sm90AccFetch D %s RowMajor\n",
              int(CollectiveMainloopWithBlockWiseScaling::DispatchPolicy::Stages),
              int(CollectiveMainloopWithBlockWiseScaling::ScalePromotionInterval),
              int(CollectiveMainloopWithBlockWiseScaling::NumSplitsM{}),
              sizeof(ElementD) == 4 ? "auto" : "128x128", sizeof(ElementD) == 4 ? "f32" : "bf16");

  // Strides and scale layouts as the example's initialize() (lines 378-389) makes them.
  StrideA stride_A = cutlass::make_cute_packed_stride(StrideA{}, cute::make_shape(M, K, L));
  StrideB stride_B = cutlass::make_cute_packed_stride(StrideB{}, cute::make_shape(N, K, L));
  StrideC stride_C = cutlass::make_cute_packed_stride(StrideC{}, cute::make_shape(M, N, L));
  StrideD stride_D = cutlass::make_cute_packed_stride(StrideD{}, cute::make_shape(M, N, L));
  LayoutSFA layout_SFA = ScaleConfig::tile_atom_to_shape_SFA(make_shape(M, N, K, L));
  LayoutSFB layout_SFB = ScaleConfig::tile_atom_to_shape_SFB(make_shape(M, N, K, L));
  if (size_t(size(filter_zeros(layout_SFA))) != size_t(M) * kb ||
      size_t(size(filter_zeros(layout_SFB))) != size_t(nb) * kb) {
    std::fprintf(stderr, "unexpected scale layout sizes\n");
    return 2;
  }

  auto* dA = to_device<ElementA>(hA);
  auto* dB = to_device<ElementB>(hB);
  auto* dSFA = to_device<ElementBlockScale>(hSFA);
  auto* dSFB = to_device<ElementBlockScale>(hSFB);
  ElementD* dD = nullptr;
  const size_t d_bytes = size_t(M) * N * sizeof(ElementD);
  CK(cudaMalloc(&dD, d_bytes));
  CK(cudaMemset(dD, 0xff, d_bytes));  // NaN pattern: an output the kernel never wrote shows

  // Arguments as the example's args_from_options() (lines 431-456) builds them.
  typename Gemm::Arguments arguments{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {M, N, K, L},
      {dA, stride_A, dB, stride_B, dSFA, layout_SFA, dSFB, layout_SFB},
      {{}, nullptr, stride_C, dD, stride_D}};
  using RasterOrderOptions =
      typename cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90Params::RasterOrderOptions;
  arguments.scheduler.raster_order = RasterOrderOptions::Heuristic;
  arguments.scheduler.max_swizzle_size = 1;

  Gemm gemm;
  size_t workspace_size = Gemm::get_workspace_size(arguments);
  void* workspace = nullptr;
  if (workspace_size) CK(cudaMalloc(&workspace, workspace_size));
  cutlass::Status st = gemm.can_implement(arguments);
  if (st != cutlass::Status::kSuccess) {
    std::printf("status: can_implement refused: %s\n", cutlassGetStatusString(st));
    return 3;
  }
  st = gemm.initialize(arguments, workspace);
  if (st != cutlass::Status::kSuccess) {
    std::printf("status: initialize failed: %s\n", cutlassGetStatusString(st));
    return 4;
  }
  st = gemm.run();
  CK(cudaDeviceSynchronize());
  if (st != cutlass::Status::kSuccess) {
    std::printf("status: run failed: %s\n", cutlassGetStatusString(st));
    return 4;
  }
  std::vector<char> hD(d_bytes);
  CK(cudaMemcpy(hD.data(), dD, d_bytes, cudaMemcpyDeviceToHost));
  std::ofstream f(argv[8], std::ios::binary);
  f.write(hD.data(), static_cast<std::streamsize>(d_bytes));
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", argv[8]);
    return 2;
  }
  std::printf("status: ok workspace %zu\n", workspace_size);
  return 0;
}
