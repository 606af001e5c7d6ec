"""fp8sim._torch_reuse: a linear layer's quantised operand reused, transposed, by a later GEMM
of the same step, where the recipe's quantisation of the transpose is exactly the transposed
codes and scales: Dgrad's W^T from Fprop's W, and (per-tensor scaling) Wgrad's X^T from
Fprop's X and dY^T from Dgrad's dY. Used by ``_torch_linear``'s ``Float8Linear``.

Quantisation is a pure function of the tensor: each element is RNE(x / s) of its scale
group's scale, and a scale is a function of its group's largest magnitude, the format and the
scale encoding. So quantising X^T gives the transposes of X's codes and scales exactly where
the groups of X^T are the transposes of X's groups: one group (``tensor``, ``none``) or square
blocks (``block128`` for B: 128 x 128). Elsewhere it does not: DeepSeek-V3's activations and
gradients (1 x 128 along K) become 128 x 1 columns when transposed, MX blocks (1 x 32) likewise,
row scales become column scales; those are quantised afresh. ``reusable`` decides by the
library's own scale-shape rule; tests/python/test_torch_reuse.py checks every scaling name's
reused operand against a fresh quantisation, bit for bit, and ``FP8SIM_VERIFY_REUSE=1`` (or
``VERIFY = True``) makes every reuse check itself against one at run time."""
from __future__ import annotations

import functools
import os

import numpy as np
import torch

import fp8sim as _fp8sim

# Each reuse also quantised afresh and compared (tests; a few percent of a step's time).
VERIFY = os.environ.get("FP8SIM_VERIFY_REUSE", "") not in ("", "0")

# A probe shape with unequal sides and several scale groups along each (multiples of every
# block the library has: 16, 32, 128).
_PROBE_T, _PROBE_K = 384, 640


@torch.compiler.assume_constant_result
def reusable(fmt_from: str, scaling_from: str, role_from: str, fmt_to: str, scaling_to: str,
             role_to: str) -> bool:
    """Whether quantising X^T as (fmt_to, scaling_to, role_to) gives exactly the transposes
    of X's codes and scales quantised as (fmt_from, scaling_from, role_from): the same format
    and scaling (name and scale encoding), one level of scales, and the scale groups of the
    transpose the transposes of X's (the library's scale shape of T x K under the first
    equals that of K x T under the second, reversed, at a shape with unequal sides). A
    constant for torch.compile.

    >>> reusable("e4m3", "tensor", "a", "e4m3", "tensor", "b")  # X for Wgrad's X^T
    True
    >>> [reusable("e4m3", "block128", r, "e4m3", "block128", r) for r in "ab"]  # 1x128, 128x128
    [False, True]
    """
    return _reusable(fmt_from, scaling_from, role_from, fmt_to, scaling_to, role_to)


@functools.lru_cache(maxsize=256)
def _reusable(fmt_from: str, scaling_from: str, role_from: str, fmt_to: str, scaling_to: str,
              role_to: str) -> bool:
    if fmt_from != fmt_to or scaling_from != scaling_to:
        return False
    core = _fp8sim._core
    if core.scaling_is_two_level(scaling_from):
        return False
    rows, cols = core.quantize_scale_shape(_PROBE_T, _PROBE_K, scaling_from, role_from)
    rows_t, cols_t = core.quantize_scale_shape(_PROBE_K, _PROBE_T, scaling_to, role_to)
    return (rows, cols) == (cols_t, rows_t)


def transposed(q: tuple, fmt: str, scaling: str, role: str,
               fresh_of=None) -> tuple:
    """The quantised transpose (codes^T, scales^T) of a quantised operand q = (codes,
    scales), reusable() having said yes. With VERIFY, ``fresh_of()`` (the float transpose)
    is quantised afresh (outside the timers) and a difference raises RuntimeError."""
    codes, scales = q
    out = (_codes_t(codes), scales.t().contiguous())
    if VERIFY and fresh_of is not None:
        check_same(out, fresh_of(), fmt, scaling, role)
    return out


def _codes_t(codes: torch.Tensor) -> torch.Tensor:
    """codes^T, contiguous: eager CUDA codes through the library's transpose, on torch's
    current stream (torch's copy of a transposed uint8 tensor ran at about a tenth of the
    memory's speed on an H100); else torch's."""
    if (codes.is_cuda and not torch.compiler.is_compiling() and codes.dim() == 2 and
            codes.is_contiguous() and codes.dtype == torch.uint8):
        out = _fp8sim._written_whole((codes.shape[1], codes.shape[0]), dtype=torch.uint8,
                                     device=codes.device)
        _fp8sim._core.transpose_codes_cuda(
            codes, out, torch.cuda.current_stream(codes.device).cuda_stream)
        return out
    return codes.t().contiguous()


def check_same(q: tuple, x_t: torch.Tensor, fmt: str, scaling: str, role: str) -> None:
    """Raises RuntimeError where q = (codes, scales) is not, bit for bit, the quantisation of
    x_t (fmt, scaling, role) that fp8sim.quantize gives."""
    f = _fp8sim.quantize(x_t.detach(), fmt, scaling, role=role)
    codes = f.codes.cpu() if isinstance(f.codes, torch.Tensor) else torch.from_numpy(f.codes)
    want_s = np.ascontiguousarray(f.scales)
    got_s = q[1].detach().cpu().numpy()
    same_codes = codes.shape == q[0].shape and torch.equal(codes, q[0].detach().cpu())
    same_scales = (got_s.shape == want_s.shape and got_s.dtype == want_s.dtype and
                   np.array_equal(got_s.view(np.uint8), want_s.view(np.uint8)))
    if not (same_codes and same_scales):
        raise RuntimeError(f"fp8sim.torch: a reused transposed operand ({fmt}, {scaling}, role "
                           f"{role}) differs from a fresh quantisation "
                           f"({'codes' if not same_codes else 'scales'})")
