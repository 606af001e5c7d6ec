"""fp8sim.torch: PyTorch front-end -- custom ops, ``scaled_mm``, ``emulate`` and ``Float8Linear``.

Every numeric step runs in fp8sim's C++ core through three ``torch.library`` custom ops with
fake kernels (``fp8sim::gemm``, ``fp8sim::quantize``, ``fp8sim::encode``), so the functions
here work under ``torch.compile(fullgraph=True)``. CPU and CUDA tensors: on CUDA tensors
``fp8sim::gemm`` runs the CUDA engine in place (device pointers, torch's current stream, the
same bits as the CPU engine) and ``fp8sim::quantize`` runs on the GPU (amax per scale
block there, scales on the host, every code there), as does ``fp8sim::encode`` of finite
values with rne and saturation (other roundings, NaN and Inf go through the CPU, and the
codes come back to the input's device).

What ``scaled_mm`` models of cuBLASLt (``torch._scaled_mm``), all measured on an H100 and an
H200 with CUDA 13 (docs/cublaslt.md): Hopper ``wgmma`` promoted to FP32 every 128 K
elements without fast accumulation and never with it; split-K (``split_k``: the numSplitsK
cuBLASLt chose for the shape, which its log shows, e.g. CUBLASLT_LOG_LEVEL=2); tensor and
row scales applied once after K (``scale_order="cublaslt"``), block scales at each 128-K
block; bias added in FP32 before the output rounding. Not measured: FP8 outputs (here
``D * scale_result`` rounded to nearest even with saturation).
"""
from __future__ import annotations

import contextlib
import functools
import os
import time
from dataclasses import dataclass, field, replace
from typing import Iterator, Optional

try:
    import torch
except ModuleNotFoundError:
    raise ModuleNotFoundError("fp8sim.torch needs PyTorch: pip install 'fp8sim[torch]' (or pip "
                              "install torch)") from None
from torch.utils._python_dispatch import TorchDispatchMode

import fp8sim as _fp8sim

__all__ = ["gemm", "quantize", "encode", "scaled_mm", "explain", "Plan", "emulate", "GemmRecipe", "Recipe",
           "RECIPES", "recipe", "with_model", "Float8Linear", "convert", "FORMAT_OF_DTYPE",
           "GemmTime", "timed"]

FORMAT_OF_DTYPE = {
    torch.float8_e4m3fn: "e4m3", torch.float8_e5m2: "e5m2",
    torch.float8_e4m3fnuz: "e4m3fnuz", torch.float8_e5m2fnuz: "e5m2fnuz",
}
_DTYPE_OF_FORMAT = {v: k for k, v in FORMAT_OF_DTYPE.items()}


def _codes(t: torch.Tensor) -> torch.Tensor:
    """FP8 tensors as their uint8 codes (a view, no copy)."""
    return t.view(torch.uint8) if t.dtype in FORMAT_OF_DTYPE else t


# ---- where the time goes -------------------------------------------------------------------

@dataclass
class GemmTime:
    """The time of the emulated GEMMs and quantisations made while ``timed`` is active, summed
    over the calls (every thread's: autograd's backward runs on a thread of its own).

    ``kernel_s``: the CUDA engine's GEMM kernels (CUDA events; decoding, copies and set-up
    excluded; 0 on the CPU). ``gemm_s``: wall time inside the GEMM calls (on the CPU the
    engine's whole work; on a GPU also the engine's set-up, decoding, copies and its wait for
    the work queued before it, since it synchronises before returning). ``quantize_s``: wall
    time inside the quantisations. ``macs``: M * N * K summed over the GEMMs."""
    gemm_calls: int = 0
    macs: int = 0
    kernel_s: float = 0.0
    gemm_s: float = 0.0
    quantize_calls: int = 0
    quantize_s: float = 0.0


_timers: list = []  # the active GemmTime objects (timed)


