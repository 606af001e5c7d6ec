// replay: recompute captured kernel outputs with a model and compare them bit for bit.
//
// A capture folder holds manifest.json and .npy files (format below, written by fp8sim-hw
// capture or by anyone's own script with np.save + json.dump). replay() checks every file,
// recomputes each case through the GEMM engine and reports, per case, the matches, the first
// mismatching element and the first K chunk (from the prefix outputs) where model and kernel
// part ways.
//
// DIR/manifest.json:
//   {"fp8sim_capture": 1, "device", "driver", "cuda", "date", "git_revision", "generator",
//    "seed", "cases": [{"name", "kernel", "suite", "a_format", "b_format", "model",
//    "promote_every", "scaling", "block", "scale_order", "out_type", "M", "N", "K",
//    "a", "b", "c", "sa", "sb", "d", "prefix_k", "d_prefix"}]}
//   a, b: uint8 (M,K) and (N,K) codes; c, d: float32 (M,N); out_type f16/bf16: d holds the
//   float32 values of f16/bf16 numbers; sa, sb: float32 in scale_shapes(); d_prefix: float32
//   (P,M,N), the kernel's output on the first prefix_k[p] columns of K. "model": null when
//   unknown (then a model must be given). Provenance keys and c, sa, sb, prefix_k, d_prefix,
//   promote_every (0), scaling ("none"), block (128), scale_order ("deepgemm"),
//   out_type ("f32"), kernel, suite may be absent. Paths are relative to DIR.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "device.hpp"

namespace fp8sim {

struct ReplayOptions {
  std::string model;          // overrides every case's "model" when not empty
  int promote_every = -1;     // overrides every case's "promote_every" when >= 0
  std::string case_name;      // replay only this case when not empty
  int threads = 0;            // engine threads (0 = all); results never depend on it
  Device device = Device::cpu;  // where the engine runs
};

struct ReplayMismatch {
  int m = 0, n = 0;
  float got = 0, want = 0;    // got: the captured kernel output; want: the model's
};

struct ReplayCase {
  std::string name, kernel, model;
  int promote_every = 0;
  std::size_t matches = 0, total = 0;         // elements of d
  std::optional<ReplayMismatch> first;        // first mismatching element of d (row-major)
  // The first prefix chunk where some output differs: K = k_lo..k_hi (k_hi = K for d itself).
  std::optional<std::pair<int, int>> divergence;
  int prefixes = 0;                           // prefix outputs checked
  bool ok() const { return !first && !divergence; }
};

struct ReplayReport {
  std::string dir, device, driver, cuda, date, git_revision, generator;
  std::vector<ReplayCase> cases;
  bool all_match() const;
};

// Reads DIR/manifest.json and every file it names, recomputes and compares. Bad input
// (missing or malformed file, wrong dtype or shape, missing key, unknown model / format /
// scaling, no case named opts.case_name) throws std::runtime_error with one line that names
// the file or case and the problem.
ReplayReport replay(const std::string& dir, const ReplayOptions& opts = {});

// One line per case: "<case>: <matches>/<total> match" and, on a mismatch,
// "; first mismatch (m,n) got <hex> want <hex>; first divergence at K = lo..hi".
std::string format_case(const ReplayCase& c);

// The report as JSON text (for --json).
std::string replay_json(const ReplayReport& r);

}  // namespace fp8sim
