// capture: manifest + .npy capture folders, read with their checks and written atomically.
#include "io/capture.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <unordered_set>
#include <vector>

#include "base/checked_json.hpp"
#include "kernel/gemm_inputs.hpp"
#include "base/input_file.hpp"
#include "kernel/kernel.hpp"
#include "kernel/triton_config.hpp"
#include "base/limits.hpp"
#include "io/npy.hpp"
#include "io/output_file.hpp"
#include "io/std_streams.hpp"

namespace fp8sim {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// Where an error happened: "<dir>/manifest.json: case 'x'".
struct Where {
  std::string manifest, name;
  std::string str() const {
    return name.empty() ? manifest : fmt::format("{}: case '{}'", manifest, limits::quoted(name));
  }
  [[noreturn]] void fail(const std::string& problem) const {
    // Printable whatever the manifest held (a format name with an escape sequence...).
    throw std::runtime_error(printable(fmt::format("{}: {}", str(), problem)));
  }
};

// A JSON value in an error message: scalars as written (cut to kMaxQuotedValue), lists and
// objects by their size, never dumped whole.
std::string show(const json& v) {
  if (v.is_array()) return fmt::format("a list of {} items", v.size());
  if (v.is_object()) return fmt::format("an object of {} keys", v.size());
  if (v.is_string()) return limits::quoted(fmt::format("\"{}\"", v.get_ref<const std::string&>()));
  return limits::quoted(v.dump());
}

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
  if (!v.is_string()) w.fail(fmt::format("key '{}' must be a string, got {}", key, show(v)));
  const auto& s = v.get_ref<const std::string&>();
  if (s.size() > limits::kMaxStringLength)
    w.fail(fmt::format("key '{}' is a string of {} characters {}", key, s.size(),
                       limits::named("kMaxStringLength", limits::kMaxStringLength)));
  return s;
}

std::int64_t get_int(const json& v, const char* key, const Where& w, std::int64_t lo,
                     std::int64_t hi, const char* limit_name = nullptr) {
  if (!v.is_number_integer())
    w.fail(fmt::format("key '{}' must be an integer, got {}", key, show(v)));
  // An unsigned value above INT64_MAX (up to 2^64 - 1) is out of range, not wrapped.
  const bool in_range = v.is_number_unsigned()
                            ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(hi) &&
                                  static_cast<std::int64_t>(v.get<std::uint64_t>()) >= lo
                            : v.get<std::int64_t>() >= lo && v.get<std::int64_t>() <= hi;
  if (!in_range)
    w.fail(fmt::format("key '{}' = {} is not in {}..{}{}{}", key, show(v), lo, hi,
                       limit_name ? " " : "", limit_name ? limits::named(limit_name, hi) : ""));
  return v.get<std::int64_t>();
}

std::string opt_string(const json& j, const char* key, const Where& w, std::string fallback) {
  const json* v = find(j, key);
  return v == nullptr ? fallback : get_string(*v, key, w);
}

FormatSpec output_type(const std::string& name, const Where& w) {
  try {
    return output_type_by_name(name, "out_type");
  } catch (const std::invalid_argument& e) {
    w.fail(e.what());
  }
}

std::string output_type_name(const FormatSpec& f) {
  return f.name == "fp32" ? "f32" : f.name == "fp16" ? "f16" : f.name;
}

// The manifest as JSON: a regular file of bounded size, nested at most kMaxJsonDepth deep,
// no key twice in an object (checked while parsing, so a deep file is refused before it is
// built).
json parse_manifest(const Where& top) {
  const std::string text =
      InputFile(top.manifest, limits::kMaxManifestBytes, "kMaxManifestBytes").read_rest();
  try {
    return parse_checked_json(text);
  } catch (const std::invalid_argument& e) {
    top.fail(e.what());
  }
}

