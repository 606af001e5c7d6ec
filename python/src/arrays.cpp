// arrays: checked views of caller arrays and NumPy results owning their buffers.
#include "arrays.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace fp8sim::py {

std::size_t View::size() const {
  std::size_t n = 1;
  for (std::size_t e : shape) n *= e;
  return n;
}

namespace {
std::string descr_of(nb::dlpack::dtype t) {
  const int bytes = t.bits / 8;
  const char order = bytes == 1 ? '|' : '<';
  switch (static_cast<nb::dlpack::dtype_code>(t.code)) {
    case nb::dlpack::dtype_code::Int: return fmt::format("{}i{}", order, bytes);
    case nb::dlpack::dtype_code::UInt: return fmt::format("{}u{}", order, bytes);
    case nb::dlpack::dtype_code::Float: return fmt::format("{}f{}", order, bytes);
    case nb::dlpack::dtype_code::Bool: return "|b1";
    default: return fmt::format("dlpack-code{}-bits{}", int(t.code), int(t.bits));
  }
}

template <class Array>
View checked_view(const Array& a, std::string_view name, std::string_view descr, int ndim) {
  View v;
  v.descr = descr_of(a.dtype());
  for (std::size_t i = 0; i < a.ndim(); ++i) v.shape.push_back(a.shape(i));
  v.data = a.data();
  if (!descr.empty() && v.descr != descr)
    throw std::runtime_error(fmt::format("{}: expected dtype {}, got {}", name, descr, v.descr));
  if (ndim >= 0 && int(a.ndim()) != ndim)
    throw std::runtime_error(fmt::format("{}: expected {} dimensions, got {}", name, ndim, a.ndim()));
  if (!c_contiguous(a)) throw std::runtime_error(fmt::format("{}: not C-contiguous", name));
  return v;
}

}  // namespace

View view(const AnyArray& a, std::string_view name, std::string_view descr, int ndim) {
  return checked_view(a, name, descr, ndim);
}

View view(const CudaArray& a, std::string_view name, std::string_view descr, int ndim) {
  return checked_view(a, name, descr, ndim);
}

nb::object codes_to_numpy(std::vector<std::uint32_t>&& codes, int bits,
                          std::vector<std::size_t> shape) {
  if (bits > 16) return nb::cast(to_numpy(std::move(codes), std::move(shape)));
  if (bits > 8) {
    std::vector<std::uint16_t> c(codes.begin(), codes.end());
    return nb::cast(to_numpy(std::move(c), std::move(shape)));
  }
  std::vector<std::uint8_t> c(codes.begin(), codes.end());
  return nb::cast(to_numpy(std::move(c), std::move(shape)));
}

}  // namespace fp8sim::py
