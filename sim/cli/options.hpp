// options: integer command-line options read strictly (parse_number.hpp), for every front-end.
//
// CLI11 alone accepts "" as 0, -1 for a count and clamps 20-digit seeds; an option added
// here takes a decimal or 0x hex integer in lo..hi and nothing else, and reports anything
// else as a CLI11 parse error naming the option (exit 2).
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/limits.hpp"
#include "base/parse_number.hpp"
#include "io/std_streams.hpp"

namespace fp8sim::cli {

template <class T>
CLI::Option* add_integer_option(CLI::App* app, const std::string& name, T& target,
                                const std::string& description, std::uint64_t lo,
                                std::uint64_t hi) {
  const std::string flag = name.substr(0, name.find(','));
  auto* opt = app->add_option_function<std::string>(
      name,
      [&target, flag, lo, hi](const std::string& text) {
        try {
          const std::uint64_t v = parse_unsigned(text, "value", hi);
          if (v < lo)
            throw std::invalid_argument(fmt::format("bad value '{}': must be >= {}", text, lo));
          target = static_cast<T>(v);
        } catch (const std::invalid_argument& e) {
          throw CLI::ValidationError(flag, e.what());
        }
      },
      description);
  opt->type_name("INT")->default_str(std::to_string(target));
  return opt;
}

// A comma list of such integers (e.g. analyze's --promote-every 0,128), each read strictly
// (an empty item, as in "128,,0" or "128,", is an error: CLI11's own splitting drops it);
// the option may be repeated.
template <class T>
CLI::Option* add_integer_list_option(CLI::App* app, const std::string& name,
                                     std::vector<T>& target, const std::string& description,
                                     std::uint64_t lo, std::uint64_t hi) {
  const std::string flag = name.substr(0, name.find(','));
  auto* opt = app->add_option_function<std::vector<std::string>>(
      name,
      [&target, flag, lo, hi](const std::vector<std::string>& texts) {
        target.clear();
        std::vector<std::string> items;
        for (const std::string& list : texts) {
          std::size_t start = 0;
          while (true) {
            const std::size_t comma = std::min(list.find(',', start), list.size());
            items.push_back(list.substr(start, comma - start));
            if (comma == list.size()) break;
            start = comma + 1;
          }
        }
        for (const std::string& text : items) {
          try {
            const std::uint64_t v = parse_unsigned(text, "value", hi);
            if (v < lo)
              throw std::invalid_argument(fmt::format("bad value '{}': must be >= {}", text, lo));
            target.push_back(static_cast<T>(v));
          } catch (const std::invalid_argument& e) {
            throw CLI::ValidationError(flag, e.what());
          }
        }
      },
      description);
  opt->type_name("INT,...");
  return opt;
}

// A comma list of names (e.g. analyze's --recipes a,b), split strictly: an empty item, as in
// "a,,b", "a," or "", is an error naming the option (CLI11's own splitting drops it, so
// --recipes '' would mean "not given"); the option may be repeated.
inline CLI::Option* add_list_option(CLI::App* app, const std::string& name,
                                    std::vector<std::string>& target,
                                    const std::string& description) {
  const std::string flag = name.substr(0, name.find(','));
  auto* opt = app->add_option_function<std::vector<std::string>>(
      name,
      [&target, flag](const std::vector<std::string>& texts) {
        target.clear();
        for (const std::string& list : texts) {
          std::size_t start = 0;
          while (true) {
            const std::size_t comma = std::min(list.find(',', start), list.size());
            if (comma == start)
              throw CLI::ValidationError(
                  flag, fmt::format("empty item in '{}' (a comma at the start, the end or "
                                    "twice, or an empty value)", printable(list)));
            target.push_back(list.substr(start, comma - start));
            if (comma == list.size()) break;
            start = comma + 1;
          }
        }
      },
      description);
  opt->type_name("NAME,...");
  return opt;
}

// --device: cpu | cuda, read by parse_device() (device.hpp) when the command runs.
inline CLI::Option* add_device_option(CLI::App* app, std::string& target) {
  return app->add_option("--device", target, "cpu|cuda: where the GEMM engine runs (same bits)")
      ->capture_default_str();
}

// --threads: 0 (every hardware thread) up to limits::kMaxThreads.
template <class T>
CLI::Option* add_threads_option(CLI::App* app, T& target) {
  return add_integer_option(app, "--threads", target,
                            fmt::format("Threads (0 = all, at most {}); results never depend on it",
                                        limits::kMaxThreads),
                            0, limits::kMaxThreads);
}

// The options given on the command line, by their long names as fields ("--split-k-align"
// -> "split_k_align"): GemmOptions::given.
inline std::vector<std::string> given_options(const CLI::App& cmd) {
  std::vector<std::string> out;
  for (const CLI::Option* opt : cmd.get_options())
    if (opt->count() > 0 && !opt->get_lnames().empty()) {
      std::string name = opt->get_lnames().front();
      std::replace(name.begin(), name.end(), '-', '_');
      out.push_back(name);
    }
  return out;
}

// Parses the command line: -1 when the program goes on, else the exit code (0 after --help,
// 2 after "<program>: error: <problem>" for bad flags or values).
// An empty value is never "not given": every option that takes a value refuses "" (a path,
// a name), in every subcommand; the integer options above refuse it themselves, naming it a
// bad value.
inline void refuse_empty_values(CLI::App& app) {
  const CLI::Validator non_empty(
      [](std::string& text) { return text.empty() ? std::string("empty value") : std::string(); },
      "");
  for (CLI::Option* opt : app.get_options())
    if (opt->get_type_size_max() > 0 && opt->get_type_name().rfind("INT", 0) != 0)
      opt->check(non_empty);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    refuse_empty_values(*sub);
}

inline int parse_command_line(CLI::App& app, int argc, char** argv, const std::string& program) {
  refuse_empty_values(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {  // --version: the text on stdout, exit 0
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_stderr(fmt::format("{}: error: {}\n", program, printable(e.what())));
    return 2;
  }
  return -1;
}

}  // namespace fp8sim::cli
