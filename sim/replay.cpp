// replay: capture manifests, their checks, the model recomputation and the comparison.
#include "replay.hpp"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "accumulator.hpp"
#include "format.hpp"
#include "gemm.hpp"
#include "npy.hpp"
#include "revision.hpp"

namespace fp8sim {
namespace {

using nlohmann::json;

// Where an error happened: "<dir>/manifest.json: case 'x'".
struct Where {
  std::string manifest, name;
  std::string str() const {
    return name.empty() ? manifest : fmt::format("{}: case '{}'", manifest, name);
  }
  [[noreturn]] void fail(const std::string& problem) const {
    throw std::runtime_error(fmt::format("{}: {}", str(), problem));
  }
};

const json* find(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

const json& need(const json& j, const char* key, const Where& w) {
  const json* v = find(j, key);
  if (v == nullptr) w.fail(fmt::format("missing key '{}'", key));
  return *v;
}

std::string get_string(const json& v, const char* key, const Where& w) {
  if (!v.is_string()) w.fail(fmt::format("key '{}' must be a string, got {}", key, v.dump()));
  return v.get<std::string>();
}

int get_int(const json& v, const char* key, const Where& w, int lo, int hi) {
  if (!v.is_number_integer())
    w.fail(fmt::format("key '{}' must be an integer, got {}", key, v.dump()));
  const auto x = v.get<std::int64_t>();
  if (x < lo || x > hi) w.fail(fmt::format("key '{}' = {} is not in {}..{}", key, x, lo, hi));
  return static_cast<int>(x);
}

std::string opt_string(const json& j, const char* key, const Where& w, std::string fallback) {
  const json* v = find(j, key);
  return v == nullptr ? fallback : get_string(*v, key, w);
}

FormatSpec output_type(const std::string& name, const Where& w) {
  if (name == "f32" || name == "fp32") return format_by_name("fp32");
  if (name == "bf16") return format_by_name("bf16");
  if (name == "f16" || name == "fp16") return format_by_name("fp16");
  w.fail(fmt::format("unknown out_type '{}' (f32, bf16, f16)", name));
}

bool same_bits(float got, float want) {
  if (std::isnan(got) && std::isnan(want)) return true;
  return std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(want);
}

// Columns [0, k) of a rows x cols row-major matrix.
template <class T>
std::vector<T> first_columns(const std::vector<T>& v, std::size_t rows, std::size_t cols,
                             std::size_t k) {
  std::vector<T> out(rows * k);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < k; ++c) out[r * k + c] = v[r * cols + c];
  return out;
}

// One case, read and checked.
struct Case {
  Where where;
  std::string name, kernel, model_name;
  GemmSpec spec;
  int M = 0, N = 0, K = 0;
  std::vector<std::uint8_t> a, b;
  std::vector<float> c, sa, sb, d, d_prefix;
  std::vector<int> prefix_k;
};

Case read_case(const std::string& dir, const json& j, const ReplayOptions& o, Where w) {
  Case cs;
  if (!j.is_object()) w.fail("a case must be a JSON object");
  cs.name = get_string(need(j, "name", w), "name", w);
  w.name = cs.name;
  cs.where = w;
  cs.kernel = opt_string(j, "kernel", w, "");

  // 1. The spec: formats, model (or --model), promotion, scaling, output type.
  auto spec_call = [&](auto&& f) {
    try {
      return f();
    } catch (const std::invalid_argument& e) {
      w.fail(e.what());
    }
  };
  GemmSpec& s = cs.spec;
  s.device = o.device;
  s.a_format = spec_call([&] { return format_by_name(get_string(need(j, "a_format", w), "a_format", w)); });
  s.b_format = spec_call([&] { return format_by_name(get_string(need(j, "b_format", w), "b_format", w)); });
  if (!o.model.empty()) {
    cs.model_name = o.model;
  } else {
    const json* m = find(j, "model");
    if (m == nullptr) w.fail("model is null (unknown): pass --model");
    cs.model_name = get_string(*m, "model", w);
  }
  s.model = spec_call([&] { return accumulator_by_name(cs.model_name); });
  s.promote_every = o.promote_every >= 0 ? o.promote_every
                    : find(j, "promote_every") ? get_int(j["promote_every"], "promote_every", w, 0, 1 << 30)
                                               : 0;
  s.scaling = spec_call([&] { return parse_scaling(opt_string(j, "scaling", w, "none")); });
  s.block = find(j, "block") ? get_int(j["block"], "block", w, 1, 1 << 20) : 128;
  s.order = spec_call([&] { return parse_scale_order(opt_string(j, "scale_order", w, "deepgemm")); });
  s.out_type = output_type(opt_string(j, "out_type", w, "f32"), w);
  s.threads = o.threads;
  cs.M = get_int(need(j, "M", w), "M", w, 1, 1 << 20);
  cs.N = get_int(need(j, "N", w), "N", w, 1, 1 << 20);
  cs.K = get_int(need(j, "K", w), "K", w, 1, 1 << 24);
  spec_call([&] { validate(s, cs.M, cs.N, cs.K); return 0; });
  const std::size_t M = cs.M, N = cs.N, K = cs.K;

  // 2. The files, each checked for dtype and shape.
  auto path = [&](const char* key) {
    return dir + "/" + get_string(need(j, key, w), key, w);
  };
  auto read = [&](const std::string& p, const char* descr, std::vector<std::size_t> shape) {
    try {
      return read_npy_checked(p, descr, shape);
    } catch (const std::runtime_error& e) {
      w.fail(e.what());
    }
  };
  cs.a = read(path("a"), "|u1", {M, K}).as<std::uint8_t>();
  cs.b = read(path("b"), "|u1", {N, K}).as<std::uint8_t>();
  cs.d = read(path("d"), "<f4", {M, N}).as<float>();
  if (find(j, "c")) cs.c = read(path("c"), "<f4", {M, N}).as<float>();
  if (s.scaling != Scaling::none) {
    const ScaleShapes sh = scale_shapes(s, cs.M, cs.N, cs.K);
    cs.sa = read(path("sa"), "<f4", {sh.a_rows, sh.a_cols}).as<float>();
    cs.sb = read(path("sb"), "<f4", {sh.b_rows, sh.b_cols}).as<float>();
  }
  const json* pk = find(j, "prefix_k");
  if (pk != nullptr) {
    if (!pk->is_array()) w.fail("key 'prefix_k' must be a list of integers");
    int last = 0;
    for (const json& k : *pk) {
      const int kp = get_int(k, "prefix_k", w, 1, cs.K);
      if (kp <= last) w.fail(fmt::format("prefix_k must increase ({} after {})", kp, last));
      spec_call([&] {
        try {
          validate(s, cs.M, cs.N, kp);
        } catch (const std::invalid_argument& e) {
          throw std::invalid_argument(fmt::format("prefix_k {}: {}", kp, e.what()));
        }
        return 0;
      });
      cs.prefix_k.push_back(last = kp);
    }
    if (!cs.prefix_k.empty())
      cs.d_prefix = read(path("d_prefix"), "<f4", {cs.prefix_k.size(), M, N}).as<float>();
  } else if (find(j, "d_prefix")) {
    w.fail("d_prefix given without prefix_k");
  }
  return cs;
}

// The model's D for the first k columns of K.
std::vector<float> model_output(const Case& cs, int k) {
  const std::size_t M = cs.M, N = cs.N, K = cs.K;
  std::vector<float> d(M * N);
  if (k == cs.K) {
    gemm(cs.spec, cs.M, cs.N, cs.K, cs.a, cs.b, cs.c, cs.sa, cs.sb, d);
    return d;
  }
  const auto a = first_columns(cs.a, M, K, k), b = first_columns(cs.b, N, K, k);
  std::vector<float> sa = cs.sa, sb = cs.sb;
  if (cs.spec.scaling == Scaling::block || cs.spec.scaling == Scaling::mx) {
    const ScaleShapes full = scale_shapes(cs.spec, cs.M, cs.N, cs.K);
    const ScaleShapes part = scale_shapes(cs.spec, cs.M, cs.N, k);
    sa = first_columns(cs.sa, full.a_rows, full.a_cols, part.a_cols);
    sb = first_columns(cs.sb, full.b_rows, full.b_cols, part.b_cols);
  }
  gemm(cs.spec, cs.M, cs.N, k, a, b, cs.c, sa, sb, d);
  return d;
}

ReplayCase run_case(const Case& cs) {
  ReplayCase r;
  r.name = cs.name;
  r.kernel = cs.kernel;
  r.model = cs.model_name;
  r.promote_every = cs.spec.promote_every;
  std::vector<float> want;
  try {
    want = model_output(cs, cs.K);
  } catch (const std::invalid_argument& e) {
    cs.where.fail(e.what());  // e.g. an operand code the format does not have
  }
  r.total = want.size();
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (same_bits(cs.d[i], want[i])) {
      ++r.matches;
    } else if (!r.first) {
      r.first = ReplayMismatch{int(i / cs.N), int(i % cs.N), cs.d[i], want[i]};
    }
  }
  // The first prefix whose outputs differ anywhere; else d itself when it differs.
  const std::size_t mn = std::size_t(cs.M) * cs.N;
  int k_lo = 0;
  for (std::size_t p = 0; p < cs.prefix_k.size(); ++p) {
    const auto w = model_output(cs, cs.prefix_k[p]);
    ++r.prefixes;
    bool same = true;
    for (std::size_t i = 0; i < mn && same; ++i) same = same_bits(cs.d_prefix[p * mn + i], w[i]);
    if (!same) {
      r.divergence = std::make_pair(k_lo, cs.prefix_k[p]);
      return r;
    }
    k_lo = cs.prefix_k[p];
  }
  if (r.first && !cs.prefix_k.empty()) r.divergence = std::make_pair(k_lo, cs.K);
  return r;
}

std::string hex(float v) { return fmt::format("{:#010x}", std::bit_cast<std::uint32_t>(v)); }

}  // namespace

