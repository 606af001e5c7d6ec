// dispatch: the one place that decides how a GEMM runs. gemm(), gemm_prefixes() and
// batched_dot() (operands on the host) come here, in this order: a kernel's zero-padded K
// tail, the library GEMM around the chain (split-K, epilogue scales, bias: gemm_split.hpp),
// operands unpacked for the model, the spec checked against the shapes, block scales folded
// into the operands or applied by group sums (block_fold.hpp) or by the reference step with
// block scales (on the CUDA engine: gemm_device.hpp), then the CUDA engine
// (gemm_device.hpp) or the CPU engine (engine_cpu.hpp). gemm_resident() (operands in CUDA
// memory) takes the same routes: a block-scaled model on its device routes with its scales
// checked on the device (resident_block_scales.hpp) or else through the host entry (one copy
// each way), else the K tail and split-K slices read in place by the CUDA engine, the
// reduction and epilogue as the library GEMM does them. gemm() on host codes with device cuda
// copies the codes to the device and takes gemm_resident's route (block scales inside the MMA
// where it keeps the codes on the device), large GEMMs in bands (device_bands.hpp), so the
// host decodes nothing. No front-end decides any of this itself.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gemm/block_fold.hpp"
#include "gemm/device_bands.hpp"
#include "gemm/device_gemm.hpp"
#include "gemm/engine_cpu.hpp"
#include "gemm/gemm.hpp"
#include "gemm/gemm_device.hpp"
#include "gemm/gemm_path.hpp"
#include "gemm/gemm_split.hpp"
#include "gemm/resident_block_scales.hpp"

