// bind_format: formats, encode / decode / table / neighbours / ulp and quantize for Python.
#include <fmt/format.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "arrays.hpp"
#include "bindings.hpp"
#include "base/parallel.hpp"
#include "format/convert_batch.hpp"
#include "format/format.hpp"
#include "base/rng.hpp"
#include "format/rounding.hpp"
#include "scaling/quantize_device.hpp"
#include "scaling/scaling.hpp"

namespace fp8sim::py {
namespace {

std::string_view specials_name(Specials s) {
  switch (s) {
    case Specials::ieee: return "ieee";
    case Specials::fn: return "fn";
    case Specials::fnuz: return "fnuz";
    case Specials::finite: return "finite";
    case Specials::e8m0: return "e8m0";
  }
  return "?";
}

nb::dict describe_format(const std::string& name) {
  const FormatSpec f = format_by_name(name);
  nb::dict d;
  d["name"] = f.name;
  d["bits"] = total_bits(f);
  d["exponent_bits"] = f.exponent_bits;
  d["mantissa_bits"] = f.mantissa_bits;
  d["bias"] = f.bias;
  d["specials"] = std::string(specials_name(f.specials));
  d["signed"] = f.is_signed;
  d["has_inf"] = has_inf(f);
  d["has_nan"] = has_nan(f);
  d["has_negative_zero"] = has_negative_zero(f);
  d["has_subnormals"] = has_subnormals(f);
  d["min_normal_exponent"] = min_normal_exponent(f);
  d["max_exponent"] = max_exponent(f);
  d["max"] = max_finite(f);
  d["min_subnormal"] = min_subnormal(f);
  return d;
}

// Codes of `f` from any unsigned integer array, checked against the format's width.
std::vector<std::uint32_t> read_codes(const AnyArray& a, const FormatSpec& f, View& v) {
  v = view(a, "codes");
  std::vector<std::uint32_t> c(v.size());
  if (v.descr == "|u1") {
    const auto* p = static_cast<const std::uint8_t*>(v.data);
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = p[i];
  } else if (v.descr == "<u2") {
    const auto* p = static_cast<const std::uint16_t*>(v.data);
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = p[i];
  } else if (v.descr == "<u4") {
    const auto* p = static_cast<const std::uint32_t*>(v.data);
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = p[i];
  } else {
    throw std::runtime_error(fmt::format("codes: expected dtype |u1, <u2 or <u4, got {}", v.descr));
  }
  for (std::size_t i = 0; i < c.size(); ++i)
    if (!is_valid_code(f, c[i]))
      throw std::invalid_argument(fmt::format("bad code '{:#x}' at index {}: format '{}' has {} bits",
                                              c[i], i, f.name, total_bits(f)));
  return c;
}

nb::object encode_array(const AnyArray& x, const std::string& format, const std::string& rounding,
                        const std::string& overflow, std::uint64_t seed, int sr_bits, int threads) {
  const FormatSpec f = format_by_name(format);
  const RoundingSpec r{parse_rounding(rounding), parse_overflow(overflow), sr_bits};
  validate(r);
  check_threads(threads);
  const View v = view(x, "x");
  if (v.descr != "<f4" && v.descr != "<f8")
    throw std::runtime_error(fmt::format("x: expected dtype <f4 or <f8, got {}", v.descr));
  const std::size_t n = v.size();
  if (v.descr == "<f4" && total_bits(f) <= 8 && r.mode != Rounding::sr) {
    std::vector<std::uint8_t> out(n);
    {
      nb::gil_scoped_release release;
      encode_batch(f, r, {static_cast<const float*>(v.data), n}, out, threads);
    }
    return nb::cast(to_numpy(std::move(out), v.shape));
  }
  std::vector<std::uint32_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double xi = v.descr == "<f4" ? static_cast<const float*>(v.data)[i]
                                       : static_cast<const double*>(v.data)[i];
    out[i] = encode(xi, f, r, random_u64(seed, /*stream=*/0, i));  // the CLI's draws
  }
  return codes_to_numpy(std::move(out), total_bits(f), v.shape);
}

// A double per code (decode, ulp).
template <class Value>
nb::ndarray<nb::numpy, double> code_values(const AnyArray& codes, const std::string& format,
                                           Value value) {
  const FormatSpec f = format_by_name(format);
  View v;
  const std::vector<std::uint32_t> c = read_codes(codes, f, v);
  std::vector<double> out(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) out[i] = value(f, c[i]);
  return to_numpy(std::move(out), v.shape);
}

double ulp_or_nan(const FormatSpec& f, std::uint32_t code) {
  const ValueClass k = classify(f, code);
  return (k == ValueClass::nan || k == ValueClass::inf) ? NAN : ulp(f, code);
}

template <class Step>
nb::object step_codes(const AnyArray& codes, const std::string& format, Step step) {
  const FormatSpec f = format_by_name(format);
  View v;
  std::vector<std::uint32_t> c = read_codes(codes, f, v);
  for (auto& ci : c) ci = step(f, ci);
  return codes_to_numpy(std::move(c), total_bits(f), v.shape);
}

nb::tuple table(const std::string& format) {
  const FormatSpec f = format_by_name(format);
  if (total_bits(f) > 16)
    throw std::invalid_argument(fmt::format(
        "format '{}' has {} bits: table lists formats of at most 16 bits", f.name, total_bits(f)));
  std::vector<std::uint32_t> codes = all_codes(f);
  std::vector<double> values(codes.size());
  for (std::size_t i = 0; i < codes.size(); ++i) values[i] = decode(f, codes[i]);
  const std::size_t n = codes.size();
  return nb::make_tuple(codes_to_numpy(std::move(codes), total_bits(f), {n}),
                        to_numpy(std::move(values), {n}));
}

OperandRole role_by_name(const std::string& role) {
  if (role != "a" && role != "b")
    throw std::invalid_argument(fmt::format("unknown role '{}' (a, b)", role));
  return role == "a" ? OperandRole::a : OperandRole::b;
}

// A quantised operand's scales in the shape gemm() takes for the engine's scaling (B's
// 128 x 128 blocks one row per block; a scale for the whole tensor is one scale, "tensor"):
// (scales, gemm scaling, block, saturated, tensor scales or None).
nb::tuple scales_tuple(const ScalingSpec& s, OperandRole r, QuantisedOperand&& q, int T, int K,
                       int tensor_rows) {
  std::string name(to_string(engine_scaling(s)));
  const ScaleShape sh = gemm_scale_shape(s, r, T, K, tensor_rows);
  std::vector<float> scales = gemm_scales(s, r, q);
  scales.resize(sh.rows * sh.cols);  // a whole-tensor scale: its first copy (each row holds it)
  if (s.granularity == ScaleGranularity::tensor && (tensor_rows <= 0 || tensor_rows >= T))
    name = "tensor";
  const std::size_t rows = sh.rows, cols = sh.cols;
  nb::object tensor_scales = nb::none();
  if (!q.tensor_scales.empty()) {
    const std::size_t n = q.tensor_scales.size();
    tensor_scales = nb::cast(to_numpy(std::move(q.tensor_scales), {n, 1}));
  }
  return nb::make_tuple(to_numpy(std::move(scales), {rows, cols}), name, s.nc ? s.nc : 128,
                        q.saturated, tensor_scales);
}

// quantise_operand on a T x K array: (codes, then scales_tuple's five).
nb::tuple quantize(const AnyArray& x, const std::string& format, const std::string& scaling,
                   const std::string& role, int tensor_rows, int threads) {
  const FormatSpec f = format_by_name(format);
  const ScalingSpec s = scaling_by_name(scaling);
  const OperandRole r = role_by_name(role);
  check_threads(threads);
  if (tensor_rows < 0)
    throw std::invalid_argument(
        fmt::format("tensor_rows = {} is negative (0: all rows)", tensor_rows));
  const View v = view(x, "x", "<f8", 2);
  const int T = int(v.shape[0]), K = int(v.shape[1]);
  const auto* p = static_cast<const double*>(v.data);
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(p[i]))
      throw std::invalid_argument(fmt::format("x: value at index {} is {}", i, p[i]));
  QuantisedOperand q;
  {
    nb::gil_scoped_release release;
    q = quantise_operand(s, r, f, T, K, {p, v.size()},
                         tensor_rows <= 0 ? std::max(T, 1) : tensor_rows,
                         threads);
  }
  std::vector<std::uint32_t> codes(v.size());
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = encode(q.operand.value[i], f);
  nb::object c = codes_to_numpy(std::move(codes), total_bits(f), v.shape);
  const nb::tuple rest = scales_tuple(s, r, std::move(q), T, K, tensor_rows);
  return nb::make_tuple(c, rest[0], rest[1], rest[2], rest[3], rest[4]);
}

