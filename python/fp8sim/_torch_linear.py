"""fp8sim._torch_linear: recipes (``GemmRecipe``, ``Recipe``, ``RECIPES``, ``recipe``,
``with_model``) and ``Float8Linear`` / ``convert``, whose three GEMMs run through the custom
ops. Imported by ``fp8sim.torch``, which re-exports them."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

import fp8sim as _fp8sim

from . import _args
from . import _torch_reuse
from ._torch_ops import _engine_scaling, _timed_gemm, _timed_quantize_operand
from ._torch_plan import _plan_split

# ---- recipes and Float8Linear -------------------------------------------------------------

@dataclass(frozen=True)
class GemmRecipe:
    """How one GEMM of a linear layer is quantised and accumulated. A is the left operand
    (M x K), B the right one given as N x K; scalings as ``fp8sim.quantize`` names them
    (``block128``: A in 1 x 128 tiles, B in 128 x 128 blocks; ``:pow2`` etc. the scales'
    encoding), the rest as ``fp8sim.gemm``'s keywords."""
    a_format: str = "e4m3"
    b_format: str = "e4m3"
    a_scaling: str = "tensor"
    b_scaling: str = "tensor"
    model: str = "hopper-wgmma"
    promote_every: int = 128
    scale_order: str = "cublaslt"
    kernel: str = ""  # the kernel preset it emulates (fp8sim.kernels()); "" none


@dataclass(frozen=True)
class Recipe:
    """A recipe per GEMM: Fprop (Y = X W^T), Dgrad (dX = dY W), Wgrad (dW = dY^T X)."""
    name: str
    fprop: GemmRecipe = field(default_factory=GemmRecipe)
    dgrad: GemmRecipe = field(default_factory=GemmRecipe)
    wgrad: GemmRecipe = field(default_factory=GemmRecipe)


def _gemm_recipe(name: str, gemm: str) -> GemmRecipe:
    """One GEMM of a named recipe from the library's table (sim/kernel/recipe.cpp)."""
    g = _fp8sim._core.recipe_gemm(name, gemm)
    return GemmRecipe(a_format=g["a_format"], b_format=g["b_format"], a_scaling=g["scaling"],
                      b_scaling=g["scaling"], model=g["model"],
                      promote_every=g["promote_every"], scale_order=g["scale_order"],
                      kernel=g["kernel"])


# The library's named recipes (``fp8sim recipes`` lists them with their sources), each GEMM
# as the table gives it: deepseek-v3, te-tensorwise (Fprop with fast accumulation, E5M2
# gradients promoted every 128), mxfp8 (scales inside mxf8f6f4), fast-accum. nvfp4's
# two-level scales are not modelled by Float8Linear (fp8sim.gemm and fp8sim.analyze run it).
_NOT_IN_TRAINING = {"nvfp4": "its two-level NVFP4 scales are not modelled by Float8Linear "
                             "(fp8sim.gemm and fp8sim.analyze run it)"}
RECIPES: dict[str, Recipe] = {
    n: Recipe(n, *(_gemm_recipe(n, g) for g in ("fprop", "dgrad", "wgrad")))
    for n in _fp8sim._core.recipe_names() if n not in _NOT_IN_TRAINING}


def recipe(r: "str | Recipe") -> Recipe:
    """A named recipe (deepseek-v3, te-tensorwise, mxfp8, fast-accum) or a custom Recipe.

    >>> recipe("deepseek-v3").fprop.a_scaling
    'block128'
    """
    if isinstance(r, Recipe):
        return r
    if r in _NOT_IN_TRAINING:
        raise ValueError(f"recipe '{r}': {_NOT_IN_TRAINING[r]}")
    if r not in RECIPES:
        raise ValueError(f"unknown recipe '{r}' (known: {', '.join(RECIPES)}, or a Recipe)")
    return RECIPES[r]


def _quantized(x: torch.Tensor, fmt: str, scaling: str, role: str) -> tuple:
    """x quantised (fmt, scaling, role): (uint8 codes on x's device, scales as a tensor).
    Eager CUDA tensors call the library directly, which leaves codes and scales on the GPU
    and does not wait for it (``_timed_quantize_operand``: a value that is not finite makes
    the scales NaN, so the GEMM's outputs, and is raised by a later quantisation or at the end
    of a ``timed`` block); torch.compile and CPU tensors go through the op, which raises it at
    once. The same codes and scales either way."""
    if x.is_cuda and not torch.compiler.is_compiling():
        return _timed_quantize_operand(x, fmt, scaling, role)
    return torch.ops.fp8sim.quantize(x, fmt, scaling, role)


