// test_cli_options_reliability: options and inputs the CLI must refuse rather than read
// another way (issue 39): a preset meeting a loose option (W1), options that apply to nothing
// (W2), empty values (W3), custom: model integers (W4), NaN scale codes (W7), .npy headers
// with bytes after their dict (W11), and errors with stderr closed or full (C3). Each class
// is a table of its members; each member must give exit 2 and one line naming it.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "cli_runner.hpp"
#include "io/npy.hpp"

using namespace fp8sim;
using fp8sim::test::Run;
using fp8sim::test::run_cli;
using fp8sim::test::workdir;
namespace fs = std::filesystem;

namespace {

// Exit 2, nothing on stdout, one line on stderr holding `needle`.
void bad(const std::string& args, const std::string& needle) {
  const Run r = run_cli(args);
  INFO("fp8sim " << args << " => rc " << r.status << " stderr: " << r.err.substr(0, 400));
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find("error: ") != std::string::npos);
  CHECK(r.err.find(needle) != std::string::npos);
}

void good(const std::string& args) {
  const Run r = run_cli(args);
  INFO("fp8sim " << args << " => " << r.err);
  CHECK(r.status == 0);
}

void save_u8(const std::string& name, std::size_t r, std::size_t c, std::uint8_t code) {
  const std::vector<std::uint8_t> v(r * c, code);
  write_npy((workdir() / name).string(), "|u1", {r, c}, v.data(), v.size());
}
void save_f32(const std::string& name, std::vector<std::size_t> shape, float v) {
  std::size_t n = 1;
  for (const std::size_t e : shape) n *= e;
  const std::vector<float> d(n, v);
  write_npy((workdir() / name).string(), "<f4", shape, d.data(), n * 4);
}

const std::string kAB = "gemm --a A.npy --b B.npy --out D.npy ";

void inputs() {
  save_u8("A.npy", 4, 256, 0x38);
  save_u8("B.npy", 3, 256, 0x38);
}

}  // namespace

TEST_CASE("W1: a kernel preset refuses every option it sets, given at any value", "[unit]") {
  inputs();
  for (const char* kernel : {"cublaslt", "cublaslt-fast-accum", "deepgemm-sm90-1d2d"})
    for (const auto& [option, field] :
         std::vector<std::pair<std::string, std::string>>{
             {"--promote-every 0", "promote_every"},
             {"--promote-every 128", "promote_every"},
             {"--model hopper-wgmma", "model"},
             {"--scale-order deepgemm", "scale_order"},
             {"--scale-order cublaslt", "scale_order"},
             {"--split-k 2 --split-k-align 128", "split_k_align"}})
      bad(kAB + "--kernel " + kernel + " " + option, "drop " + field);
  save_f32("T1.npy", {1, 1}, 1.0f);
  good(kAB + "--kernel cublaslt --a-scales T1.npy --b-scales T1.npy");
}

TEST_CASE("W1: a manifest case's keys must agree with its kernel_preset", "[unit]") {
  fs::create_directories(workdir() / "cap1");
  save_u8("cap1/a.npy", 64, 32, 0x38);
  save_f32("cap1/d.npy", {64, 64}, 32.0f);
  const auto manifest = [&](const nlohmann::json& extra) {
    nlohmann::json c = {{"name", "one"}, {"a_format", "e4m3"}, {"b_format", "e4m3"},
                        {"model", "hopper-wgmma"}, {"M", 64}, {"N", 64}, {"K", 32},
                        {"a", "a.npy"}, {"b", "a.npy"}, {"d", "d.npy"},
                        {"kernel_preset", "triton-fp8-dot-imprecise-acc-32"}};
    c.update(extra);
    std::ofstream(workdir() / "cap1" / "manifest.json")
        << nlohmann::json{{"fp8sim_capture", 1}, {"cases", {c}}}.dump();
  };
  // The preset's own values (promoted every 32, scales after K) are fine.
  manifest({{"promote_every", 32}, {"scale_order", "cublaslt"}});
  good("replay --captures cap1");
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"promote_every", 0}, {"promote_every", 128}, {"scale_order", "deepgemm"},
           {"split_k_align", 512}, {"model", "exact"}}) {
    manifest({{key, value}});
    bad("replay --captures cap1", "'" + key + "'");
  }
}

