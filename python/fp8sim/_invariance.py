"""fp8sim._invariance: which batch sizes change one row's bits (``fp8sim.invariance``), the
report of sim/analysis/invariance.hpp as a pandas DataFrame."""
from __future__ import annotations

from typing import Optional, Sequence, Union

import numpy as _np

from . import ArrayLike, _core, _require_pandas, as_array


def invariance(n: Optional[int] = None, k: Optional[int] = None,
               m: Union[str, Sequence[int]] = "1-4096", kernel: str = "cublaslt",
               gpu: str = "h100", out_type: str = "bf16", scaling: Optional[str] = None,
               fast_accum: bool = False, bias: bool = False, triton_config: Optional[str] = None,
               a_row: Optional[ArrayLike] = None, b: Optional[ArrayLike] = None, seed: int = 1,
               rows: bool = True, model: Optional[str] = None, mma_model: Optional[str] = None,
               promote_every: Optional[int] = None, scale_order: Optional[str] = None,
               split_k: Optional[int] = None, threads: int = 0, cublaslt_plan=None):
    """Which batch sizes change one row's bits, as ``fp8sim invariance``: the plan ``kernel``
    runs at each M of ``m`` (a range "1-4096", a list "1,2,4,8" or a sequence of ints) for
    an N x K weight, where each answer came from, the M ranges of one plan, how far one fixed
    input row's output moves at each change of plan (share of outputs changed, max ULP in the
    output type, max relative difference), and the setting that removes the change, checked
    with the same engine (``docs/invariance.md``).

    ``kernel``: a kernel preset (``kernels()``; cuBLASLt's plans on ``gpu`` with
    ``out_type``, ``scaling`` tensor|row|block, ``fast_accum``, ``bias``) or ``"none"`` for
    a loose recipe (``mma_model``, ``promote_every``, ``scale_order``, ``split_k``, fixed at
    every M). The row: seeded N(0, 1) activations and weights (``seed``), or ``a_row`` (K
    values) and ``b`` (N x K), quantised as the kernel does. ``rows=False``: plans only.
    ``model`` (``"deepseek-v3"``, ``"llama-3-8b"`` or a layer-list .json) gives every
    layer's N and K instead of ``n`` and ``k``.

    cuBLASLt's plan at each M: from the recorded tables of ``gpu`` ("h100", "h200" or a
    table's .json), or with ``gpu="cuda"`` (``"cuda:1"``) asked of cuBLASLt on this machine's
    GPU as torch asks it (source "gpu-query"; needs torch with CUDA), or from
    ``cublaslt_plan``: a function (m, n, k, out, fast_accum, scale, bias) returning a dict
    with ``split_k`` (and optionally ``reduction``: default COMPUTE_TYPE for a split, the
    scheme of every split recorded; ``tile``, ``stages``, ``cluster``,
    ``algo_id``, ``source``, ``gpu``, ``versions``, ``why``) or a str, the one line of a
    refusal (e.g. splits read from a trace of the calls).

    Returns a pandas DataFrame with one row per plan region (``m_lo``, ``m_hi``, ``points``,
    ``plan``, ``sources``, ``refused``, ``variant``, ``detail``, and ``changed_share``,
    ``max_ulp``, ``max_rel`` of the change into the region; with ``model`` a ``layer``,
    ``n``, ``k`` first). ``df.attrs`` (plain lists and dicts, so that pandas can compare and
    copy them; ``pd.DataFrame(df.attrs["points"])`` makes a table): ``points`` (the plan at
    every M, with ``options``: the GEMM the row ran with, as ``gemm()``'s keywords),
    ``changes``, ``verdict``, ``invariant``, ``fix`` (dict or None), ``text`` (the CLI's
    table), ``rows`` (the row's D under each distinct arithmetic, lists of floats; ``variant``
    indexes them); with ``model``: ``layers`` (one dict per layer). Needs pandas.

    >>> df = invariance(576, 7168, [1, 2, 4, 128, 256], fast_accum=True, out_type="f32")
    >>> df[["m_lo", "m_hi", "plan"]].values.tolist()
    [[1, 128, 'split-K 2'], [256, 256, 'split-K 1']]
    >>> df.attrs["fix"]["setting"], df.attrs["fix"]["invariant"]
    ('split_k=1', True)
    """
    import json
    pd = _require_pandas("invariance")
    spec = _core.InvarianceSpec()
    spec.kernel = "" if kernel == "none" else kernel
    if fast_accum:
        if kernel != "cublaslt":
            raise ValueError("fast_accum is cuBLASLt's: give kernel='cublaslt' (or "
                             "'cublaslt-fast-accum')")
        spec.kernel = "cublaslt-fast-accum"
    loose = dict(model=mma_model, promote_every=promote_every, scale_order=scale_order,
                 split_k=split_k)
    if spec.kernel and any(v is not None for v in loose.values()):
        raise ValueError(f"kernel {kernel} sets the model, promotion, scale order and split: "
                         "mma_model, promote_every, scale_order and split_k go with kernel='none'")
    for name, value in loose.items():
        if value is not None:
            setattr(spec, name, value)
    spec.gpu, spec.out_type = gpu, {"fp32": "f32", "fp16": "f16"}.get(out_type, out_type)
    if isinstance(gpu, str) and (gpu == "cuda" or gpu.startswith("cuda:")):
        if cublaslt_plan is not None:
            raise ValueError("give gpu='cuda' (cuBLASLt asked on this GPU) or cublaslt_plan, "
                             "not both")
        name, ask = _ask_gpu(gpu)
        if spec.kernel.startswith("cublaslt"):
            spec.gpu, cublaslt_plan = name, ask
        else:  # a server's config files are per GPU model: this GPU's recorded name
            spec.gpu = next((g for g in _core.recorded_gpus() if g in name.lower()), name)
    if cublaslt_plan is not None:
        if not callable(cublaslt_plan):
            raise TypeError("cublaslt_plan: expected a function (m, n, k, out, fast_accum, "
                            "scale, bias) -> dict or str")
        spec.ask_cublaslt(cublaslt_plan)
    spec.scaling, spec.bias = scaling or "", bool(bias)
    spec.triton_config, spec.seed, spec.rows, spec.threads = triton_config or "", seed, rows, threads
    spec.m = _core.parse_m_list(m) if isinstance(m, str) else _m_values(m)

    def floats(x, name):
        return None if x is None else _np.ascontiguousarray(as_array(x), dtype=_np.float64)
    if model is not None:
        if n is not None or k is not None or b is not None:
            raise ValueError("model gives each layer's N and K and draws its weights: drop n, k "
                             "and b")
        layers, text, source = _core.model_invariance(str(model), spec, floats(a_row, "a_row"))
        records, summary = [], []
        for name, ln, lk, origin, report in layers:
            r = json.loads(report)
            records += [dict(layer=name, n=ln, k=lk, **g) for g in _regions(r)]
            summary.append(dict(layer=name, n=ln, k=lk, invariant=r["invariant"],
                                refused=r["refused"], verdict=r["verdict"], origin=origin))
        df = pd.DataFrame(records)
        df.attrs.update(layers=summary, text=text, source=source)
        return df
    if n is None or k is None:
        raise ValueError("give n and k (or model)")
    spec.n, spec.k = _m_values([n])[0], _m_values([k])[0]
    report, text, distinct_rows = _core.invariance(spec, floats(a_row, "a_row"), floats(b, "b"))
    r = json.loads(report)
    df = pd.DataFrame(_regions(r))
    df.attrs.update(points=r["points"], changes=r["changes"], verdict=r["verdict"],
                    invariant=r["invariant"], fix=r.get("fix"), text=text,
                    rows=distinct_rows.tolist(), input=r["input"])
    return df


