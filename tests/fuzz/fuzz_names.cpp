// fuzz_names: libFuzzer target for the name parsers: format names (eXmY and presets), model
// strings (presets and custom:key=value,...), scaling, scale order and rounding names. Any
// text gives a valid spec or std::invalid_argument, never a crash or undefined behaviour.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "accumulator/accumulator.hpp"
#include "format/format.hpp"
#include "gemm/gemm.hpp"
#include "format/rounding.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto attempt = [](auto&& f) {
    try {
      f();
    } catch (const std::invalid_argument&) {
    }
  };
  attempt([&] {
    const fp8sim::FormatSpec f = fp8sim::format_by_name(text);
    fp8sim::validate(f);
    (void)fp8sim::decode(f, 1);
  });
  attempt([&] { fp8sim::validate(fp8sim::accumulator_by_name(text)); });
  attempt([&] { fp8sim::accumulator_by_name("custom:" + text); });
  attempt([&] { fp8sim::parse_scaling(text); });
  attempt([&] { fp8sim::parse_scale_order(text); });
  attempt([&] { fp8sim::parse_rounding(text); });
  return 0;
}
