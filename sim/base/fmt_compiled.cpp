// fmt_compiled: fmt's implementation, compiled once into fp8sim (target fp8sim_fmt) instead of
// linked from libfmt.so or compiled header-only into every file that prints. One mode of fmt
// for every build: the Python module and the CLI carry no shared library of their own, and
// no file pays for fmt's code again (header-only fmt cost each printing file about 2 s).
// fmt's headers declare what the library provides: the functions defined in format-inl.h
// (non-inline when FMT_HEADER_ONLY is not set) and the templates below, which format.h
// declares for char (extern template) and for float and double (dragonbox::to_decimal);
// a missing one is an undefined symbol at link time, never a silent difference.
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {
template auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template locale_ref::locale_ref(const std::locale& loc);
template auto locale_ref::get<std::locale>() const -> std::locale;
template auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl(locale_ref) -> char;
}  // namespace detail
FMT_END_NAMESPACE