@contextlib.contextmanager
def timed(t: Optional[GemmTime] = None) -> Iterator[GemmTime]:
    """Within the block, every emulated GEMM and quantisation of this module adds its time to
    ``t`` (a new GemmTime when not given), which the block yields; blocks may nest.

    >>> lin = Float8Linear(128, 128, recipe="deepseek-v3")
    >>> with timed() as t:
    ...     y = lin(torch.ones(4, 128))
    >>> t.gemm_calls, t.macs, t.quantize_calls
    (1, 65536, 2)
    """
    t = GemmTime() if t is None else t
    _timers.append(t)
    try:
        yield t
    finally:
        _timers.remove(t)


def _timed_gemm(m: int, n: int, k: int, *args, **kwargs):
    """``fp8sim.gemm(*args, **kwargs)`` (an m x n x k GEMM), its time added to the timers."""
    if not _timers:
        return _fp8sim.gemm(*args, **kwargs)
    k0, t0 = _fp8sim._core.device_kernel_seconds(), time.perf_counter()
    d = _fp8sim.gemm(*args, **kwargs)
    dt = time.perf_counter() - t0
    dk = _fp8sim._core.device_kernel_seconds() - k0  # this thread's kernels in this call
    for t in _timers:
        t.gemm_calls += 1
        t.macs += m * n * k
        t.kernel_s += dk
        t.gemm_s += dt
    return d


def _timed_quantize(*args, **kwargs):
    """``fp8sim.quantize(*args, **kwargs)``, its time added to the timers."""
    if not _timers:
        return _fp8sim.quantize(*args, **kwargs)
    t0 = time.perf_counter()
    q = _fp8sim.quantize(*args, **kwargs)
    dt = time.perf_counter() - t0
    for t in _timers:
        t.quantize_calls += 1
        t.quantize_s += dt
    return q


# ---- custom ops ---------------------------------------------------------------------------

_LIB = torch.library.Library("fp8sim", "DEF")


def _op(fn):
    """``fn`` as the torch op ``fp8sim::<name>``, its schema inferred from the annotations as
    ``torch.library.custom_op`` does, defined through ``torch.library.Library`` (one kernel for
    every device). Not ``custom_op``: its first call imports torch._dynamo and Inductor
    (``torch._disable_dynamo``), 3 to 10 s on a 2-core machine, which these ops do not need
    (they have no autograd of their own; ``Float8Linear`` wraps them in an autograd.Function).
    ``torch.compile`` runs them through the fake kernels registered with ``.register_fake``."""
    name = fn.__name__
    _LIB.define(name + torch.library.infer_schema(fn, mutates_args=()))
    _LIB.impl(name, fn, "CompositeExplicitAutograd")
    packet = getattr(torch.ops.fp8sim, name)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        return packet(*args, **kwargs)
    call.register_fake = lambda f: torch.library.register_fake(f"fp8sim::{name}", f, lib=_LIB)
    return call


@_op
def gemm(a: torch.Tensor, b: torch.Tensor, c: Optional[torch.Tensor] = None,
         a_scales: Optional[torch.Tensor] = None, b_scales: Optional[torch.Tensor] = None,
         a_format: Optional[str] = None, b_format: Optional[str] = None,
         model: Optional[str] = None, promote_every: Optional[int] = None,
         scaling: Optional[str] = None, block: Optional[int] = None,
         scale_order: Optional[str] = None, out_type: Optional[str] = None,
         threads: Optional[int] = None, bias: Optional[torch.Tensor] = None,
         split_k: Optional[int] = None, split_k_align: Optional[int] = None,
         kernel_preset: Optional[str] = None, triton_config: Optional[str] = None,
         gpu: Optional[str] = None) -> torch.Tensor:
    """``fp8sim.gemm`` as a torch op: A (M x K) and B (N x K) uint8 codes -> float32 M x N;
    every keyword as ``fp8sim.gemm``'s (None: the library's default). ``kernel_preset`` names
    a kernel preset (``fp8sim.kernels()``), which sets the model, promotion, scale order and
    split alignment (those stay None then). (Not ``kernel``: Inductor's fallback lowering
    takes that name for itself.) ``triton_config`` and ``gpu`` are ``fp8sim.gemm``'s
    ``config`` and ``gpu`` for a Triton kernel preset.

    >>> a = torch.full((1, 32), 0x38, dtype=torch.uint8)  # e4m3 1.0
    >>> torch.ops.fp8sim.gemm(a, a).item()
    32.0
    """
    on_cuda = a.is_cuda or b.is_cuda
    d = _timed_gemm(a.shape[0], b.shape[0], a.shape[1], a, b, c, a_format, b_format, model,
                    promote_every, a_scales, b_scales, scaling or None, block, scale_order,
                    out_type, None if on_cuda else "cpu", None if on_cuda else threads,
                    bias=bias, split_k=split_k, split_k_align=split_k_align,
                    kernel=kernel_preset or None, config=triton_config or None,
                    gpu=gpu or None)
    return d if on_cuda else torch.from_numpy(d)


