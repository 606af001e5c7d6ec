// fp8sim-hw: runs the cuda/ kernels on a GPU and compares them bit for bit with the models.
//
// Subcommands: check (suites x kernels, JSON report, non-zero exit on a mismatch), capture
// (.npy + manifest.json for replay without a GPU), probe (sim/probe.hpp on each kernel),
// bench (TFLOP/s), cvt (hardware FP8 conversions vs encode(), exhaustive or sampled).
// Without a CUDA device every subcommand prints "fp8sim-hw: no CUDA device" and exits 77.
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>

#include "capture.hpp"
#include "convert_batch.hpp"
#include "cublaslt_fp8.hpp"
#include "hw_device.hpp"
#include "hw_harness.hpp"
#include "kernels.hpp"
#include "npy.hpp"
#include "output_file.hpp"
#include "revision.hpp"
#include "rng.hpp"
#include "rounding.hpp"
#include "probe.hpp"

namespace fp8sim::hw {
namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

// ---- provenance -----------------------------------------------------------------------------

struct DeviceInfo {
  std::string name, driver, cuda, date;
};

DeviceInfo device_info() {
  DeviceInfo d;
  cudaDeviceProp p{};
  cuda_check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
  d.name = fmt::format("{} (sm_{}{}, {} SMs)", p.name, p.major, p.minor, p.multiProcessorCount);
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  d.cuda = fmt::format("driver API {}.{}, runtime {}.{}", drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
  d.driver = d.cuda;
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  if (std::getline(f, line)) {
    // "NVRM version: NVIDIA UNIX ... Kernel Module [for x86_64]  580.159.04  Release Build ...":
    // the first word of the form digits.digits[.digits].
    std::size_t i = 0;
    while (i < line.size()) {
      const std::size_t j = line.find(' ', i);
      const std::string w = line.substr(i, j == std::string::npos ? std::string::npos : j - i);
      if (w.size() >= 3 && std::isdigit(static_cast<unsigned char>(w[0])) && w.find('.') != std::string::npos &&
          w.find_first_not_of("0123456789.") == std::string::npos) {
        d.driver = w;
        break;
      }
      if (j == std::string::npos) break;
      i = j + 1;
    }
  }
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  d.date = buf;
  return d;
}

json provenance(const DeviceInfo& d, std::uint64_t seed, const std::string& generator) {
  return json{{"device", d.name}, {"driver", d.driver}, {"cuda", d.cuda}, {"date", d.date},
              {"git_revision", git_revision()}, {"generator", generator}, {"seed", seed}};
}

// FP8SIM_HW_SKIP_WGMMA=1 leaves the wgmma path out (e.g. while its self-test faults).
bool skip_wgmma() {
  const char* e = std::getenv("FP8SIM_HW_SKIP_WGMMA");
  return e != nullptr && e[0] == '1';
}

std::vector<Variant> variants_to_run(int layout) {
  std::vector<Variant> vs;
  for (auto& v : make_variants(std::max(layout, 0)))
    if (!(skip_wgmma() && v.path == "wgmma")) vs.push_back(std::move(v));
  return vs;
}

// ---- self-test: which descriptor layout the wgmma path needs -----------------------------

// Small-integer operands: every model (and the exact sum) gives the same result, so a
// mismatch can only be a layout error. Returns the layout that works, or -1.
int pick_wgmma_layout(std::string& note) {
  Case c;
  c.a_format = format_by_name("e4m3");
  c.b_format = c.a_format;
  c.K = 256;
  c.A.resize(static_cast<std::size_t>(c.M) * c.K);
  c.B.resize(static_cast<std::size_t>(c.N) * c.K);
  for (std::size_t i = 0; i < c.A.size(); ++i)
    c.A[i] = static_cast<std::uint8_t>(encode(static_cast<double>(static_cast<int>((i * 7 + i / 97) % 5) - 2), c.a_format));
  for (std::size_t i = 0; i < c.B.size(); ++i)
    c.B[i] = static_cast<std::uint8_t>(encode(static_cast<double>(static_cast<int>((i * 13 + i / 31) % 5) - 2), c.b_format));
  std::vector<float> want(static_cast<std::size_t>(c.M) * c.N);
  for (int m = 0; m < c.M; ++m)
    for (int n = 0; n < c.N; ++n) {
      double s = 0;
      for (int k = 0; k < c.K; ++k)
        s += decode(c.a_format, c.A[m * c.K + k]) * decode(c.b_format, c.B[n * c.K + k]);
      want[m * c.N + n] = static_cast<float>(s);
    }
  int found = -1;
  std::vector<int> layouts = {0, 1};
  if (const char* e = std::getenv("FP8SIM_HW_LAYOUT")) layouts = {std::atoi(e)};
  if (skip_wgmma()) layouts.clear(), note += "wgmma skipped (FP8SIM_HW_SKIP_WGMMA); ";
  for (int layout : layouts) {
    cuda::WgmmaGemm g;
    g.desc_layout = layout;
    DevBuf<std::uint8_t> A(c.A), B(c.B);
    DevBuf<float> D(want.size());
    launch_check(cuda::wgmma_gemm(g, c.M, c.N, c.K, A.get(), B.get(), nullptr, nullptr, nullptr, D.get()));
    cuda_check(cudaDeviceSynchronize(), "wgmma self-test");
    const auto got = D.download();
    int ok = 0;
    for (std::size_t i = 0; i < got.size(); ++i) ok += got[i] == want[i];
    note += fmt::format("wgmma descriptor layout {} ({}): {}/{} small-integer outputs right; ", layout,
                        layout == 0 ? "LBO = K-direction core stride" : "LBO = row-direction core stride",
                        ok, got.size());
    if (ok == static_cast<int>(got.size()) && found < 0) found = layout;
    if (found >= 0) break;  // layout 1 is tried only when layout 0 fails
  }
  // The same check for mma.sync fragments.
  DevBuf<std::uint8_t> A(c.A), B(c.B);
  DevBuf<float> D(want.size());
  launch_check(cuda::mma_sync_gemm(cuda::Fp8::e4m3, cuda::Fp8::e4m3, c.M, c.N, c.K, A.get(), B.get(), nullptr, D.get()));
  cuda_check(cudaDeviceSynchronize(), "mma.sync self-test");
  const auto got = D.download();
  int ok = 0;
  for (std::size_t i = 0; i < got.size(); ++i) ok += got[i] == want[i];
  note += fmt::format("mma.sync fragments: {}/{} right", ok, got.size());
  return found;
}

// ---- check ----------------------------------------------------------------------------------

struct CaseRun {
  Case c;                    // as the variant saw it
  std::vector<float> d;      // kernel output
};

struct Candidate {
  std::string model;
  int promote_every;
  long matches = 0, total = 0;
};

// Every (candidate model, interval) against the recorded runs, best first.
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

FormatSpec fmt_of(cuda::Fp8 t) { return format_by_name(t == cuda::Fp8::e4m3 ? "e4m3" : "e5m2"); }

bool selected(const std::string& name, const std::vector<std::string>& filters) {
  if (filters.empty()) return true;
  for (const auto& f : filters)
    if (name.find(f) != std::string::npos) return true;
  return false;
}

int cmd_check(std::uint64_t seed, int max_k, const std::string& json_path,
              const std::vector<std::string>& kernels, const std::vector<std::string>& suites_in,
              bool closest_all) {
  const DeviceInfo dev = device_info();
  std::string note;
  const int layout = pick_wgmma_layout(note);
  fmt::print("device: {} | driver {} | {}\nself-test: {}\nseed: {}\n", dev.name, dev.driver, dev.cuda, note, seed);
  const std::vector<std::string> suites = suites_in.empty() ? suite_names() : suites_in;
  json report = provenance(dev, seed, "fp8sim-hw check");
  report["self_test"] = note;
  report["wgmma_desc_layout"] = layout;
  report["variants"] = json::array();
  bool any_fail = false;

  std::vector<std::vector<std::string>> table;
  std::vector<std::string> header = {"kernel"};
  for (const auto& s : suites) header.push_back(s);
  header.push_back("status");
  table.push_back(header);

  for (const Variant& v : variants_to_run(layout)) {
    if (!selected(v.name, kernels)) continue;
    json jv{{"name", v.name}, {"kernel", v.kernel}, {"path", v.path},
            {"model", v.model.empty() ? json(nullptr) : json(v.model)},
            {"promote_every", v.promote_every}, {"scaling", v.block_scales ? "block" : "none"},
            {"out_type", v.out_type}, {"suites", json::object()}};
    std::vector<std::string> row = {v.name};
    std::vector<CaseRun> runs;
    long vm = 0, vt = 0;
    std::string first_bad;
    const bool broken_layout = v.path == "wgmma" && layout < 0;
    for (const auto& s : suites) {
      long sm = 0, st = 0;
      for (Case c : make_suite(s, fmt_of(v.a), fmt_of(v.b), seed, v.block_scales, max_k)) {
        c = adapt_case(v, c);
        std::vector<float> want;
        if (!v.model.empty()) {
          try {
            want = run_model(variant_spec(v, c, v.model, v.promote_every), c);
          } catch (const std::invalid_argument&) {
            continue;  // e.g. K not a multiple of the scale block: not applicable
          }
        } else if (v.block_scales && c.K % 128) {
          continue;
        }
        std::vector<float> got;
        try {
          got = broken_layout ? std::vector<float>(static_cast<std::size_t>(c.M) * c.N, NAN) : v.run(c);
        } catch (const std::exception& e) {
          fmt::print("{} {} K={}: {}\n", v.name, s, c.K, e.what());
          any_fail = true;
          continue;
        }
        if (!want.empty()) {
          for (int m = 0; m < c.M; ++m)
            for (int n = 0; n < c.N; ++n) {
              const std::size_t i = static_cast<std::size_t>(m) * c.N + n;
              if (same_bits(got[i], want[i])) {
                ++sm;
                continue;
              }
              if (first_bad.empty())
                first_bad = fmt::format("{} suite={} seed={:#x} K={} m={} n={} c={} => got {} want {} (replay the capture for the inputs)",
                                        v.name, s, c.seed, c.K, m, n, c.C.empty() ? "none" : hex32(c.C[i]),
                                        hex32(got[i]), hex32(want[i]));
            }
          st += static_cast<long>(want.size());
        } else {
          st += static_cast<long>(got.size());
        }
        runs.push_back({std::move(c), std::move(got)});
      }
      vm += sm, vt += st;
      jv["suites"][s] = st == 0 ? json(nullptr) : json{{"matches", sm}, {"total", st}};
      row.push_back(st == 0 ? "n/a" : v.model.empty() ? fmt::format("({})", st) : fmt::format("{}/{}", sm, st));
    }
    std::string status;
    const bool known = !v.model.empty();
    if (known && vm == vt) {
      status = "ok";
    } else {
      if (known) any_fail = true, status = "FAIL";
      else status = "measure";
      jv["first_mismatch"] = first_bad.empty() ? json(nullptr) : json(first_bad);
      if (!first_bad.empty()) fmt::print("first mismatch: {}\n", first_bad);
    }
    if (!known || vm != vt || closest_all || v.model.empty()) {
      const auto ranked = rank_candidates(v, runs);
      json jc = json::array();
      for (std::size_t i = 0; i < ranked.size() && i < 5; ++i)
        jc.push_back({{"model", ranked[i].model}, {"promote_every", ranked[i].promote_every},
                      {"matches", ranked[i].matches}, {"total", ranked[i].total}});
      jv["closest"] = jc;
      if (!ranked.empty())
        status += fmt::format(" (closest: {}: {}/{})", cand_label(ranked[0]), ranked[0].matches, ranked[0].total);
    }
    jv["matches"] = vm;
    jv["total"] = vt;
    jv["status"] = status;
    row.push_back(status);
    table.push_back(row);
    report["variants"].push_back(jv);
    std::fflush(stdout);
  }

  // The table: kernel x suite, matches/total ("(n)" = outputs measured, model unknown).
  std::vector<std::size_t> width(table[0].size(), 0);
  for (const auto& r : table)
    for (std::size_t i = 0; i + 1 < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  for (const auto& r : table) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i)
      line += i + 1 < r.size() ? fmt::format("{:<{}} ", r[i], width[i]) : r[i];
    fmt::print("{}\n", line);
  }
  report["result"] = any_fail ? "FAIL" : "ok";
  if (!json_path.empty()) {
    write_file(json_path, report.dump(2) + "\n");
    fmt::print("report: {}\n", json_path);
  }
  return any_fail ? 1 : 0;
}

// ---- cvt: hardware conversions vs encode() --------------------------------------------------

// Inputs near every rounding boundary of `f` (each code's value and each midpoint between
// neighbours, +-radius fp32 ulps, both signs), the overflow threshold, plus every
// 2^32/stride-th fp32 bit pattern (NaNs, Infs, all exponents).
std::vector<float> cvt_sample(const FormatSpec& f, int radius, std::uint32_t stride) {
  std::vector<std::uint32_t> bits;
  auto around = [&](double v) {
    const auto b = std::bit_cast<std::uint32_t>(static_cast<float>(v));
    for (int d = -radius; d <= radius; ++d) bits.push_back(b + static_cast<std::uint32_t>(d));
  };
  for (std::uint32_t code = 0; code <= max_finite_magnitude_code(f); ++code) {
    const double v = decode(f, code), up = decode(f, next_up(f, code));
    for (double s : {1.0, -1.0}) {
      if (v != 0) around(s * v);
      around(s * (std::isinf(up) ? v + ulp(f, code) / 2 : (v + up) / 2));
    }
    if (code == max_finite_magnitude_code(f))
      for (double s : {1.0, -1.0}) around(s * (v + ulp(f, code))), around(s * (v + ulp(f, code) / 2));
  }
  for (std::uint64_t b = 0; b < (1ull << 32); b += stride) bits.push_back(static_cast<std::uint32_t>(b));
  for (std::uint32_t b : {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x00000001u, 0x80000001u})
    bits.push_back(b);
  std::sort(bits.begin(), bits.end());
  bits.erase(std::unique(bits.begin(), bits.end()), bits.end());
  std::vector<float> out(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) out[i] = std::bit_cast<float>(bits[i]);
  return out;
}

std::vector<std::uint8_t> hw_cvt(cuda::Fp8 to, const std::vector<float>& x) {
  DevBuf<float> in(x);
  DevBuf<std::uint8_t> out(x.size());
  DevBuf<unsigned> bad(std::vector<unsigned>{0u});
  launch_check(cuda::cvt_f32_to_f8(to, in.get(), out.get(), x.size(), bad.get()));
  cuda_check(cudaDeviceSynchronize(), "cvt kernel");
  if (bad.download()[0] != 0) throw std::runtime_error("cvt: the two bytes of an x2 result disagreed");
  return out.download();
}

std::string cvt_line(const char* what, float x, std::uint8_t got, std::uint32_t want) {
  return fmt::format("{} x={} ({}) => got 0x{:02x} want 0x{:02x}", what, hex32(x), format_value(x), got, want);
}

// Compares the hardware with encode(x, f, {rne, saturate}); NaN inputs are compared as
// "is a NaN code" and their sign is tallied separately.
json cvt_compare(const char* what, const FormatSpec& f, const std::vector<float>& x,
                 const std::vector<std::uint8_t>& hw, long& mismatches) {
  long bad = 0, nan_in = 0, nan_sign_kept = 0;
  json ex = json::array();
  std::map<std::string, int> kinds;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      ++nan_in;
      const bool neg_in = std::signbit(x[i]);
      const bool is_nan = classify(f, hw[i]) == ValueClass::nan;
      if (!is_nan) {
        ++bad;
        if (ex.size() < 20) ex.push_back(cvt_line(what, x[i], hw[i], nan_code(f, neg_in)));
      } else if (((hw[i] & 0x80) != 0) == neg_in) {
        ++nan_sign_kept;
      }
      kinds[fmt::format("nan 0x{:08x}-class -> 0x{:02x}", neg_in ? 0xffc00000u : 0x7fc00000u, hw[i])]++;
      continue;
    }
    const std::uint32_t want = encode(x[i], f, {Rounding::rne, Overflow::saturate, 32});
    if (hw[i] != want) {
      ++bad;
      if (ex.size() < 20) ex.push_back(cvt_line(what, x[i], hw[i], want));
    }
  }
  mismatches += bad;
  json nan_codes = json::object();
  for (auto& [k, n] : kinds) nan_codes[k] = n;
  return json{{"instruction", what}, {"inputs", x.size()}, {"mismatches", bad}, {"nan_inputs", nan_in},
              {"nan_sign_kept", nan_sign_kept}, {"nan_results", nan_codes}, {"examples", ex}};
}

