// cli_runner: runs the real fp8sim binary (FP8SIM_CLI) for the CLI contract tests.
#pragma once

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace fp8sim::test {

struct Run {
  int status;            // exit code (-1 if the process did not exit normally)
  std::string out, err;  // everything it wrote to stdout and stderr
};

// A scratch folder for this test process: <tmp>/fp8sim-<tag>-<pid>.
inline const std::filesystem::path& workdir(const std::string& tag = "cli") {
  static const std::filesystem::path dir = [&] {
    auto d = std::filesystem::temp_directory_path() / fmt::format("fp8sim-{}-{}", tag, ::getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs `<program> <args>` inside workdir() (args are passed to the shell as written);
// `before` is shell text put in front of the program in its own subshell, e.g.
// "ulimit -f 8; exec " or "exec timeout 60 ".
inline Run run_program(const std::string& program, const std::string& args,
                       const std::string& before = "") {
  const auto out = workdir() / "stdout.txt", err = workdir() / "stderr.txt";
  const std::string cmd = fmt::format("cd '{}' && ({}'{}' {}) > '{}' 2> '{}'", workdir().string(),
                                      before, program, args, out.string(), err.string());
  const int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, slurp(out), slurp(err)};
}

// Runs `fp8sim <args>` (FP8SIM_CLI) inside workdir().
inline Run run_cli(const std::string& args, const std::string& before = "") {
  const char* cli = std::getenv("FP8SIM_CLI");
  REQUIRE(cli != nullptr);
  return run_program(cli, args, before);
}

}  // namespace fp8sim::test
