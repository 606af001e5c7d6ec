# Sweep engine (sim/sweep, metrics, distributions, scaling) and the notebooks.
fp8sim_add_test(test_metrics SOURCES test_metrics.cpp LABELS unit differential TIMEOUT 120)
fp8sim_add_test(test_sweep SOURCES test_sweep.cpp LABELS unit differential TIMEOUT 300)
fp8sim_add_test(test_quantize_table SOURCES test_quantize_table.cpp LABELS unit exhaustive)
fp8sim_add_test(test_device_scales SOURCES test_device_scales.cpp LABELS unit differential)

# Experiments run small, their plot scripts, and every notebook executed (needs the
# experiment binaries and a Python with nbconvert: tests/setup.sh's venv).
if(TARGET experiments AND Python3_Interpreter_FOUND)
  fp8sim_add_test(test_notebooks LABELS notebooks TIMEOUT 600
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_notebooks.sh ${Python3_EXECUTABLE}
            ${PROJECT_BINARY_DIR}/experiments ${PROJECT_SOURCE_DIR})
endif()
