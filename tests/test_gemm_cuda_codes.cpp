// test_gemm_cuda_codes: resident 8-bit codes read in place by the CUDA engine's kernels
// (DeviceLaunch::codes, issue 38: no decoded copy of the operands, and no prepared copy for
// the float kernel), bit for bit.
//
// Every model of the test grid that the CUDA engine runs without block scales, on codes of
// e4m3, e5m2, mixed and narrower formats (e3m2 x e2m3: 64 codes, the bad-code check kept),
// adversarial rows (random codes with Inf/NaN, the largest magnitudes, mostly zeros of both
// signs, subnormals), adversarial C, scalings and output types rotating, at shapes that take
// each branch of the float kernel's loader: whole tiles on 16-byte rows, ragged rows, decode
// shapes (K-parallel), a K tail inside the last slab (cols < len) and a slice of wider rows
// at an odd offset (byte loads); and the FP4 group-sum models on e2m1 codes. Each
// configuration runs through resident_on_device (gemm_resident's route) with the codes in
// place (the default), decoded first (codes -1), one thread per output on the codes, and
// K-parallel forced on and off; each against the CPU engine on the same elements. Then peak
// device memory: a resident GEMM with the codes in place stays within 1.5x its codes plus D.
// And gemm_resident's block scales, checked on the device, against gemm()'s host check, and
// power-of-two block scales folded into the codes as the kernels read them.
// FP8SIM_SEED overrides the seed; the first mismatch is printed as one line.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "format/format.hpp"
#include "gemm/gemm.hpp"
#include "gemm/gemm_device.hpp"
#include "gemm/gemm_split.hpp"
#include "error_of.hpp"
#include "gemm_cuda_util.hpp"
#include "model_grid.hpp"
#include "scale_probes.hpp"

using namespace fp8sim;
using namespace fp8sim::gpu_test;

