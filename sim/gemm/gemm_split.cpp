// gemm_split: split-K slices reduced in fp32, then the epilogue (see gemm_split.hpp).
#include "gemm/gemm_split.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace fp8sim {

bool epilogue_scales(const GemmSpec& s) {
  return s.order == ScaleOrder::cublaslt &&
         (s.scaling == Scaling::tensor || s.scaling == Scaling::row);
}

namespace {

// K elements per scale for scalings whose scales stay inside the slices (0: none).
int inner_scale_block(const GemmSpec& s) {
  if (s.scaling == Scaling::block) return s.block;
  if (s.scaling == Scaling::mx) return s.mx_block;
  return 0;
}

// Columns [k0, k0 + len) of an operand.
Operand columns(const Operand& op, int k0, int len) {
  Operand o;
  o.rows = op.rows;
  o.cols = len;
  o.format = op.format;
  o.has_special = op.has_special;
  o.value.resize(std::size_t(op.rows) * len);
  o.exponent.resize(o.value.size());
  for (int r = 0; r < op.rows; ++r) {
    const std::size_t from = std::size_t(r) * op.cols + k0, to = std::size_t(r) * len;
    std::copy_n(op.value.begin() + from, len, o.value.begin() + to);
    std::copy_n(op.exponent.begin() + from, len, o.exponent.begin() + to);
  }
  return o;
}

// Columns [c0, c1) of a row-major matrix of `cols` columns.
std::vector<float> scale_columns(std::span<const float> v, std::size_t cols, std::size_t c0,
                                 std::size_t c1) {
  const std::size_t rows = cols == 0 ? 0 : v.size() / cols;
  std::vector<float> out;
  out.reserve(rows * (c1 - c0));
  for (std::size_t r = 0; r < rows; ++r)
    out.insert(out.end(), v.begin() + r * cols + c0, v.begin() + r * cols + c1);
  return out;
}

}  // namespace

int split_slice(const GemmSpec& s, int K) {
  if (s.split_k <= 1) return K;
  const int per = (K + s.split_k - 1) / s.split_k;
  const int align = std::max(1, s.split_k_align);
  const int aligned = (per + align - 1) / align * align;
  return std::min(aligned, K);
}

std::vector<KSliceCut> split_k_slices(const GemmSpec& s, int K, std::span<const float> sa,
                                      std::span<const float> sb) {
  const int slice = split_slice(s, K);
  const int bs = inner_scale_block(s);
  if (bs > 0 && slice < K && slice % bs != 0)
    throw std::invalid_argument(fmt::format(
        "split_k = {}: slices of {} elements cut the scale blocks of {}", s.split_k, slice, bs));
  const bool scaled = slice_spec(s).scaling != Scaling::none;
  std::vector<KSliceCut> cuts;
  for (int k0 = 0; k0 < K; k0 += slice) {
    KSliceCut cut;
    cut.k0 = k0;
    cut.len = std::min(slice, K - k0);
    if (scaled && bs > 0 && cut.len < K) {
      const std::size_t cols = (std::size_t(K) + bs - 1) / bs;
      const std::size_t c0 = std::size_t(k0) / bs, c1 = (std::size_t(k0) + cut.len + bs - 1) / bs;
      cut.sa = scale_columns(sa, cols, c0, c1);
      cut.sb = scale_columns(sb, cols, c0, c1);
    } else if (scaled) {
      cut.sa.assign(sa.begin(), sa.end());
      cut.sb.assign(sb.begin(), sb.end());
    }
    cuts.push_back(std::move(cut));
  }
  return cuts;
}

bool needs_library_gemm(const GemmSpec& s, bool has_bias) {
  return s.split_k > 1 || has_bias || epilogue_scales(s);
}

GemmSpec slice_spec(const GemmSpec& s) {
  GemmSpec in = s;
  in.split_k = 1;
  in.out_type = format_by_name("fp32");
  if (epilogue_scales(s)) in.scaling = Scaling::none;
  return in;
}