int cmd_cvt(bool exhaustive, const std::string& json_path, const std::string& out_dir) {
  const DeviceInfo dev = device_info();
  json report = provenance(dev, 0, "fp8sim-hw cvt");
  report["ptxas_sm_90a"] = {
      "cvt.rn.{e4m3x2,e5m2x2}.f32 without .satfinite: rejected ('.satfinite' modifier required)",
      "cvt.{rz,rp}.satfinite.ue8m0x2.f32: rejected ('not supported on .target sm_90a'): waived"};
  long mismatches = 0;
  bool ok = true;
  for (cuda::Fp8 t : {cuda::Fp8::e4m3, cuda::Fp8::e5m2}) {
    const FormatSpec f = fmt_of(t);
    const std::string what = fmt::format("cvt.rn.satfinite.{}x2.f32", f.name);
    // 1. The decode direction: every code through cvt.rn.f16x2.<f>x2, compared with decode().
    DevBuf<std::uint16_t> h(256);
    launch_check(cuda::cvt_f8_to_f16_all(t, h.get()));
    cuda_check(cudaDeviceSynchronize(), "decode kernel");
    const auto hb = h.download();
    long dec_bad = 0;
    json dex = json::array();
    for (std::uint32_t code = 0; code < 256; ++code) {
      const std::uint32_t want = encode(decode(f, code), format_by_name("fp16"), {Rounding::rne, Overflow::nonsat, 32});
      const bool both_nan = std::isnan(decode(f, code)) && (hb[code] & 0x7c00) == 0x7c00 && (hb[code] & 0x3ff);
      if (hb[code] != want && !both_nan) {
        ++dec_bad;
        if (dex.size() < 10) dex.push_back(fmt::format("cvt.rn.f16x2.{}x2 code=0x{:02x} => got 0x{:04x} want 0x{:04x}", f.name, code, hb[code], want));
      }
    }
    fmt::print("cvt.rn.f16x2.{}x2: {}/256 codes decode as decode() does\n", f.name, 256 - dec_bad);
    // 2. The sample (committed for CI).
    const auto xs = cvt_sample(f, 16, 65521);
    const auto hs = hw_cvt(t, xs);
    json js = cvt_compare(what.c_str(), f, xs, hs, mismatches);
    fmt::print("{} sample: {}/{} match encode(rne, saturate); NaN inputs {} (sign kept {})\n", what,
               static_cast<long>(xs.size()) - js["mismatches"].get<long>(), xs.size(), js["nan_inputs"].get<long>(),
               js["nan_sign_kept"].get<long>());
    for (const auto& e : js["examples"]) fmt::print("  {}\n", e.get<std::string>());
    json jf{{"format", f.name}, {"decode_mismatches", dec_bad}, {"decode_examples", dex}, {"sample", js}};
    if (!out_dir.empty()) {
      fs::create_directories(out_dir);
      write_npy(out_dir + "/" + f.name + "_in.npy", "<f4", {xs.size()}, xs.data(), xs.size() * 4);
      write_npy(out_dir + "/" + f.name + "_out.npy", "|u1", {hs.size()}, hs.data(), hs.size());
      write_npy(out_dir + "/" + f.name + "_decode_f16.npy", "<u2", {256}, hb.data(), 512);
    }
    // 3. Every fp32 bit pattern, compared with encode_batch (then encode() for the examples).
    if (exhaustive) {
      constexpr std::size_t kChunk = 1u << 26;
      DevBuf<std::uint8_t> dout(kChunk);
      std::vector<float> x(kChunk);
      std::vector<std::uint8_t> want(kChunk);
      long bad = 0, nan_bad = 0, nan_sign_kept = 0, nan_in = 0;
      json ex = json::array();
      std::map<std::string, long> by_class;
      for (std::uint64_t first = 0; first < (1ull << 32); first += kChunk) {
        launch_check(cuda::cvt_f32_range_to_f8(t, static_cast<std::uint32_t>(first), dout.get(), kChunk));
        for (std::size_t i = 0; i < kChunk; ++i) x[i] = std::bit_cast<float>(static_cast<std::uint32_t>(first + i));
        encode_batch(f, {Rounding::rne, Overflow::saturate, 32}, x, want, 0);
        const auto got = dout.download();
        for (std::size_t i = 0; i < kChunk; ++i) {
          if (std::isnan(x[i])) {
            ++nan_in;
            if (classify(f, got[i]) != ValueClass::nan) ++nan_bad;
            else if (((got[i] & 0x80) != 0) == std::signbit(x[i])) ++nan_sign_kept;
            continue;
          }
          if (got[i] == want[i]) continue;
          const std::uint32_t w2 = encode(x[i], f, {Rounding::rne, Overflow::saturate, 32});
          ++bad;
          by_class[fmt::format("{}", static_cast<int>(classify(f, w2)))]++;
          if (ex.size() < 20) ex.push_back(cvt_line(what.c_str(), x[i], got[i], w2));
        }
      }
      mismatches += bad + nan_bad;
      fmt::print("{} exhaustive 2^32: {} non-NaN mismatches; NaN inputs {}: {} not NaN, sign kept in {}\n", what, bad,
                 nan_in, nan_bad, nan_sign_kept);
      for (const auto& e : ex) fmt::print("  {}\n", e.get<std::string>());
      jf["exhaustive"] = {{"inputs", 1ull << 32}, {"non_nan_mismatches", bad}, {"nan_inputs", nan_in},
                          {"nan_not_nan", nan_bad}, {"nan_sign_kept", nan_sign_kept}, {"examples", ex}};
    }
    if (dec_bad) ok = false;
    report[f.name] = jf;
  }
  if (mismatches) ok = false;
  report["result"] = ok ? "ok" : "FAIL";
  if (!json_path.empty()) write_file(json_path, report.dump(2) + "\n");
  if (!out_dir.empty()) {
    json m = provenance(dev, 0, "fp8sim-hw cvt");
    m["fp8sim_cvt_capture"] = 1;
    m["rounding"] = "rne";
    m["overflow"] = "saturate";
    m["sets"] = json::array();
    for (const char* f : {"e4m3", "e5m2"})
      m["sets"].push_back({{"format", f}, {"instruction", fmt::format("cvt.rn.satfinite.{}x2.f32", f)},
                           {"in", fmt::format("{}_in.npy", f)}, {"out", fmt::format("{}_out.npy", f)},
                           {"decode_f16", fmt::format("{}_decode_f16.npy", f)},
                           {"decode_instruction", fmt::format("cvt.rn.f16x2.{}x2", f)}});
    write_file(out_dir + "/manifest.json", m.dump(2) + "\n");
  }
  fmt::print("cvt: {}\n", ok ? "ok" : "MISMATCHES (see report)");
  return ok ? 0 : 1;
}

