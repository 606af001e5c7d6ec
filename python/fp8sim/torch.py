"""fp8sim.torch: PyTorch front-end -- custom ops, ``scaled_mm``, ``emulate`` and ``Float8Linear``.

Every numeric step runs in fp8sim's C++ core through three ``torch.library`` custom ops with
fake kernels (``fp8sim::gemm``, ``fp8sim::quantize``, ``fp8sim::encode``), so the functions
here work under ``torch.compile(fullgraph=True)``. CPU and CUDA tensors: on CUDA tensors
``fp8sim::gemm`` runs the CUDA engine in place (device pointers, torch's current stream, the
same bits as the CPU engine) and ``fp8sim::quantize`` runs on the GPU (amax per scale
block, the scales from those and every code there; the scales then downloaded), as does
``fp8sim::encode`` of finite values with rne and saturation (other roundings, NaN and Inf go
through the CPU, and the codes come back to the input's device).

What ``scaled_mm`` models of cuBLASLt (``torch._scaled_mm``), all measured on an H100 and an
H200 with CUDA 13 (docs/cublaslt.md): Hopper ``wgmma`` promoted to FP32 every 128 K
elements without fast accumulation and never with it; split-K (``split_k``: the numSplitsK
cuBLASLt chose for the shape, which its log shows, e.g. CUBLASLT_LOG_LEVEL=2); tensor and
row scales applied once after K (``scale_order="cublaslt"``), block scales at each 128-K
block; bias added in FP32 before the output rounding. Not measured: FP8 outputs (here
``D * scale_result`` rounded to nearest even with saturation).

The ops and their timers live in ``_torch_ops``, cuBLASLt's plan in ``_torch_plan``, the
recipes and ``Float8Linear`` in ``_torch_linear``; this module re-exports them.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Optional

try:
    import torch
except ModuleNotFoundError:
    raise ModuleNotFoundError("fp8sim.torch needs PyTorch: pip install 'fp8sim[torch]' (or pip "
                              "install torch)") from None
from torch.utils._python_dispatch import TorchDispatchMode

import fp8sim as _fp8sim

# One concept a module (re-exported here, the public paths fp8sim.torch.X): the custom ops
# and their timers, cuBLASLt's plan, the recipes and Float8Linear.
from ._torch_ops import (FORMAT_OF_DTYPE, _DTYPE_OF_FORMAT, GemmTime, _codes, encode, gemm,
                         quantize, timed)
from ._torch_plan import _OUT_NAMES, Plan, _plan_split, explain
from ._torch_linear import (RECIPES, Float8Linear, GemmRecipe, Recipe, _recipe_mm, convert,
                            recipe, with_model)

__all__ = ["gemm", "quantize", "encode", "scaled_mm", "explain", "Plan", "emulate", "GemmRecipe", "Recipe",
           "RECIPES", "recipe", "with_model", "Float8Linear", "convert", "FORMAT_OF_DTYPE",
           "GemmTime", "timed"]


# ---- scaled_mm ----------------------------------------------------------------------------

def scaled_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
              bias: Optional[torch.Tensor] = None, scale_result: Optional[torch.Tensor] = None,
              out_dtype: Optional[torch.dtype] = None, use_fast_accum: bool = False,
              model: Optional[str] = None, promote_every: Optional[int] = None,
              scale_order: str = "cublaslt", threads: int = 0, split_k: Optional[int] = None,
              split_k_align: Optional[int] = None, gpu: Optional[str] = None) -> torch.Tensor:
    """``torch._scaled_mm`` through fp8sim: ``(a @ b) * scales (+ bias)`` in ``out_dtype``.

    ``a`` FP8 (M x K), ``b`` FP8 (K x N, column-major as cuBLASLt wants it). Scales:
    tensor-wise (one value each), row-wise (``scale_a`` M x 1, ``scale_b`` 1 x N) or
    DeepSeek blocks (``scale_a`` M x K/128, ``scale_b`` K/128 x N/128). ``out_dtype`` None
    means a's dtype (FP8: ``D * scale_result`` rounded with saturation). Defaults: what
    cuBLASLt does on an H100 or H200 -- ``hopper-wgmma`` promoted every 128 without fast
    accumulation and never with it, scales and bias in cuBLASLt's epilogue, and the split-K
    cuBLASLt chooses for the call (``explain()``): asked of cuBLASLt on the tensors' GPU (on
    CPU tensors, this machine's GPU where it has one), else from the tables recorded on
    ``gpu`` ("h100", "h200"; default "h100", with a warning once), refused where they cannot
    decide. ``split_k`` overrides the
    plan; slices round up to ``split_k_align`` elements (default: 512 with block scales, else
    128, as cuBLASLt's kernels do). With ``model`` given (a model of your own, not cuBLASLt),
    ``promote_every`` defaults to 0 and ``split_k`` to 1.

    >>> a = torch.ones(16, 64).to(torch.float8_e4m3fn); one = torch.tensor(1.0)
    >>> d = scaled_mm(a, a.t(), one, one, out_dtype=torch.float32, gpu="h100")
    >>> d.shape, d[0, 0].item()
    (torch.Size([16, 16]), 64.0)
    """
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"scaled_mm: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be multiplied")
    for name, t in (("a", a), ("b", b)):
        if t.dtype not in FORMAT_OF_DTYPE:
            raise ValueError(f"scaled_mm: {name} is {t.dtype}, expected an FP8 dtype")
    M, K = a.shape
    N = b.shape[1]
    # cuBLASLt's own kernel unless a model of the caller's is asked for
    custom_model = (model is not None or promote_every is not None or scale_order != "cublaslt"
                    or split_k_align is not None)
    preset = "" if custom_model else "cublaslt-fast-accum" if use_fast_accum else "cublaslt"
    if preset:
        model, promote_every, scale_order = None, None, None  # the preset sets them
    elif promote_every is None:
        promote_every = 0 if (model is not None or use_fast_accum) else 128
    model = model or (None if preset else "hopper-wgmma")
    bt = b.t().contiguous()  # N x K; no copy for a column-major b
    sa = scale_a.to(torch.float32)
    sb = scale_b.to(torch.float32)
    if sa.numel() == 1 and sb.numel() == 1:
        scaling, sa, sb = "tensor", sa.reshape(1, 1), sb.reshape(1, 1)
    elif sa.shape == (M, 1) and sb.shape == (1, N):
        scaling, sa, sb = "row", sa, sb.reshape(N, 1)
    elif sa.shape == (M, K // 128) and sb.shape == (K // 128, (N + 127) // 128):
        scaling, sb = "block", sb.t().contiguous()
    else:
        raise ValueError(f"scaled_mm: scales {tuple(scale_a.shape)} and {tuple(scale_b.shape)} are "
                         "not tensor-wise, row-wise or 1x128/128x128 blocks")
    out_dtype = out_dtype or a.dtype
    if out_dtype not in _SCALED_MM_OUT_DTYPES:
        raise ValueError(f"scaled_mm: out_dtype {out_dtype} is not one torch._scaled_mm "
                         "produces (float32, bfloat16, float16 or an FP8 dtype)")
    fp8_out = out_dtype in _DTYPE_OF_FORMAT.values()
    out_type = {torch.bfloat16: "bf16", torch.float16: "f16"}.get(out_dtype, "f32")
    if split_k is None:
        split_k = 1 if custom_model else _plan_split(
            M, N, K, _OUT_NAMES.get(out_dtype, "?"), use_fast_accum, scaling,
            "" if bias is None else _OUT_NAMES.get(bias.dtype, "bf16"), gpu or "",
            str(a.device) if a.is_cuda else "")
    # Options for what applies only (given otherwise, they are refused): the block with block
    # scales, the slice alignment with a split and no preset (which sets its own).
    align = None if preset else split_k_align if split_k == 1 else (
        split_k_align or (512 if scaling == "block" else 128))
    d = torch.ops.fp8sim.gemm(_codes(a.contiguous()), _codes(bt), None, sa.contiguous(),
                              sb.contiguous(), FORMAT_OF_DTYPE[a.dtype],
                              FORMAT_OF_DTYPE[b.dtype], model, promote_every, scaling,
                              128 if scaling == "block" else None, scale_order,
                              "f32" if fp8_out else out_type, threads,
                              None if bias is None else bias.to(torch.float32), split_k,
                              align, kernel_preset=preset)
    if fp8_out:
        if scale_result is not None:
            d = d * scale_result.to(torch.float32)
        return torch.ops.fp8sim.encode(d, FORMAT_OF_DTYPE[out_dtype]).view(out_dtype)
    return d.to(out_dtype)


# The output dtypes torch._scaled_mm produces; any other (an integer, float64, complex)
# is refused rather than cast to.
_SCALED_MM_OUT_DTYPES = frozenset({torch.float32, torch.bfloat16, torch.float16,
                                   *FORMAT_OF_DTYPE})

_SCALED_MM_V2 = getattr(torch.ops.aten, "_scaled_mm_v2", None)


def _scaled_mm_v2(a, b, scale_a, recipe_a, swizzle_a, scale_b, recipe_b, swizzle_b, bias=None,
                  out_dtype=None, contraction_dim=None, use_fast_accum=False, **kw):
    if len(scale_a) != 1 or len(scale_b) != 1 or any(swizzle_a) or any(swizzle_b):
        raise ValueError("emulate: _scaled_mm_v2 with several or swizzled scales is not "
                         "modelled (MX / NVFP4 recipes)")
    return scaled_mm(a, b, scale_a[0], scale_b[0], bias=bias, out_dtype=out_dtype,
                     use_fast_accum=use_fast_accum, **kw)


class _Emulate(TorchDispatchMode):
    """Routes aten._scaled_mm (and _scaled_mm_v2 where torch has it) through ``scaled_mm``."""

    def __init__(self, model: Optional[str], promote_every: Optional[int], scale_order: str):
        super().__init__()
        self.kw = dict(model=model, promote_every=promote_every, scale_order=scale_order)
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten._scaled_mm.default:
            self.calls += 1
            return scaled_mm(*args, **kwargs, **self.kw)
        if _SCALED_MM_V2 is not None and func is _SCALED_MM_V2.default:
            self.calls += 1
            return _scaled_mm_v2(*args, **kwargs, **self.kw)
        if any(t is not torch.Tensor for t in types):
            # Tensor subclasses (torchao's Float8TrainingTensor, ...) first: their own
            # dispatch then issues the plain _scaled_mm this mode routes.
            return NotImplemented
        return func(*args, **kwargs)


@contextlib.contextmanager
def emulate(model: Optional[str] = None, promote_every: Optional[int] = None,
            scale_order: str = "cublaslt") -> Iterator[_Emulate]:
    """Within the block, every ``aten._scaled_mm`` (and ``aten._scaled_mm_v2``) of unmodified
    code runs through ``scaled_mm`` with these settings (defaults: cuBLASLt on an H100).
    The yielded object counts the routed calls in ``.calls``.

    >>> a = torch.ones(2, 32).to(torch.float8_e4m3fn); one = torch.tensor(1.0)
    >>> with emulate(model="exact") as mode:
    ...     d = torch._scaled_mm(a, a.t(), one, one, out_dtype=torch.float32)
    >>> mode.calls, d[0, 0].item()
    (1, 32.0)
    """
    mode = _Emulate(model, promote_every, scale_order)
    with mode:
        yield mode
