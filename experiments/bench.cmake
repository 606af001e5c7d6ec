# fp8sim-bench-convert: float32 -> e4m3 encoding rate (encode_batch, encode) beside ml_dtypes.
add_executable(fp8sim-bench-convert bench_convert.cpp)
target_link_libraries(fp8sim-bench-convert PRIVATE fp8sim::sim CLI11::CLI11)
target_compile_definitions(fp8sim-bench-convert PRIVATE FP8SIM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