@gemm.register_fake
def _(a, b, c=None, a_scales=None, b_scales=None, a_format=None, b_format=None, model=None,
      promote_every=None, scaling=None, block=None, scale_order=None, out_type=None,
      threads=None, bias=None, split_k=None, split_k_align=None, kernel_preset=None,
      triton_config=None, gpu=None):
    torch._check(a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[1])
    return a.new_empty((a.shape[0], b.shape[0]), dtype=torch.float32)


@_op
def quantize(x: torch.Tensor, fmt: str = "e4m3", scaling: str = "tensor",
             role: str = "a") -> tuple[torch.Tensor, torch.Tensor]:
    """``fp8sim.quantize`` as a torch op: T x K floats -> (uint8 codes, float32 scales in
    the shape ``gemm`` takes); ``scaling`` as ``fp8sim.quantize`` names it. Formats of at
    most 8 bits.

    >>> codes, scales = torch.ops.fp8sim.quantize(torch.tensor([[1.0, 896.0]]))
    >>> codes.tolist(), scales.tolist()
    ([[48, 126]], [[2.0]])
    """
    if x.is_cuda:  # on the GPU: codes stay there, the scales come back (they are few)
        q = _timed_quantize(x, fmt, scaling, role=role)
        return q.codes, torch.from_numpy(q.scales).to(x.device)
    q = _timed_quantize(x.detach(), fmt, scaling, role=role)
    if q.codes.dtype.itemsize != 1:
        raise ValueError(f"fp8sim::quantize: format {fmt} has more than 8 bits")
    return torch.from_numpy(q.codes), torch.from_numpy(q.scales)


@quantize.register_fake
def _(x, fmt="e4m3", scaling="tensor", role="a"):
    torch._check(x.dim() == 2)
    # The scale shape from the library's one rule (sim/scaling/scaling.hpp gemm_scale_shape), as the
    # real op gets it; T and K become concrete here (a symbolic shape is specialised).
    rows, cols = _fp8sim._core.quantize_scale_shape(
        int(x.shape[0]), int(x.shape[1]), scaling, role)
    return (x.new_empty(x.shape, dtype=torch.uint8),
            x.new_empty((rows, cols), dtype=torch.float32))


@_op
def encode(x: torch.Tensor, fmt: str = "e4m3", rounding: str = "rne",
           overflow: str = "saturate", seed: int = 0) -> torch.Tensor:
    """``fp8sim.encode`` as a torch op (formats of at most 8 bits): uint8 codes of x.

    >>> torch.ops.fp8sim.encode(torch.tensor([0.1, 500.0])).tolist()
    [29, 126]
    """
    if x.is_cuda and rounding == "rne" and overflow == "saturate" and x.numel() > 0:
        f = _fp8sim.describe(fmt)
        if f["signed"] and f["bits"] <= 8 and bool(torch.isfinite(x).all()):
            # Finite values rounded to nearest with saturation: the GPU quantiser, no scales.
            return _fp8sim.quantize(x.detach().reshape(1, -1), fmt, "none").codes.view(x.shape)
    c = _fp8sim.encode(x.detach().cpu(), fmt, rounding, overflow, seed)
    if c.dtype.itemsize != 1:
        raise ValueError(f"fp8sim::encode: format {fmt} has more than 8 bits")
    return torch.from_numpy(c).to(x.device)


@encode.register_fake
def _(x, fmt="e4m3", rounding="rne", overflow="saturate", seed=0):
    return x.new_empty(x.shape, dtype=torch.uint8)