using CudaCodes = nb::ndarray<std::uint8_t, nb::device::cuda>;

// x (T x K float32 or float64) and codes (T x K uint8, C-contiguous) on one CUDA device, as
// the CUDA quantiser takes them: x's view.
View resident_operand(const CudaArray& x, const CudaCodes& codes) {
  const View v = view(x, "x", "", 2);
  if (v.descr != "<f4" && v.descr != "<f8")
    throw std::invalid_argument(fmt::format("x: expected dtype <f4 or <f8, got {}", v.descr));
  const std::size_t T = v.shape[0], K = v.shape[1];
  check_matrix(codes, "codes", T, K, "uint8");
  check_device("codes", codes.device_id(), "x", x.device_id());
  return v;
}

// quantise_resident: x (T x K float32 or float64) and codes (T x K uint8, written) on one CUDA
// device, on `stream`; returns scales_tuple's five.
nb::tuple quantize_cuda(const CudaArray& x, CudaCodes codes, const std::string& format,
                        const std::string& scaling, const std::string& role, int tensor_rows,
                        std::uintptr_t stream, bool count_saturated) {
  const FormatSpec f = format_by_name(format);
  const ScalingSpec s = scaling_by_name(scaling);
  const OperandRole r = role_by_name(role);
  if (tensor_rows < 0)
    throw std::invalid_argument(
        fmt::format("tensor_rows = {} is negative (0: all rows)", tensor_rows));
  const View v = resident_operand(x, codes);
  const std::size_t T = v.shape[0], K = v.shape[1];
  QuantisedOperand q;
  {
    nb::gil_scoped_release release;
    q = quantise_resident(s, r, f, int(T), int(K), v.data, v.descr == "<f8",
                          tensor_rows <= 0 ? std::max(int(T), 1) : tensor_rows, codes.data(),
                          reinterpret_cast<void*>(stream), x.device_id(), count_saturated);
  }
  return scales_tuple(s, r, std::move(q), int(T), int(K), tensor_rows);
}

