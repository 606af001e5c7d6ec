// capture: the hardware capture format, read with every check and written, in one place.
//
// A capture folder holds manifest.json and .npy files (written by fp8sim-hw capture through
// write_capture(), or by anyone's own script with np.save + json.dump):
//
// DIR/manifest.json:
//   {"fp8sim_capture": 1, "device", "driver", "cuda", "date", "git_revision", "generator",
//    "seed", "cases": [{"name", "kernel", "suite", "a_format", "b_format", "model",
//    "promote_every", "scaling", "block", "scale_order", "out_type", "M", "N", "K",
//    "a", "b", "c", "sa", "sb", "d", "prefix_k", "d_prefix", "seed", "split_k", "bias"}],
//    "self_test"}
//   a, b: uint8 (M,K) and (N,K) codes; c, d: float32 (M,N); out_type f16/bf16: d holds the
//   float32 values of f16/bf16 numbers; sa, sb: float32 in scale_shapes() (finite); d_prefix:
//   float32 (P,M,N), the kernel's output on the first prefix_k[p] columns of K; bias: float32
//   (N,), added before the output rounding; split_k: K slices (gemm_split.hpp). "model": null
//   when unknown. Provenance keys and c, sa, sb, prefix_k, d_prefix, promote_every (0),
//   scaling ("none"), block (128), scale_order ("deepgemm"), out_type ("f32"), kernel, suite,
//   seed, self_test, split_k (1), split_k_align (128), bias may be absent. Other top-level
//   keys are provenance, kept as written; a case's other keys must be among those the capture
//   tools write for people to read (kCaseNotes in capture.cpp: shape, window, launch_config,
//   ..., and any key starting with "note"): any other key (a typo such as "promote_evry")
//   is refused. Paths are relative to DIR. "kernel_preset" (optional) names a kernel preset
//   (sim/kernel/kernel.hpp), which then sets model, promote_every, scale_order, the K tile and
//   split_k_align; those keys may still be given, and must then agree with the preset. With a
//   Triton preset, "triton_config" (optional) is the config it was launched with
//   (sim/kernel/triton_config.hpp), which routes the preset by the instruction Triton lowers
//   that config to and sets the promotion and K tile.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gemm/gemm.hpp"

namespace fp8sim {

struct CaptureCase {
  std::string name, kernel, suite;
  std::string seed;             // the case's own seed as written ("0x..."), may be empty
  std::string model;            // the model that reproduces the kernel; "" = unknown (null)
  GemmSpec spec;                // formats, promote_every, scaling, block, order, out_type;
                                // spec.model is not set (see `model`)
  int M = 0, N = 0, K = 0;
  std::vector<std::uint8_t> a, b;       // M x K and N x K codes
  std::vector<float> c;                 // M x N, or empty
  std::vector<float> sa, sb;            // scale_shapes(spec), or empty (scaling none)
  std::vector<float> bias;              // N, or empty
  std::vector<float> d;                 // M x N
  std::vector<int> prefix_k;            // increasing, in 1..K
  std::vector<float> d_prefix;          // prefix_k.size() x M x N
  std::string kernel_preset;            // a kernel preset (sim/kernel/kernel.hpp) that sets model,
                                        // promotion, scale order, K tile and split alignment
  std::string triton_config;            // with a Triton kernel_preset: the config it was launched
                                        // with (BM,BN,BK,WARPS,STAGES; triton_config.hpp), which
                                        // routes the preset and sets promotion and K tile
  // The files the manifest names for a, b, c, sa, sb, bias, d, d_prefix ("" where absent):
  // DIR joined with a path checked to stay inside DIR (read_capture_manifest).
  struct Files {
    std::string a, b, c, sa, sb, bias, d, d_prefix;
  } files;
};

struct CaptureProvenance {
  std::string device, driver, cuda, date, git_revision, generator, self_test;
  std::uint64_t seed = 0;
};

struct Capture {
  std::string dir;              // as given, without trailing '/'
  CaptureProvenance provenance;
  std::vector<CaptureCase> cases;
};

// Reads and checks DIR/manifest.json whole, and the header of every .npy file the selected
// cases name, before any array is read (the arrays stay empty: load_case reads them). In
// time linear in the manifest's size: a regular file of at most kMaxManifestBytes, JSON
// nested at most kMaxJsonDepth deep with no key twice in an object, version exactly 1,
// every key of the right type (strings of at most kMaxStringLength), case names unique,
// formats, scaling, scale order and output type known, shapes within kMaxDim /
// kMaxOutputElements, at most kMaxCases cases and kMaxPrefixes prefixes; every file path
// relative, free of '..', NUL and control characters and (symlinks resolved) inside DIR;
// each .npy of the right dtype and shape. Every case is checked; `only_case` non-empty
// selects the case of that name (its files alone are opened). Bad input throws
// std::runtime_error with one short line naming the file or case and the problem.
Capture read_capture_manifest(const std::string& dir, const std::string& only_case = "");

// Reads one case's arrays (headers checked again, scales finite): the case's memory, so a
// replay holds one case's arrays at a time. Throws as read_capture_manifest.
void load_case(const Capture& cap, CaptureCase& cs);

// read_capture_manifest, then load_case for every selected case.
Capture read_capture(const std::string& dir, const std::string& only_case = "");

// "<dir>/manifest.json: case '<name>'", the prefix of an error about one case.
std::string case_where(const Capture& c, const CaptureCase& cs);

// Writes the capture into DIR (created if missing): each case's arrays as <name>_a.npy,
// _b.npy, _d.npy, _c.npy, _sa.npy, _sb.npy, _dprefix.npy, then manifest.json; every file
// through OutputFile. Throws std::runtime_error on I/O failure.
void write_capture(const std::string& dir, const Capture& c);

// A GEMM cut to the first k columns of K: A and B's first k columns and, with block or MX
// scaling, the scale columns that cover them (the one place a K prefix is sliced).
struct KSlice {
  std::vector<std::uint8_t> a, b;
  std::vector<float> sa, sb;
};
KSlice slice_k(const GemmSpec& s, int M, int N, int K, std::span<const std::uint8_t> a,
               std::span<const std::uint8_t> b, std::span<const float> sa,
               std::span<const float> sb, int k);

}  // namespace fp8sim
