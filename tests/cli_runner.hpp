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

// Runs `fp8sim <args>` inside workdir() (args are passed to the shell as written).
inline Run run_cli(const std::string& args) {
  const char* cli = std::getenv("FP8SIM_CLI");
  REQUIRE(cli != nullptr);
  const auto out = workdir() / "stdout.txt", err = workdir() / "stderr.txt";
  const std::string cmd = fmt::format("cd '{}' && '{}' {} > '{}' 2> '{}'", workdir().string(), cli,
                                      args, out.string(), err.string());
  const int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, slurp(out), slurp(err)};
}

}  // namespace fp8sim::test
