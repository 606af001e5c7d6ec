// test_reliability: hostile inputs and faults against the library's readers, writers and
// thread pool: each must end in a short one-line error (or a correct result), never a crash,
// a hang, a runaway allocation, a wrapped number or a clobbered file.
//
// Memory and thread faults run in a forked child under RLIMIT_AS (a huge allocation or a
// thread stack then fails at once); the child's exit code carries the verdict. Skipped under
// the sanitizers, whose shadow memory does not fit such a limit.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "capture.hpp"
#include "limits.hpp"
#include "npy.hpp"
#include "output_file.hpp"
#include "parallel.hpp"
#include "parse_number.hpp"
#include "replay.hpp"

using namespace fp8sim;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() / fmt::format("fp8sim_rel_{}_{}", getpid(), n++);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// The message `f` throws (std::exception), or "" when it returns.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// Runs f in a child whose address space may grow by at most `extra` bytes; returns the child's
// exit code (f's return value), or -signal when it died.
template <class F>
int in_child_with_memory_limit(std::size_t extra, F&& f) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    std::ifstream statm("/proc/self/statm");
    std::size_t pages = 0;
    statm >> pages;
    const rlim_t cap = pages * sysconf(_SC_PAGESIZE) + extra;
    rlimit r{cap, cap};
    setrlimit(RLIMIT_AS, &r);
    int code = 99;
    try {
      code = f();
    } catch (const std::bad_alloc&) {
      code = 98;
    } catch (...) {
      code = 97;
    }
    std::fflush(stdout);
    _exit(code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// An .npy file with a hand-written header claiming `shape` and `data_bytes` of data.
void write_claim(const fs::path& p, const std::string& shape, std::size_t data_bytes,
                 const std::string& descr = "|u1") {
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape);
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(p, std::ios::binary);
  f << std::string("\x93NUMPY\x01\x00", 8) << char(header.size() & 0xff) << char(header.size() >> 8)
    << header << std::string(data_bytes, '\0');
}

void write_text(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// A capture folder with one valid 1 x 1 x 32 case (d = 0, a = b = 0 codes); `edit` changes
// the manifest before it is written.
template <class Edit>
void make_capture(const fs::path& dir, Edit&& edit) {
  const std::vector<std::uint8_t> z(32, 0);
  const float d = 0.0f;
  write_npy((dir / "a.npy").string(), "|u1", {1, 32}, z.data(), z.size());
  write_npy((dir / "b.npy").string(), "|u1", {1, 32}, z.data(), z.size());
  write_npy((dir / "d.npy").string(), "<f4", {1, 1}, &d, 4);
  json m = {{"fp8sim_capture", 1},
            {"cases", {{{"name", "x"}, {"a_format", "e4m3"}, {"b_format", "e4m3"},
                        {"model", "hopper-wgmma"}, {"M", 1}, {"N", 1}, {"K", 32},
                        {"a", "a.npy"}, {"b", "b.npy"}, {"d", "d.npy"}}}}};
  edit(m);
  write_text(dir / "manifest.json", m.dump());
}

std::string replay_error(const fs::path& dir) {
  return error_of([&] { replay(dir.string()); });
}

// A short one-line message naming `part`.
void check_error(const std::string& e, const std::string& part) {
  INFO("error: " << e.substr(0, 400));
  CHECK(e.find(part) != std::string::npos);
  CHECK(e.find('\n') == std::string::npos);
  CHECK(e.size() < 400);
}

}  // namespace

TEST_CASE("npy: a claimed shape is checked against the file before allocating", "[unit]") {
  if (kSanitized) return;
  TempDir t;
  const fs::path p = t.path / "claim.npy";
  write_claim(p, "(12000000, 256)", 64);  // 2.9 GB claimed, 64 bytes present
  const int code = in_child_with_memory_limit(std::size_t{256} << 20, [&] {
    const std::string e = error_of([&] { read_npy(p.string()); });
    return e.find("data section shorter than the shape needs") != std::string::npos ? 0 : 1;
  });
  CHECK(code == 0);  // 98: std::bad_alloc (allocated first)
  write_claim(p, "(4611686018427387904, 4)", 64);  // 2^64 bytes: would wrap
  check_error(error_of([&] { read_npy(p.string()); }), "fit in 64 bits");
}

TEST_CASE("npy: a shape whose element count wraps to 0 is rejected", "[unit]") {
  TempDir t;
  const fs::path p = t.path / "wrap.npy";
  write_claim(p, "(4294967296, 4294967296)", 0);  // 2^64 elements: wraps to 0
  check_error(error_of([&] { read_npy(p.string()); }), "fit in 64 bits");
  write_claim(p, "(18446744073709551616,)", 0);  // 2^64 itself
  check_error(error_of([&] { read_npy(p.string()); }), "64 bits");
}

TEST_CASE("npy: a FIFO or a folder as input is refused without blocking", "[unit]") {
  TempDir t;
  const fs::path fifo = t.path / "fifo.npy";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  alarm(20);  // a blocking open would hang here: fail the test instead
  check_error(error_of([&] { read_npy(fifo.string()); }), "not a regular file");
  check_error(error_of([&] { read_npy(t.path.string()); }), "folder");
  check_error(error_of([&] { replay(t.path.string() + "/fifo.npy"); }), "manifest.json");
  fs::rename(fifo, t.path / "manifest.json");
  check_error(error_of([&] { replay(t.path.string()); }), "not a regular file");
  alarm(0);
}

