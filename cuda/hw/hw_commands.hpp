// hw_commands: fp8sim-hw's subcommands, one source file each (hw_cmd_<name>.cpp); hw_main.cpp
// parses the command line and calls one of them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fp8sim::hw {

// Suites x kernels vs models, bit for bit; JSON report; 1 on a mismatch.
int cmd_check(std::uint64_t seed, int max_k, const std::string& json_path,
              const std::vector<std::string>& kernels, const std::vector<std::string>& suites_in,
              bool closest_all);
// Hardware FP8 conversions vs encode(), sampled (and exhaustive on request).
int cmd_cvt(bool exhaustive, const std::string& json_path, const std::string& out_dir);
// Inputs and outputs of each capture set as .npy + manifest.json for replay without a GPU.
int cmd_capture(const std::string& out, std::uint64_t seed);
// sim/analysis/probe.hpp on each kernel; 1 when a kernel with a preset disagrees with it.
int cmd_probe(const std::vector<std::string>& kernels, const std::string& json_path);
// TFLOP/s of each kernel on a size^3 GEMM.
int cmd_bench(int size, int iters);

}  // namespace fp8sim::hw