// quantise_resident_deferred: x (T x K float32 or float64), codes (T x K uint8) and scales
// (gemm_scale_shape's rows x cols float32, written) on one CUDA device, on `stream`; returns
// without waiting for the device.
void quantize_cuda_deferred(const CudaArray& x, CudaCodes codes, CudaOut& scales,
                            const std::string& format, const std::string& scaling,
                            const std::string& role, std::uintptr_t stream) {
  const FormatSpec f = format_by_name(format);
  const ScalingSpec s = scaling_by_name(scaling);
  const OperandRole r = role_by_name(role);
  const View v = resident_operand(x, codes);
  const std::size_t T = v.shape[0], K = v.shape[1];
  const ScaleShape sh = gemm_scale_shape(s, r, int(T), int(K), 0);
  if (sh.cols > 0)  // none: refused below, by name
    check_matrix(scales, "scales", std::size_t(sh.rows), std::size_t(sh.cols), "float32");
  check_device("scales", scales.device_id(), "x", x.device_id());
  nb::gil_scoped_release release;
  quantise_resident_deferred(s, r, f, int(T), int(K), v.data, v.descr == "<f8", codes.data(),
                             scales.data(), caller_stream(stream), x.device_id());
}

// src (rows x cols uint8, C-contiguous) transposed into dst (cols x rows, C-contiguous), both
// on one CUDA device, on `stream`, without waiting for the device.
void transpose_codes_cuda(const CudaCodes& src, CudaCodes dst, std::uintptr_t stream) {
  if (src.ndim() != 2 || !c_contiguous(src))
    throw std::invalid_argument("src: expected a C-contiguous 2-D uint8 array");
  const std::size_t rows = src.shape(0), cols = src.shape(1);
  if (rows > std::size_t(INT32_MAX) || cols > std::size_t(INT32_MAX))
    throw std::invalid_argument(fmt::format("src: {} x {} is too large (at most 2^31 - 1 a "
                                            "side)", rows, cols));
  check_matrix(dst, "dst", cols, rows, "uint8");
  check_device("dst", dst.device_id(), "src", src.device_id());
  const auto* s = static_cast<const std::uint8_t*>(src.data());
  std::uint8_t* d = dst.data();
  const std::size_t n = rows * cols;
  if (n > 0 && s < d + n && d < s + n)
    throw std::invalid_argument("dst: overlaps src (the transpose needs another array)");
  DeviceLaunch launch;
  launch.stream = caller_stream(stream);
  launch.device = src.device_id();
  nb::gil_scoped_release release;
  run_device_transpose_codes(s, int(rows), int(cols), d, launch);
}

}  // namespace