// ---- capture --------------------------------------------------------------------------------

// The case on its first k columns of K (capture.hpp's slice_k; the model does not matter).
Case cut_k(const Variant& v, const Case& c, int k) {
  const KSlice cut = slice_k(variant_spec(v, c, "exact", v.promote_every), c.M, c.N, c.K, c.A, c.B, c.sa, c.sb, k);
  Case s = c;
  s.K = k;
  s.A = cut.a, s.B = cut.b, s.sa = cut.sa, s.sb = cut.sb;
  return s;
}

struct CaptureSet {
  std::string dir;                    // folder under --out
  std::string variant;                // Variant::name
  std::vector<std::string> suites;
  int max_k;
};

int cmd_capture(const std::string& out, std::uint64_t seed) {
  const DeviceInfo dev = device_info();
  std::string note;
  const int layout = pick_wgmma_layout(note);
  if (layout < 0 && !skip_wgmma()) throw std::runtime_error("wgmma self-test failed: " + note);
  const std::vector<std::string> base = {"random-normal", "nonzero-c", "one-large", "cancellation",
                                         "specials", "subnormals", "k-sweep"};
  // Kept small for the repository (cases with K > max_k are left out, all suites).
  const std::vector<CaptureSet> sets = {
      {"wgmma_f32_e4m3", "wgmma_m64n8k32_f32_e4m3_e4m3", base, 512},
      {"wgmma_f32_e5m2", "wgmma_m64n8k32_f32_e5m2_e5m2", base, 512},
      {"wgmma_f32_e4m3_e5m2", "wgmma_m64n8k32_f32_e4m3_e5m2", {"random-normal", "nonzero-c", "specials"}, 256},
      {"wgmma_f32_p128_block", "wgmma_m64n8k32_f32_e4m3_e4m3.p128.block128", {"random-normal", "one-large", "k-sweep"}, 1024},
      {"wgmma_f32_p128_block_e5m2", "wgmma_m64n8k32_f32_e5m2_e5m2.p128.block128", {"random-normal", "k-sweep"}, 512},
      {"wgmma_f16_e4m3", "wgmma_m64n8k32_f16_e4m3_e4m3", base, 512},
      {"wgmma_f16_e5m2", "wgmma_m64n8k32_f16_e5m2_e5m2", {"random-normal", "nonzero-c", "specials", "k-sweep"}, 512},
      {"wgmma_f16_e5m2_subnormals", "wgmma_m64n8k32_f16_e5m2_e5m2", {"subnormals"}, 512},
      {"mma_sync_e4m3", "mma_m16n8k32_row_col_f32_e4m3_e4m3_f32", base, 512},
      {"mma_sync_e5m2_e4m3", "mma_m16n8k32_row_col_f32_e5m2_e4m3_f32", {"random-normal", "one-large"}, 512},
      {"cublaslt_default", "cublaslt_e4m3_e4m3_f32_default", {"random-normal", "one-large", "k-sweep"}, 2048},
      {"cublaslt_fastaccum", "cublaslt_e4m3_e4m3_f32_fastaccum", {"random-normal", "one-large", "k-sweep"}, 2048},
  };
  const auto variants = variants_to_run(layout);
  for (const auto& set : sets) {
    const auto it = std::find_if(variants.begin(), variants.end(), [&](const Variant& v) { return v.name == set.variant; });
    if (it == variants.end()) {
      fmt::print("{}: skipped (variant {} not run)\n", set.dir, set.variant);
      continue;
    }
    const Variant& v = *it;
    const std::string dir = out + "/" + set.dir;
    std::vector<CaseRun> runs;
    Capture cap;
    cap.provenance = {dev.name, dev.driver, dev.cuda, dev.date, git_revision(), "fp8sim-hw capture", note, seed};
    for (const auto& s : set.suites)
      for (Case c : make_suite(s, fmt_of(v.a), fmt_of(v.b), seed, v.block_scales, set.max_k)) {
        c = adapt_case(v, c);
        if ((v.block_scales && c.K % 128) || c.K > set.max_k) continue;
        const auto d = v.run(c);
        CaptureCase cc{fmt::format("{}_k{}", s, c.K), v.kernel, s, fmt::format("{:#x}", c.seed), "",
                       variant_spec(v, c, "exact", v.promote_every), c.M, c.N, c.K, c.A, c.B, c.C, c.sa, c.sb, d, {}, {}};
        // Prefixes (K >= 512): the kernel on the first k columns, k = K/4, 2K/4, 3K/4.
        const int unit = v.block_scales ? 128 : 32;
        for (int j = 1; j <= 4 && c.K >= 512; ++j) {
          const int k = std::max(unit, (c.K * j / 4) / unit * unit);
          if (k < c.K && (cc.prefix_k.empty() || cc.prefix_k.back() != k)) cc.prefix_k.push_back(k);
        }
        for (int k : cc.prefix_k) {
          const auto dk = v.run(cut_k(v, c, k));
          cc.d_prefix.insert(cc.d_prefix.end(), dk.begin(), dk.end());
        }
        cap.cases.push_back(std::move(cc));
        runs.push_back({std::move(c), d});
      }
    // The model: the variant's own if it matches every output, else a candidate that does.
    std::string model;
    int promote = v.promote_every;
    auto all_match = [&](const std::string& m, int p) {
      for (const auto& r : runs) {
        std::vector<float> want;
        try {
          want = run_model(variant_spec(v, r.c, m, p), r.c);
        } catch (const std::invalid_argument&) {
          return false;
        }
        for (std::size_t i = 0; i < want.size(); ++i)
          if (!same_bits(r.d[i], want[i])) return false;
      }
      return true;
    };
    if (!v.model.empty() && all_match(v.model, v.promote_every)) {
      model = v.model;
    } else {
      const auto ranked = rank_candidates(v, runs);
      if (!ranked.empty() && ranked[0].matches == ranked[0].total) model = ranked[0].model, promote = ranked[0].promote_every;
      std::string top;
      for (std::size_t i = 0; i < ranked.size() && i < 3; ++i)
        top += fmt::format("{}{}: {}/{}", i ? "; " : "", cand_label(ranked[i]), ranked[i].matches, ranked[i].total);
      fmt::print("{}: closest models: {}\n", set.dir, top);
    }
    for (auto& cc : cap.cases) {
      cc.model = model;
      cc.spec.promote_every = promote;
    }
    write_capture(dir, cap);
    fmt::print("{}: {} cases, model {}\n", set.dir, cap.cases.size(), model.empty() ? "unknown (null)" : model + fmt::format(" promote={}", promote));
  }
  return 0;
}