# ---- cuBLASLt's plan -----------------------------------------------------------------------

@dataclass(frozen=True)
class Plan:
    """What cuBLASLt runs for one ``torch._scaled_mm`` call, and how that is known.

    ``source``: "gpu-query" (cuBLASLt asked on this machine's GPU, as torch asks it),
    "table" (a point recorded on ``gpu``), "rule" (a rule the recordings show with no
    exception) or "user" (``split_k`` given). ``split_k`` and ``reduction`` decide the bits;
    ``tile``, ``stages``, ``cluster`` and ``algo_id`` are reported where known ("" / -1)."""
    m: int
    n: int
    k: int
    out: str
    use_fast_accum: bool
    scale: str
    split_k: int
    reduction: str
    source: str
    gpu: str
    tile: str = ""
    stages: str = ""
    cluster: str = ""
    algo_id: int = -1
    detail: str = ""

    def __str__(self) -> str:
        algo = (f"tile {self.tile}, stages {self.stages}, cluster {self.cluster}, algo "
                f"{self.algo_id}" if self.algo_id >= 0 else "algorithm not known")
        return (f"torch._scaled_mm {self.m}x{self.n}x{self.k} ({self.out}, {self.scale} scales, "
                f"fast accumulation {'on' if self.use_fast_accum else 'off'}) on {self.gpu}: "
                f"split-K {self.split_k} ({self.reduction}), {algo}; from {self.source}: "
                f"{self.detail}")


_OUT_NAMES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16",
              torch.float8_e4m3fn: "e4m3", torch.float8_e5m2: "e5m2"}
_warned_default_gpu = []


def explain(m: int, n: int, k: int, out_dtype: "torch.dtype | str" = torch.bfloat16,
            use_fast_accum: bool = False, scale: str = "tensor", bias=False,
            gpu: Optional[str] = None, split_k: Optional[int] = None, device=None) -> Plan:
    """The plan of one ``torch._scaled_mm`` call (a: m x k, b: k x n, e4m3): which split-K
    cuBLASLt runs, and whether that comes from the GPU, a recorded table or a rule.

    ``gpu`` names a recorded GPU ("h100", "h200", or a table's .json path); without it the
    plan is asked of cuBLASLt on ``device`` (a CUDA device; default: the current one when
    this machine has a GPU). ``scale``: "tensor", "row" or "block" (1x128 / 128x128);
    ``bias``: False, True or the bias's dtype.
    ``split_k`` given: that split, source "user". Raises ValueError with one line where no
    answer rests on evidence (a shape the tables cannot decide, no GPU and no ``gpu``).

    >>> print(explain(64, 64, 65536, out_dtype=torch.float32, use_fast_accum=True, gpu="h100"))
    torch._scaled_mm 64x64x65536 (f32, tensor scales, fast accumulation on) on NVIDIA H100 80GB HBM3: split-K 22 (COMPUTE_TYPE), tile 32x64, stages 128xAUTO, cluster 2x1x1, algo 66; from table: recorded point M=64 N=64 K=65536 (cuBLASLt 130100, torch 2.11.0+cu130, driver 580.159.04, recorded 2026-11-24T22:31:46Z)
    """
    out = out_dtype if isinstance(out_dtype, str) else _OUT_NAMES.get(out_dtype)
    if out is None:
        raise ValueError(f"explain: out_dtype {out_dtype}: expected float32, bfloat16, float16 "
                         "or an FP8 dtype")
    if scale not in ("tensor", "row", "block"):
        raise ValueError(f"explain: scale {scale!r}: expected tensor, row or block")
    call = dict(m=int(m), n=int(n), k=int(k), out=out, use_fast_accum=bool(use_fast_accum),
                scale=scale)
    if split_k is not None:
        if int(split_k) < 1:
            raise ValueError(f"explain: split_k = {split_k} must be >= 1")
        return Plan(**call, split_k=int(split_k),
                    reduction="COMPUTE_TYPE" if split_k > 1 else "NONE", source="user",
                    gpu=gpu or "any GPU", detail="split_k given")
    if gpu is None and device is None and torch.cuda.is_available():
        device = torch.device("cuda", torch.cuda.current_device())
    if gpu is None and device is not None:
        from . import cublaslt_plan as lt
        try:
            bias_dtype = None if bias is False or bias is None else (
                bias if bias is not True else "bf16" if out == "f32" else out)
            q = lt.query(m, n, k, out, use_fast_accum=use_fast_accum, scale_mode=scale,
                         bias_dtype=bias_dtype, device=device)
            v = lt.versions(device)
        except lt.PlanUnavailable as e:
            raise ValueError(f"explain: {e}") from None
        if q["split_k"] > 1 and q["reduction"] != "COMPUTE_TYPE":
            raise ValueError(f"explain: {m}x{n}x{k} on {v['gpu']}: cuBLASLt's split-K "
                             f"reduction {q['reduction']} is not modelled; pass split_k")
        return Plan(**call, split_k=q["split_k"], reduction=q["reduction"], source="gpu-query",
                    gpu=v["gpu"], tile=q["tile"], stages=q["stages"], cluster=q["cluster"],
                    algo_id=q["algo_id"],
                    detail=f"cuBLASLt {v['cublaslt_version']} asked as torch {v['torch']} asks")
    if gpu is None:
        raise ValueError(f"explain: {m}x{n}x{k}: no GPU here to ask cuBLASLt; name a recorded "
                         f"GPU (gpu={' or '.join(repr(g) for g in _fp8sim._core.recorded_gpus())}) "
                         "or pass split_k")
    d = _fp8sim._core.cublaslt_plan(gpu, m, n, k, out, bool(use_fast_accum), scale,
                                    bias is not False and bias is not None)
    detail = f"{d['why']} ({d['versions']})"
    if torch.cuda.is_available() and device is None:
        here = torch.cuda.get_device_name()
        if here != d["gpu"]:
            detail += f"; note: this machine's GPU is {here}, the table's is {d['gpu']}"
    return Plan(**call, split_k=d["split_k"], reduction=d["reduction"], source=d["source"],
                gpu=d["gpu"], tile=d["tile"], stages=d["stages"], cluster=d["cluster"],
                algo_id=d["algo_id"], detail=detail)


