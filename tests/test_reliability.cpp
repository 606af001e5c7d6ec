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

#include <sys/sysmacros.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "accumulator/accumulator.hpp"
#include "analysis/analyze.hpp"
#include "io/capture.hpp"
#include "base/limits.hpp"
#include "io/npy.hpp"
#include "io/output_file.hpp"
#include "base/parallel.hpp"
#include "base/parse_number.hpp"
#include "io/replay.hpp"
#include "error_of.hpp"

using namespace fp8sim;
using fp8sim::test::error_of;
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

std::string fp8sim_slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

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
  // Out of range is an error, not capped (the one check every front-end's threads goes through).
  for (const int bad : {-1, -1000, limits::kMaxThreads + 1, 200000, 1000000})
    check_error(error_of([&] { resolve_threads(bad); }), "kMaxThreads");
  CHECK(resolve_threads(limits::kMaxThreads) == limits::kMaxThreads);
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

// ---- Reliability, third pass (issue 29) --------------------------------------------------

TEST_CASE("output files: a fatal signal during a write leaves no temporary", "[unit]") {
  // Each signal a terminal, a job control or a file size limit sends, in a child that is
  // writing: the child dies of that signal and neither the output nor a temporary remains.
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGXFSZ}) {
    TempDir t;
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
      for (const int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGXFSZ})
        std::signal(s, SIG_DFL);  // a fresh process (Catch2 catches some of them)
      OutputFile a((t.path / "D.npy").string()), b((t.path / "E.csv").string());
      a.write(std::string(100000, 'x'));
      b.write("partial");
      ::raise(sig);
      _exit(0);  // not reached
    }
    int status = 0;
    waitpid(pid, &status, 0);
    INFO("signal " << sig);
    CHECK(WIFSIGNALED(status));
    CHECK((WIFSIGNALED(status) && WTERMSIG(status) == sig));
    CHECK(fs::is_empty(t.path));
  }
}

TEST_CASE("output files: special files are written through, never replaced", "[unit]") {
  TempDir t;
  // A character device (as mknod makes one in a user's folder), a symlink to it, a FIFO with
  // a reader, and /proc/self/fd/N of a pipe: written in place, still what they were.
  const fs::path dev = t.path / "null", link = t.path / "link_to_null";
  // NOTE: a node made here, never the system's /dev/null (a regression would replace it).
  if (::mknod(dev.c_str(), S_IFCHR | 0666, ::makedev(1, 3)) != 0) {
    WARN("waived: mknod needs root");
    return;
  }
  fs::create_symlink(dev, link);
  for (const fs::path& p : {dev, link}) {
    write_file(p.string(), "through");
    CHECK(fs::is_character_file(p));
  }
  CHECK(fs::is_symlink(link));
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  write_file(fmt::format("/proc/self/fd/{}", fds[1]), "piped");
  char got[8] = {};
  CHECK(::read(fds[0], got, sizeof got) == 5);
  CHECK(std::string(got) == "piped");
  ::close(fds[0]);
  ::close(fds[1]);
  // A FIFO with no reader: one line at once, not a hang; the FIFO stays.
  const fs::path fifo = t.path / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  check_error(error_of([&] { write_file(fifo.string(), "x"); }), "a FIFO with no reader");
  CHECK(fs::is_fifo(fifo));
  // A symlink to a regular file: the target is replaced, the link stays a link.
  write_text(t.path / "target.csv", "old");
  fs::create_symlink(t.path / "target.csv", t.path / "alias.csv");
  write_file((t.path / "alias.csv").string(), "new");
  CHECK(fs::is_symlink(t.path / "alias.csv"));
  CHECK(fp8sim_slurp(t.path / "target.csv") == "new");
  // Refused with one line: a folder, a dangling symlink.
  fs::create_directories(t.path / "folder");
  check_error(error_of([&] { write_file((t.path / "folder").string(), "x"); }), "is a folder");
  fs::create_symlink(t.path / "missing", t.path / "dangling");
  check_error(error_of([&] { write_file((t.path / "dangling").string(), "x"); }),
              "symlink whose target does not exist");
  CHECK(fs::is_symlink(t.path / "dangling"));
  // And no temporary anywhere.
  for (const auto& e : fs::directory_iterator(t.path))
    CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);
}

