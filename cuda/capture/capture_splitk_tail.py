"""capture_splitk_tail: does cuBLASLt's split-K sum the K tail? (issue 35, item 4)

A public report (bitequiv, #2767) says cuBLAS's split-K sometimes sums only the first
K - (K mod block_k) terms. This runs torch._scaled_mm (e4m3, tensor scales 1, f32 and bf16
out, fast accumulation off and on) at shapes cuBLASLt splits (its own heuristic, through
fp8sim.cublaslt_plan.query) with K not a multiple of 128, and keeps D with the split cuBLASLt
chose. The operands are drawn on the CPU from numpy's default_rng(seed) (N(0, 2^2), cast to
e4m3 by torch), so a machine without a GPU draws them again (tests/python/test_splitk_tail.py
checks their sha256, then computes D with and without the tail):

    python3 cuda/capture/capture_splitk_tail.py --out tests/data/hw/splitk_tail_h100
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = [(1, 64, 5280), (4, 128, 9744), (8, 64, 20016), (2, 96, 33328), (16, 64, 16400),
          (1, 2160, 5280), (12, 128, 65552), (3, 32, 100016), (5, 48, 12304), (8, 16, 40976)]


def plan_module():
    path = os.path.join(HERE, "..", "..", "python", "fp8sim", "cublaslt_plan.py")
    spec = importlib.util.spec_from_file_location("fp8sim_cublaslt_plan", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=354)
    args = ap.parse_args()
    cp = plan_module()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    one = torch.tensor(1.0, device="cuda")
    cases = []
    for m, n, k in SHAPES:
        for out, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
            for fast in (False, True):
                plan = cp.query(m, n, k, out_dtype=out, use_fast_accum=fast, scale_mode="tensor")
                draw = lambda rows: torch.from_numpy(  # noqa: E731
                    (rng.standard_normal((rows, k)) * 2).astype(np.float32)).to(torch.float8_e4m3fn)
                a, b = draw(m), draw(n)
                d = torch._scaled_mm(a.cuda(), b.cuda().t(), one, one, out_dtype=dtype,
                                     use_fast_accum=fast)
                tag = f"t{len(cases)}"
                np.save(os.path.join(args.out, f"{tag}_d.npy"), d.float().cpu().numpy())
                sha = lambda x: hashlib.sha256(x.view(torch.uint8).numpy().tobytes()).hexdigest()  # noqa: E731
                cases.append(dict(tag=tag, m=m, n=n, k=k, out=out, fast=fast, a_sha=sha(a),
                                  b_sha=sha(b), split_k=plan["split_k"], tile=plan["tile"],
                                  reduction=plan["reduction"]))
                print(cases[-1], flush=True)
    with open(os.path.join(args.out, "tail.json"), "w") as f:
        json.dump(dict(cases=cases, versions=cp.versions(), seed=args.seed,
                       generator="cuda/capture/capture_splitk_tail.py"), f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
