# Experiments a-h (a-g: issue 5, h: issue 12): one exp_<name> binary per experiment on a shared driver; each
# writes <name>.csv, <name>_summary.csv and <name>.json; plot_<name>.py draws the figures.
add_library(fp8sim_experiment STATIC ${CMAKE_CURRENT_SOURCE_DIR}/experiment.cpp)
target_include_directories(fp8sim_experiment PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(fp8sim_experiment PUBLIC fp8sim::sim CLI11::CLI11 nlohmann_json::nlohmann_json)
target_compile_options(fp8sim_experiment PRIVATE -Wall -Wextra)
# In a sanitizer build (tests/run.sh's build-asan) the driver runs only in test_cli_reliability's
# error-contract checks (--trials 1) (clang 14 with ASan+UBSan: 17 CPU-s at -O1, 8 at -O0).
fp8sim_not_under_test(fp8sim_experiment)
# The experiments are the exp_<name>.cpp files here: this glob is the one list. It is written
# to <build>/experiments/experiments.txt for run.sh and tests/test_notebooks.sh.
file(GLOB fp8sim_experiment_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/exp_*.cpp)
set(FP8SIM_EXPERIMENTS "")
foreach(src ${fp8sim_experiment_sources})
  get_filename_component(name ${src} NAME_WE)
  string(REGEX REPLACE "^exp_" "" name ${name})
  list(APPEND FP8SIM_EXPERIMENTS ${name})
endforeach()
list(SORT FP8SIM_EXPERIMENTS)
list(JOIN FP8SIM_EXPERIMENTS "\n" fp8sim_experiment_lines)
file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/experiments.txt CONTENT "${fp8sim_experiment_lines}\n")
set(fp8sim_experiment_targets "")
foreach(name ${FP8SIM_EXPERIMENTS})
  list(APPEND fp8sim_experiment_targets exp_${name})
  add_executable(exp_${name} ${CMAKE_CURRENT_SOURCE_DIR}/exp_${name}.cpp)
  target_link_libraries(exp_${name} PRIVATE fp8sim_experiment)
  target_compile_options(exp_${name} PRIVATE -Wall -Wextra)
endforeach()
add_custom_target(experiments DEPENDS ${fp8sim_experiment_targets})