bool ReplayReport::all_match() const {
  for (const ReplayCase& c : cases)
    if (!c.ok()) return false;
  return true;
}

ReplayReport replay(const std::string& dir_arg, const ReplayOptions& opts) {
  std::string dir = dir_arg;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const Where top{dir + "/manifest.json", ""};
  std::ifstream in(top.manifest);
  if (!in) top.fail("cannot open (not a capture folder?)");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    top.fail(fmt::format("not valid JSON: {}", e.what()));
  }
  if (!j.is_object()) top.fail("not a JSON object");
  const json* version = find(j, "fp8sim_capture");
  if (version == nullptr || !version->is_number_integer() || version->get<int>() != 1)
    top.fail("missing \"fp8sim_capture\": 1 (not an fp8sim capture, or a newer version)");
  ReplayReport r;
  r.dir = dir;
  r.device = opt_string(j, "device", top, "");
  r.driver = opt_string(j, "driver", top, "");
  r.cuda = opt_string(j, "cuda", top, "");
  r.date = opt_string(j, "date", top, "");
  r.git_revision = opt_string(j, "git_revision", top, "");
  r.generator = opt_string(j, "generator", top, "");
  const json& cases = need(j, "cases", top);
  if (!cases.is_array()) top.fail("key 'cases' must be a list");
  bool found = false;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const json& c = cases[i];
    if (!opts.case_name.empty() &&
        !(c.is_object() && c.contains("name") && c["name"] == opts.case_name))
      continue;
    found = true;
    const Where w{top.manifest, fmt::format("#{}", i)};
    r.cases.push_back(run_case(read_case(dir, c, opts, w)));
  }
  if (!opts.case_name.empty() && !found)
    top.fail(fmt::format("no case named '{}'", opts.case_name));
  if (r.cases.empty()) top.fail("no cases");
  return r;
}

