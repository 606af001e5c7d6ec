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
               split_k: Optional[int] = None, threads: int = 0):
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
