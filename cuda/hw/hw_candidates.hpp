// hw_candidates: ranking candidate accumulator models against a variant's recorded kernel
// runs (check's "closest" column, capture's model choice).
#pragma once

#include <string>
#include <vector>

#include "hw/hw_harness.hpp"
#include "hw/hw_kernel_table.hpp"

namespace fp8sim::hw {

struct CaseRun {
  Case c;                    // as the variant saw it
  std::vector<float> d;      // kernel output
};

struct Candidate {
  std::string model;
  int promote_every;
  long matches = 0, total = 0;
};

// Every (candidate model, interval) of v against the recorded runs, best first.
std::vector<Candidate> rank_candidates(const Variant& v, const std::vector<CaseRun>& runs);

// "<model> promote=<n|never>".
std::string cand_label(const Candidate& c);

}  // namespace fp8sim::hw
