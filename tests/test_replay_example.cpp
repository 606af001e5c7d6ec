// test_replay_example: the capture example of docs/hardware.md (tests/data/replay/example_capture.py)
// runs as written, with `fp8sim gemm` as the user's kernel, and its capture replays clean.
// Waived when FP8SIM_PYTHON lacks numpy or ml_dtypes.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <sys/wait.h>

namespace fs = std::filesystem;

namespace {

int run(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("the capture example writes a capture that replays clean", "[unit]") {
  const char* python = std::getenv("FP8SIM_PYTHON");
  const char* cli = std::getenv("FP8SIM_CLI");
  const char* data = std::getenv("FP8SIM_TEST_DATA");
  REQUIRE(cli != nullptr);
  REQUIRE(data != nullptr);
  if (python == nullptr || *python == '\0' ||
      run(fmt::format("'{}' -c 'import numpy, ml_dtypes' >/dev/null 2>&1", python)) != 0) {
    fmt::print("waived: FP8SIM_PYTHON with numpy and ml_dtypes not available\n");
    std::exit(77);
  }
  const fs::path dir = fs::temp_directory_path() / fmt::format("fp8sim_example_{}", getpid());
  fs::remove_all(dir);
  const std::string script = (fs::path(data) / "replay" / "example_capture.py").string();
  CHECK(run(fmt::format("'{}' '{}' '{}' '{}'", python, script, dir.string(), cli)) == 0);
  const std::string log = (dir / "replay.txt").string();
  const int code = run(fmt::format("'{}' replay --captures '{}' > '{}' 2>&1", cli, dir.string(), log));
  const std::string cat = fmt::format("cat '{}'", log);
  INFO("replay exit " << code);
  std::system(cat.c_str());
  CHECK(code == 0);
  CHECK(run(fmt::format("grep -q '^my_kernel_random_normal: 1024/1024 match$' '{}'", log)) == 0);
  // The same capture against another model must be caught.
  CHECK(run(fmt::format("'{}' replay --captures '{}' --model ada-fp8 > /dev/null 2>&1", cli,
                        dir.string())) == 1);
  fs::remove_all(dir);
}
