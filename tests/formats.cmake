# Formats, rounding, exact sums and the encode/decode/table CLI (issue 2).

# cuda_fp8.h: CUDA's host-side FP8 conversions are the oracle of test_format_cuda_fp8. The
# header compiles with the host compiler alone; without it the test prints "waived" (exit 77).
find_package(CUDAToolkit QUIET)
find_path(FP8SIM_CUDA_INCLUDE_DIR cuda_fp8.h
  HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{CUDA_HOME}/include /usr/local/cuda/include
  DOC "Folder holding CUDA's cuda_fp8.h (oracle for test_format_cuda_fp8)")

fp8sim_add_test(test_format_cuda_fp8 SOURCES test_format_cuda_fp8.cpp LABELS exhaustive TIMEOUT 900)
if(FP8SIM_CUDA_INCLUDE_DIR)
  target_include_directories(test_format_cuda_fp8 SYSTEM PRIVATE ${FP8SIM_CUDA_INCLUDE_DIR})
  target_compile_definitions(test_format_cuda_fp8 PRIVATE FP8SIM_HAVE_CUDA_FP8_H)
else()
  message(STATUS "fp8sim: cuda_fp8.h not found: test_format_cuda_fp8 will be waived")
endif()

fp8sim_add_test(test_format_codes SOURCES test_format_codes.cpp LABELS "unit;exhaustive" TIMEOUT 300)
fp8sim_add_test(test_rounding_boost SOURCES test_rounding_boost.cpp LABELS differential TIMEOUT 600)
fp8sim_add_test(test_exact SOURCES test_exact.cpp LABELS "unit;differential" TIMEOUT 120)
fp8sim_add_test(test_rounding_sr SOURCES test_rounding_sr.cpp LABELS unit TIMEOUT 300)
fp8sim_add_test(test_cli_convert SOURCES test_cli_convert.cpp LABELS unit TIMEOUT 300 DRIVER)
add_dependencies(test_cli_convert fp8sim)

# ml_dtypes as a third oracle: oracle_ml_dtypes.py drives a helper that dumps fp8sim's codes.
add_executable(test_format_mldtypes_helper test_format_mldtypes_helper.cpp)
target_link_libraries(test_format_mldtypes_helper PRIVATE fp8sim::sim)
if(Python3_Interpreter_FOUND)
  fp8sim_add_test(test_format_mldtypes LABELS differential TIMEOUT 300
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/oracle_ml_dtypes.py
            --helper $<TARGET_FILE:test_format_mldtypes_helper>)
else()
  message(STATUS "fp8sim: no Python: test_format_mldtypes is not registered")
endif()
fp8sim_add_test(test_format_batch SOURCES test_format_batch.cpp LABELS "unit;differential" TIMEOUT 300)
# The same comparison on the portable (non-AVX2) build of the loop.
fp8sim_add_test(test_format_batch_generic COMMAND test_format_batch LABELS "unit;differential"
  TIMEOUT 300 ENV FP8SIM_ISA=generic)