std::string format_case(const ReplayCase& c) {
  std::string s = fmt::format("{}: {}/{} match", c.name, c.matches, c.total);
  if (c.first)
    s += fmt::format("; first mismatch ({},{}) got {} want {}", c.first->m, c.first->n,
                     hex(c.first->got), hex(c.first->want));
  if (c.divergence)
    s += fmt::format("; first divergence at K = {}..{}", c.divergence->first,
                     c.divergence->second);
  if (!c.first && c.divergence) s += " (prefix outputs only)";
  return s;
}

std::string replay_json(const ReplayReport& r) {
  json j;
  j["captures"] = r.dir;
  j["device"] = r.device;
  j["driver"] = r.driver;
  j["cuda"] = r.cuda;
  j["date"] = r.date;
  j["capture_git_revision"] = r.git_revision;
  j["generator"] = r.generator;
  j["fp8sim_git_revision"] = git_revision();
  j["all_match"] = r.all_match();
  j["cases"] = json::array();
  for (const ReplayCase& c : r.cases) {
    json jc;
    jc["name"] = c.name;
    jc["kernel"] = c.kernel;
    jc["model"] = c.model;
    jc["promote_every"] = c.promote_every;
    jc["matches"] = c.matches;
    jc["total"] = c.total;
    jc["prefixes_checked"] = c.prefixes;
    jc["first_mismatch"] = c.first ? json{{"m", c.first->m},
                                           {"n", c.first->n},
                                           {"got", hex(c.first->got)},
                                           {"want", hex(c.first->want)}}
                                   : json(nullptr);
    jc["divergence"] = c.divergence
                           ? json{{"k_lo", c.divergence->first}, {"k_hi", c.divergence->second}}
                           : json(nullptr);
    j["cases"].push_back(jc);
  }
  return j.dump(1) + "\n";
}

}  // namespace fp8sim
