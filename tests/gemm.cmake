# Accumulator models and the GEMM engine.
fp8sim_add_test(test_gemm_hwdata SOURCES test_gemm_hwdata.cpp LABELS hwdata TIMEOUT 300)
fp8sim_add_test(test_gemm_engine SOURCES test_gemm_engine.cpp LABELS "unit;differential" TIMEOUT 600)
fp8sim_add_test(test_gemm_cases SOURCES test_gemm_cases.cpp LABELS unit)
fp8sim_add_test(test_gemm_path SOURCES test_gemm_path.cpp LABELS unit)
fp8sim_add_test(test_cli_gemm SOURCES test_cli_gemm.cpp LABELS unit)
fp8sim_add_test(test_gemm_prefixes SOURCES test_gemm_prefixes.cpp LABELS "unit;differential")
fp8sim_add_test(test_kernel SOURCES test_kernel.cpp LABELS "unit;golden")
fp8sim_add_test(test_cublaslt_plan SOURCES test_cublaslt_plan.cpp LABELS "unit;golden"
  LIBS nlohmann_json::nlohmann_json)
fp8sim_add_test(test_triton_config SOURCES test_triton_config.cpp LABELS "unit;golden"
  LIBS nlohmann_json::nlohmann_json)
fp8sim_add_test(test_invariance SOURCES test_invariance.cpp LABELS "unit;differential")
# The plan-table reader under hostile tables (issue 39: C1, T1).
fp8sim_add_test(test_plan_table_reliability SOURCES test_plan_table_reliability.cpp LABELS unit
  DRIVER LIBS nlohmann_json::nlohmann_json)
# The CUDA engine's reference step with block scales compiled for the host (no GPU needed):
# its sources under cuda/engine, no FMA contraction (the engine's --fmad=false).
fp8sim_add_test(test_gemm_scaled_host SOURCES test_gemm_scaled_host.cpp LABELS "unit;differential"
  NO_PCH)
target_include_directories(test_gemm_scaled_host PRIVATE ${PROJECT_SOURCE_DIR}/cuda)
target_compile_options(test_gemm_scaled_host PRIVATE -ffp-contract=off -Wno-unknown-pragmas)
