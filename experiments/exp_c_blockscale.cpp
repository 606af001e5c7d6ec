// exp_c_blockscale: block-wise scaling with chunk 128 and 512 vs tensor-wise, on three input distributions.
#include "experiment.hpp"

using namespace fp8sim;

int main(int argc, char** argv) {
  experiments::Experiment e;
  e.name = "c_blockscale";
  e.question =
      "How much quantisation SNR do block-wise scales (1x128 / 128x128 and 1x512 / 512x512, "
      "DeepSeek-V3 style) and MX 1x32 E8M0 scales gain over one tensor-wise scale, for "
      "Gaussian, heavy-tailed and LLM-like inputs (outlier channels, and tokens of different "
      "magnitudes)?";
  e.default_trials = 200;
  e.paper_trials = 2000;
  e.build = [] {
    SweepSpec s;
    s.distributions = {distribution_by_name("gaussian"), distribution_by_name("t:nu=3"),
                       distribution_by_name("llm:channels=8,gain=50"),
                       // tokens (rows of A) whose magnitudes differ by 2^(3 N(0,1))
                       distribution_by_name("llm:channels=8,gain=50,rowspread=3")};
    s.k = {4096};
    s.formats = {format_by_name("e4m3")};
    s.scalings = {scaling_by_name("tensor"), scaling_by_name("block512"),
                  scaling_by_name("block128"), scaling_by_name("mx")};
    s.promote_every = {32, 128};  // scales are applied at promotion: mx needs 32
    s.models = {accumulator_by_name("hopper-wgmma")};
    s.skip_invalid = true;
    return s;
  };
  return experiments::run(e, argc, argv);
}
