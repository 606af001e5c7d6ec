// exp_b_promotion: chunked promotion to FP32 every 32/64/128/512 products vs never, Hopper accumulator.
#include "experiment.hpp"

using namespace fp8sim;

int main(int argc, char** argv) {
  experiments::Experiment e;
  e.name = "b_promotion";
  e.question =
      "How much accumulation SNR does promoting the Hopper tensor-core partial sum to an FP32 "
      "register every 32, 64, 128 or 512 products recover, against never promoting?";
  e.default_trials = 200;
  e.paper_trials = 2000;
  e.build = [] {
    SweepSpec s;
    s.k = {256, 1024, 4096, 16384};
    s.formats = {format_by_name("e4m3")};
    s.scalings = {scaling_by_name("tensor")};
    s.promote_every = {0, 32, 64, 128, 512};
    s.models = {accumulator_by_name("hopper-wgmma")};
    return s;
  };
  return experiments::run(e, argc, argv);
}
