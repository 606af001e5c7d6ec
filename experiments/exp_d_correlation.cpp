// exp_d_correlation: correlation rho in {0, 0.1, 0.5, 0.9, 0.99} crossed with promotion (b) and block scaling (c).
#include "experiment.hpp"

using namespace fp8sim;

int main(int argc, char** argv) {
  experiments::Experiment e;
  e.name = "d_correlation";
  e.question =
      "How do quantisation and accumulation SNR change with the correlation rho between the two "
      "vectors, for no promotion vs promotion every 128 and tensor-wise vs 1x128 block scales?";
  e.default_trials = 200;
  e.paper_trials = 2000;
  e.build = [] {
    SweepSpec s;
    s.k = {4096};
    s.rho = {0.0, 0.1, 0.5, 0.9, 0.99};
    s.formats = {format_by_name("e4m3")};
    s.scalings = {scaling_by_name("tensor"), scaling_by_name("block128")};
    s.promote_every = {0, 128};  // block128 with no promotion is invalid and skipped
    s.models = {accumulator_by_name("hopper-wgmma")};
    s.skip_invalid = true;
    return s;
  };
  return experiments::run(e, argc, argv);
}
