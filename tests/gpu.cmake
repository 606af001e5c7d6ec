# tests/gpu.cmake: the CUDA engine against the CPU engine (label gpu). Built in every build;
# without CUDA or without a GPU it prints "waived: ..." and exits 77 (skipped). Its second
# source: the K-parallel chunks at decode shapes; its third: resident codes read in place; its
# fourth: the reference step with block scales (fp32 / bf16 operands) and analyze on the GPU.
fp8sim_add_test(test_gemm_cuda SOURCES test_gemm_cuda.cpp test_gemm_cuda_kpar.cpp
  test_gemm_cuda_codes.cpp test_gemm_cuda_scaled.cpp test_gemm_cuda_bands.cpp LABELS gpu GPU
  TIMEOUT 900)