def _ask_gpu(device: str):
    """(the GPU's name, a cublaslt_plan function asking cuBLASLt on `device`), as
    fp8sim.torch.explain asks it; a one-line ValueError where no CUDA GPU is here."""
    try:
        import torch
    except ImportError:
        raise ValueError(f"gpu={device!r}: needs torch with CUDA (not installed here); name a "
                         "recorded GPU (gpu='h100' or 'h200')") from None
    if not torch.cuda.is_available():
        raise ValueError(f"gpu={device!r}: no CUDA GPU here to ask cuBLASLt; name a recorded "
                         "GPU (gpu='h100' or 'h200')")
    from . import cublaslt_plan as lt
    dev = torch.device(device)
    v = lt.versions(dev)
    versions = f"cuBLASLt {v['cublaslt_version']}, torch {v['torch']}"

    def ask(m, n, k, out, fast, scale, bias):
        try:  # the bias torch passes: bf16 for f32 out, else the output's type (explain's)
            q = lt.query(m, n, k, out, use_fast_accum=fast, scale_mode=scale,
                         bias_dtype=("bf16" if out == "f32" else out) if bias else None,
                         device=dev)
        except (lt.PlanUnavailable, ValueError) as e:
            return f"cuBLASLt on {v['gpu']} at {m}x{n}x{k}: {e}"
        return dict(q, source="gpu-query", gpu=v["gpu"], versions=versions,
                    why=f"asked of cuBLASLt on {v['gpu']} as torch asks it")
    return v["gpu"], ask


def _m_values(values) -> list:
    """Whole numbers >= 1 (a one-line ValueError otherwise)."""
    out = []
    for v in values:
        if isinstance(v, bool) or not float(v).is_integer() or int(v) < 1:
            raise ValueError(f"M, N, K: {v!r} is not a whole number >= 1")
        out.append(int(v))
    return out


def _regions(r: dict) -> list:
    """One dict per plan region of a report, with the movement of the change into it."""
    moved = {c["m_after"]: c for c in r["changes"]}
    rows = []
    for g in r["regions"]:
        c = moved.get(g["m_lo"])
        rows.append(dict(m_lo=g["m_lo"], m_hi=g["m_hi"], points=g["points"], plan=g["plan"],
                         sources=g["sources"], refused=g["refused"], variant=g["variant"],
                         changed_share=None if c is None else c["changed_share"],
                         max_ulp=None if c is None else c["max_ulp"],
                         max_rel=None if c is None else float(c["max_rel"]),
                         detail=g["detail"]))
    return rows
