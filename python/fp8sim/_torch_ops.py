"""fp8sim._torch_ops: the ``torch.library`` custom ops of ``fp8sim.torch`` (``fp8sim::gemm``,
``fp8sim::quantize``, ``fp8sim::encode``) with their fake kernels, and the timers of the GEMMs
and quantisations they run (``timed``). Imported by ``fp8sim.torch``, which re-exports them."""
from __future__ import annotations

import contextlib
import functools
import time
from dataclasses import dataclass
from typing import Iterator, Optional

import torch

import fp8sim as _fp8sim

from . import _args

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
    excluded; 0 on the CPU), added when the ``timed`` block ends, which waits for those
    kernels then (a GEMM on CUDA tensors returns without waiting for its kernels where it has
    nothing to report). ``gemm_s``: wall time inside the GEMM calls (on the CPU the engine's
    whole work; on a GPU the engine's set-up and launches, and its wait where it synchronises:
    a code check, scales the engine reads on the host). ``quantize_s``: wall time inside the
    quantisations (on a GPU their launches: codes and scales stay there; a quantisation
    without scales waits for them). ``macs``: M * N * K summed over the GEMMs."""
    gemm_calls: int = 0
    macs: int = 0
    kernel_s: float = 0.0
    gemm_s: float = 0.0
    quantize_calls: int = 0
    quantize_s: float = 0.0


_timers: list = []  # the active GemmTime objects (timed)
_unread: dict = {}  # id(GemmTime) -> kernel events of its GEMMs, read when its block ends


@contextlib.contextmanager
def timed(t: Optional[GemmTime] = None) -> Iterator[GemmTime]:
    """Within the block, every emulated GEMM and quantisation of this module adds its time to
    ``t`` (a new GemmTime when not given), which the block yields; blocks may nest.

    >>> from fp8sim.torch import Float8Linear
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
        # The kernels' time, waiting for them: a CUDA fault of the block's GEMMs surfaces
        # here at the latest (or at torch's first synchronisation before it).
        t.kernel_s += sum(e.seconds() for e in _unread.pop(id(t), ()))
    # An operand quantised without waiting for the GPU that held a value that is not finite
    # is raised here at the latest (ValueError), the GPU's work waited for.
    _fp8sim._core.check_deferred(True)


def _timed_gemm(m: int, n: int, k: int, *args, gemm=None, **kwargs):
    """``fp8sim.gemm(*args, **kwargs)`` (an m x n x k GEMM; or ``gemm``'s, a function of the
    same results), its time added to the timers: its kernels' events (this thread's, taken
    without waiting) are read when the timers' blocks end; without timers they go back to the
    engine unread."""
    t0 = time.perf_counter()
    d = (gemm or _fp8sim.gemm)(*args, **kwargs)
    dt = time.perf_counter() - t0
    events = _fp8sim._core.device_kernel_take()  # this call's kernels (no wait)
    for t in _timers:
        t.gemm_calls += 1
        t.macs += m * n * k
        t.gemm_s += dt
        if len(events):
            _unread.setdefault(id(t), []).append(events)
    return d


def _timed_quantize(*args, **kwargs):
    """``fp8sim.quantize(*args, **kwargs)``, its time added to the timers."""
    return _timed_quantisation(_fp8sim.quantize, *args, **kwargs)


@torch.compiler.assume_constant_result
def _engine_scaling(name: str) -> str:
    """The engine's scaling (none|tensor|row|block|mx) for a scaling name, as the library
    maps it (a constant for torch.compile)."""
    return _fp8sim._core.gemm_scaling(name)


def _timed_quantize_operand(x, fmt: str, scaling: str, role: str) -> tuple:
    """A CUDA tensor quantised for a GEMM, its time added to the timers: (codes, scales), both
    CUDA tensors, with no wait for the GPU (``fp8sim._quantize_cuda_deferred``: an element
    that is not finite makes the scales NaN and is raised by a later call) where the scaling
    has one level of scales; without scales, the codes and host scales of a quantisation that
    waits for its scales (the saturated count not made)."""
    if _engine_scaling(scaling) != "none":
        return _timed_quantisation(_fp8sim._quantize_cuda_deferred, x, fmt, scaling, role)
    q = _timed_quantisation(_fp8sim._quantize_cuda, x, fmt, scaling, role, 0,
                            count_saturated=False)
    return q.codes, torch.from_numpy(q.scales)


def _timed_quantisation(fn, *args, **kwargs):
    if not _timers:
        return fn(*args, **kwargs)
    t0 = time.perf_counter()
    q = fn(*args, **kwargs)
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
    # The Python entry checks its arguments first (one line naming one, fp8sim._args), within
    # the schema's int64 ints; torch.ops.fp8sim.<name> itself is torch's schema parser.
    check = _args.arguments(fn, f"fp8sim.torch.{name}", **{
        p: (0, 2**63 - 1) for p in ("seed",)})

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if not torch.compiler.is_compiling():  # traced: the op's schema and fake kernel check
            args, kwargs = check(*args, **kwargs)
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
    _one_level(scaling)
    if x.is_cuda:  # on the GPU: codes stay there, the scales come back (they are few)
        q = _timed_quantize(x, fmt, scaling, role=role)
        return q.codes, torch.from_numpy(q.scales).to(x.device)
    q = _timed_quantize(x.detach(), fmt, scaling, role=role)
    if q.codes.dtype.itemsize != 1:
        raise ValueError(f"fp8sim::quantize: format {fmt} has more than 8 bits")
    return torch.from_numpy(q.codes), torch.from_numpy(q.scales)


def _one_level(scaling: str) -> None:
    """Refuses a two-level scaling (nvfp4: UE4M3 block scales under a per-tensor scale): the
    op returns codes and one level of scales, and would drop the tensor scale (every value
    off by it)."""
    if _fp8sim._core.scaling_is_two_level(scaling):
        raise ValueError(f"fp8sim::quantize: scaling {scaling} has two levels of scales (block "
                         "scales under a tensor scale) and the op returns one: use "
                         "fp8sim.quantize (Quantized.tensor_scales) and fp8sim.gemm")


@quantize.register_fake
def _(x, fmt="e4m3", scaling="tensor", role="a"):
    _one_level(scaling)
    torch._check(x.dim() == 2)
    # The scale shape from the library's one rule (sim/scaling/scaling.hpp gemm_scale_shape), as the
    # real op gets it; T and K become concrete here (a symbolic shape is specialised).
    rows, cols = _fp8sim._core.quantize_scale_shape(
        int(x.shape[0]), int(x.shape[1]), scaling, role)
    return (x.new_empty(x.shape, dtype=torch.uint8),
            x.new_empty((rows, cols), dtype=torch.float32))


@_op
def encode(x: torch.Tensor, fmt: str = "e4m3", rounding: str = "rne",
           overflow: str = "saturate", seed: Optional[int] = None) -> torch.Tensor:
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
def _(x, fmt="e4m3", rounding="rne", overflow="saturate", seed=None):
    return x.new_empty(x.shape, dtype=torch.uint8)
