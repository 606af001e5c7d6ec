# fp8sim analyze: the library's analysis (sim/analyze, sim/recipe) and the CLI subcommand.
fp8sim_add_test(test_analyze SOURCES test_analyze.cpp LABELS "unit;differential" TIMEOUT 300)
if(Python3_Interpreter_FOUND)
  fp8sim_add_test(test_analyze_plot LABELS notebooks TIMEOUT 300
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_analyze_plot.sh ${Python3_EXECUTABLE}
            $<TARGET_FILE:fp8sim> ${PROJECT_SOURCE_DIR})
endif()
