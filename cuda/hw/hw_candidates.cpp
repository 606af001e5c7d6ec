// hw_candidates: ranking candidate accumulator models against a variant's recorded kernel runs.
#include "hw/hw_candidates.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace fp8sim::hw {

std::vector<Candidate> rank_candidates(const Variant& v, const std::vector<CaseRun>& runs) {
  std::vector<Candidate> out;
  for (const auto& m : v.candidates)
    for (int p : v.candidate_promote) {
      Candidate cand{m, p};
      for (const auto& r : runs) {
        std::vector<float> want;
        try {
          want = run_model(variant_spec(v, r.c, m, p), r.c);
        } catch (const std::invalid_argument&) {
          continue;
        }
        for (std::size_t i = 0; i < want.size(); ++i) cand.matches += same_bits(r.d[i], want[i]);
        cand.total += static_cast<long>(want.size());
      }
      if (cand.total > 0) out.push_back(cand);
    }
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    return a.matches * b.total > b.matches * a.total;
  });
  return out;
}

std::string cand_label(const Candidate& c) {
  return fmt::format("{} promote={}", c.model, c.promote_every == 0 ? std::string("never") : std::to_string(c.promote_every));
}

}  // namespace fp8sim::hw