void apply_epilogue(const GemmSpec& s, int M, int N, bool batched, std::span<const float> sa,
                    std::span<const float> sb, std::span<const float> bias,
                    std::span<const float> acc, std::span<float> D) {
  const bool scales = epilogue_scales(s);
  const bool per_row = batched || s.scaling == Scaling::row;
  const std::size_t outputs = std::size_t(M) * N;
  for (std::size_t i = 0; i < outputs; ++i) {
    const std::size_t m = i / N, n = batched ? i : i % N;
    float v = acc[i];
    if (scales && s.scaling == Scaling::tensor) {
      const float ab = sa[per_row ? m : 0] * sb[per_row ? n : 0];
      v = v * ab;
    } else if (scales) {
      const float b_scaled = v * sb[n];
      v = b_scaled * sa[m];
    }
    if (!bias.empty()) v = v + bias[n];
    D[i] = to_out_type(s.out_type, v);
  }
}

void library_gemm(const GemmSpec& s, const Operand& A, const Operand& B, bool batched,
                  std::span<const float> C, std::span<const float> sa, std::span<const float> sb,
                  std::span<const float> bias, std::span<float> D, const SliceEngine& engine) {
  const int M = A.rows, K = A.cols, N = batched ? 1 : B.rows;
  if (s.split_k < 1)
    throw std::invalid_argument(fmt::format("split_k = {} must be >= 1", s.split_k));
  if (!bias.empty() && (batched || bias.size() != std::size_t(N)))
    throw std::invalid_argument(batched ? std::string("bias: not taken by batched dot products")
                                        : fmt::format("bias has {} values, expected N = {}",
                                                      bias.size(), N));
  if (B.cols != K)
    throw std::invalid_argument(fmt::format("A is {} x {} but B is {} x {}: K differs", A.rows,
                                            A.cols, B.rows, B.cols));
  const std::size_t outputs = std::size_t(M) * N;
  auto expect = [](const char* what, std::size_t got, std::size_t want) {
    if (got != want)
      throw std::invalid_argument(fmt::format("{} has {} elements, expected {}", what, got, want));
  };
  expect("D", D.size(), outputs);
  if (!C.empty()) expect("C", C.size(), outputs);
  if (epilogue_scales(s)) {  // the epilogue reads them: one per row (or one) of A and of B
    const bool per_row = batched || s.scaling == Scaling::row;
    expect("A scales", sa.size(), per_row ? std::size_t(M) : 1);
    expect("B scales", sb.size(), per_row ? std::size_t(batched ? M : B.rows) : 1);
  }
  const std::span<const float> none;
  reduce_slices(s, M, N, K, batched, sa, sb, bias, D,
                [&](const GemmSpec& in, const KSliceCut& cut, std::span<float> out) {
                  const std::span<const float> c_in = cut.k0 == 0 ? C : none;
                  if (cut.len == K) {
                    engine(in, A, B, c_in, cut.sa, cut.sb, out);
                  } else {
                    engine(in, columns(A, cut.k0, cut.len), columns(B, cut.k0, cut.len), c_in,
                           cut.sa, cut.sb, out);
                  }
                });
}

void reduce_slices(const GemmSpec& s, int M, int N, int K, bool batched,
                   std::span<const float> sa, std::span<const float> sb,
                   std::span<const float> bias, std::span<float> D, const SliceRun& run) {
  const GemmSpec in = slice_spec(s);
  const std::size_t outputs = std::size_t(M) * N;
  std::vector<float> acc(outputs), part(outputs);
  for (const KSliceCut& cut : split_k_slices(s, K, sa, sb)) {
    run(in, cut, cut.k0 == 0 ? std::span<float>(acc) : std::span<float>(part));
    if (cut.k0 > 0)
      for (std::size_t i = 0; i < outputs; ++i) acc[i] = acc[i] + part[i];
  }
  apply_epilogue(s, M, N, batched, sa, sb, bias, acc, D);
}

}  // namespace fp8sim