TEST_CASE("output files: a set appears whole or not at all", "[unit]") {
  TempDir t;
  const std::string a = (t.path / "a.csv").string(), b = (t.path / "b.csv").string(),
                    c = (t.path / "c.json").string();
  for (const auto& p : {a, b, c}) write_text(p, "old");
  // The last target is a folder: refused before anything is written; the others stay old.
  fs::remove(c);
  fs::create_directories(c);
  check_error(error_of([&] { write_files({{a, "new"}, {b, "new"}, {c, "new"}}); }), "is a folder");
  CHECK(fp8sim_slurp(a) == "old");
  CHECK(fp8sim_slurp(b) == "old");
  // A write failing on the last file (a file size limit): none of the set is renamed.
  fs::remove_all(c);
  write_text(c, "old");
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit r{4096, 4096};
    setrlimit(RLIMIT_FSIZE, &r);
    const std::string e =
        error_of([&] { write_files({{a, "new"}, {b, "new"}, {c, std::string(10000, 'x')}}); });
    _exit(e.find("c.json: write failed") != std::string::npos ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  for (const auto& p : {a, b, c}) CHECK(fp8sim_slurp(p) == "old");
  CHECK(std::distance(fs::directory_iterator(t.path), fs::directory_iterator()) == 3);
  write_files({{a, "new"}, {b, "new"}, {c, "new"}});
  for (const auto& p : {a, b, c}) CHECK(fp8sim_slurp(p) == "new");
}

TEST_CASE("key=value specs and JSON objects refuse a key given twice", "[unit]") {
  // Custom models: every key twice, out/outfmt together, and switches other than 0/1.
  for (const char* bad :
       {"custom:group=32,group=16", "custom:frac=13,frac=exact", "custom:out=14,outfmt=e8m13",
        "custom:cut=rz,cut=rne", "custom:c=join,c=join", "custom:block=32,block=32",
        "custom:scale=ue8m0:32,scale=none", "custom:zero=none,zero=-10",
        "custom:interleave=1,interleave=1"})
    check_error(error_of([&] { accumulator_by_name(bad); }), "given twice");
  for (const char* bad : {"custom:interleave=2", "custom:renorm=7", "custom:signedzero=01",
                          "custom:overflow=", "custom:dropfar=10"})
    check_error(error_of([&] { accumulator_by_name(bad); }), "not 0 or 1");
  CHECK(error_of([] { accumulator_by_name("custom:group=16,frac=13,renorm=1"); }).empty());
  // .npy headers.
  TempDir t;
  for (const char* header :
       {"{'descr': '|u1', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '|u1', 'fortran_order': False, 'fortran_order': True, 'shape': (2,), }",
        "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), 'shape': (1,), }"}) {
    std::string h = header;
    h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
    h += '\n';
    write_text(t.path / "dup.npy", std::string("\x93NUMPY\x01\x00", 8) + char(h.size() & 0xff) +
                                       char(h.size() >> 8) + h + std::string(8, '\0'));
    check_error(error_of([&] { read_npy((t.path / "dup.npy").string()); }), "given twice");
  }
  // Manifests: at the top, in a case, nested; and two cases of one name.
  for (const char* text :
       {R"({"fp8sim_capture": 1, "fp8sim_capture": 1, "cases": []})",
        R"({"fp8sim_capture": 1, "cases": [{"name": "x", "a": "a.npy", "a": "b.npy"}]})",
        R"({"fp8sim_capture": 1, "extra": {"k": 1, "k": 2}, "cases": []})"}) {
    write_text(t.path / "manifest.json", text);
    check_error(replay_error(t.path), "given twice");
  }
  make_capture(t.path, [](json& m) { m["cases"].push_back(m["cases"][0]); });
  check_error(replay_error(t.path), "case name 'x' given twice");
}

TEST_CASE("manifests: case paths stay inside the capture folder", "[unit]") {
  TempDir t;
  fs::create_directories(t.path / "cap" / "sub");
  make_capture(t.path / "cap", [](json&) {});
  fs::copy_file(t.path / "cap" / "a.npy", t.path / "outside.npy");
  fs::create_symlink(t.path / "outside.npy", t.path / "cap" / "escape.npy");
  fs::create_symlink(t.path, t.path / "cap" / "up");
  fs::create_symlink(t.path / "cap" / "a.npy", t.path / "cap" / "sub" / "inside.npy");
  // Each a member of the class: '..' anywhere, absolute, NUL or a control character, empty,
  // a symlink (file or folder) resolving outside.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"../outside.npy", "'..'"},
      {"sub/../../outside.npy", "'..'"},
      {"sub/..", "'..'"},
      {"..", "'..'"},
      {(t.path / "outside.npy").string(), "absolute"},
      {"/etc/passwd", "absolute"},
      {std::string("a.npy\0x", 7), "control character"},
      {"a\x1b[2J.npy", "control character"},
      {"a\n.npy", "control character"},
      {"", "empty"},
      {"escape.npy", "outside the capture folder"},
      {"up/outside.npy", "outside the capture folder"},
  };
  for (const auto& item : bad)  // (no structured bindings: clang 14 cannot capture them)
    for (const char* key : {"a", "b", "d"}) {
      const std::string& path = item.first;
      const std::string& why = item.second;
      make_capture(t.path / "cap", [&](json& m) { m["cases"][0][key] = path; });
      INFO(key << " = " << path);
      const std::string e = replay_error(t.path / "cap");
      check_error(e, why);
      CHECK(e.find('\x1b') == std::string::npos);
    }
  // Inside is fine, through a symlink too, and "./".
  for (const char* ok : {"sub/inside.npy", "./a.npy", "sub/./inside.npy"}) {
    make_capture(t.path / "cap", [&](json& m) { m["cases"][0]["a"] = ok; });
    INFO(ok);
    CHECK(replay_error(t.path / "cap").empty());
  }
}