@torch.compiler.assume_constant_result
def _plan_split(m: int, n: int, k: int, out: str, fast: bool, scale: str, bias: str, gpu: str,
                device: str) -> int:
    """explain()'s split for a call (bias: its dtype's name or ""; device: "" for CPU
    tensors). A constant for torch.compile: the plan depends on shapes and settings only."""
    if not gpu and not device and not torch.cuda.is_available():
        gpu = "h100"  # CPU tensors on a machine without a GPU: the H100's tables, said once
        if not _warned_default_gpu:
            _warned_default_gpu.append(True)
            import warnings
            warnings.warn("fp8sim.torch: CPU tensors get cuBLASLt's plan as recorded on an H100 "
                          "(gpu='h100'); pass gpu= or split_k= to choose", stacklevel=4)
    # cuBLASLt's workspace limit is part of the question asked of the GPU (cublaslt_plan).
    workspace = "" if gpu else os.environ.get("CUBLASLT_WORKSPACE_SIZE", "")
    return _plan_split_of(m, n, k, out, fast, scale, bias, gpu, device, workspace)


@functools.lru_cache(maxsize=4096)
def _plan_split_of(m: int, n: int, k: int, out: str, fast: bool, scale: str, bias: str,
                   gpu: str, device: str, workspace: str) -> int:
    """_plan_split's answer, asked once per shape and setting: a recorded table's answer is
    fixed, and cuBLASLt's heuristic on the GPU (a query through ctypes for every GEMM of a
    training step before) depends only on these and the workspace limit."""
    return explain(m, n, k, out_dtype=out, use_fast_accum=fast, scale=scale,
                   bias=bias or False, gpu=gpu or None,
                   device=torch.device(device) if device else None).split_k


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
        model, promote_every, scale_order = "hopper-wgmma", 0, "deepgemm"  # the op's defaults
    elif promote_every is None:
        promote_every = 0 if (model is not None or use_fast_accum) else 128
    model = model or "hopper-wgmma"
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
    d = torch.ops.fp8sim.gemm(_codes(a.contiguous()), _codes(bt), None, sa.contiguous(),
                              sb.contiguous(), FORMAT_OF_DTYPE[a.dtype],
                              FORMAT_OF_DTYPE[b.dtype], model, promote_every, scaling, 128,
                              scale_order, "f32" if fp8_out else out_type, threads,
                              None if bias is None else bias.to(torch.float32), split_k,
                              split_k_align or (128 if preset else
                                                512 if scaling == "block" else 128),
                              kernel_preset=preset)
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


