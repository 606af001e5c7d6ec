# Experiments a-g (issue 5): one exp_<name> binary per experiment on a shared driver; each
# writes <name>.csv, <name>_summary.csv and <name>.json; plot_<name>.py draws the figures.
add_library(fp8sim_experiment STATIC ${CMAKE_CURRENT_SOURCE_DIR}/experiment.cpp)
target_include_directories(fp8sim_experiment PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(fp8sim_experiment PUBLIC fp8sim::sim CLI11::CLI11 nlohmann_json::nlohmann_json)
target_compile_options(fp8sim_experiment PRIVATE -Wall -Wextra)
set(FP8SIM_EXPERIMENTS a_length b_promotion c_blockscale d_correlation e_deepseek f_hw_design g_storage)
foreach(name ${FP8SIM_EXPERIMENTS})
  add_executable(exp_${name} ${CMAKE_CURRENT_SOURCE_DIR}/exp_${name}.cpp)
  target_link_libraries(exp_${name} PRIVATE fp8sim_experiment)
  target_compile_options(exp_${name} PRIVATE -Wall -Wextra)
endforeach()
add_custom_target(experiments DEPENDS exp_a_length exp_b_promotion exp_c_blockscale
  exp_d_correlation exp_e_deepseek exp_f_hw_design exp_g_storage)