// ---- probe ----------------------------------------------------------------------------------

// A GEMM variant as a DotKernel: rows t of a batch go 64 at a time into A (64 x K) and B
// (64 x K); the result is the diagonal of the 64 x 64 GEMM, with C's diagonal = c.
DotKernel as_dot_kernel(const Variant& v) {
  return [v](const DotBatch& batch) {
    std::vector<float> out(batch.T);
    for (int t0 = 0; t0 < batch.T; t0 += 64) {
      const int rows = std::min(64, batch.T - t0);
      Case c;
      c.a_format = batch.a_format, c.b_format = batch.b_format;
      c.M = 64, c.N = 64, c.K = batch.K;
      c.A.assign(static_cast<std::size_t>(64) * batch.K, 0);
      c.B.assign(static_cast<std::size_t>(64) * batch.K, 0);
      std::copy_n(batch.a.begin() + static_cast<std::ptrdiff_t>(t0) * batch.K, static_cast<std::size_t>(rows) * batch.K, c.A.begin());
      std::copy_n(batch.b.begin() + static_cast<std::ptrdiff_t>(t0) * batch.K, static_cast<std::size_t>(rows) * batch.K, c.B.begin());
      if (!batch.c.empty() && v.takes_c) {
        c.C.assign(64 * 64, 0.0f);
        for (int r = 0; r < rows; ++r) c.C[r * 64 + r] = batch.c[t0 + r];
      }
      if (!batch.c.empty() && !v.takes_c && v.run_epilogue_c) {
        c.C.assign(64 * 64, 0.0f);
        for (int r = 0; r < rows; ++r) c.C[r * 64 + r] = batch.c[t0 + r];
      }
      const auto d = c.C.empty() || v.takes_c ? v.run(c) : v.run_epilogue_c(c);
      for (int r = 0; r < rows; ++r) out[t0 + r] = d[r * 64 + r];
    }
    return out;
  };
}