namespace fp8sim {
namespace {

void check_span(std::string_view what, std::size_t got, std::size_t want) {
  if (got != want)
    throw std::invalid_argument(fmt::format("{} has {} elements, expected {}", what, got, want));
}

// The dispatcher under gemm(), gemm_prefixes() and batched_dot(), routes in the order of the
// file comment. With prefixes (all_pairs only), D_prefix (P x M x N) gets the outputs at each
// prefix of K, read off the CPU engine's running state.
void dispatch(const GemmSpec& s, const Operand& A_in, const Operand& B_in,
                std::span<const float> C, std::span<const float> sa, std::span<const float> sb,
                std::span<float> D, Pairing pairing, std::span<const int> prefix = {},
                std::span<float> D_prefix = {}, std::span<const float> bias = {}) {
  if (A_in.rows == 0 || B_in.rows == 0) {  // an empty D, as torch.mm gives: nothing to run
    validate(s, A_in.rows, B_in.rows, A_in.cols);
    return;
  }
  if (const int Kp = padded_k(s, A_in.cols); Kp != A_in.cols && B_in.cols == A_in.cols) {
    // A kernel's masked tail loads: the chain runs on K zero-padded to its tile (the scale
    // columns already cover the padded K: ceil(K / block) of them either way).
    return dispatch(s, zero_padded(A_in, Kp), zero_padded(B_in, Kp), C, sa, sb, D, pairing,
                      prefix, D_prefix, bias);
  }
  if (needs_library_gemm(s, !bias.empty())) {  // split-K, epilogue scales, bias
    if (!prefix.empty())
      throw std::invalid_argument(
          "prefix outputs are not read with split-K, a bias or scales applied after K "
          "(scale order cublaslt with tensor or row scales)");
    return library_gemm(s, A_in, B_in, pairing == Pairing::row_by_row, C, sa, sb, bias, D,
                        [pairing](const GemmSpec& in, const Operand& a, const Operand& b,
                                  std::span<const float> c, std::span<const float> xa,
                                  std::span<const float> xb, std::span<float> d) {
                          dispatch(in, a, b, c, xa, xb, d, pairing);
                        });
  }
  const auto ua = unpacked(s.model, A_in), ub = unpacked(s.model, B_in);
  const Operand& A = ua ? *ua : A_in;
  const Operand& B = ub ? *ub : B_in;
  const bool all_pairs = pairing == Pairing::all_pairs;
  const int M = A.rows, K = A.cols;
  const int N = all_pairs ? B.rows : 1;
  if (all_pairs && B.cols != K)
    throw std::invalid_argument(fmt::format("A is {} x {} but B is {} x {}: K differs", A.rows,
                                            A.cols, B.rows, B.cols));
  if (!all_pairs && (B.rows != M || B.cols != K))
    throw std::invalid_argument(fmt::format(
        "batched_dot: A is {} x {} but B is {} x {}; both must be T x K", A.rows, A.cols,
        B.rows, B.cols));
  GemmSpec spec = s;
  spec.a_format = A.format;
  spec.b_format = B.format;
  validate(spec, M, N, K);
  const ScaleShapes sh =
      all_pairs ? scale_shapes(spec, M, N, K) : batched_scale_shapes(spec, M, K);
  const std::size_t outputs = std::size_t(M) * N;
  if (!C.empty()) check_span("C", C.size(), outputs);
  check_span("D", D.size(), outputs);
  if (all_pairs || spec.scaling != Scaling::none) {  // gemm() without scales: both empty
    check_span("A scales", sa.size(), sh.a_rows * sh.a_cols);
    check_span("B scales", sb.size(), sh.b_rows * sh.b_cols);
  }
  check_span("D prefixes", D_prefix.size(), prefix.size() * outputs);
  if (const auto& in = spec.model.block_scale) {
    scale_values(in->format).check(spec, sa, sb);
    const bool on_device = spec.device == Device::cuda && prefix.empty();
    if (auto folded = fold_block_scales(spec, A, B, sa, sb, sh.a_cols, sh.b_cols)) {
      const GemmSpec plain = without_block_scales(spec);
      // The CUDA engine's paths run the plain model unless it needs the reference step
      // (lanes, cuts toward -inf, ...): then the reference step with block scales below.
      if (on_device && !needs_reference_step(plain.model))
        return folded_on_device(spec, *folded, C, sa, sb, D, !all_pairs);
      if (!on_device)
        return dispatch(plain, folded->a, folded->b, C, {}, {}, D, pairing, prefix, D_prefix);
    }
    if (on_device && group_sums_on_device_fit(spec, A, B, C, sa, sb))
      return group_sums_on_device(spec, A, B, C, sa, sb, D, !all_pairs);
    if (on_device && scaled_reference_on_device_fit(spec.model))
      return scaled_reference_on_device(spec, A, B, C, sa, sb, D, !all_pairs);
    spec.device = Device::cpu;  // the CPU's reference step applies the scales (GemmSpec::device)
  }
  if (spec.device == Device::cuda && !prefix.empty())
    throw std::invalid_argument(
        "prefix outputs are read off the CPU engine's running state: device cuda runs each "
        "prefix as a GEMM of its own");
  if (spec.device == Device::cuda)
    return all_pairs ? gemm_on_device(spec, A, B, C, sa, sb, D)
                     : batched_dot_on_device(spec, A, B, C, sa, sb, D);

  cpu_engine(spec, A, B, C, sa, sb, sh, D, pairing, prefix, D_prefix);
}

}  // namespace

void gemm(const GemmSpec& s, const Operand& A, const Operand& B, std::span<const float> C,
          std::span<const float> sa, std::span<const float> sb, std::span<float> D,
          std::span<const float> bias) {
  dispatch(s, A, B, C, sa, sb, D, Pairing::all_pairs, {}, {}, bias);
}

void gemm_prefixes(const GemmSpec& s, const Operand& A, const Operand& B,
                   std::span<const float> C, std::span<const float> sa,
                   std::span<const float> sb, std::span<const int> prefix_k, std::span<float> D,
                   std::span<float> D_prefix) {
  int last = 0;
  for (const int k : prefix_k) {
    const int K = A.cols;
    if (k <= last || k > K)
      throw std::invalid_argument(fmt::format(
          "prefix_k {} after {}: prefixes must increase and lie in 1..K = {}", k, last, K));
    GemmSpec at_k = s;
    at_k.a_format = A.format;
    at_k.b_format = B.format;
    validate(at_k, A.rows, B.rows, k);
    last = k;
  }
  dispatch(s, A, B, C, sa, sb, D, Pairing::all_pairs, prefix_k, D_prefix);
}

namespace {

// gemm() on host codes with device cuda, where gemm_resident takes the codes without a round
// trip through the host (no block scales inside the MMA, or block scales on its device
// routes: block_route, with finite scales and C) and the spec and every argument's size are
// right: the codes copied to the device as they are, 1 byte each, decoded there by
// gemm_resident's route, and D copied back (large GEMMs in bands, each band's copies
// overlapping the others' kernels: device_bands.hpp). Block scales and C are checked on the
// device (block_scales_on_device), in bands or not, except scales of formats whose values the
// device cannot look up (checked on the host). The same bits as the host route: both are the
// CUDA engine on the same values (tests/test_gemm_cuda.cpp pins it against the CPU engine).
// Returns false, D untouched, wherever the host route is to run or to give its own error (a
// bad spec or size, a CPU-only model, no CUDA in the build or no device, block scales or C
// off the device routes); a bad code is reported by the device in the host decoder's words.
bool gemm_codes_on_device(const GemmSpec& s, int M, int N, int K,
                          std::span<const std::uint8_t> A, std::span<const std::uint8_t> B,
                          std::span<const float> C, std::span<const float> sa,
                          std::span<const float> sb, std::span<float> D,
                          std::span<const float> bias) {
  if (s.device != Device::cuda || M <= 0 || N <= 0 || K <= 0 || total_bits(s.a_format) > 8 ||
      total_bits(s.b_format) > 8)
    return false;
  const std::size_t outputs = std::size_t(M) * N;
  if (A.size() != std::size_t(M) * K || B.size() != std::size_t(N) * K ||
      D.size() != outputs || (!C.empty() && C.size() != outputs) ||
      (!bias.empty() && bias.size() != std::size_t(N)) ||
      (!s.model.block_scale && needs_reference_step(s.model)))
    return false;
  try {
    validate(s, M, N, K);
  } catch (const std::invalid_argument&) {
    return false;
  }
  const ScaleShapes sh = scale_shapes(s, M, N, K);
  const bool scaled = s.scaling != Scaling::none;
  if (sa.size() != (scaled ? sh.a_rows * sh.a_cols : 0) ||
      sb.size() != (scaled ? sh.b_rows * sh.b_cols : 0))
    return false;
  const BlockRoute route =
      s.model.block_scale ? block_route(s, K, !bias.empty()) : BlockRoute::host;
  if (s.model.block_scale && route == BlockRoute::host) return false;
  if (gemm_bands_fit(s, K, !bias.empty())) {  // copies overlapping the kernels (device_bands.hpp)
    int sms = 0;
    try {
      sms = device_sm_count();
    } catch (const std::runtime_error&) {  // no device: the host route says so in its words
      return false;
    }
    // Block scales checked on the device there: false where they (or C) send the GEMM to the
    // host route, as gemm_resident's device check would.
    if (const GemmBands bands = gemm_bands(s, M, N, K, sms); bands.count >= 2)
      return gemm_codes_in_bands(s, M, N, K, A, B, C, sa, sb, D, bands);
  }
  // Block scales whose values the device looks up (ScaleValues::high_half): copied there and
  // checked with C (block_scales_on_device, as in the bands), which decides the route; other
  // scale formats: checked here, only where gemm_resident keeps the codes on the device.
  const ScaleValues* on_device_values = nullptr;
  if (s.model.block_scale) {
    const ScaleValues& values = scale_values(s.model.block_scale->format);
    if (values.high_half)
      on_device_values = &values;
    else if ((route == BlockRoute::group_sums &&
              !group_sums_on_device_fit(s, s.a_format, s.b_format, true, C, sa, sb)) ||
             (route == BlockRoute::folded && !folded_codes_fit(s, sa, sb)))
      return false;
  }
  DeviceBlock da, db, dc, dd, ds;
  try {  // no CUDA in this build, or no device: the host route says so in its words
    da.p = device_pool_malloc(A.size());
    db.p = device_pool_malloc(B.size());
    dd.p = device_pool_malloc(outputs * sizeof(float));
    if (!C.empty()) dc.p = device_pool_malloc(outputs * sizeof(float));
  } catch (const std::runtime_error&) {
    return false;
  }
  const auto* a = static_cast<const std::uint8_t*>(da.p);
  const auto* b = static_cast<const std::uint8_t*>(db.p);
  const auto* c = static_cast<const float*>(dc.p);
  auto* d = static_cast<float*>(dd.p);
  if (!C.empty()) copy_device(dc.p, C.data(), outputs * sizeof(float), true);
  std::optional<DeviceBlockScales> scales;
  if (on_device_values) {
    scales = block_scales_on_device(s, route, *on_device_values, sa, sb,
                                    route == BlockRoute::group_sums ? c : nullptr, outputs, ds,
                                    nullptr, -1);
    if (!scales) return false;
  }
  copy_device(da.p, A.data(), A.size(), true);
  copy_device(db.p, B.data(), B.size(), true);
  if (scales)
    resident_on_device(s, M, N, K, 0, K, K, a, b, c, scales->a, scales->b, d, nullptr, -1,
                       scales->launch);
  else
    gemm_resident(s, M, N, K, a, b, c, sa, sb, d, nullptr, -1, bias);
  copy_device(D.data(), dd.p, outputs * sizeof(float), false);
  return true;
}

// gemm_resident's checks of a GEMM with outputs, before any route: formats of at most 8
// bits, the scales' and the bias's sizes.
void check_resident(const GemmSpec& s, int M, int N, int K, std::size_t sa, std::size_t sb,
                    std::size_t bias) {
  for (const FormatSpec* f : {&s.a_format, &s.b_format})
    if (total_bits(*f) > 8)
      throw std::invalid_argument(fmt::format(
          "format {} has {} bits: 8-bit codes cannot hold it", f->name, total_bits(*f)));
  const ScaleShapes sh = scale_shapes(s, M, N, K);
  if (s.scaling != Scaling::none &&
      (sa != sh.a_rows * sh.a_cols || sb != sh.b_rows * sh.b_cols))
    throw std::invalid_argument(fmt::format(
        "scales: A has {} and B {} elements, expected {} and {}", sa, sb,
        sh.a_rows * sh.a_cols, sh.b_rows * sh.b_cols));
  if (bias != 0 && bias != std::size_t(N))
    throw std::invalid_argument(fmt::format("bias has {} values, expected N = {}", bias, N));
}

// The library GEMM (gemm_split.hpp) on the device: each split-K slice read in place by the
// CUDA engine, its fp32 result written into D (the first) or a scratch buffer added into D
// in slice order, then the epilogue in place (reduce_slices' and apply_epilogue's operations).
// scales_on_device: sa and sb are device memory, read by the epilogue there (the slices then
// carry none: epilogue scales, or none at all).
void library_on_device(const GemmSpec& s, int M, int N, int K, const std::uint8_t* A,
                       const std::uint8_t* B, const float* C, std::span<const float> sa,
                       std::span<const float> sb, float* D, void* stream, int device,
                       std::span<const float> bias, bool scales_on_device) {
  const std::size_t outputs = std::size_t(M) * N;
  const GemmSpec in = slice_spec(s);
  const std::vector<KSliceCut> cuts = split_k_slices(s, padded_k(s, K), sa, sb);
  DeviceBlock part;  // read by the epilogues queued on `stream`
  if (cuts.size() > 1) part.p = device_pool_malloc(outputs * sizeof(float), device);
  part.stream = stream;
  DeviceEpilogue e;
  e.M = M;
  e.N = N;
  for (const KSliceCut& cut : cuts) {
    float* out = cut.k0 == 0 ? D : static_cast<float*>(part.p);
    resident_on_device(in, M, N, K, cut.k0, cut.len, std::max(0, std::min(cut.len, K - cut.k0)),
                       A, B, cut.k0 == 0 ? C : nullptr, cut.sa, cut.sb, out, stream, device);
    if (cut.k0 > 0) {
      e.part = out;
      run_device_epilogue(e, D, stream, device);
    }
  }
  e.part = nullptr;
  e.finish = true;
  e.scales = !epilogue_scales(s) ? 0 : s.scaling == Scaling::tensor ? 1 : 2;
  e.scales_on_device = scales_on_device;
  e.sa = sa.data();
  e.sb = sb.data();
  e.bias = bias.empty() ? nullptr : bias.data();
  e.out_type = device_format(s.out_type);
  e.out_fp32 = s.out_type.mantissa_bits == 23;
  run_device_epilogue(e, D, stream, device);
}

}  // namespace

void gemm(const GemmSpec& s, int M, int N, int K, std::span<const std::uint8_t> A,
          std::span<const std::uint8_t> B, std::span<const float> C, std::span<const float> sa,
          std::span<const float> sb, std::span<float> D, std::span<const float> bias) {
  if (gemm_codes_on_device(s, M, N, K, A, B, C, sa, sb, D, bias)) return;
  const Operand a = decode_operand(s.a_format, M, K, A);
  const Operand b = decode_operand(s.b_format, N, K, B);
  gemm(s, a, b, C, sa, sb, D, bias);
}

void batched_dot(const GemmSpec& s, const Operand& A, const Operand& B,
                 std::span<const float> C, std::span<const float> sa, std::span<const float> sb,
                 std::span<float> D) {
  dispatch(s, A, B, C, sa, sb, D, Pairing::row_by_row);
}

void gemm_resident(const GemmSpec& s, int M, int N, int K, const std::uint8_t* A,
                   const std::uint8_t* B, const float* C, std::span<const float> sa,
                   std::span<const float> sb, float* D, void* stream,
                   int device, std::span<const float> bias) {
  validate(s, M, N, K);
  if (M == 0 || N == 0) return;  // an empty D: no kernel to launch
  check_resident(s, M, N, K, sa.size(), sb.size(), bias.size());
  const std::size_t outputs = std::size_t(M) * N;
  if (s.model.block_scale) {
    // Scales inside the MMA on group sums: the CUDA engine's group-sum step reads the codes in
    // place where it is exact (finite elements, scales and C) and no library GEMM wraps it.
    // Power-of-two scales on single products (kind::mxf8f6f4): folded into the codes' values
    // where the kernels read them, where every folded value is exact.
    const BlockRoute route = block_route(s, K, !bias.empty());
    const bool group_route = route == BlockRoute::group_sums;
    const bool folded_route = route == BlockRoute::folded;
    const ScaleValues& values = scale_values(s.model.block_scale->format);
    if ((group_route || folded_route) && values.high_half) {
      // The scales go to the device once and are checked there, and the kernels read that
      // copy: the group-sum step, or the codes' decoding that folds them in.
      DeviceBlock copy;
      if (const auto d = block_scales_on_device(s, route, values, sa, sb, C, outputs, copy,
                                                stream, device))
        return resident_on_device(s, M, N, K, 0, K, K, A, B, C, d->a, d->b, D, stream, device,
                                  d->launch);
    } else {
      values.check(s, sa, sb);
      if (group_route && group_sums_on_device_fit(s, s.a_format, s.b_format, true, {}, sa, sb) &&
          (C == nullptr || device_all_finite(C, outputs, stream, device)))
        return resident_on_device(s, M, N, K, 0, K, K, A, B, C, sa, sb, D, stream, device);
      if (folded_route && folded_codes_fit(s, sa, sb))
        return resident_on_device(s, M, N, K, 0, K, K, A, B, C, sa, sb, D, stream, device);
    }
    // Elsewhere the host entry folds the scales into the operands (or sums groups) before
    // the CUDA engine runs, so the codes make one round trip through the host.
    std::vector<std::uint8_t> a(std::size_t(M) * K), b(std::size_t(N) * K);
    std::vector<float> c(C ? outputs : 0), d(outputs);
    copy_device(a.data(), A, a.size(), false, stream, device);
    copy_device(b.data(), B, b.size(), false, stream, device);
    if (C) copy_device(c.data(), C, c.size() * sizeof(float), false, stream, device);
    GemmSpec on = s;
    on.device = Device::cuda;
    gemm(on, M, N, K, a, b, c, sa, sb, d, bias);
    copy_device(D, d.data(), outputs * sizeof(float), true, stream, device);
    return;
  }
  if (!needs_library_gemm(s, !bias.empty()))  // a kernel's masked K tail: zeros past K
    return resident_on_device(s, M, N, K, 0, padded_k(s, K), K, A, B, C, sa, sb, D, stream,
                              device);
  library_on_device(s, M, N, K, A, B, C, sa, sb, D, stream, device, bias, false);
}

void gemm_resident_scales_on_device(const GemmSpec& s, int M, int N, int K,
                                    const std::uint8_t* A, const std::uint8_t* B,
                                    const float* C, std::span<const float> sa,
                                    std::span<const float> sb, float* D, void* stream,
                                    int device) {
  validate(s, M, N, K);
  if (M == 0 || N == 0) return;
  check_resident(s, M, N, K, sa.size(), sb.size(), 0);
  // Where the host reads the scales (a block-scaled model's routes, split-K slices cutting
  // block scales into columns): they come down once and gemm_resident takes them.
  const bool sliced = s.split_k > 1 && !epilogue_scales(s) && s.scaling != Scaling::none;
  if (s.model.block_scale || sliced) {
    check_deferred_quantisations(true);  // a quantisation's bad element before its NaN scales
    std::vector<float> ha(sa.size()), hb(sb.size());
    copy_device(ha.data(), sa.data(), ha.size() * sizeof(float), false, stream, device);
    copy_device(hb.data(), sb.data(), hb.size() * sizeof(float), false, stream, device);
    return gemm_resident(s, M, N, K, A, B, C, ha, hb, D, stream, device);
  }
  if (!needs_library_gemm(s, false)) {
    DeviceLaunch base;
    base.scales_on_device = true;
    return resident_on_device(s, M, N, K, 0, padded_k(s, K), K, A, B, C, sa, sb, D, stream,
                              device, base);
  }
  library_on_device(s, M, N, K, A, B, C, sa, sb, D, stream, device, {}, true);
}

}  // namespace fp8sim