// A file a case names: a relative path inside the capture folder, checked as text here (no
// '..' component, not absolute, no NUL or control character: printable in every message)
// and, when it exists, with symlinks resolved (inside_folder).
std::string case_path(const std::string& dir, const std::string& rel, const char* key,
                      const Where& w) {
  const auto bad = [&](const char* why) {
    w.fail(fmt::format("key '{}' = \"{}\": {} (paths are relative to the capture folder and "
                       "stay inside it)", key, limits::quoted(rel), why));
  };
  if (rel.empty()) bad("an empty path");
  if (rel[0] == '/') bad("an absolute path");
  for (const char c : rel)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) bad("a NUL or control character");
  std::size_t start = 0;
  while (start <= rel.size()) {
    const std::size_t slash = std::min(rel.find('/', start), rel.size());
    if (rel.compare(start, slash - start, "..") == 0 && slash - start == 2) bad("a '..' component");
    start = slash + 1;
  }
  return dir + "/" + rel;
}

// Symlinks resolved, `path` must lie inside the folder `real_dir` (canonical). A file that
// does not exist is left to the reader to report.
void inside_folder(const std::string& real_dir, const std::string& path, const Where& w) {
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(path, ec);
  if (ec) return;
  const std::string r = real.string();
  if (r.size() <= real_dir.size() || r.compare(0, real_dir.size(), real_dir) != 0 ||
      (real_dir != "/" && r[real_dir.size()] != '/'))
    w.fail(fmt::format("{}: resolves outside the capture folder (a symlink to {})", path,
                       limits::quoted(r)));
}

// A case's keys: those read, then those the capture tools write for people to read (never
// read here; so is any key starting with "note"). Any other key is refused: a typo must not
// fall back to a default.
constexpr std::string_view kCaseKeys[] = {
    "name", "kernel", "suite", "seed", "a_format", "b_format", "model", "promote_every",
    "scaling", "block", "scale_order", "out_type", "split_k", "split_k_align", "kernel_preset",
    "M", "N", "K", "a", "b", "c", "d", "bias", "sa", "sb", "prefix_k", "d_prefix",
    "triton_config"};
constexpr std::string_view kCaseNotes[] = {
    "shape", "window", "window_b_blocks", "launch_config", "rows", "cols", "bit_identical_to",
    "nan_outputs", "max_num_imprecise_acc", "upstream", "scale_mode", "use_fast_accum", "algo",
    "config_source", "instruction", "ptx_counts", "mma_shapes"};

void check_case_keys(const json& j, const Where& w) {
  for (const auto& item : j.items()) {
    const std::string& key = item.key();
    const auto is = [&](std::string_view k) { return k == key; };
    if (std::any_of(std::begin(kCaseKeys), std::end(kCaseKeys), is) ||
        std::any_of(std::begin(kCaseNotes), std::end(kCaseNotes), is) || key.starts_with("note"))
      continue;
    std::string known;
    for (const std::string_view k : kCaseKeys)
      known += fmt::format("{}{}", known.empty() ? "" : ", ", k);
    w.fail(fmt::format("unknown key '{}' (a case's keys: {}; notes: shape, window, ..., note*)",
                       limits::quoted(key), known));
  }
}

