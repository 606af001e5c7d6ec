// kernel: the FP8 GEMM kernels people run, as data. A kernel preset names everything a
// library's or a framework's kernel does around the tensor-core chain: the MMA model, how
// often partial results are promoted to the FP32 main accumulator, in what order and with
// which fp32 operations the scales enter, split-K slicing, masked K tails and the output
// rounding, each row with its evidence (upstream source read, captures replayed).
//
// A preset replaces the loose options it sets (model, promote_every, scale order, split
// alignment, K padding): a front-end that is given both refuses (apply_kernel).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gemm/gemm.hpp"

namespace fp8sim {

struct KernelSpec {
  std::string name;                 // e.g. "deepgemm-sm90-1d2d"
  std::string description;          // one line: what the kernel is
  std::string model;                // accumulator preset (accumulator_by_name)
  int promote_every = 128;          // K elements per promoted chunk; 0 = never
  ScaleOrder order = ScaleOrder::deepgemm;
  std::vector<Scaling> scalings;    // the scalings the kernel takes
  int k_tile = 0;                   // K zero-padded to a multiple of this (masked loads);
                                    // 0: K as given
  int split_k_align = 128;          // split-K slices round up to a multiple of this
  int split_k_align_block = 0;      // the same with block scales (0: split_k_align)
  std::string upstream;             // repository, file and commit the model was read from
  std::string evidence;             // captures replayed: folder, GPU, date, outputs reproduced
  std::string not_modelled;         // what the preset leaves out
};

// Every preset, in the order `fp8sim kernels` lists them.
const std::vector<KernelSpec>& kernel_presets();

// A preset by name; throws std::invalid_argument listing the known names.
const KernelSpec& kernel_by_name(std::string_view name);

// Sets the model, promotion, scale order, K tile and split alignment of `s` from `k`, and
// checks that the kernel takes s.scaling. Throws std::invalid_argument naming the problem.
void apply_kernel(GemmSpec& s, const KernelSpec& k);

// "model hopper-wgmma, promoted every 128, scales deepgemm, K padded to 128" for listings.
std::string describe(const KernelSpec& k);

}  // namespace fp8sim