TEST_CASE("output files: a user's <path>.tmp is never touched", "[unit]") {
  TempDir t;
  const fs::path out = t.path / "D.npy", user = t.path / "D.npy.tmp";
  write_text(user, "the user's own file");
  const float v[2] = {1, 2};
  write_npy(out.string(), "<f4", {2}, v, 8);
  CHECK(read_npy(out.string()).as<float>() == std::vector<float>{1, 2});
  std::ifstream f(user);
  CHECK(std::string(std::istreambuf_iterator<char>(f), {}) == "the user's own file");
  CHECK(std::distance(fs::directory_iterator(t.path), fs::directory_iterator()) == 2);
}

TEST_CASE("output files: a failed write leaves neither the file nor a temporary", "[unit]") {
  TempDir t;
  const fs::path out = t.path / "D.npy";
  // Over the file size limit (SIGXFSZ ignored): write() fails with EFBIG, as on a full disk.
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit r{4096, 4096};
    setrlimit(RLIMIT_FSIZE, &r);
    const std::vector<float> big(100000, 1.0f);
    const std::string e = error_of([&] { write_npy(out.string(), "<f4", {big.size()}, big.data(), big.size() * 4); });
    const std::string e2 = error_of([&] { write_file((t.path / "r.json").string(), std::string(10000, 'x')); });
    _exit(e.find("D.npy: write failed") != std::string::npos && e2.find("r.json") != std::string::npos ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(fs::is_empty(t.path));  // no D.npy, no D.npy.tmp-*
  // The old file stays as it was when a rewrite fails.
  write_file(out.string(), "old");
  CHECK_THROWS(write_file((t.path / "missing_dir" / "x").string(), "new"));
  std::ifstream f(out);
  CHECK(std::string(std::istreambuf_iterator<char>(f), {}) == "old");
}

TEST_CASE("parallel_for: threads that fail to start leave their pieces to the caller", "[unit]") {
  if (kSanitized) return;
  // 1000 threads of 8 MB stacks cannot start within 64 MB more address space.
  const int code = in_child_with_memory_limit(std::size_t{64} << 20, [] {
    std::vector<int> hit(5000, 0);
    parallel_for(hit.size(), 1000, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) hit[i] += 1;
    });
    for (int h : hit)
      if (h != 1) return 1;
    return 0;
  });
  CHECK(code == 0);  // -6 (SIGABRT): a std::thread destroyed while joinable
  CHECK(resolve_threads(200000) == limits::kMaxThreads);
}

TEST_CASE("manifests: deep nesting, huge values and wrapped numbers are short errors", "[unit]") {
  TempDir t;
  // 100000 levels of nesting: refused while parsing, message short.
  write_text(t.path / "manifest.json", std::string(100000, '[') + std::string(100000, ']'));
  check_error(replay_error(t.path), "kMaxJsonDepth");
  // A 15 MB string where a model name goes, and a long list where a string goes.
  make_capture(t.path, [](json& m) { m["cases"][0]["model"] = std::string(15 << 20, 'x'); });
  check_error(replay_error(t.path), "kMaxStringLength");
  make_capture(t.path, [](json& m) { m["cases"][0]["model"] = json(std::vector<int>(1000000, 7)); });
  check_error(replay_error(t.path), "a list of 1000000 items");
  make_capture(t.path, [](json& m) { m["cases"][0]["kernel"] = std::vector<std::vector<int>>(100000, {1, 2}); });
  check_error(replay_error(t.path), "key 'kernel' must be a string");
  // Version 2^32 + 1 is not 1.
  make_capture(t.path, [](json& m) { m["fp8sim_capture"] = (std::uint64_t{1} << 32) + 1; });
  check_error(replay_error(t.path), "4294967297");
  // u64 max as M: said as it is, not "-1".
  make_capture(t.path, [](json& m) { m["cases"][0]["M"] = ~std::uint64_t{0}; });
  check_error(replay_error(t.path), "M' = 18446744073709551615 is not in 1..1073741824");
  make_capture(t.path, [](json& m) { m["cases"][0]["prefix_k"] = std::vector<int>(limits::kMaxPrefixes + 1, 32); });
  check_error(replay_error(t.path), "kMaxPrefixes");
  // The clean capture replays.
  make_capture(t.path, [](json&) {});
  CHECK(replay_error(t.path).empty());
}

TEST_CASE("captures: NaN or Inf scales are bad input, not a mismatch", "[unit]") {
  TempDir t;
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    make_capture(t.path, [](json& m) {
      m["cases"][0]["scaling"] = "tensor";
      m["cases"][0]["sa"] = "sa.npy";
      m["cases"][0]["sb"] = "sb.npy";
    });
    const float one = 1.0f;
    write_npy((t.path / "sa.npy").string(), "<f4", {1, 1}, &bad, 4);
    write_npy((t.path / "sb.npy").string(), "<f4", {1, 1}, &one, 4);
    check_error(replay_error(t.path), "scales must be finite");
  }
}

TEST_CASE("parse_unsigned: decimal or 0x hex, nothing else", "[unit]") {
  CHECK(parse_unsigned("0", "x", 10) == 0);
  CHECK(parse_unsigned("10", "x", 10) == 10);
  CHECK(parse_unsigned("0x1F", "x", 100) == 31);
  CHECK(parse_unsigned("18446744073709551615", "x", ~std::uint64_t{0}) == ~std::uint64_t{0});
  for (const char* bad : {"", "010", "-1", "+1", " 1", "1 ", "0x", "1e3", "18446744073709551616",
                          "99999999999999999999", "11"})
    CHECK_THROWS_AS(parse_unsigned(bad, "x", 10), std::invalid_argument);
  const std::string e = error_of([] { parse_unsigned("010", "code", 255); });
  CHECK(e.find("no octal") != std::string::npos);
  CHECK(error_of([] { parse_unsigned(std::string(100000, '9'), "seed", 1); }).size() < 200);
}