CaptureCase read_case(const std::string& dir, const json& j, Where w) {
  CaptureCase cs;
  if (!j.is_object()) w.fail("a case must be a JSON object");
  cs.name = get_string(need(j, "name", w), "name", w);
  w.name = cs.name;
  check_case_keys(j, w);
  cs.kernel = opt_string(j, "kernel", w, "");
  cs.suite = opt_string(j, "suite", w, "");
  cs.seed = opt_string(j, "seed", w, "");

  // 1. The spec: formats, model name, promotion, scaling, output type.
  auto spec_call = [&](auto&& f) {
    try {
      return f();
    } catch (const std::invalid_argument& e) {
      w.fail(e.what());
    }
  };
  GemmSpec& s = cs.spec;
  s.a_format = spec_call([&] { return format_by_name(get_string(need(j, "a_format", w), "a_format", w)); });
  s.b_format = spec_call([&] { return format_by_name(get_string(need(j, "b_format", w), "b_format", w)); });
  cs.model = opt_string(j, "model", w, "");
  s.promote_every = find(j, "promote_every")
                        ? int(get_int(j["promote_every"], "promote_every", w, 0, limits::kMaxDim, "kMaxDim"))
                        : 0;
  s.scaling = spec_call([&] { return parse_scaling(opt_string(j, "scaling", w, "none")); });
  s.block = find(j, "block") ? int(get_int(j["block"], "block", w, 1, limits::kMaxDim, "kMaxDim")) : 128;
  s.order = spec_call([&] { return parse_scale_order(opt_string(j, "scale_order", w, "deepgemm")); });
  s.out_type = output_type(opt_string(j, "out_type", w, "f32"), w);
  s.split_k = find(j, "split_k") ? int(get_int(j["split_k"], "split_k", w, 1, limits::kMaxDim, "kMaxDim")) : 1;
  s.split_k_align = find(j, "split_k_align") ? int(get_int(j["split_k_align"], "split_k_align", w, 1, limits::kMaxDim, "kMaxDim")) : 128;
  cs.kernel_preset = opt_string(j, "kernel_preset", w, "");
  cs.triton_config = opt_string(j, "triton_config", w, "");
  if (!cs.triton_config.empty() && !is_triton_kernel(cs.kernel_preset))
    w.fail("triton_config goes with a Triton kernel_preset");
  if (!cs.kernel_preset.empty()) {
    const GemmSpec said = s;  // the case's own keys, which must agree with the preset
    spec_call([&] {
      const KernelSpec& k = kernel_by_name(cs.kernel_preset);
      apply_kernel(s, k);
      const auto disagree = [&](const char* key, const std::string& case_value,
                                const std::string& preset_value) {
        if (find(j, key) != nullptr && case_value != preset_value)
          w.fail(fmt::format("key '{}' = {} disagrees with kernel_preset {} ({}): drop it or the "
                             "preset", key, case_value, k.name, preset_value));
      };
      if (!cs.model.empty())
        disagree("model", describe(accumulator_by_name(cs.model)),
                 describe(accumulator_by_name(k.model)));
      disagree("promote_every", std::to_string(said.promote_every),
               std::to_string(s.promote_every));
      disagree("scale_order", std::string(to_string(said.order)), std::string(to_string(s.order)));
      disagree("split_k_align", std::to_string(said.split_k_align),
               std::to_string(s.split_k_align));
      cs.model = k.model;
      if (!cs.triton_config.empty()) {  // the config as launched: it routes and sets the tile
        const TritonPlan p = triton_plan(cs.triton_config, 0, 0, 0, "", cs.kernel_preset);
        apply_triton_plan(s, cs.kernel_preset, p);
        cs.model = s.model.name;
      }
      return 0;
    });
  }
  cs.M = int(get_int(need(j, "M", w), "M", w, 1, limits::kMaxDim, "kMaxDim"));
  cs.N = int(get_int(need(j, "N", w), "N", w, 1, limits::kMaxDim, "kMaxDim"));
  cs.K = int(get_int(need(j, "K", w), "K", w, 1, limits::kMaxDim, "kMaxDim"));
  const std::size_t M = cs.M, N = cs.N;
  if (M * N > std::uint64_t(limits::kMaxOutputElements))
    w.fail(fmt::format("M x N = {} x {} is too large {}", M, N,
                       limits::named("kMaxOutputElements", limits::kMaxOutputElements)));

  // 2. The paths of the files, checked as text.
  CaptureCase::Files& fl = cs.files;
  auto path = [&](const char* key) {
    return case_path(dir, get_string(need(j, key, w), key, w), key, w);
  };
  fl.a = path("a");
  fl.b = path("b");
  fl.d = path("d");
  if (find(j, "c")) fl.c = path("c");
  if (find(j, "bias")) fl.bias = path("bias");
  if (s.scaling != Scaling::none) {
    spec_call([&] { return scale_shapes(s, cs.M, cs.N, cs.K); });
    fl.sa = path("sa");
    fl.sb = path("sb");
  }
  const json* pk = find(j, "prefix_k");
  if (pk != nullptr) {
    if (!pk->is_array()) w.fail(fmt::format("key 'prefix_k' must be a list of integers, got {}", show(*pk)));
    if (pk->size() > limits::kMaxPrefixes)
      w.fail(fmt::format("prefix_k has {} entries {}", pk->size(),
                         limits::named("kMaxPrefixes", limits::kMaxPrefixes)));
    int last = 0;
    for (const json& k : *pk) {
      const int kp = int(get_int(k, "prefix_k", w, 1, cs.K));
      if (kp <= last) w.fail(fmt::format("prefix_k must increase ({} after {})", kp, last));
      cs.prefix_k.push_back(last = kp);
    }
    if (!cs.prefix_k.empty()) fl.d_prefix = path("d_prefix");
  } else if (find(j, "d_prefix")) {
    w.fail("d_prefix given without prefix_k");
  }
  return cs;
}