void bind_format(nb::module_& m) {
  m.def("formats", &preset_format_names, "Preset format names (aliases excluded).");
  m.def("describe", &describe_format, nb::arg("fmt"), "A format's fields and derived values.");
  m.def("encode", &encode_array, nb::arg("x"), nb::arg("fmt"), nb::arg("rounding") = "rne",
        nb::arg("overflow") = "saturate", nb::arg("seed") = 0, nb::arg("sr_bits") = 32,
        nb::arg("threads") = 0, "Codes of float32/float64 values rounded into fmt.");
  m.def("decode", [](const AnyArray& c, const std::string& f) {
          return code_values(c, f, [](const FormatSpec& s, std::uint32_t x) { return decode(s, x); });
        }, nb::arg("codes"), nb::arg("fmt"), "Exact values of codes.");
  m.def("next_up", [](const AnyArray& c, const std::string& f) {
          return step_codes(c, f, [](const FormatSpec& s, std::uint32_t x) { return next_up(s, x); });
        }, nb::arg("codes"), nb::arg("fmt"), "Next larger value's code.");
  m.def("next_down", [](const AnyArray& c, const std::string& f) {
          return step_codes(c, f, [](const FormatSpec& s, std::uint32_t x) { return next_down(s, x); });
        }, nb::arg("codes"), nb::arg("fmt"), "Next smaller value's code.");
  m.def("ulp", [](const AnyArray& c, const std::string& f) { return code_values(c, f, ulp_or_nan); },
        nb::arg("codes"), nb::arg("fmt"), "Unit in the last place (NaN for Inf/NaN codes).");
  m.def("table", &table, nb::arg("fmt"), "Every code of a format (<= 16 bits) and its value.");
  m.def("quantize", &quantize, nb::arg("x"), nb::arg("fmt"), nb::arg("scaling"),
        nb::arg("role") = "a", nb::arg("tensor_rows") = 0, nb::arg("threads") = 0,
        "quantise_operand: (codes, scales, gemm scaling, block, saturated, tensor scales).");
  m.def(
      "quantize_scale_shape",
      [](int T, int K, const std::string& scaling, const std::string& role, int tensor_rows) {
        const ScaleShape sh = gemm_scale_shape(scaling_by_name(scaling), role_by_name(role), T, K,
                                               tensor_rows);
        return std::make_pair(sh.rows, sh.cols);
      },
      nb::arg("T"), nb::arg("K"), nb::arg("scaling"), nb::arg("role") = "a",
      nb::arg("tensor_rows") = 0,
      "The shape of quantize()'s scales for a T x K input (sim/scaling/scaling.hpp gemm_scale_shape).");
  m.def(
      "scaling_is_two_level",
      [](const std::string& scaling) {
        return scaling_by_name(scaling).encoding == ScaleEncoding::ue4m3;
      },
      nb::arg("scaling"),
      "Whether quantize() gives a scaling tensor scales too (UE4M3 block scales under an fp32 "
      "tensor scale: nvfp4, mx<Nc>:ue4m3).");
  m.def("quantize_cuda", &quantize_cuda, nb::arg("x"), nb::arg("codes"), nb::arg("fmt"),
        nb::arg("scaling"), nb::arg("role"), nb::arg("tensor_rows"), nb::arg("stream"),
        nb::arg("count_saturated") = true,
        "quantise_resident: codes written in place on x's CUDA device; returns (scales, gemm "
        "scaling, block, saturated, tensor scales), computed on the device; count_saturated "
        "false: saturated 0, not counted, and (stream not 0) no wait for the codes.");
  m.def("quantize_cuda_deferred", &quantize_cuda_deferred, nb::arg("x"), nb::arg("codes"),
        nb::arg("scales"), nb::arg("fmt"), nb::arg("scaling"), nb::arg("role"),
        nb::arg("stream"),
        "quantise_resident_deferred: codes and one level of scales written in place on x's "
        "CUDA device, on `stream` (0: the legacy default one), without waiting for the "
        "device; an element that is not finite makes every scale NaN and is reported by "
        "check_deferred.");
  m.def("transpose_codes_cuda", &transpose_codes_cuda, nb::arg("src"), nb::arg("dst"),
        nb::arg("stream"),
        "run_device_transpose_codes: dst = src^T (uint8, C-contiguous, one CUDA device) on "
        "`stream` (0: the legacy default one), without waiting for the device.");
  m.def(
      "check_deferred",
      [](bool wait) {
        nb::gil_scoped_release release;
        check_deferred_quantisations(wait);
      },
      nb::arg("wait") = false,
      "check_deferred_quantisations: raises ValueError for the first deferred quantisation "
      "whose device found an element that is not finite (wait: all of them, waiting).");
}

}  // namespace fp8sim::py
