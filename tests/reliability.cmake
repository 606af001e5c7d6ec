# Reliability: hostile inputs and faults (limits, readers, writers, thread pool, CLI exits).
fp8sim_add_test(test_reliability SOURCES test_reliability.cpp LABELS unit
  LIBS nlohmann_json::nlohmann_json)
