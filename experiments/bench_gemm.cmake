# fp8sim-bench-gemm: GEMM engine rate (emulated MAC/s), side by side with MMA-Sim.
add_executable(fp8sim-bench-gemm bench_gemm.cpp)
target_link_libraries(fp8sim-bench-gemm PRIVATE fp8sim::sim CLI11::CLI11)
target_compile_definitions(fp8sim-bench-gemm PRIVATE FP8SIM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
if(TARGET fp8sim_cublaslt_bench)
  target_link_libraries(fp8sim-bench-gemm PRIVATE fp8sim_cublaslt_bench)
  target_compile_definitions(fp8sim-bench-gemm PRIVATE FP8SIM_HAVE_CUBLASLT_BENCH)
endif()
