// plan_table: cuBLASLt plan tables read by name or path, checked whole before use.
#include "kernel/plan_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "base/checked_json.hpp"
#include "base/input_file.hpp"
#include "base/limits.hpp"
#include "kernel/plan_tables.hpp"

namespace fp8sim {
namespace {

using nlohmann::json;

// The checks of one table, each failure one line naming the table.
struct Checker {
  std::string_view name;

  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument(fmt::format("cuBLASLt plan table {}: {}",
                                            limits::quoted(std::string(name), 4096), what));
  }
  static std::string show(const json& v) { return limits::quoted(v.dump()); }

  const json& need(const json& j, const char* key, const char* where) const {
    if (!j.is_object() || !j.contains(key)) fail(fmt::format("{} has no key '{}'", where, key));
    return j.at(key);
  }
  long long integer(const json& v, const std::string& what, long long lo, long long hi) const {
    if (!v.is_number_integer()) fail(fmt::format("{} = {} is not an integer", what, show(v)));
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(hi))
      fail(fmt::format("{} = {} is not in {}..{}", what, show(v), lo, hi));
    const long long x = v.get<long long>();
    if (x < lo || x > hi) fail(fmt::format("{} = {} is not in {}..{}", what, show(v), lo, hi));
    return x;
  }
  void string(const json& v, const std::string& what) const {
    if (!v.is_string()) fail(fmt::format("{} = {} is not a string", what, show(v)));
  }
  std::vector<std::string> strings(const json& v, const std::string& what) const {
    if (!v.is_array()) fail(fmt::format("{} is not a list", what));
    std::vector<std::string> out;
    for (const json& s : v) {
      string(s, what);
      if (std::find(out.begin(), out.end(), s.get<std::string>()) != out.end())
        fail(fmt::format("{}: '{}' given twice", what, limits::quoted(s.get<std::string>())));
      out.push_back(s.get<std::string>());
    }
    return out;
  }
  // An axis: a non-empty, strictly increasing list of integers in 1..kMaxDim.
  std::vector<int> axis(const json& axes, const char* key) const {
    const json& a = need(axes, key, "axes");
    const std::string what = fmt::format("axes.{}", key);
    if (!a.is_array() || a.empty()) fail(fmt::format("{} must be a non-empty list", what));
    std::vector<int> out;
    for (const json& v : a) {
      out.push_back(int(integer(v, what, 1, limits::kMaxDim)));
      if (out.size() > 1 && out.back() <= out[out.size() - 2])
        fail(fmt::format("{} must increase strictly ({} after {})", what, out.back(),
                         out[out.size() - 2]));
    }
    return out;
  }
  // The optional key `key` of object `o`, if present of the type `is` checks.
  template <class Is>
  void optional(const json& o, const char* key, Is is, const char* type,
                const std::string& where) const {
    if (o.contains(key) && !is(o.at(key)))
      fail(fmt::format("{}.{} = {} is not {}", where, key, show(o.at(key)), type));
  }
};

bool is_int(const json& v) { return v.is_number_integer(); }
bool is_bool(const json& v) { return v.is_boolean(); }
bool is_string(const json& v) { return v.is_string(); }

}  // namespace

