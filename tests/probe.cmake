# Accumulator probing (probe.hpp) and capture replay (replay.hpp, fp8sim replay).
fp8sim_add_test(test_probe SOURCES test_probe.cpp LABELS unit TIMEOUT 300)
fp8sim_add_test(test_replay SOURCES test_replay.cpp LABELS unit TIMEOUT 300 DRIVER
  LIBS nlohmann_json::nlohmann_json)
fp8sim_add_test(test_replay_example SOURCES test_replay_example.cpp LABELS unit TIMEOUT 300)