TEST_CASE("W2: options and manifest keys that apply to nothing are refused", "[unit]") {
  inputs();
  save_f32("S1.npy", {4, 1}, 1.0f);
  save_f32("S2.npy", {3, 1}, 1.0f);
  const std::string scaled = kAB + "--a-scales S1.npy --b-scales S2.npy --scaling row ";
  for (const auto& [option, needle] : std::vector<std::pair<std::string, std::string>>{
           {"--block 64", "block applies"},
           {"--block 128", "block applies"},  // the default value, given: still refused
           {"--mx-block 32", "mx_block applies"},
           {"--mx-scale ue8m0", "mx_scale applies"},
           {"--split-k-align 256", "split_k_align applies"},
           {"--split-k-align 128", "split_k_align applies"}}) {
    bad(kAB + option, needle);
    bad(scaled + option, needle);
  }
  good(kAB + "--split-k 2 --split-k-align 256");
  for (const auto& [option, needle] : std::vector<std::pair<std::string, std::string>>{
           {"--seed 1", "--seed applies"},
           {"--seed 0", "--seed applies"},
           {"--sr-bits 8", "--sr-bits applies"},
           {"-r rne --seed 3", "--seed applies"},
           {"-r rz --sr-bits 32", "--sr-bits applies"}})
    bad("encode -f e4m3 " + option + " -- 0.3", needle);
  good("encode -f e4m3 -r sr --seed 3 --sr-bits 8 -- 0.3");
  // A typo in a manifest case's key is refused, not read as the default.
  fs::create_directories(workdir() / "cap2");
  save_u8("cap2/a.npy", 64, 32, 0x38);
  save_f32("cap2/d.npy", {64, 64}, 32.0f);
  for (const char* key : {"promote_evry", "Promote_every", "scalng", "kernel_prest", "biass"}) {
    nlohmann::json c = {{"name", "one"}, {"a_format", "e4m3"}, {"b_format", "e4m3"},
                        {"model", "hopper-wgmma"}, {"M", 64}, {"N", 64}, {"K", 32},
                        {"a", "a.npy"}, {"b", "a.npy"}, {"d", "d.npy"}, {key, 0}};
    std::ofstream(workdir() / "cap2" / "manifest.json")
        << nlohmann::json{{"fp8sim_capture", 1}, {"cases", {c}}}.dump();
    bad("replay --captures cap2", std::string("unknown key '") + key + "'");
  }
}

TEST_CASE("W3: an empty value is an error, never \"not given\"", "[unit]") {
  inputs();
  save_f32("FA.npy", {4, 128}, 1.0f);
  const std::string an = "analyze --a FA.npy --b FA.npy --quiet --out an_empty ";
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {kAB + "--c ''", "--c"},
           {kAB + "--bias ''", "--bias"},
           {kAB + "--kernel ''", "--kernel"},
           {kAB + "--gpu ''", "--gpu"},
           {kAB + "--a-scales '' --b-scales ''", "--a-scales"},
           {kAB + "--scaling ''", "--scaling"},
           {kAB + "--model ''", "--model"},
           {kAB + "--out ''", "--out"},
           {"gemm --a '' --b B.npy", "--a"},
           {an + "--recipes a,,b", "--recipes"},
           {an + "--recipes ''", "--recipes"},
           {an + "--recipes fast-accum,", "--recipes"},
           {an + "--formats ,e4m3", "--formats"},
           {an + "--scalings tensor,,row", "--scalings"},
           {an + "--encodings ''", "--encodings"},
           {an + "--models hopper-wgmma,,exact", "--models"},
           {an + "--out-type ''", "--out-type"},
           {"replay --captures ''", "--captures"},
           {"replay --captures . --kernel ''", "--kernel"},
           {"explain --m 64 --n 64 --k 4096 --gpu ''", "--gpu"},
           {"encode -f '' -- 1", "--format"},
           {"encode -f e4m3 -- ''", "empty"}})
    bad(args, needle);
}

