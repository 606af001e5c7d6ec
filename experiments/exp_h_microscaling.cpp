// exp_h_microscaling: MXFP8, MXFP4 and NVFP4 through Blackwell's block-scaled MMAs vs
// DeepSeek-V3's 1x128 E4M3 on Hopper, at equal K on the same data.
#include "experiment.hpp"

using namespace fp8sim;

int main(int argc, char** argv) {
  experiments::Experiment e;
  e.name = "h_microscaling";
  e.question =
      "At equal K and on the same data, how do MXFP8 (E4M3, E8M0 scales per 32), MXFP4 (E2M1, "
      "E8M0 per 32) and NVFP4 (E2M1, UE4M3 per 16 under an fp32 tensor scale), each with its "
      "scales applied inside Blackwell's block-scaled MMA, compare with DeepSeek-V3's E4M3 "
      "1x128 / 128x128 blocks on Hopper's WGMMA promoted every 128, in total and accumulation "
      "SNR?";
  e.default_trials = 128;
  e.paper_trials = 1024;
  e.build = [] {
    SweepSpec s;
    s.distributions = {distribution_by_name("gaussian"), distribution_by_name("t:nu=3"),
                       distribution_by_name("llm:channels=8,gain=50")};
    s.k = {256, 1024, 4096, 16384};
    s.formats = {format_by_name("e4m3"), format_by_name("e2m1")};
    s.scalings = {scaling_by_name("block128"), scaling_by_name("mx"), scaling_by_name("nvfp4")};
    s.promote_every = {128, 0};
    s.models = {accumulator_by_name("hopper-wgmma"), accumulator_by_name("mxf8f6f4"),
                accumulator_by_name("mxf4"), accumulator_by_name("nvfp4")};
    // (format, scaling, promote_every, model): deepseek-v3, mxfp8, mxfp4, nvfp4.
    s.only = {{0, 0, 0, 0}, {0, 1, 1, 1}, {1, 1, 1, 2}, {1, 2, 1, 3}};
    s.tensor_rows = 128;
    return s;
  };
  return experiments::run(e, argc, argv);
}
