// hw_cmd_cvt: `fp8sim-hw cvt`, the hardware FP8 conversions compared with encode().
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "format/convert_batch.hpp"
#include "hw/hw_commands.hpp"
#include "hw/hw_device.hpp"
#include "hw/hw_harness.hpp"
#include "hw/hw_kernel_table.hpp"
#include "hw/hw_provenance.hpp"
#include "hw/kernels.hpp"
#include "io/npy.hpp"
#include "format/rounding.hpp"
#include "io/output_file.hpp"

namespace fp8sim::hw {
namespace {

namespace fs = std::filesystem;

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
  return fmt::format("{} x={} ({}) => got 0x{:02x} want 0x{:02x}", what, hex_bits(x), format_value(x), got, want);
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

}  // namespace

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

}  // namespace fp8sim::hw