@torch.compiler.assume_constant_result
def _engine_scaling(name: str) -> str:
    """The engine's scaling (none|tensor|row|block|mx) for a scaling name, as the library
    maps it (a constant for torch.compile)."""
    return _fp8sim._core.gemm_scaling(name)


def _recipe_mm(g: GemmRecipe, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A (M x K) times B^T (B: N x K) under recipe g, float32 M x N. An empty product (a
    batch of 0 rows, or K = 0 in Wgrad of an empty batch) is zeros, as torch.mm gives."""
    if a.shape[0] == 0 or b.shape[0] == 0 or a.shape[1] == 0:
        return a.new_zeros((a.shape[0], b.shape[0]), dtype=torch.float32)
    # Eager CUDA tensors call the library directly: the scales it computes on the host stay
    # there, where the engine reads them (the ops return them as CUDA tensors, which the GEMM
    # then copied back: two uploads, two downloads and their waits per GEMM). The same calls
    # and values otherwise; torch.compile traces the ops.
    direct = a.is_cuda and not torch.compiler.is_compiling()
    if direct:
        qa = _timed_quantize(a, g.a_format, g.a_scaling, role="a")
        qb = _timed_quantize(b, g.b_format, g.b_scaling, role="b")
        ca, sa, cb, sb = qa.codes, qa.scales, qb.codes, qb.scales
    else:
        ca, sa = torch.ops.fp8sim.quantize(a, g.a_format, g.a_scaling, "a")
        cb, sb = torch.ops.fp8sim.quantize(b, g.b_format, g.b_scaling, "b")
    scaling = _engine_scaling(g.a_scaling)
    split_k = 1
    if g.kernel.startswith("cublaslt"):  # cuBLASLt's split-K for this shape (explain())
        split_k = _plan_split(a.shape[0], b.shape[0], a.shape[1], "f32",
                              g.kernel == "cublaslt-fast-accum", scaling, "", "",
                              str(a.device) if a.is_cuda else "")
    sa, sb = (sa, sb) if scaling != "none" else (None, None)
    align = 512 if scaling == "block" else 128
    if direct:
        return _timed_gemm(a.shape[0], b.shape[0], a.shape[1], ca, cb, a_format=g.a_format,
                           b_format=g.b_format, model=g.model, promote_every=g.promote_every,
                           a_scales=sa, b_scales=sb, scaling=g.a_scaling,
                           scale_order=g.scale_order, out_type="f32", split_k=split_k,
                           split_k_align=align)
    return torch.ops.fp8sim.gemm(ca, cb, None, sa, sb, g.a_format, g.b_format, g.model,
                                 g.promote_every, g.a_scaling, None, g.scale_order, "f32",
                                 split_k=split_k, split_k_align=align)


class _Float8LinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, r: Recipe) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.recipe = r
        return _recipe_mm(r.fprop, x, weight).to(x.dtype)

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        x, weight = ctx.saved_tensors
        r = ctx.recipe
        dx = _recipe_mm(r.dgrad, dy, weight.t().contiguous()).to(x.dtype)
        dw = _recipe_mm(r.wgrad, dy.t().contiguous(), x.t().contiguous()).to(weight.dtype)
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
        x2 = x.reshape(-1, self.in_features)
        y = _Float8LinearFunction.apply(x2, self.weight, self.recipe)
        y = y.reshape(*x.shape[:-1], self.out_features)
        return y + self.bias if self.bias is not None else y

    def extra_repr(self) -> str:
        return super().extra_repr() + f", recipe={self.recipe.name}"


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