PlanTable parse_plan_table(std::string_view name, std::string_view meta, std::string_view blob) {
  const Checker c{name};
  PlanTable t;
  t.name = name;
  // 1. The JSON: depth and keys checked while it is read, then every key the lookup reads.
  try {
    t.meta = parse_checked_json(meta);
  } catch (const std::invalid_argument& e) {
    c.fail(e.what());
  }
  if (!t.meta.is_object()) c.fail("the .json is not a JSON object");
  const json& axes = c.need(t.meta, "axes", "the table");
  t.m = c.axis(axes, "m");
  t.n = c.axis(axes, "n");
  t.k = c.axis(axes, "k");
  t.variants = c.strings(c.need(t.meta, "variants", "the table"), "variants");
  if (t.variants.empty()) c.fail("variants must be a non-empty list");
  t.fields = c.strings(c.need(t.meta, "fields", "the table"), "fields");
  if (t.meta.contains("none")) t.none = std::uint16_t(c.integer(t.meta["none"], "none", 0, 65535));
  const json& prov = c.need(t.meta, "provenance", "the table");
  if (!prov.is_object()) c.fail("provenance is not an object");
  c.optional(prov, "gpu", is_string, "a string", "provenance");
  // Configurations: rows of the fields, the ones the lookup reads of their types.
  const json& configs = c.need(t.meta, "configs", "the table");
  if (!configs.is_array()) c.fail("configs is not a list");
  const auto column = [&](const char* field) {
    const auto it = std::find(t.fields.begin(), t.fields.end(), field);
    if (it == t.fields.end()) c.fail(fmt::format("fields has no '{}'", field));
    return std::size_t(it - t.fields.begin());
  };
  const std::size_t algo = column("algo_id"), split = column("split_k");
  const std::size_t text_columns[] = {column("tile"), column("stages"), column("reduction"),
                                      column("cluster")};
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const json& row = configs[i];
    const std::string where = fmt::format("configs[{}]", i);
    if (!row.is_array() || row.size() != t.fields.size())
      c.fail(fmt::format("{} is not a list of {} values (the fields)", where, t.fields.size()));
    c.integer(row[algo], where + ".algo_id", 0, 1 << 30);
    c.integer(row[split], where + ".split_k", 0, limits::kMaxDim);
    for (const std::size_t col : text_columns) c.string(row[col], where + "." + t.fields[col]);
  }
  if (t.none < configs.size())
    c.fail(fmt::format("none = {} is the index of a configuration", t.none));
  for (const char* list : {"rules", "bias_same_split"}) {
    if (!t.meta.contains(list)) continue;
    const json& items = t.meta[list];
    if (!items.is_array()) c.fail(fmt::format("{} is not a list", list));
    for (std::size_t i = 0; i < items.size(); ++i) {
      const std::string where = fmt::format("{}[{}]", list, i);
      if (!items[i].is_object()) c.fail(fmt::format("{} is not an object", where));
      c.optional(items[i], "variant", is_string, "a string", where);
      c.optional(items[i], "never_splits", is_bool, "true or false", where);
      c.optional(items[i], "points", is_int, "an integer", where);
      c.optional(items[i], "no_split_above_mn", is_int, "an integer", where);
      if (items[i].contains("no_split_below_k"))
        c.integer(items[i]["no_split_below_k"], where + ".no_split_below_k", 0, limits::kMaxDim);
    }
  }
  // 2. The grid's size, bounded before anything is allocated for it.
  std::uint64_t points = t.variants.size();
  for (const std::size_t extent : {t.m.size(), t.n.size(), t.k.size()})
    if (__builtin_mul_overflow(points, std::uint64_t{extent}, &points) ||
        points > limits::kMaxPlanPoints)
      c.fail(fmt::format("the grid (variants x M x N x K) has more than {} points {}",
                         limits::kMaxPlanPoints,
                         limits::named("kMaxPlanPoints", limits::kMaxPlanPoints)));
  // 3. The .bin: (index, count) runs of little-endian uint16 filling exactly that grid.
  if (blob.size() % 4 != 0)
    c.fail(fmt::format("the .bin holds {} bytes, not whole (index, count) pairs", blob.size()));
  t.codes.reserve(points);
  const auto u16 = [&](std::size_t at) {
    return std::uint16_t(std::uint8_t(blob[at]) | std::uint8_t(blob[at + 1]) << 8);
  };
  for (std::size_t i = 0; i < blob.size(); i += 4) {
    const std::uint16_t code = u16(i), count = u16(i + 2);
    if (count == 0) c.fail(fmt::format("the .bin has a run of 0 at byte {}", i));
    if (code != t.none && code >= configs.size())
      c.fail(fmt::format("the .bin names configuration {} at byte {} (the table has {}, none = {})",
                         code, i, configs.size(), t.none));
    if (t.codes.size() + count > points)
      c.fail(fmt::format("the .bin holds more than the grid's {} points (data after byte {})",
                         points, i));
    t.codes.insert(t.codes.end(), count, code);
  }
  if (t.codes.size() != points)
    c.fail(fmt::format("the .bin holds {} points, the grid {}", t.codes.size(), points));
  try {
    t.rule = split_rule_constants(t.meta);
  } catch (const std::invalid_argument& e) {
    c.fail(e.what());
  }
  return t;
}

const PlanTable& plan_table(std::string_view gpu) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<PlanTable>, std::less<>> cache;
  const std::lock_guard<std::mutex> lock(mu);
  if (const auto it = cache.find(gpu); it != cache.end()) return *it->second;
  std::unique_ptr<PlanTable> t;
  for (const BuiltinPlanTable& b : builtin_plan_tables())
    if (b.gpu == gpu) t = std::make_unique<PlanTable>(parse_plan_table(b.gpu, b.meta, b.blob));
  if (!t && gpu.size() > 5 && gpu.substr(gpu.size() - 5) == ".json") {
    const std::string path(gpu), bin = path.substr(0, path.size() - 5) + ".bin";
    // Regular files of bounded size, opened without blocking (a FIFO is refused at once).
    const auto slurp = [&](const std::string& file) {
      try {
        return InputFile(file, limits::kMaxManifestBytes, "kMaxManifestBytes").read_rest();
      } catch (const std::runtime_error& e) {  // "<file>: <problem>"
        throw std::invalid_argument(fmt::format("cuBLASLt plan table {}", e.what()));
      }
    };
    const std::string meta = slurp(path), blob = slurp(bin);
    t = std::make_unique<PlanTable>(parse_plan_table(path, meta, blob));
  }
  if (!t) {
    std::string known;
    for (const BuiltinPlanTable& b : builtin_plan_tables())
      known += fmt::format("{}{}", known.empty() ? "" : ", ", b.gpu);
    throw std::invalid_argument(fmt::format(
        "gpu '{}': no recorded cuBLASLt plans (recorded: {}; or a table's .json path; "
        "record one with cuda/capture/record_cublaslt_plans.py on that GPU)",
        limits::quoted(std::string(gpu)), known));
  }
  return *cache.emplace(std::string(gpu), std::move(t)).first->second;
}

}  // namespace fp8sim
