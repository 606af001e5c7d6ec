// exp_e_deepseek: DeepSeek-V3's K=4096 'maximum relative error of nearly 2%' on the Hopper accumulator.
#include "experiment.hpp"

using namespace fp8sim;

int main(int argc, char** argv) {
  experiments::Experiment e;
  e.name = "e_deepseek";
  e.question =
      "DeepSeek-V3 (s3.3.2) reports that a K=4096 GEMM with the limited tensor-core accumulation "
      "reaches a maximum relative error near 2%: what does the hopper-wgmma model give without "
      "promotion, and with promotion to FP32 every 128 products?";
  e.default_trials = 500;
  e.paper_trials = 10000;  // ~3 GB: the sweep holds all trials of a configuration at once
  e.build = [] {
    SweepSpec s;
    // Zero-mean inputs (errors partly cancel) and positive inputs (every truncation toward
    // zero lowers the sum: the worst case for a round-toward-zero accumulator).
    s.distributions = {distribution_by_name("gaussian"), distribution_by_name("uniform:lo=0,hi=1")};
    s.rho = {0.0, 0.5, 0.99};  // a correlated pair's dot product grows like rho K
    s.k = {4096};
    s.formats = {format_by_name("e4m3")};
    s.scalings = {scaling_by_name("tensor")};
    s.promote_every = {0, 128};
    s.models = {accumulator_by_name("hopper-wgmma"), accumulator_by_name("fp32")};
    return s;
  };
  return experiments::run(e, argc, argv);
}
