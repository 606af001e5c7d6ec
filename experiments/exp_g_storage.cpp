// exp_g_storage: E4M3 vs E5M2 vs E5M6 storage of the same data.
#include "experiment.hpp"

using namespace fp8sim;

int main(int argc, char** argv) {
  experiments::Experiment e;
  e.name = "g_storage";
  e.question =
      "Storing the same data as E4M3, E5M2 or E5M6 (12-bit), unscaled and with a tensor-wise "
      "scale: how much SNR does each element format give?";
  e.default_trials = 200;
  e.paper_trials = 2000;
  e.build = [] {
    SweepSpec s;
    s.distributions = {distribution_by_name("gaussian"), distribution_by_name("t:nu=3"),
                       distribution_by_name("llm:channels=8,gain=50,rowspread=3"),
                       distribution_by_name("gaussian:sigma=0.0009765625")};
    s.k = {4096};
    s.formats = {format_by_name("e4m3"), format_by_name("e5m2"), format_by_name("e5m6")};
    s.scalings = {scaling_by_name("none"), scaling_by_name("tensor")};
    s.promote_every = {128};
    s.models = {accumulator_by_name("hopper-wgmma")};
    return s;
  };
  return experiments::run(e, argc, argv);
}
