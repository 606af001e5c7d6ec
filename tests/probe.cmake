# Accumulator probing (probe.hpp) and capture replay (replay.hpp, fp8sim replay).
fp8sim_add_test(test_probe SOURCES test_probe.cpp LABELS unit TIMEOUT 300)
