// fuzz_manifest: libFuzzer target for capture manifests: the input is DIR/manifest.json
// beside small valid .npy files (a.npy, b.npy: 2 x 32 codes; d.npy, c.npy: 2 x 2 float32;
// s.npy: 2 x 1 float32), a symlink out of DIR (out.npy -> ../<outside>.npy, a valid 2 x 32
// array) and one to a folder above (up -> ..), replayed with replay(). Any text gives a
// report or one std::runtime_error line of bounded length without control characters, never
// a crash, a hang or a runaway allocation; a path leaving DIR is never read.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/npy.hpp"
#include "io/replay.hpp"

namespace {

// The folder this process replays in, and the file its escaping link points at; removed at
// exit, and removed first where a dead process of the same pid left them (a pid is reused).
struct Scratch {
  std::filesystem::path dir, outside;
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    std::filesystem::remove(outside, ec);
  }
};

const std::string& capture_dir() {
  static Scratch scratch;
  static const std::string dir = [] {
    const auto d = std::filesystem::temp_directory_path() /
                   ("fp8sim_fuzz_manifest_" + std::to_string(getpid()));
    const auto outside = d.parent_path() / (d.filename().string() + "_outside.npy");
    scratch = {d, outside};
    std::filesystem::remove_all(d);
    std::filesystem::remove(outside);
    std::filesystem::create_directories(d);
    const std::vector<std::uint8_t> codes(64, 0x38);
    const std::vector<float> f(4, 32.0f);
    fp8sim::write_npy((d / "a.npy").string(), "|u1", {2, 32}, codes.data(), codes.size());
    fp8sim::write_npy((d / "b.npy").string(), "|u1", {2, 32}, codes.data(), codes.size());
    fp8sim::write_npy((d / "d.npy").string(), "<f4", {2, 2}, f.data(), 16);
    fp8sim::write_npy((d / "c.npy").string(), "<f4", {2, 2}, f.data(), 16);
    fp8sim::write_npy((d / "s.npy").string(), "<f4", {2, 1}, f.data(), 8);
    fp8sim::write_npy(outside.string(), "|u1", {2, 32}, codes.data(), codes.size());
    std::filesystem::create_symlink(std::filesystem::path("..") / outside.filename(),
                                    d / "out.npy");
    std::filesystem::create_symlink("..", d / "up");
    return d.string();
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& dir = capture_dir();
  std::ofstream(dir + "/manifest.json", std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  try {
    fp8sim::ReplayOptions o;
    o.threads = 1;
    for (const fp8sim::ReplayCase& c : fp8sim::replay(dir, o).cases)
      for (const char ch : fp8sim::format_case(c))  // printed as it is: printable
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) __builtin_trap();
  } catch (const std::runtime_error& e) {
    // One short line: the paths, a quoted case name and value (limits::quoted).
    const std::string msg = e.what();
    if (msg.find('\n') != std::string::npos || msg.size() > 3 * dir.size() + 600) __builtin_trap();
    for (const char c : msg)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) __builtin_trap();
  }
  return 0;
}
