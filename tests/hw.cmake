# tests/hw.cmake: hardware captures replayed without a GPU (golden) and fp8sim-hw itself (gpu).
# Captures come from `fp8sim-hw capture` / `fp8sim-hw cvt --out` on an H100 (tests/data/hw).
fp8sim_add_test(test_hw_captures SOURCES test_hw_captures.cpp LABELS golden TIMEOUT 300
  LIBS nlohmann_json::nlohmann_json)

# `fp8sim replay` on every capture set (each manifest names the model that reproduces it).
foreach(set wgmma_f32_e4m3 wgmma_f32_e5m2 wgmma_f32_e4m3_e5m2 wgmma_f32_p128_block
            wgmma_f32_p128_block_e5m2 wgmma_f16_e4m3 wgmma_f16_e5m2 wgmma_f16_e5m2_subnormals
            cublaslt_default cublaslt_fastaccum mma_sync_e4m3 mma_sync_e5m2_e4m3)
  add_test(NAME hw_replay_${set}
    COMMAND fp8sim replay --captures ${CMAKE_CURRENT_SOURCE_DIR}/data/hw/${set})
  set_tests_properties(hw_replay_${set} PROPERTIES LABELS golden TIMEOUT 300)
endforeach()

# On a machine with a GPU: the harness itself. Without one it prints
# "fp8sim-hw: no CUDA device" and exits 77 (skipped).
if(TARGET fp8sim-hw)
  foreach(sub check probe bench cvt)
    fp8sim_add_test(hw_gpu_${sub} COMMAND fp8sim-hw ${sub} LABELS gpu TIMEOUT 900)
  endforeach()
endif()
