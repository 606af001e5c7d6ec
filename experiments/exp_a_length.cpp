// exp_a_length: SNR distribution vs vector length K, with and without a tensor-wise scale.
#include "experiment.hpp"

using namespace fp8sim;

int main(int argc, char** argv) {
  experiments::Experiment e;
  e.name = "a_length";
  e.question =
      "How does the SNR of an e4m3 dot product on the Hopper accumulator (no promotion) fall "
      "with the vector length K, with and without a tensor-wise scaling factor?";
  e.default_trials = 200;
  e.paper_trials = 2000;
  e.build = [] {
    SweepSpec s;
    // Unit-variance data and small data (sigma = 2^-10, like activation gradients), where an
    // unscaled e4m3 loses most values to underflow.
    s.distributions = {distribution_by_name("gaussian"), distribution_by_name("gaussian:sigma=0.0009765625")};
    s.k = {32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
    s.formats = {format_by_name("e4m3")};
    s.scalings = {scaling_by_name("none"), scaling_by_name("tensor")};
    s.promote_every = {0};
    s.models = {accumulator_by_name("hopper-wgmma")};
    return s;
  };
  return experiments::run(e, argc, argv);
}
