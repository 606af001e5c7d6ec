// replay: recompute captured kernel outputs with a model and compare them bit for bit.
//
// A capture folder (capture.hpp: manifest.json and .npy files) is read and checked by
// read_capture(); replay() recomputes each case and its K prefixes in one pass through the
// GEMM engine (gemm_prefixes) and reports, per case, the matches, the first mismatching
// element and the first K chunk (from the prefix outputs) where model and kernel part ways.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gemm/device.hpp"

namespace fp8sim {

struct ReplayOptions {
  std::string kernel;         // a kernel preset (sim/kernel/kernel.hpp) for every case when not
                              // empty: its model, promotion, scale order, K tile, split
                              // alignment (then model / promote_every override those)
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

// Reads the capture in DIR (read_capture), recomputes and compares. Bad input (missing or
// malformed file, wrong dtype or shape, missing key, unknown model / format / scaling,
// non-finite scales, no case named opts.case_name) throws std::runtime_error with one line
// that names the file or case and the problem.
ReplayReport replay(const std::string& dir, const ReplayOptions& opts = {});

// One line per case: "<case>: <matches>/<total> match" and, on a mismatch,
// "; first mismatch (m,n) got <hex> want <hex>; first divergence at K = lo..hi".
std::string format_case(const ReplayCase& c);

// The report as JSON text (for --json).
std::string replay_json(const ReplayReport& r);

}  // namespace fp8sim