TEST_CASE("manifests: every case checked before any array is read", "[unit]") {
  if (kSanitized) return;
  TempDir t;
  // Case 0 names a 1 GiB array (sparse: costs no disk) that a 256 MB address space cannot
  // hold; the last case has a bad format / model / shape / file. The error must be the last
  // case's, found before case 0's array is read.
  const std::size_t K = std::size_t{1} << 30;
  {
    std::ofstream f(t.path / "big.npy", std::ios::binary);
    std::string h =
        fmt::format("{{'descr': '|u1', 'fortran_order': False, 'shape': (1, {}), }}", K);
    h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
    h += '\n';
    f << std::string("\x93NUMPY\x01\x00", 8) << char(h.size() & 0xff) << char(h.size() >> 8) << h;
  }
  fs::resize_file(t.path / "big.npy", fs::file_size(t.path / "big.npy") + K);
  const std::vector<std::pair<std::function<void(json&)>, std::string>> last = {
      {[](json& c) { c["a_format"] = "bogus"; }, "bogus"},
      {[](json& c) { c["model"] = "no-such-model"; }, "no-such-model"},
      {[](json& c) { c["promote_every"] = 48; }, "promote_every = 48"},
      {[](json& c) { c["d"] = "missing.npy"; }, "missing.npy"},
      {[](json& c) { c["d"] = "a.npy"; }, "expected dtype <f4"},
      {[](json& c) { c["a"] = "../a.npy"; }, "'..'"},
  };
  for (const auto& item : last) {
    const auto& edit = item.first;
    const std::string& needle = item.second;
    make_capture(t.path, [&](json& m) {
      json big = m["cases"][0];
      big["name"] = "big";
      big["K"] = K;
      big["a"] = big["b"] = "big.npy";
      json bad = m["cases"][0];
      bad["name"] = "bad";
      edit(bad);
      m["cases"] = {big, m["cases"][0], bad};
    });
    const int code = in_child_with_memory_limit(std::size_t{256} << 20, [&] {
      const std::string e = replay_error(t.path);
      const bool named = e.find(needle) != std::string::npos;
      return named && e.find("case 'bad'") != std::string::npos ? 0 : 1;
    });
    INFO(needle);
    CHECK(code == 0);
  }
}