int cmd_probe(const std::vector<std::string>& kernels, const std::string& json_path) {
  const DeviceInfo dev = device_info();
  std::string note;
  const int layout = pick_wgmma_layout(note);
  json report = provenance(dev, 0, "fp8sim-hw probe");
  report["kernels"] = json::array();
  const std::vector<std::string> defaults = {
      "wgmma_m64n8k32_f32_e4m3_e4m3", "wgmma_m64n8k32_f16_e4m3_e4m3", "wgmma_m64n8k32_f32_e5m2_e5m2",
      "mma_m16n8k32_row_col_f32_e4m3_e4m3_f32", "mma_m16n8k32_row_col_f32_e5m2_e4m3_f32",
      "cublaslt_e4m3_e4m3_f32_default",
      "cublaslt_e4m3_e4m3_f32_fastaccum"};
  const auto& want = kernels.empty() ? defaults : kernels;
  int rc = 0;
  for (const Variant& v : variants_to_run(layout)) {
    if (std::find(want.begin(), want.end(), v.name) == want.end()) continue;
    ProbeOptions o;
    o.format = fmt_of(v.a);
    if (v.b != v.a) o.b_format = fmt_of(v.b);
    o.k_multiple = 32;
    o.max_k = v.path == "cublaslt" ? 16384 : 4096;
    json jk{{"kernel", v.name}};
    try {
      const auto t0 = std::chrono::steady_clock::now();
      const ProbeReport r = probe(as_dot_kernel(v), o);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      fmt::print("{}: {} ({:.1f} s)\n", v.name, r.describe(), s);
      for (const auto& e : r.evidence) fmt::print("    {}\n", e);
      jk["found"] = r.describe();
      jk["group"] = r.group, jk["frac_bits"] = r.frac_bits, jk["out_bits"] = r.out_bits;
      jk["promote_every"] = r.promote_every, jk["c_joins"] = r.c_joins, jk["c_added_after"] = r.c_added_after;
      jk["evidence"] = r.evidence;
      // A kernel with a preset must give back that preset's parameters.
      if (!v.model.empty()) {
        const AccumulatorSpec preset = accumulator_by_name(v.model);
        const std::string bad = disagreements(r, preset, v.promote_every);
        jk["expected"] = describe(preset);
        jk["agrees"] = bad.empty();
        fmt::print("    {}\n", bad.empty() ? fmt::format("agrees with {}", v.model)
                                          : fmt::format("DISAGREES with {}: {}", v.model, bad));
        if (!bad.empty()) rc = 1;
      }
    } catch (const std::exception& e) {
      fmt::print("{}: probe failed: {}\n", v.name, e.what());
      jk["error"] = e.what();
      rc = 1;
    }
    report["kernels"].push_back(jk);
    std::fflush(stdout);
  }
  if (!json_path.empty()) write_file(json_path, report.dump(2) + "\n");
  return rc;
}

