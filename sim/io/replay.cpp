// replay: a capture (capture.hpp) recomputed through a model and compared bit for bit.
#include "io/replay.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "base/bits.hpp"
#include "io/capture.hpp"
#include "gemm/gemm.hpp"
#include "kernel/kernel.hpp"
#include "kernel/triton_config.hpp"
#include "base/limits.hpp"
#include "base/parallel.hpp"
#include "io/std_streams.hpp"
#include "io/revision.hpp"

namespace fp8sim {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const Capture& cap, const CaptureCase& cs, const std::string& problem) {
  throw std::runtime_error(printable(fmt::format("{}: {}", case_where(cap, cs), problem)));
}

// The case's spec with its model (or opts.model / opts.promote_every), checked against its
// shape and each prefix.
GemmSpec case_spec(const Capture& cap, const CaptureCase& cs, const ReplayOptions& o) {
  GemmSpec s = cs.spec;
  std::string model = o.model.empty() ? cs.model : o.model;
  try {
    if (!o.kernel.empty()) {
      const KernelSpec& k = kernel_by_name(o.kernel);
      apply_kernel(s, k);
      if (o.model.empty()) model = k.model;
      if (!cs.triton_config.empty() && is_triton_kernel(o.kernel)) {  // as it was launched
        apply_triton_plan(s, o.kernel, triton_plan(cs.triton_config, 0, 0, 0, "", o.kernel));
        if (o.model.empty()) model = s.model.name;
      }
    }
    if (model.empty()) fail(cap, cs, "model is null (unknown): pass --model or --kernel");
    s.model = accumulator_by_name(model);
    if (o.promote_every >= 0) s.promote_every = o.promote_every;
    s.threads = o.threads;
    s.device = o.device;
    validate(s, cs.M, cs.N, cs.K);
    for (const int kp : cs.prefix_k) {
      try {
        validate(s, cs.M, cs.N, kp);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(fmt::format("prefix_k {}: {}", kp, e.what()));
      }
    }
  } catch (const std::invalid_argument& e) {
    fail(cap, cs, e.what());
  }
  return s;
}

ReplayCase run_case(const Capture& cap, const CaptureCase& cs, const ReplayOptions& o) {
  const GemmSpec s = case_spec(cap, cs, o);
  ReplayCase r;
  r.name = cs.name;
  r.kernel = cs.kernel;
  r.model = s.model.name;
  r.promote_every = s.promote_every;
  // 1. The model's D and its outputs at every prefix, in one pass along K.
  const std::size_t mn = std::size_t(cs.M) * cs.N;
  std::vector<float> want(mn), want_prefix(cs.prefix_k.size() * mn);
  try {
    if (s.device == Device::cpu) {
      const Operand A = decode_operand(s.a_format, cs.M, cs.K, cs.a);
      const Operand B = decode_operand(s.b_format, cs.N, cs.K, cs.b);
      if (cs.prefix_k.empty())
        gemm(s, A, B, cs.c, cs.sa, cs.sb, want, cs.bias);
      else
        gemm_prefixes(s, A, B, cs.c, cs.sa, cs.sb, cs.prefix_k, want, want_prefix);
    } else {
      // The CUDA engine reads no prefixes off its running state: each prefix is a GEMM of
      // its own on the device over the first k columns (slice_k).
      gemm(s, cs.M, cs.N, cs.K, cs.a, cs.b, cs.c, cs.sa, cs.sb, want, cs.bias);
      for (std::size_t p = 0; p < cs.prefix_k.size(); ++p) {
        const int k = cs.prefix_k[p];
        const KSlice cut = slice_k(s, cs.M, cs.N, cs.K, cs.a, cs.b, cs.sa, cs.sb, k);
        gemm(s, cs.M, cs.N, k, cut.a, cut.b, cs.c, cut.sa, cut.sb,
             std::span<float>(want_prefix).subspan(p * mn, mn));
      }
    }
  } catch (const std::invalid_argument& e) {
    fail(cap, cs, e.what());  // e.g. an operand code the format does not have
  }
  // 2. D, element by element.
  r.total = want.size();
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (same_bits(cs.d[i], want[i])) {
      ++r.matches;
    } else if (!r.first) {
      r.first = ReplayMismatch{int(i / cs.N), int(i % cs.N), cs.d[i], want[i]};
    }
  }
  // 3. The first prefix whose outputs differ anywhere; else d itself when it differs.
  int k_lo = 0;
  for (std::size_t p = 0; p < cs.prefix_k.size(); ++p) {
    ++r.prefixes;
    bool same = true;
    for (std::size_t i = 0; i < mn && same; ++i)
      same = same_bits(cs.d_prefix[p * mn + i], want_prefix[p * mn + i]);
    if (!same) {
      r.divergence = std::make_pair(k_lo, cs.prefix_k[p]);
      return r;
    }
    k_lo = cs.prefix_k[p];
  }
  if (r.first && !cs.prefix_k.empty()) r.divergence = std::make_pair(k_lo, cs.K);
  return r;
}

}  // namespace

bool ReplayReport::all_match() const {
  for (const ReplayCase& c : cases)
    if (!c.ok()) return false;
  return true;
}

ReplayReport replay(const std::string& dir, const ReplayOptions& opts) {
  // 1. The options, the whole manifest and every selected case's model and shapes, before
  // any array is read.
  check_threads(opts.threads);
  if (opts.promote_every < -1 || opts.promote_every > limits::kMaxDim)
    throw std::invalid_argument(fmt::format(
        "promote_every = {} is not in 0..{} (or -1: each case's own) {}", opts.promote_every,
        limits::kMaxDim, limits::named("kMaxDim", limits::kMaxDim)));
  Capture cap = read_capture_manifest(dir, opts.case_name);
  for (const CaptureCase& cs : cap.cases) case_spec(cap, cs, opts);
  ReplayReport r;
  r.dir = cap.dir;
  r.device = cap.provenance.device;
  r.driver = cap.provenance.driver;
  r.cuda = cap.provenance.cuda;
  r.date = cap.provenance.date;
  r.git_revision = cap.provenance.git_revision;
  r.generator = cap.provenance.generator;
  // 2. One case at a time: its arrays read, replayed and released.
  for (CaptureCase& cs : cap.cases) {
    load_case(cap, cs);
    r.cases.push_back(run_case(cap, cs, opts));
    cs = CaptureCase{};
  }
  return r;
}

std::string format_case(const ReplayCase& c) {
  // The name as printable text: it comes from the manifest (no escape sequence reaches a
  // terminal).
  std::string s = fmt::format("{}: {}/{} match", printable(c.name), c.matches, c.total);
  if (c.first)
    s += fmt::format("; first mismatch ({},{}) got {} want {}", c.first->m, c.first->n,
                     hex_bits(c.first->got), hex_bits(c.first->want));
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
                                           {"got", hex_bits(c.first->got)},
                                           {"want", hex_bits(c.first->want)}}
                                   : json(nullptr);
    jc["divergence"] = c.divergence
                           ? json{{"k_lo", c.divergence->first}, {"k_hi", c.divergence->second}}
                           : json(nullptr);
    j["cases"].push_back(jc);
  }
  return j.dump(1) + "\n";
}

}  // namespace fp8sim
