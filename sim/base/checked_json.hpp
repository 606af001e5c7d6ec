// checked_json: JSON text parsed with the checks every input file gets (capture manifests,
// cuBLASLt plan tables): nested at most kMaxJsonDepth deep and no key twice in one object,
// both refused while reading (one linear pass, so a deep file is refused before it is built).
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace fp8sim {

// The JSON value of `text`. Throws std::invalid_argument with one line and no file name (the
// caller prefixes its source): "JSON nested more than 64 deep (limits: kMaxJsonDepth = 64)",
// "key \"x\" given twice in one object", "not valid JSON: <nlohmann's message, quoted>".
nlohmann::json parse_checked_json(std::string_view text);

}  // namespace fp8sim
