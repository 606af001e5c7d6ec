// error_of: the message of the exception of type E (std::exception unless given) that f
// throws, "" where f returns; another exception passes through.
#pragma once

#include <exception>
#include <string>

namespace fp8sim::test {

template <class E = std::exception, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

}  // namespace fp8sim::test