def _recipe_mm(g: GemmRecipe, a: "torch.Tensor | None", b: "torch.Tensor | None",
               qa: "tuple | None" = None, qb: "tuple | None" = None) -> torch.Tensor:
    """A (M x K) times B^T (B: N x K) under recipe g, float32 M x N. ``qa`` / ``qb``: the
    operand already quantised under g (codes, scales; ``_torch_reuse``), its float values
    then not needed (None). An empty product (a batch of 0 rows, or K = 0 in Wgrad of an
    empty batch) is zeros, as torch.mm gives."""
    ra = a if qa is None else qa[0]
    rb = b if qb is None else qb[0]
    if ra.shape[0] == 0 or rb.shape[0] == 0 or ra.shape[1] == 0:
        return ra.new_zeros((ra.shape[0], rb.shape[0]), dtype=torch.float32)
    ca, sa = _quantized(a, g.a_format, g.a_scaling, "a") if qa is None else qa
    cb, sb = _quantized(b, g.b_format, g.b_scaling, "b") if qb is None else qb
    m, n, k = ca.shape[0], cb.shape[0], ca.shape[1]
    direct = ca.is_cuda and not torch.compiler.is_compiling()
    scaling = _engine_scaling(g.a_scaling)
    split_k = 1
    if g.kernel.startswith("cublaslt"):  # cuBLASLt's split-K for this shape (explain())
        split_k = _plan_split(m, n, k, "f32", g.kernel == "cublaslt-fast-accum", scaling, "",
                              "", str(ca.device) if ca.is_cuda else "")
    sa, sb = (sa, sb) if scaling != "none" else (None, None)
    # cuBLASLt's slice alignment, for a split only (given without one, it is refused)
    align = None if split_k == 1 else 512 if scaling == "block" else 128
    if direct:  # scales on the GPU (_quantized): read there, no wait for it
        options = dict(a_format=g.a_format, b_format=g.b_format, model=g.model,
                       promote_every=g.promote_every, scaling=g.a_scaling,
                       scale_order=g.scale_order, out_type="f32", split_k=split_k,
                       split_k_align=align)
        if sa is None:
            return _timed_gemm(m, n, k, ca, cb, **options)
        return _timed_gemm(m, n, k, ca, cb, sa, sb, gemm=_fp8sim._gemm_cuda_scales_on_device,
                           **options)
    return torch.ops.fp8sim.gemm(ca, cb, None, sa, sb, g.a_format, g.b_format, g.model,
                                 g.promote_every, g.a_scaling, None, g.scale_order, "f32",
                                 split_k=split_k, split_k_align=align)


def _reuse(r: Recipe) -> tuple:
    """Which quantised operands a step of Float8Linear under r reuses, transposed
    (``_torch_reuse.reusable``): Fprop's W as Dgrad's W^T, Fprop's X as Wgrad's X^T,
    Dgrad's dY as Wgrad's dY^T."""
    f, d, w = r.fprop, r.dgrad, r.wgrad
    return (_torch_reuse.reusable(f.b_format, f.b_scaling, "b", d.b_format, d.b_scaling, "b"),
            _torch_reuse.reusable(f.a_format, f.a_scaling, "a", w.b_format, w.b_scaling, "b"),
            _torch_reuse.reusable(d.a_format, d.a_scaling, "a", w.a_format, w.a_scaling, "a"))