// Each file of the case with its dtype and shape (scale files by scale_shapes).
struct CaseFile {
  const std::string* path;
  const char* descr;
  std::vector<std::size_t> shape;
};
std::vector<CaseFile> case_files(const CaptureCase& cs) {
  const std::size_t M = cs.M, N = cs.N, K = cs.K;
  const CaptureCase::Files& f = cs.files;
  std::vector<CaseFile> out = {{&f.a, "|u1", {M, K}}, {&f.b, "|u1", {N, K}}, {&f.d, "<f4", {M, N}}};
  if (!f.c.empty()) out.push_back({&f.c, "<f4", {M, N}});
  if (!f.bias.empty()) out.push_back({&f.bias, "<f4", {N}});
  if (!f.sa.empty()) {
    const ScaleShapes sh = scale_shapes(cs.spec, cs.M, cs.N, cs.K);
    out.push_back({&f.sa, "<f4", {sh.a_rows, sh.a_cols}});
    out.push_back({&f.sb, "<f4", {sh.b_rows, sh.b_cols}});
  }
  if (!f.d_prefix.empty()) out.push_back({&f.d_prefix, "<f4", {cs.prefix_k.size(), M, N}});
  return out;
}

// The headers of the case's files: inside the folder, dtype and shape as the case says.
void check_case_files(const std::string& real_dir, const CaptureCase& cs, const Where& w) {
  for (const CaseFile& f : case_files(cs)) {
    inside_folder(real_dir, *f.path, w);
    try {
      NpyReader(*f.path).expect(f.descr, f.shape);
    } catch (const std::runtime_error& e) {
      w.fail(e.what());
    }
  }
}

}  // namespace

Capture read_capture_manifest(const std::string& dir_arg, const std::string& only_case) {
  Capture cap;
  cap.dir = dir_arg;
  while (cap.dir.size() > 1 && cap.dir.back() == '/') cap.dir.pop_back();
  const Where top{cap.dir + "/manifest.json", ""};
  const json j = parse_manifest(top);
  if (!j.is_object()) top.fail("not a JSON object");
  const json* version = find(j, "fp8sim_capture");
  if (version == nullptr || !version->is_number_integer() || version->get<std::int64_t>() != 1 ||
      (version->is_number_unsigned() && version->get<std::uint64_t>() != 1))
    top.fail(fmt::format("missing \"fp8sim_capture\": 1 (not an fp8sim capture, or a newer "
                         "version{})",
                         version ? ": got " + show(*version) : ""));
  CaptureProvenance& p = cap.provenance;
  p.device = opt_string(j, "device", top, "");
  p.driver = opt_string(j, "driver", top, "");
  p.cuda = opt_string(j, "cuda", top, "");
  p.date = opt_string(j, "date", top, "");
  p.git_revision = opt_string(j, "git_revision", top, "");
  p.generator = opt_string(j, "generator", top, "");
  p.self_test = opt_string(j, "self_test", top, "");
  if (const json* seed = find(j, "seed"); seed != nullptr && seed->is_number_unsigned())
    p.seed = seed->get<std::uint64_t>();
  const json& cases = need(j, "cases", top);
  if (!cases.is_array()) top.fail(fmt::format("key 'cases' must be a list, got {}", show(cases)));
  if (cases.size() > limits::kMaxCases)
    top.fail(fmt::format("{} cases {}", cases.size(), limits::named("kMaxCases", limits::kMaxCases)));
  // 1. Every case's keys, whether selected or not; names unique.
  std::unordered_set<std::string> names;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    CaptureCase cs = read_case(cap.dir, cases[i], Where{top.manifest, fmt::format("#{}", i)});
    if (!names.insert(cs.name).second)
      top.fail(fmt::format("case name '{}' given twice", limits::quoted(cs.name)));
    if (only_case.empty() || cs.name == only_case) cap.cases.push_back(std::move(cs));
  }
  if (!only_case.empty() && cap.cases.empty())
    top.fail(fmt::format("no case named '{}'", limits::quoted(only_case)));
  if (cap.cases.empty()) top.fail("no cases");
  // 2. The selected cases' files: headers only.
  std::error_code ec;
  const std::string real_dir = std::filesystem::canonical(cap.dir, ec).string();
  if (ec) top.fail(fmt::format("cannot resolve the capture folder: {}", ec.message()));
  for (const CaptureCase& cs : cap.cases)
    check_case_files(real_dir, cs, Where{top.manifest, cs.name});
  return cap;
}

