// exp_f_hw_design: SNR vs accumulator fraction bits (8..24) and products per fused step (8..64).
#include <fmt/format.h>

#include <algorithm>

#include "experiment.hpp"

using namespace fp8sim;

int main(int argc, char** argv) {
  experiments::Experiment e;
  e.name = "f_hw_design";
  e.question =
      "For hardware designers: how does accumulation SNR at K=4096 depend on the fraction bits "
      "kept below the largest exponent (8..24, output 1 bit wider, up to fp32) and on the "
      "number of products fused per step (8..64), without and with promotion every 128?";
  e.default_trials = 200;
  e.paper_trials = 2000;
  e.build = [] {
    SweepSpec s;
    s.k = {4096};
    s.formats = {format_by_name("e4m3")};
    s.scalings = {scaling_by_name("tensor")};
    s.promote_every = {0, 128};
    s.models.clear();
    for (int group : {8, 16, 32, 64})
      for (int frac = 8; frac <= 24; ++frac)
        s.models.push_back(accumulator_by_name(
            fmt::format("custom:group={},frac={},out={},cut=rz", group, frac, std::min(frac + 1, 24))));
    return s;
  };
  return experiments::run(e, argc, argv);
}
