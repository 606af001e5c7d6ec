# tests/hw.cmake: hardware captures replayed without a GPU (golden: test_hw_captures replays
# every capture set once, through replay()) and fp8sim-hw itself (gpu).
# Captures come from `fp8sim-hw capture` / `fp8sim-hw cvt --out` on an H100 (tests/data/hw).
fp8sim_add_test(test_hw_captures SOURCES test_hw_captures.cpp LABELS golden TIMEOUT 300
  LIBS nlohmann_json::nlohmann_json)

# On a machine with a GPU: the harness itself. Without one it prints
# "fp8sim-hw: no CUDA device" and exits 77 (skipped).
if(TARGET fp8sim-hw)
  foreach(sub check probe bench cvt)
    fp8sim_add_test(hw_gpu_${sub} COMMAND fp8sim-hw ${sub} LABELS gpu TIMEOUT 900)
  endforeach()
endif()
# fp8sim-hw's standard output is checked like any output (issue 39): a write error there is
# exit 2, never 0 (--help) or 77 (read as skipped). No GPU needed.
if(TARGET fp8sim-hw)
  fp8sim_add_test(hw_stdout_errors LABELS unit
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/hw_stdout_errors.sh $<TARGET_FILE:fp8sim-hw>)
endif()
