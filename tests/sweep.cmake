# Sweep engine (sim/sweep, metrics, distributions, scaling) and the notebooks.
fp8sim_add_test(test_metrics SOURCES test_metrics.cpp LABELS unit differential TIMEOUT 120)
fp8sim_add_test(test_sweep SOURCES test_sweep.cpp LABELS unit differential TIMEOUT 300)