TEST_CASE("manifests: parsing is linear in the number of cases", "[unit]") {
  TempDir t;
  // 350,000 empty cases (1 MB): refused as too many at once (nlohmann's parse callback made
  // this quadratic: 60 s and more).
  std::string text = R"({"fp8sim_capture": 1, "cases": [)";
  for (int i = 0; i < 350000; ++i) text += i ? ",{}" : "{}";
  text += "]}";
  write_text(t.path / "manifest.json", text);
  const auto t0 = std::chrono::steady_clock::now();
  check_error(replay_error(t.path), "kMaxCases");
  // 65,536 cases (the limit), each a JSON object: checked in one pass.
  text = R"({"fp8sim_capture": 1, "cases": [)";
  for (int i = 0; i < 65536; ++i) text += fmt::format("{}{{\"name\": \"c{}\"}}", i ? "," : "", i);
  text += "]}";
  write_text(t.path / "manifest.json", text);
  check_error(replay_error(t.path), "missing key 'a_format'");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(s < 20);  // about 0.5 s; quadratic parsing took minutes
}

TEST_CASE("npy headers are checked before the data is read", "[unit]") {
  if (kSanitized) return;
  TempDir t;
  // A sparse 2 GiB float32 file and a 2 GiB uint8 one: every check that the header alone
  // decides must fail before the data is read, within 256 MB of address space.
  const std::size_t big = std::size_t{1} << 31;
  const auto sparse = [&](const char* name, const char* descr, const std::string& shape,
                          std::size_t bytes) {
    std::ofstream f(t.path / name, std::ios::binary);
    std::string h = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                descr, shape);
    h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
    h += '\n';
    f << std::string("\x93NUMPY\x01\x00", 8) << char(h.size() & 0xff) << char(h.size() >> 8) << h;
    f.close();
    fs::resize_file(t.path / name, fs::file_size(t.path / name) + bytes);
  };
  sparse("f4.npy", "<f4", fmt::format("(2, {})", big / 8), big);
  sparse("u1.npy", "|u1", fmt::format("(2, {})", big / 2), big);
  const std::string f4 = (t.path / "f4.npy").string(), u1 = (t.path / "u1.npy").string();
  const std::vector<std::pair<std::function<void()>, std::string>> cases = {
      {[&] { read_npy_checked(f4, "|u1", {0, 0}); }, "expected dtype |u1"},
      {[&] { read_npy_checked(u1, "|u1", {0, 5}); }, "expected shape"},
      {[&] { read_npy_checked(u1, "|u1", {0}); }, "expected shape"},
      {[&] { read_input_npy(u1, InputDtype::automatic); }, "not float32"},
      {[&] { read_input_npy(f4, InputDtype::bf16); }, "not bf16"},
      {[&] { read_input_pair(f4, f4, InputDtype::f16); }, "not f16"},
  };
  for (const auto& item : cases) {
    const auto& f = item.first;
    const std::string& needle = item.second;
    const int code = in_child_with_memory_limit(std::size_t{256} << 20, [&] {
      const std::string e = error_of(f);
      return e.find(needle) != std::string::npos ? 0 : 1;
    });
    INFO(needle);
    CHECK(code == 0);
  }
}
