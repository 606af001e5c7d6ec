# Reliability: hostile inputs and faults (limits, readers, writers, thread pool, CLI exits).
fp8sim_add_test(test_reliability SOURCES test_reliability.cpp LABELS unit
  LIBS nlohmann_json::nlohmann_json)
fp8sim_add_test(test_cli_reliability SOURCES test_cli_reliability.cpp LABELS unit DRIVER
  LIBS nlohmann_json::nlohmann_json)
if(TARGET exp_g_storage)  # without experiments, test_cli_reliability skips their checks
  set_property(TEST test_cli_reliability APPEND PROPERTY ENVIRONMENT
    "FP8SIM_EXP=$<TARGET_FILE:exp_g_storage>")
endif()
fp8sim_add_test(test_threads SOURCES test_threads.cpp LABELS unit)
# Issue 39: options the CLI must refuse (W1-W4, W7, W11) and errors with stderr closed (C3).
fp8sim_add_test(test_cli_options_reliability SOURCES test_cli_options_reliability.cpp
  LABELS unit DRIVER LIBS nlohmann_json::nlohmann_json)
# Issue 39: output files under every fatal signal and keeping modes (L1-L3).
fp8sim_add_test(test_output_file_reliability SOURCES test_output_file_reliability.cpp LABELS unit)
