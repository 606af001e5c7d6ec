# fp8sim analyze: the library's analysis (sim/analyze, sim/recipe) and the CLI subcommand.
fp8sim_add_test(test_analyze SOURCES test_analyze.cpp LABELS "unit;differential" TIMEOUT 300)
