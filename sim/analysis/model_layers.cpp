// model_layers: the built-in layer lists and user JSON files, parsed and checked.
#include "analysis/model_layers.hpp"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "base/limits.hpp"

namespace fp8sim {
namespace {

ModelLayers parse(std::string_view where, std::string_view text) {
  using nlohmann::json;
  ModelLayers m;
  try {
    const json j = json::parse(text);
    m.model = j.at("model").get<std::string>();
    m.description = j.value("description", "");
    m.source = j.value("source", "");
    for (const json& l : j.at("layers")) {
      ModelLayer x;
      x.name = l.at("name").get<std::string>();
      x.n = l.at("n").get<int>();
      x.k = l.at("k").get<int>();
      x.from = l.value("from", "");
      if (x.n < 1 || x.k < 1 || x.n > limits::kMaxDim || x.k > limits::kMaxDim)
        throw std::invalid_argument(fmt::format("layer {}: N = {}, K = {} (each 1..{})", x.name,
                                                x.n, x.k, limits::kMaxDim));
      m.layers.push_back(std::move(x));
    }
  } catch (const json::exception& e) {
    throw std::invalid_argument(fmt::format("model {}: {}", where, e.what()));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("model {}: {}", where, e.what()));
  }
  if (m.layers.empty()) throw std::invalid_argument(fmt::format("model {}: no layers", where));
  return m;
}

}  // namespace

std::vector<std::string> model_names() {
  std::vector<std::string> out;
  for (const BuiltinModelLayers& b : builtin_model_layers()) out.emplace_back(b.name);
  return out;
}

ModelLayers model_layers(std::string_view name_or_path) {
  for (const BuiltinModelLayers& b : builtin_model_layers())
    if (b.name == name_or_path) return parse(b.name, b.json);
  if (name_or_path.size() > 5 && name_or_path.substr(name_or_path.size() - 5) == ".json") {
    std::ifstream f{std::string(name_or_path)};
    if (!f) throw std::invalid_argument(fmt::format("model {}: cannot be read", name_or_path));
    std::ostringstream s;
    s << f.rdbuf();
    return parse(name_or_path, s.str());
  }
  std::string known;
  for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument(
      fmt::format("unknown model '{}' (known: {}; or a .json path)", name_or_path, known));
}

}  // namespace fp8sim