namespace {

// adversarial_operand's rows as one-byte codes of f (at most 8 bits), rows x ld.
std::vector<std::uint8_t> adversarial_codes(const FormatSpec& f, int rows, int ld,
                                            std::uint64_t stream, int special) {
  const std::vector<std::uint32_t> c = adversarial_code_values(f, rows, ld, stream, special);
  return std::vector<std::uint8_t>(c.begin(), c.end());
}

// Device memory for a test, freed however it ends.
struct DeviceMemory {
  void* p = nullptr;
  explicit DeviceMemory(std::size_t bytes) : p(device_malloc(bytes)) {}
  ~DeviceMemory() { device_free(p); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
};

// Where the codes lie: rows of ld codes, the GEMM's K columns from k0, those at or beyond
// cols read as +0 (resident_on_device's arguments).
struct Layout {
  int M, N, len, ld, k0, cols;
  const char* what;
};
constexpr Layout kLayouts[] = {
    {136, 136, 256, 256, 0, 256, "whole tiles"},
    {100, 70, 256, 256, 0, 256, "ragged rows"},
    {16, 257, 1216, 1216, 0, 1216, "decode"},
    {64, 96, 512, 512, 0, 500, "K tail in the last slab"},
    {70, 45, 256, 301, 5, 230, "slice at an odd offset"},
};

// The GEMM's elements as M x len codes for the CPU engine (code 0, +0, at and beyond cols).
std::vector<std::uint8_t> slice(const std::vector<std::uint8_t>& codes, int rows,
                                const Layout& l) {
  std::vector<std::uint8_t> out(std::size_t(rows) * l.len, 0);
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < l.cols; ++k)
      out[std::size_t(r) * l.len + k] = codes[std::size_t(r) * l.ld + l.k0 + k];
  return out;
}

std::vector<std::pair<DeviceLaunch, const char*>> launches() {
  DeviceLaunch in_place, decoded, dot, kpar_on, kpar_off;
  decoded.codes = -1;
  dot.kernel = 1;
  kpar_on.k_parallel = 1;
  kpar_off.k_parallel = -1;
  return {{in_place, "codes in place"},
          {decoded, "codes decoded"},
          {dot, "per-output on codes"},
          {kpar_on, "codes in place, K-parallel forced"},
          {kpar_off, "codes in place, K-parallel off"}};
}

// One configuration: the CPU engine on the layout's elements, then resident_on_device under
// every launch of launches(), each tallied against it.
void run_layout(GemmSpec s, const Layout& l, const std::vector<std::uint8_t>& A,
                const std::vector<std::uint8_t>& B, const std::vector<float>& C,
                const std::vector<float>& sa, const std::vector<float>& sb, Tally& t,
                const std::string& what) {
  const std::size_t outputs = std::size_t(l.M) * l.N;
  std::vector<float> cpu(outputs), gpu(outputs);
  s.device = Device::cpu;
  gemm(s, l.M, l.N, l.len, slice(A, l.M, l), slice(B, l.N, l), C, sa, sb, cpu);
  s.device = Device::cuda;
  const DeviceMemory dA(A.size()), dB(B.size()), dC(C.size() * 4 + 4), dD(outputs * 4);
  copy_device(dA.p, A.data(), A.size(), true);
  copy_device(dB.p, B.data(), B.size(), true);
  if (!C.empty()) copy_device(dC.p, C.data(), C.size() * 4, true);
  for (const auto& [launch, how] : launches()) {
    resident_on_device(s, l.M, l.N, l.ld, l.k0, l.len, l.cols,
                       static_cast<const std::uint8_t*>(dA.p),
                       static_cast<const std::uint8_t*>(dB.p),
                       C.empty() ? nullptr : static_cast<const float*>(dC.p), sa, sb,
                       static_cast<float*>(dD.p), nullptr, -1, launch);
    copy_device(gpu.data(), dD.p, outputs * 4, false);
    tally(cpu, gpu, l.N, t, what + " (" + how + ")");
  }
}

int codes_test() {
  const char* pairs[][2] = {{"e4m3", "e4m3"}, {"e5m2", "e5m2"}, {"e4m3", "e5m2"}, {"e3m2", "e2m3"}};
  const Scaling scalings[] = {Scaling::none, Scaling::tensor, Scaling::block, Scaling::row};
  const char* outs[] = {"fp32", "bf16", "fp16"};
  const int promotes[] = {128, 64, 0, 32};
  Tally t;
  std::uint64_t stream = 1700000;
  std::size_t config = 0;
  for (const auto& name : test::model_grid()) {
    const AccumulatorSpec model = accumulator_by_name(name);
    if (needs_reference_step(model) || model.block_scale) continue;
    const auto& pair = pairs[config % 4];
    const Layout& l = kLayouts[config % std::size(kLayouts)];
    GemmSpec s;
    s.model = model;
    s.a_format = format_by_name(pair[0]);
    s.b_format = format_by_name(pair[1]);
    s.order = ScaleOrder::deepgemm;
    s.out_type = format_by_name(outs[(config / 4) % 3]);
    s.scaling = scalings[(config / 3) % 4];
    s.promote_every = promotes[(config / 2) % 4];
    const int g = s.model.group ? step_products(s.model) : 1;
    if (s.promote_every % g) s.promote_every = 0;
    s.block = 128;
    if (s.scaling == Scaling::block && (s.promote_every == 0 || 128 % s.promote_every))
      s.scaling = Scaling::tensor;
    ++config;
    if (needs_library_gemm(s, false) || padded_k(s, l.len) != l.len) continue;
    const int special = config % 3 == 1 ? 20 : 0;
    const auto A = adversarial_codes(s.a_format, l.M, l.ld, stream++, special);
    const auto B = adversarial_codes(s.b_format, l.N, l.ld, stream++, special);
    const ScaleShapes sh = scale_shapes(s, l.M, l.N, l.len);
    const auto sa = random_floats(sh.a_rows * sh.a_cols, stream++, -8, 8);
    const auto sb = random_floats(sh.b_rows * sh.b_cols, stream++, -8, 8);
    std::vector<float> C;
    if (config % 2) C = adversarial_c(std::size_t(l.M) * l.N, stream++);
    const std::string what = fmt::format(
        "codes: model={} a={} b={} {} M={} N={} K={} ld={} k0={} cols={} promote={} scaling={} "
        "out={} C={} special={}", name, pair[0], pair[1], l.what, l.M, l.N, l.len, l.ld, l.k0,
        l.cols, s.promote_every, to_string(s.scaling), s.out_type.name, C.empty() ? 0 : 1,
        special);
    run_layout(s, l, A, B, C, sa, sb, t, what);
  }
  // FP4 group sums (the group-sum kernel's operands prepared from the codes in place): e2m1
  // codes, scales of the model's scale format near 1, finite C with zeros.
  for (const auto& p : accumulator_presets()) {
    if (!p.block_scale || p.group_sum < 2) continue;
    for (const Layout l : {Layout{16, 130, 4160, 4160, 0, 4160, "decode"},
                           Layout{100, 70, 512, 512, 0, 512, "ragged rows"}})
      for (const int promote : {64, 128}) {
        GemmSpec s;
        s.model = p;
        use_model_block_scales(s);
        s.a_format = s.b_format = format_by_name("e2m1");
        s.out_type = format_by_name("fp32");
        s.promote_every = promote;
        const FormatSpec sf = p.block_scale->format;
        const auto A = adversarial_codes(s.a_format, l.M, l.ld, stream++, 0);
        const auto B = adversarial_codes(s.b_format, l.N, l.ld, stream++, 0);
        auto scales = [&](std::size_t n) { return block_scales_near_one(sf, n, stream++); };
        const ScaleShapes ss = scale_shapes(s, l.M, l.N, l.len);
        const auto sa = scales(ss.a_rows * ss.a_cols), sb = scales(ss.b_rows * ss.b_cols);
        auto C = random_floats(std::size_t(l.M) * l.N, stream++, -20, 12);
        for (std::size_t i = 0; i < C.size(); i += 4) C[i] = 0.0f;
        if (!group_sums_on_device_fit(s, s.a_format, s.b_format, true, C, sa, sb))
          throw std::runtime_error(std::string(p.name) + ": not taken by the group-sum step");
        const std::string what = fmt::format("codes: model={} a=e2m1 b=e2m1 {} M={} N={} K={} "
                                             "promote={}", p.name, l.what, l.M, l.N, l.len,
                                             promote);
        run_layout(s, l, A, B, C, sa, sb, t, what);
      }
  }
  fmt::print("codes: {} configurations, {} outputs, {} differ{}\n", t.configs, t.outputs, t.bad,
             t.bad ? "; first: " + t.first : "");
  return t.bad == 0 && t.configs > 100 ? 0 : 1;
}

// Peak device memory of a resident GEMM (codes and D already on the device) with the codes in
// place, against its codes plus D; and the same GEMM decoded (the prepared path) above it.
int memory_test() {
  GemmSpec s;
  s.model = accumulator_by_name("hopper-wgmma");
  s.a_format = s.b_format = format_by_name("e4m3");
  s.out_type = format_by_name("fp32");
  s.promote_every = 128;
  s.device = Device::cuda;
  const int M = 512, N = 512, K = 2048;
  const auto A = adversarial_codes(s.a_format, M, K, 1800000, 0);
  const auto B = adversarial_codes(s.b_format, N, K, 1800001, 0);
  const DeviceMemory dA(A.size()), dB(B.size()), dD(std::size_t(M) * N * 4);
  copy_device(dA.p, A.data(), A.size(), true);
  copy_device(dB.p, B.data(), B.size(), true);
  const double own = double(A.size() + B.size()) + 4.0 * M * N;
  double peak[2];
  for (int codes : {0, -1}) {
    DeviceLaunch l;
    l.codes = codes;
    device_memory_peak(true);
    resident_on_device(s, M, N, K, 0, K, K, static_cast<const std::uint8_t*>(dA.p),
                       static_cast<const std::uint8_t*>(dB.p), nullptr, {}, {},
                       static_cast<float*>(dD.p), nullptr, -1, l);
    peak[codes == 0 ? 0 : 1] = double(device_memory_peak(true)) / own;
  }
  fmt::print("memory: peak {:.3g}x of the codes plus D with the codes in place, {:.3g}x decoded\n",
             peak[0], peak[1]);
  return peak[0] <= 1.5 && peak[1] > peak[0] ? 0 : 1;
}

// One configuration through gemm() on the CPU engine, gemm_resident on device copies of the
// codes and C, and gemm() on the host codes with device cuda: the same error (or none) from
// all three, and without one the same bits.
void tally_entries(GemmSpec s, int M, int N, int K, const std::vector<std::uint8_t>& A,
                   const std::vector<std::uint8_t>& B, const std::vector<float>& C,
                   const std::vector<float>& sa, const std::vector<float>& sb, Tally& t,
                   const std::string& what) {
  std::vector<float> cpu(std::size_t(M) * N), resident(cpu.size()), host(cpu.size());
  s.device = Device::cpu;
  const std::string cpu_error =
      test::error_of([&] { gemm(s, M, N, K, A, B, C, sa, sb, cpu); });
  s.device = Device::cuda;
  const std::string resident_error = test::error_of([&] {
    const DeviceMemory dA(A.size()), dB(B.size()), dD(resident.size() * 4),
        dC(std::max<std::size_t>(C.size(), 1) * 4);
    copy_device(dA.p, A.data(), A.size(), true);
    copy_device(dB.p, B.data(), B.size(), true);
    if (!C.empty()) copy_device(dC.p, C.data(), C.size() * 4, true);
    gemm_resident(s, M, N, K, static_cast<const std::uint8_t*>(dA.p),
                  static_cast<const std::uint8_t*>(dB.p),
                  C.empty() ? nullptr : static_cast<const float*>(dC.p), sa, sb,
                  static_cast<float*>(dD.p));
    copy_device(resident.data(), dD.p, resident.size() * 4, false);
  });
  // gemm() on host codes: gemm_resident's route
  const std::string host_error =
      test::error_of([&] { gemm(s, M, N, K, A, B, C, sa, sb, host); });
  if (cpu_error != resident_error || cpu_error != host_error) {
    ++t.configs;
    if (t.bad++ == 0)
      t.first = fmt::format("seed={} {}: cpu error '{}', resident '{}', host codes '{}'", seed(),
                            what, cpu_error, resident_error, host_error);
  } else if (cpu_error.empty()) {
    tally(cpu, resident, N, t, what);
    tally(cpu, host, N, t, what + " (gemm() on host codes)");
    --t.configs;  // one configuration, its outputs counted once an entry
  } else {
    ++t.configs;
  }
}

// gemm_resident's block-scaled routes (FP4 group sums; mxf8f6f4's scales folded into the
// codes) check the block scales on the device (check_scales_on_device, with the log2 ranges
// the fold needs): over every value of the scale format, its float neighbours, its
// negations, zeros, infinities and NaN, put at a random place among A's or B's scales, the
// call fails exactly where gemm() on the CPU engine fails, with the same line (the same
// index), and otherwise gives the CPU engine's bits (non-finite scales: through the host);
// so does gemm() with device cuda on the same host codes (gemm_resident's route where the
// scales and C are finite).
int scale_check_test() {
  Tally t;
  std::uint64_t stream = 1900000;
  for (const auto& [name, element] : {std::pair{"nvfp4", "e2m1"}, std::pair{"mxf4", "e2m1"},
                                       std::pair{"mxf8f6f4", "e4m3"}}) {
    GemmSpec s;
    s.model = accumulator_by_name(name);
    use_model_block_scales(s);
    const FormatSpec ef = format_by_name(element), sf = s.model.block_scale->format;
    s.a_format = s.b_format = ef;
    s.out_type = format_by_name("fp32");
    const int M = 8, N = 8, K = 128;
    const auto A = adversarial_codes(ef, M, K, stream++, 0);
    const auto B = adversarial_codes(ef, N, K, stream++, 0);
    const std::size_t na = std::size_t(M) * K / s.mx_block, nb = std::size_t(N) * K / s.mx_block;
    const std::vector<float> probes = test::scale_probes(sf);
    for (std::size_t i = 0; i < 2 * probes.size(); ++i) {
      const bool in_a = i % 2 == 0;
      std::vector<float> sa = block_scales_near_one(sf, na, stream++);
      std::vector<float> sb = block_scales_near_one(sf, nb, stream++);
      std::vector<float>& target = in_a ? sa : sb;
      const std::size_t at = random_u64(seed(), stream++, 0) % target.size();
      target[at] = probes[i / 2];
      const std::string what = fmt::format("{} scale {} at {}[{}]", name,
                                           format_value(probes[i / 2]), in_a ? "A" : "B", at);
      tally_entries(s, M, N, K, A, B, {}, sa, sb, t, what);
    }
  }
  fmt::print("scale check: {} configurations, {} outputs, {} differ{}\n", t.configs, t.outputs,
             t.bad, t.bad ? "; first: " + t.first : "");
  return t.bad == 0 && t.outputs > 0 ? 0 : 1;
}

// gemm_resident of block-scaled models on single products (kind::mxf8f6f4 and custom models
// with block scales and no group sums): the power-of-two scales folded into the codes' values
// where the kernels read them (folded_codes_fit), against gemm() on the CPU engine (which
// folds them into the operands on the host). Operand formats of 4 to 8 bits with adversarial
// codes (Inf/NaN, largest, zeros of both signs, subnormals), scales near 1, spread over the
// range where every folded value stays an exact float, or reaching beyond it (then the call
// takes the host's route), C or none, promotion never or every 128 (K-parallel at the decode
// shape); and gemm() on the same host codes, which hands them to gemm_resident where it folds
// them; counts how many ran folded on the device.
int folded_codes_test() {
  Tally t;
  std::size_t folded = 0;
  std::uint64_t stream = 2000000;
  const char* models[] = {"mxf8f6f4",
                          "custom:group=32,frac=25,out=24,zero=-133,scale=ue8m0:32,cut=rne"};
  const char* formats[][2] = {{"e4m3", "e4m3"}, {"e5m2", "e4m3"}, {"e2m1", "e3m2"},
                              {"e2m3", "e5m2"}};
  const int shapes[][3] = {{96, 80, 256}, {70, 45, 320}, {4, 300, 1024}};
  std::size_t config = 0;
  for (const char* name : models)
    for (const auto& fm : formats)
      for (const auto& sh : shapes)
        for (int mode = 0; mode < 3; ++mode, ++config) {
          GemmSpec s;
          s.model = accumulator_by_name(name);
          use_model_block_scales(s);
          s.a_format = format_by_name(fm[0]);
          s.b_format = format_by_name(fm[1]);
          s.out_type = format_by_name(config % 2 ? "fp32" : "bf16");
          s.promote_every = config % 3 == 1 ? 0 : 128;
          const int M = sh[0], N = sh[1], K = sh[2];
          const auto A = adversarial_codes(s.a_format, M, K, stream++, int(config % 4));
          const auto B = adversarial_codes(s.b_format, N, K, stream++, int((config + 1) % 4));
          const ScaleShapes ss = scale_shapes(s, M, N, K);
          const FormatSpec& sf = s.model.block_scale->format;
          auto scales = [&](std::size_t n) {  // UE8M0 codes: 127 is 1
            std::vector<float> v(n);
            for (std::size_t i = 0; i < n; ++i) {
              const std::uint64_t r = random_u64(seed(), stream, i);
              const std::uint32_t c = mode == 0 ? 119 + r % 17 : mode == 1 ? 20 + r % 200
                                                                            : 1 + r % 253;
              v[i] = static_cast<float>(decode(sf, c));
            }
            ++stream;
            return v;
          };
          const auto sa = scales(ss.a_rows * ss.a_cols), sb = scales(ss.b_rows * ss.b_cols);
          std::vector<float> C;
          if (config % 2) C = random_floats(std::size_t(M) * N, stream++, -20, 12);
          folded += folded_codes_fit(s, sa, sb);
          const std::string what = fmt::format(
              "folded codes: model={} a={} b={} M={} N={} K={} promote={} scales={} C={} fits={}",
              name, fm[0], fm[1], M, N, K, s.promote_every, mode, C.empty() ? 0 : 1,
              folded_codes_fit(s, sa, sb));
          tally_entries(s, M, N, K, A, B, C, sa, sb, t, what);
        }
  fmt::print("folded codes: {} configurations ({} folded on the device), {} outputs, {} differ{}\n",
             t.configs, folded, t.outputs, t.bad, t.bad ? "; first: " + t.first : "");
  return t.bad == 0 && folded > config / 2 && folded < config ? 0 : 1;
}

}  // namespace

TEST_CASE("gemm_resident folds power-of-two block scales into the codes as gemm() does",
          "[gpu]") {
  CHECK(folded_codes_test() == 0);
}

TEST_CASE("gemm_resident checks FP4 block scales on the device as gemm() does on the host",
          "[gpu]") {
  CHECK(scale_check_test() == 0);
}

TEST_CASE("resident codes read in place equal the CPU engine and the decoded path", "[gpu]") {
  CHECK(codes_test() == 0);
}

TEST_CASE("resident codes read in place stay within 1.5x their memory", "[gpu]") {
  CHECK(memory_test() == 0);
}
