// triton_config_files: vLLM's and SGLang's tuned Triton block-FP8 config files
// (sim/data/triton_configs/<server>/, with provenance.json) as built into the library;
// sim/CMakeLists.txt generates the definition from the files there.
#pragma once

#include <span>
#include <string_view>

namespace fp8sim {

struct TritonConfigFile {
  std::string_view server;  // "vllm" or "sglang": the folder
  std::string_view name;    // the file name: provenance.json, or the name the server builds,
                            // e.g. "N=7168,K=1024,device_name=NVIDIA_H100_80GB_HBM3,
                            // dtype=fp8_w8a8,block_shape=[128,128].json"
  std::string_view text;    // the JSON, byte for byte
};

std::span<const TritonConfigFile> builtin_triton_config_files();

}  // namespace fp8sim
