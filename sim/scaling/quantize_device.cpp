// quantize_device: the host half of quantise_resident; the device half is
// cuda/engine/quantize_engine.cu.
#include "scaling/quantize_device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <vector>

#include "format/per_format.hpp"
#include "format/rounding.hpp"

namespace fp8sim {

namespace {

// f's distinct nonnegative finite values, ascending (a table's value[]).
std::vector<double> nonnegative_values(const FormatSpec& f) {
  std::vector<double> values;
  for (std::uint32_t c : all_codes(f)) {
    const double v = decode(f, c);
    if (std::isfinite(v) && v >= 0) values.push_back(v);
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

}  // namespace

void index_binades(DeviceEncodeTable& t) {
  int e1 = 0;
  std::frexp(t.value[1], &e1);  // value[1] in [2^(e1-1), 2^e1)
  t.binade0 = e1 - 1 + 1023;
  for (int b = 0; b < kTableBinades; ++b) {
    const double lo = std::ldexp(1.0, t.binade0 - 1023 + b);
    const int first = table_floor(t.value, t.n, lo);
    int count = 0;
    for (int i = 0; i < t.n; ++i) count += t.value[i] >= lo && t.value[i] < 2 * lo;
    int k = 0;  // 2^k slots of a binade hold its values (all 2^m but the top one of ExMy)
    while ((1 << k) < count) ++k;
    bool regular = count > 0;
    for (int i = 0; regular && i < count; ++i)  // (i = 0: value[first] is 2^e itself)
      regular = t.value[first + i] == lo + std::ldexp(lo, -k) * i;
    const int next = first + (1 << k);  // the next binade's first value, or past the top
    regular = regular && (next < t.n ? count == (1 << k) && t.value[next] == 2 * lo
                                     : first + count == t.n);
    t.first[b] = static_cast<unsigned char>(first);
    t.bits[b] = static_cast<unsigned char>(k | (regular ? kBinadeRegular : 0));
  }
}

DeviceEncodeTable device_encode_table(const FormatSpec& f) {
  if (!f.is_signed || total_bits(f) > 8)
    throw std::invalid_argument(fmt::format(
        "quantize on CUDA: format '{}' is {}; elements are signed formats of at most 8 bits",
        f.name, f.is_signed ? fmt::format("{} bits wide", total_bits(f)) : "unsigned"));
  const std::vector<double> values = nonnegative_values(f);
  if (values.size() < 2 || values.size() > std::size(DeviceEncodeTable{}.value))
    throw std::invalid_argument(fmt::format(
        "quantize on CUDA: format '{}' has {} nonnegative values", f.name, values.size()));
  const RoundingSpec rne_sat{Rounding::rne, Overflow::saturate, 32};
  const auto code = [&](double v) {
    return static_cast<unsigned char>(encode(decode(f, encode(v, f, rne_sat)), f));
  };
  DeviceEncodeTable t;
  t.n = static_cast<int>(values.size());
  for (int i = 0; i < t.n; ++i) {
    t.value[i] = values[i];
    t.pos[i] = code(values[i]);
    t.neg[i] = code(-values[i]);
    if (i + 1 < t.n) {
      const double mid = 0.5 * (values[i] + values[i + 1]);
      t.mid_pos[i] = code(mid);
      t.mid_neg[i] = code(-mid);
    }
  }
  // Values between 0 and the smallest one that round to zero keep their sign where it can.
  t.pos[0] = code(values[1] / 4);
  t.neg[0] = code(-values[1] / 4);
  t.zero_pos = code(0.0);
  t.zero_neg = code(-0.0);
  t.over = code(2 * values.back());
  t.over_neg = code(-2 * values.back());
  index_binades(t);
  return t;
}

DeviceRoundTable device_round_table(const FormatSpec& f) {
  if (f.is_signed || total_bits(f) > 8)
    throw std::invalid_argument(fmt::format(
        "quantize on CUDA: scale format '{}' is {}; scales are unsigned formats of at most 8 "
        "bits", f.name, f.is_signed ? "signed" : fmt::format("{} bits wide", total_bits(f))));
  const std::vector<double> values = nonnegative_values(f);
  if (values.size() < 2 || values.front() != 0 ||
      values.size() > std::size(DeviceRoundTable{}.value))
    throw std::invalid_argument(fmt::format(
        "quantize on CUDA: scale format '{}' has {} nonnegative values{}", f.name,
        values.size(), values.empty() || values.front() == 0 ? "" : " and no zero"));
  const RoundingSpec rne_sat{Rounding::rne, Overflow::saturate, 32};
  const auto rounded = [&](double v) { return decode(f, encode(v, f, rne_sat)); };
  DeviceRoundTable t;
  t.n = static_cast<int>(values.size());
  for (int i = 0; i < t.n; ++i) {
    t.value[i] = values[i];
    t.at[i] = rounded(values[i]);
    if (i + 1 < t.n) t.mid[i] = rounded(0.5 * (values[i] + values[i + 1]));
  }
  t.nan = rounded(std::numeric_limits<double>::quiet_NaN());
  t.zero = rounded(0.0);
  t.negative = rounded(-values[1]);
  t.over = rounded(2 * values.back());
  return t;
}

DeviceScaleRule device_scale_rule(const FormatSpec& element) {
  static const FormatSpec ue4m3 = format_by_name("ue4m3");
  DeviceScaleRule r;
  r.fmax = max_finite(element);
  r.emax = max_exponent(element);
  r.tensor_fmax = max_finite(element) * max_finite(ue4m3);  // tensor_scale_for_amax's divisor
  r.ue4m3 = device_round_table(ue4m3);
  return r;
}

namespace {

// device_encode_table and device_scale_rule once per format (pure functions of it).
const DeviceEncodeTable& encode_table_of(const FormatSpec& f) {
  return once_per_format<DeviceEncodeTable>(f, device_encode_table);
}
const DeviceScaleRule& scale_rule_of(const FormatSpec& f) {
  return once_per_format<DeviceScaleRule>(f, device_scale_rule);
}

// The job of quantise_resident (and its deferred form) up to its scales' memory.
DeviceQuantiseJob resident_job(const ScaleGroups& g, const ScalingSpec& s, const FormatSpec& f,
                               int T, int K, const void* x, bool x_double, int tensor_rows,
                               std::uint8_t* codes) {
  DeviceQuantiseJob job;
  job.table = &encode_table_of(f);
  job.x = x;
  job.x_double = x_double;
  job.T = T;
  job.K = K;
  // Without scales, one group over the whole operand still finds the values that are not finite.
  job.groups = g.cols == 0 ? DeviceScaleGroups{std::max(T, 1), K, 1}
                           : DeviceScaleGroups{g.rows_per, g.width, g.cols};
  job.layout = DeviceScaleLayout{T, g.rows_per, g.cols, tensor_rows, s.encoding};
  job.rule = &scale_rule_of(f);
  job.nc = s.nc;
  job.codes = codes;
  return job;
}

}  // namespace

QuantisedOperand quantise_resident(const ScalingSpec& s, OperandRole role, const FormatSpec& f,
                                   int T, int K, const void* x, bool x_double, int tensor_rows,
                                   std::uint8_t* codes, void* stream, int device,
                                   bool count_saturated) {
  const ScaleGroups g = scale_groups(s, role, T, K, tensor_rows);
  DeviceQuantiseJob job = resident_job(g, s, f, T, K, x, x_double, tensor_rows, codes);
  DeviceLaunch launch;
  launch.stream = stream;
  launch.device = device;
  // The scales' layout as scales_from_amax lays them out: two-level (ue4m3) with tensor
  // scales even where there are no block scales (K = 0), all 1 then.
  QuantisedOperand q;
  q.scale_cols = g.cols;
  q.scales.resize(static_cast<std::size_t>(T) * g.cols);
  if (s.encoding == ScaleEncoding::ue4m3) q.tensor_scales.resize(T);
  job.scales = g.cols == 0 ? nullptr : q.scales.data();
  job.tensor_scales = q.tensor_scales.empty() ? nullptr : q.tensor_scales.data();
  job.count = count_saturated;
  const DeviceQuantiseResult r = run_device_quantise(job, launch);
  if (r.first_bad >= 0) {
    const long long bad = r.first_bad;
    double v = 0;
    if (x_double) {
      copy_device(&v, static_cast<const double*>(x) + bad, sizeof v, false, stream, device);
    } else {
      float v32 = 0;
      copy_device(&v32, static_cast<const float*>(x) + bad, sizeof v32, false, stream, device);
      v = v32;
    }
    throw std::invalid_argument(fmt::format("x: value at index {} is {}", bad, v));
  }
  q.saturated = r.saturated;
  return q;
}

void quantise_resident_deferred(const ScalingSpec& s, OperandRole role, const FormatSpec& f,
                                int T, int K, const void* x, bool x_double,
                                std::uint8_t* codes, float* scales, void* stream, int device) {
  check_deferred_quantisations(false);  // an earlier one's report first
  if (s.encoding == ScaleEncoding::ue4m3)
    throw std::invalid_argument(
        "quantize on CUDA, deferred: two levels of scales (block scales under a tensor scale) "
        "are not deferred");
  const ScaleGroups g = scale_groups(s, role, T, K, std::max(T, 1));
  if (g.cols == 0)
    throw std::invalid_argument(
        "quantize on CUDA, deferred: scaling none has no scales to carry a bad element's NaN");
  if (stream == nullptr)
    throw std::invalid_argument("quantize on CUDA, deferred: needs a stream of the caller's");
  if (T == 0) return;  // no rows: no codes, no scales (an empty array may have no address)
  DeviceQuantiseJob job = resident_job(g, s, f, T, K, x, x_double, std::max(T, 1), codes);
  job.scales = scales;
  job.count = false;
  job.deferred = true;
  DeviceLaunch launch;
  launch.stream = stream;
  launch.device = device;
  run_device_quantise(job, launch);
}

}  // namespace fp8sim
