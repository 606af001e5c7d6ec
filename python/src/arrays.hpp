// arrays: NumPy / DLPack arrays crossing into the core without copies, and results going back.
#pragma once

#include <fmt/format.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace fp8sim::py {

namespace nb = nanobind;

// Any CPU array, read-only, as the caller passed it (no conversion, no copy).
using AnyArray = nb::ndarray<nb::ro, nb::device::cpu>;
// Any CUDA device array (torch CUDA tensors, through DLPack), read-only / written in place.
using CudaArray = nb::ndarray<nb::ro, nb::device::cuda>;
using CudaOut = nb::ndarray<float, nb::device::cuda>;

// The caller's stream as the engines take it. torch names its legacy default stream 0, which
// the engines read as no stream given (they then wait for their kernels before returning);
// CUDA's handle for that same stream is cudaStreamLegacy, 0x1, so that a call with nothing to
// report returns without waiting there too, as on any other stream of the caller's.
inline void* caller_stream(std::uintptr_t stream) {
  return reinterpret_cast<void*>(stream == 0 ? std::uintptr_t{1} : stream);
}

// Whether `a` is C-contiguous as NumPy and torch say it: each side's stride the product of the
// sides after it, where that side is longer than 1 (a side of 1 may have any stride).
template <class Array>
bool c_contiguous(const Array& a) {
  std::int64_t expect = 1;
  for (std::size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) > 1 && a.stride(i) != expect) return false;
    expect *= static_cast<std::int64_t>(a.shape(i));
  }
  return true;
}

// Argument `name` as a C-contiguous rows x cols array of `what`, or one line (an Error) saying
// so.
template <class Error = std::invalid_argument, class Array>
void check_matrix(const Array& a, const char* name, std::size_t rows, std::size_t cols,
                  const char* what) {
  if (a.ndim() != 2 || a.shape(0) != rows || a.shape(1) != cols || !c_contiguous(a))
    throw Error(fmt::format("{}: expected a C-contiguous ({}, {}) {} array", name, rows, cols,
                            what));
}

// Argument `name` (on CUDA device `id`) beside `other` (on `device`), or one line (an Error)
// naming both.
template <class Error = std::invalid_argument>
void check_device(const char* name, int id, const char* other, int device) {
  if (id != device)
    throw Error(fmt::format("{}: on CUDA device {}, {} on device {}", name, id, other, device));
}

// A checked view of an argument: its .npy dtype spelling ("|u1", "<f4", ...), shape and data.
struct View {
  std::string descr;
  std::vector<std::size_t> shape;
  const void* data = nullptr;
  std::size_t size() const;
};

// Views `a` (argument `name`); throws std::runtime_error("<name>: ...") when it is not
// C-contiguous, or when `descr` is not empty and differs ("<name>: expected dtype |u1, got
// <f4"), or when `ndim` >= 0 and the rank differs.
View view(const AnyArray& a, std::string_view name, std::string_view descr = "", int ndim = -1);
View view(const CudaArray& a, std::string_view name, std::string_view descr = "", int ndim = -1);

// A NumPy array that owns `v` (moved, no copy) with the given shape.
template <class T>
nb::ndarray<nb::numpy, T> to_numpy(std::vector<T>&& v, std::vector<std::size_t> shape) {
  auto* owned = new std::vector<T>(std::move(v));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(owned->data(), shape.size(), shape.data(), owner);
}

// Codes of a format as the smallest unsigned type that holds them (uint8/16/32).
nb::object codes_to_numpy(std::vector<std::uint32_t>&& codes, int bits,
                          std::vector<std::size_t> shape);

}  // namespace fp8sim::py