void load_case(const Capture& cap, CaptureCase& cs) {
  const Where w{cap.dir + "/manifest.json", cs.name};
  std::error_code ec;
  const std::string real_dir = std::filesystem::canonical(cap.dir, ec).string();
  const CaptureCase::Files& f = cs.files;
  auto read = [&](const std::string& p, const char* descr, std::vector<std::size_t> shape) {
    if (!ec) inside_folder(real_dir, p, w);
    try {
      return read_npy_checked(p, descr, shape);
    } catch (const std::runtime_error& e) {
      w.fail(e.what());
    }
  };
  auto finite = [&](std::vector<float> v, const std::string& p) {
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]))
        w.fail(fmt::format("{}: scale at index {} is {} (scales must be finite)", p, i, v[i]));
    return v;
  };
  const std::size_t M = cs.M, N = cs.N, K = cs.K;
  cs.a = read(f.a, "|u1", {M, K}).as<std::uint8_t>();
  cs.b = read(f.b, "|u1", {N, K}).as<std::uint8_t>();
  cs.d = read(f.d, "<f4", {M, N}).as<float>();
  if (!f.c.empty()) cs.c = read(f.c, "<f4", {M, N}).as<float>();
  if (!f.bias.empty()) cs.bias = read(f.bias, "<f4", {N}).as<float>();
  if (!f.sa.empty()) {
    const ScaleShapes sh = scale_shapes(cs.spec, cs.M, cs.N, cs.K);
    cs.sa = finite(read(f.sa, "<f4", {sh.a_rows, sh.a_cols}).as<float>(), f.sa);
    cs.sb = finite(read(f.sb, "<f4", {sh.b_rows, sh.b_cols}).as<float>(), f.sb);
  }
  if (!f.d_prefix.empty())
    cs.d_prefix = read(f.d_prefix, "<f4", {cs.prefix_k.size(), M, N}).as<float>();
}

Capture read_capture(const std::string& dir, const std::string& only_case) {
  Capture cap = read_capture_manifest(dir, only_case);
  for (CaptureCase& cs : cap.cases) load_case(cap, cs);
  return cap;
}

std::string case_where(const Capture& c, const CaptureCase& cs) {
  return Where{c.dir + "/manifest.json", cs.name}.str();
}