TEST_CASE("W4: custom: model integers read strictly, items never empty", "[unit]") {
  inputs();
  for (const auto& [model, needle] : std::vector<std::pair<std::string, std::string>>{
           {"custom:group=032", "no octal"},
           {"custom:group=32,", "empty item"},
           {"custom:,group=32", "empty item"},
           {"custom:group=32,,frac=13", "empty item"},
           {"custom:group=0x", "no digits"},
           {"custom:group=-1", "negative"},
           {"custom:group= 32", "group"},
           {"custom:group=99999999999", "out of range"},
           {"custom:frac=13,out=025", "no octal"}})
    bad(kAB + "--model '" + model + "'", needle);
  // A well-formed integer the model cannot take says so (not "not a non-negative integer").
  const Run r = run_cli(kAB + "--model custom:group=1024");
  INFO(r.err);
  CHECK(r.status == 2);
  CHECK(r.err.find("not a non-negative integer") == std::string::npos);
  good(kAB + "--model custom:group=32,frac=13");
  good(kAB + "--model custom:group=0x20");
}

TEST_CASE("W7: a NaN scale code is refused, as a NaN float scale is", "[unit]") {
  save_u8("MA.npy", 2, 64, 0x38);
  save_u8("MB.npy", 3, 64, 0x38);
  const std::string mx = "gemm --a MA.npy --b MB.npy --out D.npy --scaling mx --promote-every 32 ";
  // (scale format, its code of 1.0, its NaN code)
  for (const auto& [fmt_, one, code] : std::vector<std::tuple<std::string, int, int>>{
           {"ue8m0", 0x7f, 0xff}, {"ue4m3", 0x38, 0x7f}}) {
    save_u8("SA.npy", 2, 2, std::uint8_t(one));
    save_u8("SB.npy", 3, 2, std::uint8_t(one));
    save_u8("SN.npy", 3, 2, std::uint8_t(code));
    bad(mx + "--mx-scale " + fmt_ + " --a-scales SA.npy --b-scales SN.npy", "is nan");
    bad(mx + "--mx-scale " + fmt_ + " --a-scales SN.npy --b-scales SB.npy", "SN.npy");
  }
  save_u8("SA.npy", 2, 2, 0x7f);
  save_u8("SB.npy", 3, 2, 0x7f);
  good(mx + "--a-scales SA.npy --b-scales SB.npy");
}

TEST_CASE("W11: an .npy header with bytes after its dict is refused", "[unit]") {
  // A valid 1 x 4 uint8 array whose header dict is followed by `tail` (padded with spaces and
  // ended with '\n' to a 64-byte prefix, as numpy writes).
  const auto npy = [](const std::string& name, const std::string& tail) {
    std::string dict = "{'descr': '|u1', 'fortran_order': False, 'shape': (1, 4), }" + tail;
    std::string header = dict;
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::string file = "\x93NUMPY\x01";
    file += '\0';
    file += char(header.size() & 0xff);
    file += char(header.size() >> 8);
    file += header + std::string(4, '\x38');
    std::ofstream(workdir() / name, std::ios::binary) << file;
  };
  save_u8("B4.npy", 3, 4, 0x38);
  npy("T0.npy", "");
  const Run ok = run_cli("gemm --a T0.npy --b B4.npy --out D.npy --model exact");
  INFO(ok.err);
  CHECK(ok.status == 0);
  for (const char* tail : {"x", "}", ", 'x': 1", "\\x00", "{}", "#"}) {
    npy("T1.npy", tail);
    bad("gemm --a T1.npy --b B4.npy --out D.npy --model exact", "after the closing brace");
  }
}

TEST_CASE("C3: an error with stderr closed or full still exits 2 (no abort)", "[unit]") {
  inputs();
  for (const char* redirect : {"exec 2>&-; exec ", "exec 2>/dev/full; exec "})
    for (const char* args : {"gemm --a nope.npy --b nope.npy", "encode -f e99m1 -- 1",
                             "gemm --a A.npy --b B.npy --threads -1", "nosuchcommand",
                             "explain --m 0 --n 1 --k 1"}) {
      const Run r = run_cli(args, redirect);
      INFO(redirect << args << " => " << r.status);
      CHECK(r.status == 2);
    }
}