// ---- bench ----------------------------------------------------------------------------------

int cmd_bench(int size, int iters) {
  const DeviceInfo dev = device_info();
  std::string note;
  const int layout = std::max(pick_wgmma_layout(note), 0);
  const int M = size, N = size, K = size;
  fmt::print("device: {} | driver {} | {}x{}x{} e4m3, {} timed runs after 1 warm-up\n", dev.name, dev.driver, M, N, K, iters);
  std::vector<std::uint8_t> h(static_cast<std::size_t>(M) * K);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<std::uint8_t>(mix64(i) % 0x7e) | ((i & 1) << 7);
  DevBuf<std::uint8_t> A(h), B(h), work(32u << 20);
  DevBuf<float> D(static_cast<std::size_t>(M) * N);
  std::vector<float> sah(static_cast<std::size_t>(M) * ((K + 127) / 128), 1.0f), sbh(static_cast<std::size_t>((N + 127) / 128) * ((K + 127) / 128), 1.0f);
  DevBuf<float> sa(sah), sb(sbh);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  auto time = [&](const std::string& name, const std::function<std::string()>& f) {
    launch_check(f());
    cuda_check(cudaDeviceSynchronize(), name.c_str());
    cudaEventRecord(e0);
    for (int i = 0; i < iters; ++i) launch_check(f());
    cudaEventRecord(e1);
    cuda_check(cudaEventSynchronize(e1), name.c_str());
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    const double s = ms / 1e3 / iters;
    fmt::print("{:<52} {:9.3f} ms  {:7.1f} TFLOP/s\n", name, s * 1e3, 2.0 * M * N * K / s / 1e12);
    std::fflush(stdout);
  };
  for (int tn : skip_wgmma() ? std::vector<int>{} : std::vector<int>{64, 8})
    for (int p : {0, 128})
      for (bool blk : {false, true}) {
        if (blk && p == 0) continue;
        cuda::WgmmaGemm g;
        g.tile_n = tn, g.promote_every = p, g.block_scales = blk, g.desc_layout = layout;
        time(fmt::format("wgmma_m64n{}k32_f32_e4m3_e4m3{}{}", tn, p ? ".p128" : "", blk ? ".block128" : ""),
             [&] { return cuda::wgmma_gemm(g, M, N, K, A.get(), B.get(), nullptr, sa.get(), sb.get(), D.get()); });
      }
  if (!skip_wgmma()) {
    cuda::WgmmaGemm g;
    g.accum = cuda::Accum::f16, g.desc_layout = layout;
    time("wgmma_m64n8k32_f16_e4m3_e4m3", [&] { return cuda::wgmma_gemm(g, M, N, K, A.get(), B.get(), nullptr, nullptr, nullptr, D.get()); });
  }
  time("mma_m16n8k32_row_col_f32_e4m3_e4m3_f32", [&] {
    return cuda::mma_sync_gemm(cuda::Fp8::e4m3, cuda::Fp8::e4m3, M, N, K, A.get(), B.get(), nullptr, D.get());
  });
  for (bool fast : {false, true}) {
    std::string algo;
    launch_check(cuda::cublaslt_gemm({fast, false}, M, N, K, A.get(), B.get(), nullptr, D.get(), work.get(), work.size(), &algo));
    time(fmt::format("cublaslt_e4m3_e4m3_f32_{}", fast ? "fastaccum" : "default"), [&] {
      return cuda::cublaslt_gemm({fast, false}, M, N, K, A.get(), B.get(), nullptr, D.get(), work.get(), work.size());
    });
    fmt::print("    {} ({})\n", algo, cuda::cublaslt_version());
  }
  return 0;
}

bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

}  // namespace
}  // namespace fp8sim::hw

int main(int argc, char** argv) {
  using namespace fp8sim::hw;
  CLI::App app{"fp8sim-hw: FP8 kernels on a Hopper GPU, compared bit for bit with fp8sim's models"};
  app.require_subcommand(1);
  std::uint64_t seed = 1;
  int max_k = 16384, size = 8192, iters = 5;
  std::string json_path, out_dir;
  std::vector<std::string> kernels, suites;
  bool exhaustive = false, closest_all = false;

  auto* check = app.add_subcommand("check", "suites x kernels vs models, bit for bit; exit 1 on a mismatch");
  check->add_option("--seed", seed, "seed of every suite (printed)");
  check->add_option("--max-k", max_k, "longest K of the k-sweep suite")->check(CLI::Range(32, 65536));
  check->add_option("--json", json_path, "write the JSON report here");
  check->add_option("--kernel", kernels, "only variants whose name contains one of these");
  check->add_option("--suite", suites, "only these suites");
  check->add_flag("--closest", closest_all, "rank candidate models for every variant, not only failing ones");
  auto* cap = app.add_subcommand("capture", "write inputs and outputs as .npy + manifest.json");
  cap->add_option("--out", out_dir, "output folder")->required();
  cap->add_option("--seed", seed, "seed");
  auto* prb = app.add_subcommand("probe", "recover accumulator parameters of each kernel (sim/probe.hpp)");
  prb->add_option("--kernel", kernels, "variant names (default: one per path)");
  prb->add_option("--json", json_path, "write the JSON report here");
  auto* bench = app.add_subcommand("bench", "TFLOP/s of each kernel on a size^3 GEMM");
  bench->add_option("--size", size, "M = N = K")->check(CLI::Range(256, 16384));
  bench->add_option("--iters", iters, "timed runs")->check(CLI::Range(1, 100));
  auto* cvt = app.add_subcommand("cvt", "hardware FP8 conversions vs encode()");
  cvt->add_flag("--exhaustive", exhaustive, "also every fp32 bit pattern (2^32 per format)");
  cvt->add_option("--json", json_path, "write the JSON report here");
  cvt->add_option("--out", out_dir, "write the sample inputs/outputs (.npy) and manifest.json here");

  CLI11_PARSE(app, argc, argv);
  if (!have_device()) {
    std::puts("fp8sim-hw: no CUDA device");
    return 77;
  }
  try {
    if (*check) return cmd_check(seed, max_k, json_path, kernels, suites, closest_all);
    if (*cap) return cmd_capture(out_dir, seed);
    if (*prb) return cmd_probe(kernels, json_path);
    if (*bench) {
      if (size % 64) throw std::invalid_argument("--size must be a multiple of 64");
      return cmd_bench(size, iters);
    }
    if (*cvt) return cmd_cvt(exhaustive, json_path, out_dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fp8sim-hw: %s\n", e.what());
    return 2;
  }
  return 0;
}
