// recipe: the named-recipe table and the parsing of its rows and of grid combinations.
#include "kernel/recipe.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <stdexcept>

#include "kernel/kernel.hpp"
#include "kernel/gemm_inputs.hpp"
#include "base/limits.hpp"

namespace fp8sim {

const std::vector<NamedRecipe>& named_recipes() {
  static const std::vector<NamedRecipe> table = {
      {"deepseek-v3", "e4m3", "e4m3", "block128", "hopper-wgmma", 128, "deepgemm", "bf16",
       "E4M3 A and B, 1x128 activation tiles and 128x128 weight blocks with fp32 scales, "
       "H800 WGMMA promoted to fp32 every 128 products, bf16 output",
       "DeepSeek-V3 technical report (arXiv:2412.19437) s3.3.1 fine-grained quantisation, "
       "s3.3.2 promotion every N_C = 128 elements; DeepGEMM sm90_fp8_gemm_1d2d (the "
       "deepgemm-sm90-1d2d kernel, captured on an H100)",
       "", -1, "deepgemm-sm90-1d2d"},
      {"te-tensorwise", "e4m3", "e4m3", "tensor", "hopper-wgmma", 0, "cublaslt", "bf16",
       "Transformer Engine per-tensor scaling (HYBRID): E4M3 activations and weights, E5M2 "
       "gradients, one fp32 scale per tensor; Fprop with cuBLASLt fast accumulation (never "
       "promoted), Dgrad and Wgrad with the split accumulator (promoted every 128); bf16 output",
       "Transformer Engine recipes Float8CurrentScaling / DelayedScaling: fp8_format HYBRID, "
       "fp8_gemm_fprop use_split_accumulator=False, fp8_gemm_dgrad / fp8_gemm_wgrad True; "
       "cuBLASLt's promotion interval 128 as measured on the H100 (docs/cublaslt.md)",
       "e5m2", 128, "cublaslt-fast-accum", "cublaslt"},
      {"mxfp8", "e4m3", "e4m3", "mx", "mxf8f6f4", 0, "deepgemm", "bf16",
       "E4M3 A and B in 1x32 blocks with E8M0 scales (MX), Blackwell's block-scaled MMA "
       "applying the scales inside its step, bf16 output",
       "OCP Microscaling Formats (MX) v1.0 s5, s6.3 (MXFP8 E4M3, E8M0 scale = "
       "2^(floor(log2 amax) - emax)); MMA: tcgen05.mma kind::mxf8f6f4 block_scale, the "
       "mxf8f6f4 preset (MMA-Sim 2.1.1)"},
      {"fast-accum", "e4m3", "e4m3", "tensor", "hopper-wgmma", 0, "cublaslt", "bf16",
       "E4M3 A and B with one fp32 scale per tensor and cuBLASLt fast accumulation in every "
       "GEMM: the WGMMA accumulator is never promoted",
       "cuBLASLt CUBLASLT_MATMUL_DESC_FAST_ACCUM (the accumulator stays in the tensor core "
       "for all of K); accumulator: the hopper-wgmma preset",
       "", -1, "cublaslt-fast-accum"},
      {"nvfp4", "e2m1", "e2m1", "nvfp4", "nvfp4", 0, "deepgemm", "bf16",
       "E2M1 A and B in 1x16 blocks with UE4M3 scales under an fp32 tensor scale (NVFP4); "
       "Blackwell's block-scaled MMA applies the block scales inside the MMA and the tensor "
       "scales multiply its fp32 result; bf16 output",
       "NVIDIA NVFP4 recipe (tensor scale amax / (6 * 448), block scale UE4M3 of block amax / "
       "(6 * tensor scale)); MMA: tcgen05.mma kind::mxf4nvf4 scale_vec::4X with UE4M3 scales, "
       "the nvfp4 preset (MMA-Sim 2.1.1 GST_FDPA parameters)"},
  };
  return table;
}

Recipe recipe_by_name(std::string_view name, GemmRole role) {
  std::string known;
  for (const NamedRecipe& r : named_recipes()) {
    if (r.name != name) {
      known += (known.empty() ? "" : ", ") + r.name;
      continue;
    }
    const bool grad = role != GemmRole::fprop;
    const std::string& a = grad && !r.grad_format.empty() ? r.grad_format : r.a_format;
    const int promote = grad && r.grad_promote_every >= 0 ? r.grad_promote_every : r.promote_every;
    Recipe x = grid_recipe(format_by_name(a), scaling_by_name(r.scaling),
                           accumulator_by_name(r.model), promote, format_by_name(r.out_type));
    x.name = r.name;
    x.b_format = format_by_name(r.b_format);
    x.order = parse_scale_order(r.order);
    x.kernel = grad && !r.grad_kernel.empty() ? r.grad_kernel : r.kernel;
    if (!x.kernel.empty()) {  // the kernel's model, promotion and scale order
      const KernelSpec& k = kernel_by_name(x.kernel);
      x.model = accumulator_by_name(k.model);
      x.promote_every = k.promote_every;
      x.order = k.order;
    }
    return x;
  }
  throw std::invalid_argument(fmt::format("unknown recipe '{}' (known: {})", name, known));
}

GemmSpec engine_spec(const Recipe& r, int threads, Device device) {
  GemmSpec g;
  g.a_format = r.a_format;
  g.b_format = r.b_format;
  g.model = r.model;
  g.promote_every = r.promote_every;
  set_engine_scaling(g, r.scaling);
  g.order = r.order;
  g.out_type = format_by_name("fp32");
  g.threads = threads;
  g.device = device;
  return g;
}

Recipe grid_recipe(const FormatSpec& format, const ScalingSpec& scaling,
                   const AccumulatorSpec& model, int promote_every, const FormatSpec& out_type) {
  if (scaling.granularity == ScaleGranularity::tile)
    throw std::invalid_argument(fmt::format(
        "scaling {}: B's 1 x {} tiles per row cannot be applied by the all-pairs GEMM "
        "(it takes B's scales per {} x {} block); use block{} or mx",
        scaling.name, scaling.nc, scaling.nc, scaling.nc, scaling.nc));
  if (promote_every < 0)
    throw std::invalid_argument(fmt::format("promote_every = {} is negative", promote_every));
  Recipe r;
  r.name = fmt::format("{}/{}/{}/p{}", format.name, scaling.name, model.name, promote_every);
  r.a_format = r.b_format = format;
  r.scaling = scaling;
  r.model = model;
  r.promote_every = promote_every;
  r.out_type = out_type;
  return r;
}

std::vector<Recipe> recipe_list(const RecipeRequest& g) {
  std::vector<Recipe> out;
  std::set<std::string> seen;
  const auto add = [&](Recipe r) {
    if (seen.insert(r.name).second) out.push_back(std::move(r));
  };
  for (const std::string& name : g.names) {
    if (name == "all") {
      for (const NamedRecipe& n : named_recipes())
        add(recipe_by_name(n.name));
    } else {
      add(recipe_by_name(name));
    }
  }
  const bool grid = !g.formats.empty() || !g.scalings.empty() || !g.encodings.empty() ||
                    !g.models.empty() || !g.promote_every.empty();
  // Checked whether used or not (an unknown value is an error, not ignored).
  const FormatSpec out_type = output_type_by_name(g.out_type.value_or("f32"), "out_type");
  if (g.out_type && !grid)
    throw std::invalid_argument(fmt::format(
        "out_type {} applies to the grid only (named recipes carry their own output type): "
        "give a grid axis or leave it out", *g.out_type));
  for (const std::string& enc : g.encodings) scaling_by_name("tensor:" + enc);
  for (int p : g.promote_every)
    if (p < 0 || p > limits::kMaxDim)
      throw std::invalid_argument(fmt::format("promote_every = {} is not in 0..{} {}", p,
                                              limits::kMaxDim,
                                              limits::named("kMaxDim", limits::kMaxDim)));
  if (grid) {
    const auto or_default = [](const auto& v, auto d) { return v.empty() ? decltype(v){d} : v; };
    const auto formats = or_default(g.formats, std::string("e4m3"));
    const auto scalings = or_default(g.scalings, std::string("tensor"));
    const auto encodings = or_default(g.encodings, std::string("fp32"));
    const auto models = or_default(g.models, std::string("hopper-wgmma"));
    const auto promotes = or_default(g.promote_every, 128);
    bool encodings_used = false;
    for (const std::string& f : formats)
      for (const std::string& sc : scalings)
        for (const std::string& enc : encodings) {
          // none and mx (nvfp4) name their encoding; so does a scaling with ':'.
          const ScaleGranularity gr = scaling_by_name(sc).granularity;
          const bool fixed = gr == ScaleGranularity::none || gr == ScaleGranularity::mx ||
                             sc.find(':') != std::string::npos;
          const ScalingSpec scaling = scaling_by_name(fixed ? sc : sc + ":" + enc);
          encodings_used = encodings_used || !fixed;
          for (const std::string& m : models)
            for (int p : promotes)
              add(grid_recipe(format_by_name(f), scaling, accumulator_by_name(m), p, out_type));
        }
    if (!g.encodings.empty() && !encodings_used)
      throw std::invalid_argument(fmt::format(
          "encodings apply to none of the scalings given ({} name their own scale encoding)",
          fmt::join(scalings, ", ")));
  }
  if (out.empty())
    for (const NamedRecipe& n : named_recipes())
      add(recipe_by_name(n.name));
  return out;
}

}  // namespace fp8sim
