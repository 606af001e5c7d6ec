// per_format: a value computed once per format and kept for the process (a pure function of
// the format: code tables, encode tables), shared by the threads that ask for it.
#pragma once

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "format/format.hpp"

namespace fp8sim {

// make(f)'s result for f, computed on the first call with an equal format (a failed make
// leaves nothing behind). Each call site (each Make type) keeps its own values.
template <class T, class Make>
const T& once_per_format(const FormatSpec& f, Make make) {
  static std::mutex mutex;
  static std::vector<std::pair<FormatSpec, std::unique_ptr<const T>>> values;
  const std::lock_guard<std::mutex> lock(mutex);
  for (const auto& [format, value] : values)
    if (format == f) return *value;
  auto value = std::make_unique<const T>(make(f));
  values.emplace_back(f, std::move(value));
  return *values.back().second;
}

}  // namespace fp8sim
