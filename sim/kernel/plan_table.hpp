// plan_table: a recorded cuBLASLt plan table (cublaslt_plan.hpp), read and checked once.
//
// A table is a .json (axes, variants, configurations, provenance, rules) and a .bin (per
// variant in the JSON's order, runs of (configuration index, count) as little-endian uint16
// pairs expanding to one index per grid point, M-major then N then K; `none` where cuBLASLt
// returned no algorithm). The built-in tables (plan_tables.hpp) are named by GPU ("h100"); any
// other table is named by its .json's path, with the .bin beside it.
//
// Every check the other inputs get holds here: both files regular and at most
// kMaxManifestBytes, the JSON nested at most kMaxJsonDepth deep with no key twice, and the
// grid at most kMaxPlanPoints points (refused before anything is allocated). Then the table
// itself: axes non-empty, strictly increasing, in 1..kMaxDim; variants and fields unique; each
// configuration a row of the fields with the types the lookup reads; every index a
// configuration or `none`; the .bin exactly the grid (no run of 0, no trailing data). A table
// that passes can be looked up without another error. Errors are std::invalid_argument with
// one line "cuBLASLt plan table <name or path>: <problem>".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kernel/cublaslt_rule.hpp"

namespace fp8sim {

struct PlanTable {
  nlohmann::json meta;               // the checked .json
  std::vector<int> m, n, k;          // the axes, strictly increasing
  std::vector<std::string> variants; // "<out> <scale> fast<0|1>"
  std::vector<std::string> fields;   // the columns of meta["configs"]
  std::vector<std::uint16_t> codes;  // variants x |m| x |n| x |k|, expanded
  std::uint16_t none = 65535;        // the index meaning "no algorithm"
  std::string name;                  // the GPU's name ("h100") or the .json's path
  SplitRuleConstants rule;           // the table's "split_rule" (kernel/cublaslt_rule.hpp)
};

// The table of `gpu`: a built-in one by name, or a .json (with its .bin) by path; read and
// checked once per name, then served from a cache. Throws for an unknown name (listing the
// recorded GPUs) and for any failed check.
const PlanTable& plan_table(std::string_view gpu);

// A table from its texts, every check above but the files' (the fuzz target's entry):
// `name` names it in errors.
PlanTable parse_plan_table(std::string_view name, std::string_view meta, std::string_view blob);

}  // namespace fp8sim