class _Float8LinearFunction(torch.autograd.Function):
    """Y = X W^T, dX = dY W, dW = dY^T X, each under its GEMM's recipe. Operands whose
    transposed quantisation is their quantisation transposed (``_reuse``) are quantised
    once: Fprop saves W's (and X's) codes and scales for the backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, r: Recipe) -> torch.Tensor:
        g = r.fprop
        w_again, x_again, dy_again = _reuse(r)
        qx = qw = None
        if x.shape[0] and weight.shape[0] and x.shape[1]:  # else zeros: nothing quantised
            qx = _quantized(x, g.a_format, g.a_scaling, "a")
            qw = _quantized(weight, g.b_format, g.b_scaling, "b")
        y = _recipe_mm(g, x, weight, qx, qw)
        keep_w, keep_x = qw is not None and w_again, qx is not None and x_again
        ctx.kept = (keep_w, keep_x)
        ctx.dy_again = dy_again
        ctx.save_for_backward(x, weight, *(qw if keep_w else ()), *(qx if keep_x else ()))
        ctx.recipe = r
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        x, weight, *kept = ctx.saved_tensors
        r = ctx.recipe
        keep_w, keep_x = ctx.kept
        qw_t = qx_t = None
        if keep_w:
            g = r.dgrad
            qw_t = _torch_reuse.transposed((kept[0], kept[1]), g.b_format, g.b_scaling, "b",
                                           lambda: weight.t().contiguous())
            kept = kept[2:]
        if keep_x:
            g = r.wgrad
            qx_t = _torch_reuse.transposed((kept[0], kept[1]), g.b_format, g.b_scaling, "b",
                                           lambda: x.t().contiguous())
        d, w = r.dgrad, r.wgrad
        qdy = None
        if ctx.dy_again and dy.shape[0] and weight.shape[1] and dy.shape[1]:
            qdy = _quantized(dy, d.a_format, d.a_scaling, "a")
        dx = _recipe_mm(d, dy, None if keep_w else weight.t().contiguous(), qdy,
                        qw_t).to(x.dtype)
        qdy_t = None if qdy is None else _torch_reuse.transposed(
            qdy, w.a_format, w.a_scaling, "a", lambda: dy.t().contiguous())
        dw = _recipe_mm(w, None if qdy_t is not None else dy.t().contiguous(),
                        None if keep_x else x.t().contiguous(), qdy_t, qx_t).to(weight.dtype)
        return dx, dw, None


def _check_linear(in_features: int, out_features: int, r: Recipe) -> None:
    """Refuses, at construction, a layer whose Fprop or Dgrad GEMM the recipe cannot run (K
    not a multiple of the model's group or the scale blocks, ...): each runs once on zeros of
    the layer's K (at most 128 rows of B), so the library's own checks decide. Wgrad's K is
    the number of tokens, known only at the first backward."""
    for gemm, g, k, n in (("Fprop", r.fprop, in_features, out_features),
                          ("Dgrad", r.dgrad, out_features, in_features)):
        try:
            _recipe_mm(g, torch.zeros(1, k), torch.zeros(min(n, 128), k))
        except (ValueError, RuntimeError) as e:
            raise ValueError(f"Float8Linear({in_features}, {out_features}, recipe={r.name}): "
                             f"{gemm} (K = {k}): {e}") from None


class Float8Linear(torch.nn.Linear):
    """``nn.Linear`` whose Fprop, Dgrad and Wgrad GEMMs go through fp8sim under a recipe
    (bias added in the input's precision, as torchao and TransformerEngine do).

    >>> torch.manual_seed(0); lin = Float8Linear(128, 128, recipe="deepseek-v3")
    <torch._C.Generator object at ...>
    >>> lin(torch.randn(128, 128)).shape
    torch.Size([128, 128])
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 recipe: "str | Recipe" = "deepseek-v3", device=None, dtype=None):
        (_, in_features, out_features, bias, recipe, device, dtype), _ = _check_init(
            self, in_features, out_features, bias, recipe, device, dtype)
        r = globals()["recipe"](recipe)
        _check_linear(in_features, out_features, r)
        super().__init__(in_features, out_features, bias, device, dtype)
        self.recipe = r

    @classmethod
    def from_linear(cls, lin: torch.nn.Linear, recipe: "str | Recipe") -> "Float8Linear":
        """A Float8Linear sharing ``lin``'s parameters (no copy)."""
        r = globals()["recipe"](recipe)
        _check_linear(lin.in_features, lin.out_features, r)
        new = cls.__new__(cls)
        torch.nn.Module.__init__(new)
        new.in_features, new.out_features = lin.in_features, lin.out_features
        new.weight, new.bias = lin.weight, lin.bias
        new.recipe = r
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_floating_point():  # nn.Linear refuses integers too (never truncates them)
            raise TypeError(f"Float8Linear: input dtype {x.dtype}: expected a floating-point "
                            "tensor")
        x2 = x.reshape(-1, self.in_features)
        y = _Float8LinearFunction.apply(x2, self.weight, self.recipe)
        y = y.reshape(*x.shape[:-1], self.out_features)
        return y + self.bias if self.bias is not None else y

    def extra_repr(self) -> str:
        return super().extra_repr() + f", recipe={self.recipe.name}"


# Float8Linear's arguments checked first: one line naming a bad one (fp8sim._args).
_check_init = _args.arguments(Float8Linear.__init__, "fp8sim.torch.Float8Linear",
                              in_features=(0, _args.MAX_DIM), out_features=(0, _args.MAX_DIM))


def convert(model: torch.nn.Module, recipe: "str | Recipe" = "deepseek-v3",
            filter_fn=None) -> torch.nn.Module:
    """Replaces every ``nn.Linear`` in ``model`` (in place; ``filter_fn(name, module)`` may
    exclude some) by a Float8Linear with the same parameters; returns ``model``.

    >>> m = convert(torch.nn.Sequential(torch.nn.Linear(128, 128)), "fast-accum"); m[0].recipe.name
    'fast-accum'
    """
    for name, child in list(model.named_children()):
        if isinstance(child, torch.nn.Linear) and not isinstance(child, Float8Linear):
            if filter_fn is None or filter_fn(name, child):
                setattr(model, name, Float8Linear.from_linear(child, recipe))
        else:
            convert(child, recipe, filter_fn)
    return model


def with_model(r: Recipe, model: str, promote_every: int) -> Recipe:
    """``r`` with every GEMM's accumulator model and promotion replaced (a custom recipe).

    >>> with_model(recipe("fast-accum"), "exact", 0).wgrad.model
    'exact'
    """
    g = {k: replace(getattr(r, k), model=model, promote_every=promote_every)
         for k in ("fprop", "dgrad", "wgrad")}
    return Recipe(f"{r.name}+{model}", **g)
