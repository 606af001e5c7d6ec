# tests/gpu.cmake: the CUDA engine against the CPU engine (label gpu). Built in every build;
# without CUDA or without a GPU it prints "waived: ..." and exits 77 (skipped).
add_executable(test_gemm_cuda test_gemm_cuda.cpp)
target_link_libraries(test_gemm_cuda PRIVATE fp8sim::sim)
target_compile_options(test_gemm_cuda PRIVATE -Wall -Wextra)
add_test(NAME test_gemm_cuda COMMAND test_gemm_cuda)
set_tests_properties(test_gemm_cuda PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 900
  ENVIRONMENT "FP8SIM_TEST_DATA=${CMAKE_CURRENT_SOURCE_DIR}/data")