void write_capture(const std::string& dir, const Capture& cap) {
  std::filesystem::create_directories(dir);
  ordered_json cases = ordered_json::array();
  for (const CaptureCase& c : cap.cases) {
    const std::size_t M = c.M, N = c.N;
    auto save_f32 = [&](const char* suffix, const std::vector<float>& v,
                        std::vector<std::size_t> shape) -> ordered_json {
      if (v.empty()) return nullptr;
      const std::string file = c.name + suffix;
      write_npy(dir + "/" + file, "<f4", shape, v.data(), v.size() * sizeof(float));
      return file;
    };
    const std::string a = c.name + "_a.npy", b = c.name + "_b.npy";
    write_npy(dir + "/" + a, "|u1", {M, std::size_t(c.K)}, c.a.data(), c.a.size());
    write_npy(dir + "/" + b, "|u1", {N, std::size_t(c.K)}, c.b.data(), c.b.size());
    const ordered_json d = save_f32("_d.npy", c.d, {M, N});
    ordered_json jc{{"name", c.name}, {"kernel", c.kernel}, {"suite", c.suite},
                    {"a_format", c.spec.a_format.name}, {"b_format", c.spec.b_format.name},
                    {"model", c.model.empty() ? ordered_json(nullptr) : ordered_json(c.model)},
                    {"promote_every", c.spec.promote_every},
                    {"scaling", to_string(c.spec.scaling)}, {"block", c.spec.block},
                    {"scale_order", to_string(c.spec.order)},
                    {"out_type", output_type_name(c.spec.out_type)},
                    {"M", c.M}, {"N", c.N}, {"K", c.K}, {"a", a}, {"b", b}};
    jc["c"] = save_f32("_c.npy", c.c, {M, N});
    if (!c.kernel_preset.empty()) jc["kernel_preset"] = c.kernel_preset;
    if (!c.triton_config.empty()) jc["triton_config"] = c.triton_config;
    if (c.spec.split_k > 1) jc["split_k"] = c.spec.split_k;
    if (c.spec.split_k_align != 128) jc["split_k_align"] = c.spec.split_k_align;
    if (!c.bias.empty()) jc["bias"] = save_f32("_bias.npy", c.bias, {N});
    std::vector<std::size_t> sa_shape{0, 0}, sb_shape{0, 0};
    if (c.spec.scaling != Scaling::none) {
      const ScaleShapes sh = scale_shapes(c.spec, c.M, c.N, c.K);
      sa_shape = {sh.a_rows, sh.a_cols};
      sb_shape = {sh.b_rows, sh.b_cols};
    }
    jc["sa"] = save_f32("_sa.npy", c.sa, sa_shape);
    jc["sb"] = save_f32("_sb.npy", c.sb, sb_shape);
    jc["d"] = d;
    jc["prefix_k"] = c.prefix_k.empty() ? ordered_json(nullptr) : ordered_json(c.prefix_k);
    jc["d_prefix"] = save_f32("_dprefix.npy", c.d_prefix, {c.prefix_k.size(), M, N});
    if (!c.seed.empty()) jc["seed"] = c.seed;
    cases.push_back(std::move(jc));
  }
  const CaptureProvenance& p = cap.provenance;
  ordered_json m{{"fp8sim_capture", 1}, {"device", p.device}, {"driver", p.driver},
                 {"cuda", p.cuda}, {"date", p.date}, {"git_revision", p.git_revision},
                 {"generator", p.generator}, {"seed", p.seed}, {"cases", std::move(cases)}};
  if (!p.self_test.empty()) m["self_test"] = p.self_test;
  write_file(dir + "/manifest.json", m.dump(2) + "\n");
}

KSlice slice_k(const GemmSpec& s, int M, int N, int K, std::span<const std::uint8_t> a,
               std::span<const std::uint8_t> b, std::span<const float> sa,
               std::span<const float> sb, int k) {
  auto first_columns = [](auto src, std::size_t rows, std::size_t cols, std::size_t keep) {
    std::vector<typename decltype(src)::value_type> out(rows * keep);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < keep; ++c) out[r * keep + c] = src[r * cols + c];
    return out;
  };
  KSlice out;
  out.a = first_columns(a, M, K, k);
  out.b = first_columns(b, N, K, k);
  out.sa.assign(sa.begin(), sa.end());
  out.sb.assign(sb.begin(), sb.end());
  if (s.scaling == Scaling::block || s.scaling == Scaling::mx) {
    const ScaleShapes full = scale_shapes(s, M, N, K), part = scale_shapes(s, M, N, k);
    out.sa = first_columns(sa, full.a_rows, full.a_cols, part.a_cols);
    out.sb = first_columns(sb, full.b_rows, full.b_cols, part.b_cols);
  }
  return out;
}

}  // namespace fp8sim
