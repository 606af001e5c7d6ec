// model_grid: the accumulator models the engine tests sweep (every preset, a custom
// group x frac x cut grid, and custom models that exercise each other parameter).
#pragma once

#include <fmt/format.h>

#include <string>
#include <vector>

#include "accumulator/accumulator.hpp"

namespace fp8sim::test {

inline std::vector<std::string> model_grid() {
  std::vector<std::string> models;
  for (const auto& p : accumulator_presets()) models.push_back(p.name);
  for (int g : {1, 4, 8, 16, 32, 64})
    for (int frac : {0, 3, 10, 13, 20, 23, 24, 30, 40, 55, 62})
      for (const char* cut : {"rz", "rne"})
        models.push_back(fmt::format("custom:group={},frac={},cut={}", g, frac, cut));
  for (const char* extra :
       {"custom:out=24,outround=rne", "custom:out=8,outround=ru", "custom:out=11,outround=rd",
        "custom:out=14,outround=rna", "custom:c=exact", "custom:c=add", "custom:renorm=1",
        "custom:renorm=1,cut=rne,frac=20", "custom:outfmt=fp16,outround=rz",
        "custom:outfmt=bf16,outround=rne", "custom:group=32,frac=exact,c=add",
        "custom:group=8,frac=exact,out=24,outround=rz", "custom:group=8,block=16,c=add,frac=20",
        "custom:group=4,block=8,interleave=1,c=add,outfmt=fp16,outround=rne",
        "custom:group=16,frac=30,c=add", "custom:group=32,frac=30,cut=rne,out=24"})
    models.push_back(extra);
  return models;
}

}  // namespace fp8sim::test
