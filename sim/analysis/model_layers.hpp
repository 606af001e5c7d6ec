// model_layers: a model's GEMMs as data, (name, N, K) for y = x W^T with W N x K, each list
// citing the config.json values it comes from (sim/data/models/<model>.json, built in), or a
// user's own list in the same JSON form.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fp8sim {

struct ModelLayer {
  std::string name;
  int n = 0, k = 0;
  std::string from;  // how N and K follow from the config ("q_lora_rank x hidden_size")
};

struct ModelLayers {
  std::string model, description, source;
  std::vector<ModelLayer> layers;
};

struct BuiltinModelLayers {
  std::string_view name;  // the file name's stem: "deepseek-v3"
  std::string_view json;  // the file's text
};
std::span<const BuiltinModelLayers> builtin_model_layers();

// The built-in models' names ("deepseek-v3", "llama-3-8b").
std::vector<std::string> model_names();

// A built-in model by name, or a JSON file by path: {"model": ..., "source": ..., "layers":
// [{"name": ..., "n": N, "k": K}, ...]}. Throws std::invalid_argument with one line (unknown
// name with the known ones, unreadable file, a missing key, N or K not in 1..2^30, no layers).
ModelLayers model_layers(std::string_view name_or_path);

}  // namespace fp8sim
