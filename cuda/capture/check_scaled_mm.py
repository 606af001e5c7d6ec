"""check_scaled_mm: fp8sim.torch.scaled_mm against live torch._scaled_mm on this GPU, bit for bit.

Random shapes (seeded): M log-uniform in 1..16384, N and K from the layer dimensions of open
LLM families or random multiples of 16 (at most --max-macs multiply-adds a call, so that the
emulation stays quick); for each shape every output type (f32, bf16, f16), fast accumulation
off and on, tensor and row scales. fp8sim's split-K comes from its plan for the call
(fp8sim.torch.explain: asked of cuBLASLt on this GPU), nothing is passed by hand. Prints one
line per differing call, then the counts; writes them with the GPU's provenance to --json.
Exit 0 when every call is bit-identical, 1 otherwise, 2 without a GPU.

    python3 cuda/capture/check_scaled_mm.py --shapes 300 --json scaled_mm.json
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys

import torch

LLM_DIMS = [896, 1024, 1536, 2048, 2560, 3584, 4096, 4864, 5120, 6144, 7168, 8192, 8960, 11008,
            12288, 13824, 14336, 18432, 28672]
OUTS = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def shapes(count: int, seed: int, max_macs: float) -> list[tuple[int, int, int]]:
    r = random.Random(seed)
    out = []
    while len(out) < count:
        m = max(1, min(16384, int(round(math.exp(r.uniform(0, math.log(16384)))))))
        n, k = (r.choice(LLM_DIMS) if r.random() < 0.5 else 16 * r.randint(1, 1024)
                for _ in range(2))
        if m * n * k <= max_macs:
            out.append((m, n, k))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", type=int, default=300)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--max-macs", type=float, default=2.0 ** 34)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("check_scaled_mm: no CUDA device", file=sys.stderr)
        return 2
    import fp8sim.torch as ft
    from fp8sim import cublaslt_plan
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(args.seed)  # operands drawn on the GPU
    calls = same = 0
    splits: dict = {}
    bad = []
    for si, (m, n, k) in enumerate(shapes(args.shapes, args.seed, args.max_macs)):
        if si % 50 == 0:
            print(f"check_scaled_mm: shape {si}: {same} of {calls} calls identical so far", flush=True)
        a = (torch.randn((m, k), generator=g, device=dev) * 2).to(torch.float8_e4m3fn)
        b = (torch.randn((n, k), generator=g, device=dev) * 2).to(torch.float8_e4m3fn).t()
        scales = {"tensor": (torch.tensor(0.1234567, device=dev), torch.tensor(7.654321, device=dev)),
                  "row": (torch.rand((m, 1), generator=g, device=dev) * 3 + 0.05,
                          torch.rand((1, n), generator=g, device=dev) * 3 + 0.05)}
        for mode, (sa, sb) in scales.items():
            for out, dt in OUTS.items():
                for fast in (False, True):
                    try:
                        want = torch._scaled_mm(a, b, sa, sb, out_dtype=dt, use_fast_accum=fast)
                    except RuntimeError as e:  # torch refuses the call itself
                        print(f"{m}x{n}x{k} {mode} {out} fast{int(fast)}: torch: {str(e).splitlines()[0]}")
                        continue
                    got = ft.scaled_mm(a, b, sa, sb, out_dtype=dt, use_fast_accum=fast)
                    plan = ft.explain(m, n, k, out_dtype=dt, use_fast_accum=fast, scale=mode,
                                      device=dev)
                    calls += 1
                    splits[plan.split_k] = splits.get(plan.split_k, 0) + 1
                    w, gt = want.view(torch.int16 if dt != torch.float32 else torch.int32), \
                        got.view(torch.int16 if dt != torch.float32 else torch.int32)
                    differ = int((w != gt).sum())
                    if differ == 0:
                        same += 1
                    else:
                        line = (f"{m}x{n}x{k} {mode} {out} fast{int(fast)}: {differ} of {w.numel()} "
                                f"outputs differ (split {plan.split_k})")
                        bad.append(line)
                        print(line, flush=True)
    v = cublaslt_plan.versions()
    summary = {"gpu": v["gpu"], "cublaslt": v["cublaslt_version"], "torch": v["torch"],
               "shapes": args.shapes, "seed": args.seed, "calls": calls, "identical": same,
               "differ": calls - same, "splits": {str(s): c for s, c in sorted(splits.items())},
               "differing": bad}
    print(f"check_scaled_mm: {v['gpu']}, cuBLASLt {v['cublaslt_version']}, torch {v['torch']}: "
          f"{same} of {calls} calls bit-identical on {args.shapes} shapes (split-K counts "
          f"{summary['splits']})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0 if same == calls else 1


if __name__ == "__main__":
    sys.exit(main())
