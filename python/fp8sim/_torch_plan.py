"""fp8sim._torch_plan: which split-K cuBLASLt runs for one ``torch._scaled_mm`` call
(``explain``, ``Plan``), asked of the GPU or read from the recorded tables. Imported by
``fp8sim.torch``, which re-exports it."""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Optional

import torch

import fp8sim as _fp8sim

from . import _args

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
    m, n, k, out_dtype, use_fast_accum, scale, bias, gpu, split_k, device = _check_explain(
        m, n, k, out_dtype, use_fast_accum, scale, bias, gpu, split_k, device)[0]
    out = out_dtype if isinstance(out_dtype, str) else _OUT_NAMES.get(out_dtype)
    if out not in _OUT_NAMES.values():
        raise ValueError(f"explain: out_dtype {out_dtype}: expected float32, bfloat16, float16 "
                         f"or an FP8 dtype (or their names {', '.join(_OUT_NAMES.values())})")
    if scale not in ("tensor", "row", "block"):
        raise ValueError(f"explain: scale {scale!r}: expected tensor, row or block")
    recorded = _fp8sim._core.recorded_gpus()
    if gpu is not None and gpu not in recorded and not (gpu.endswith(".json")
                                                        and os.path.isfile(gpu)):
        raise ValueError(f"explain: gpu {gpu!r}: no recorded cuBLASLt plans (recorded: "
                         f"{', '.join(recorded)}; or an existing table's .json path)")
    call = dict(m=int(m), n=int(n), k=int(k), out=out, use_fast_accum=bool(use_fast_accum),
                scale=scale)
    if split_k is not None:
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


# explain's arguments checked first (fp8sim._args): shapes and split_k in 1..2**30.
_check_explain = _args.arguments(explain, "fp8sim.torch.explain", m=(1, _args.MAX_DIM),
                                 n=(1, _args.MAX_DIM), k=(1, _args.MAX_DIM),
                                 split_k=(1, _args.MAX_DIM))


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
