// checked_json: nlohmann's DOM builder behind a SAX handler that checks depth and keys.
#include "base/checked_json.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/limits.hpp"

namespace fp8sim {
namespace {

using nlohmann::json;

// Refuses, as it reads, JSON nested more than kMaxJsonDepth deep and a key given twice in
// one object (the DOM would keep the last). (nlohmann's parse callback is quadratic in an
// array's length: each object's end scans its parent for discarded values.)
class CheckedSax {
 public:
  struct TooDeep {};
  struct DuplicateKey {
    std::string key;
  };
  explicit CheckedSax(json& j) : dom_(j, /*allow_exceptions=*/true) {}
  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const std::string& s) {
    return dom_.number_float(v, s);
  }
  bool string(std::string& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) {
    enter();
    keys_.emplace_back();
    return dom_.start_object(n);
  }
  bool key(std::string& k) {
    if (!keys_.back().insert(k).second) throw DuplicateKey{k};
    return dom_.key(k);
  }
  bool end_object() {
    --depth_;
    keys_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    enter();
    return dom_.start_array(n);
  }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  template <class Exception>
  bool parse_error(std::size_t pos, const std::string& token, const Exception& e) {
    return dom_.parse_error(pos, token, e);
  }

 private:
  void enter() {
    if (++depth_ > limits::kMaxJsonDepth) throw TooDeep{};
  }
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::vector<std::unordered_set<std::string>> keys_;
  int depth_ = 0;
};

}  // namespace

json parse_checked_json(std::string_view text) {
  json j;
  CheckedSax sax(j);
  try {
    json::sax_parse(text, &sax);
  } catch (const CheckedSax::TooDeep&) {
    throw std::invalid_argument(fmt::format("JSON nested more than {} deep {}",
                                            limits::kMaxJsonDepth,
                                            limits::named("kMaxJsonDepth", limits::kMaxJsonDepth)));
  } catch (const CheckedSax::DuplicateKey& d) {
    throw std::invalid_argument(
        fmt::format("key \"{}\" given twice in one object", limits::quoted(d.key)));
  } catch (const json::exception& e) {
    // nlohmann's message quotes the last bytes read: at most a few hundred characters.
    throw std::invalid_argument(fmt::format(
        "not valid JSON: {}", limits::quoted(e.what(), 4 * limits::kMaxQuotedValue)));
  }
  return j;
}

}  // namespace fp8sim
