// fuzz_plan_table: libFuzzer target for the cuBLASLt plan-table reader (plan_table.hpp): the
// input is the table's .json text, a NUL byte, then its .bin bytes. Any input gives a table
// or one std::invalid_argument line of bounded length, never a crash, a hang or a runaway
// allocation; a table that is accepted holds what the lookup relies on (checked here, an
// abort on a break): non-empty strictly increasing axes, the whole grid, every index a
// configuration or `none`.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include "kernel/plan_table.hpp"

namespace {

bool axis_ok(const std::vector<int>& a) {
  if (a.empty()) return false;
  for (std::size_t i = 1; i < a.size(); ++i)
    if (a[i] <= a[i - 1]) return false;
  return a.front() >= 1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = in.find('\0');
  const std::string_view meta = in.substr(0, nul);
  const std::string_view blob = nul == std::string_view::npos ? std::string_view{} : in.substr(nul + 1);
  try {
    const fp8sim::PlanTable t = fp8sim::parse_plan_table("fuzz.json", meta, blob);
    const std::size_t points = t.variants.size() * t.m.size() * t.n.size() * t.k.size();
    if (!axis_ok(t.m) || !axis_ok(t.n) || !axis_ok(t.k) || t.variants.empty() ||
        t.codes.size() != points)
      std::abort();
    for (const std::uint16_t c : t.codes)
      if (c != t.none && c >= t.meta.at("configs").size()) std::abort();
  } catch (const std::invalid_argument& e) {
    const std::string_view msg = e.what();
    if (msg.size() > 2048 || msg.find('\n') != std::string_view::npos) std::abort();
  }
  return 0;
}
