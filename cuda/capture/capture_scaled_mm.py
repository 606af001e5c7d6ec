"""capture_scaled_mm: torch._scaled_mm (cuBLASLt) on a GPU, captured for fp8sim replay.

For each shape (--shape MxNxK, many) and each epilogue of the plan (scale mode, output type,
bias, fast accumulation) it runs torch._scaled_mm on seeded random E4M3 operands and writes
windows of D (the first and the last `--window` rows and columns) with the rows of A and B
and the scales they need, as a capture folder (manifest.json + .npy, the format sim/capture
reads). With CUBLASLT_LOG_LEVEL=5 (set here before torch loads cuBLASLt) each case also
records the algorithm cuBLASLt chose, from its own trace line of the matmul (id, tile,
stages, split-K count, reduction scheme, custom option, cluster shape, workspace), and the
fp8sim model that reproduces it (docs/cublaslt.md): hopper-wgmma promoted every 128 (never
with fast accumulation), split_k = cuBLASLt's numSplitsK (slices aligned to 512 for block
scales), scale order cublaslt. --check then replays the capture through fp8sim and prints,
per shape, ok or the first case that differs (exit 1).

  python3 cuda/capture/capture_scaled_mm.py --out DIR --plan epilogues|shapes --shape 64x64x4096 ... [--check]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile

LOG = os.path.join(tempfile.mkdtemp(prefix="fp8sim-lt-"), "cublaslt.log")
os.environ.setdefault("CUBLASLT_LOG_LEVEL", "5")
os.environ.setdefault("CUBLASLT_LOG_FILE", LOG)

import numpy as np  # noqa: E402
import torch  # noqa: E402

E4M3 = torch.float8_e4m3fn


def parse_shape(s: str) -> tuple[int, int, int]:
    m = re.fullmatch(r"(\d+)x(\d+)x(\d+)", s)
    if not m:
        raise SystemExit(f"capture_scaled_mm: --shape {s!r}: expected MxNxK")
    return tuple(int(v) for v in m.groups())


def log_tail(offset: int) -> tuple[dict, int]:
    """The algorithm of the last matmul cuBLASLt traced since `offset` ({} if none)."""
    try:
        with open(LOG, "r", errors="replace") as f:
            f.seek(offset)
            text = f.read()
            end = f.tell()
    except FileNotFoundError:
        return {}, offset
    algo = {}
    for ln in text.splitlines():
        if "[Trace][cublasLtMatmul]" in ln:
            m = re.search(r"algo=\[([^\]]*)\]", ln)
            algo = dict(kv.split("=", 1) for kv in m.group(1).split()) if m else {}
            w = re.search(r"workSpaceSizeInBytes=(\d+)", ln)
            algo["workspace"] = int(w.group(1)) if w else 0
    return algo, end


def kernel_name(algo: dict) -> str:
    """One line naming cuBLASLt's choice, e.g. 'torch._scaled_mm cuBLASLt algo 66 tile 64x32
    stages 128xAUTO splitK 22 reduction COMPUTE_TYPE custom 0 cluster 2x1x1 workspace 1048576'."""
    short = lambda k, p="": algo.get(k, "-").replace(p, "")  # noqa: E731
    return (f"torch._scaled_mm cuBLASLt algo {short('algoId')} tile {short('tile', 'MATMUL_TILE_')} "
            f"stages {short('stages', 'MATMUL_STAGES_')} splitK {algo.get('numSplitsK', '1')} "
            f"reduction {short('reductionScheme', 'REDUCTION_SCHEME_')} "
            f"custom {algo.get('customOption', '0')} cluster {short('clusterShape', 'CLUSTER_SHAPE_')} "
            f"workspace {algo.get('workspace', 0)}")


def scales(kind: str, M: int, N: int, K: int, g: torch.Generator, dev):
    """(scale_a, scale_b) as torch._scaled_mm takes them, and their fp8sim names/layouts."""
    if kind == "tensor-pow2":
        return torch.tensor(0.5, device=dev), torch.tensor(4.0, device=dev)
    if kind == "tensor":
        return torch.tensor(0.1234567, device=dev), torch.tensor(7.654321, device=dev)
    if kind == "row":
        sa = torch.rand((M, 1), generator=g, device="cpu").to(dev) * 3 + 0.05
        sb = torch.rand((1, N), generator=g, device="cpu").to(dev) * 3 + 0.05
        return sa, sb
    if kind == "block":  # DeepSeek: A 1x128, B 128x128; torch wants outer-dim-major scales
        sa = (torch.rand((K // 128, M), generator=g) * 3 + 0.05).to(dev).t()
        sb = (torch.rand(((N + 127) // 128, K // 128), generator=g) * 3 + 0.05).to(dev).t()
        return sa, sb
    raise SystemExit(f"capture_scaled_mm: unknown scale mode {kind}")


EPILOGUES = [  # (scale mode, out dtype, bias, fast accum)
    (s, o, bias, fa)
    for s in ("tensor-pow2", "tensor", "row", "block")
    for o in ("f32", "bf16", "f16")
    for bias in (False, True)
    for fa in (False, True)
    if not (bias and o == "f32")
]
SHAPE_TABLE = [("tensor", "f32", False, fa) for fa in (False, True)] + \
              [("tensor", "bf16", False, fa) for fa in (False, True)]
DTYPE = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def sync(dev) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize()


def windows(M: int, N: int, w: int):
    """(name, row0, col0, rows, cols): the first window and, where different, the last."""
    out = [("tl", 0, 0, min(w, M), min(w, N))]
    if M > w or N > w:
        out.append(("br", max(0, M - w), max(0, N - w), min(w, M), min(w, N)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--plan", choices=["epilogues", "shapes"], default="shapes")
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of the script itself")
    ap.add_argument("--check", action="store_true",
                    help="replay the capture through fp8sim and report ok per shape")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("capture_scaled_mm: no CUDA device", file=sys.stderr)
        return 2
    dev = torch.device(args.device)
    os.makedirs(args.out, exist_ok=True)
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        device = f"{props.name} (sm_{props.major}{props.minor}, {props.multi_processor_count} SMs)"
    else:
        device = "cpu (dry run)"
    manifest = {
        "fp8sim_capture": 1,
        "device": device,
        "driver": "", "cuda": f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
                             f"cuBLASLt {torch._C._cuda_getCompiledVersion() if hasattr(torch._C, '_cuda_getCompiledVersion') else ''}",
        "date": "", "git_revision": "", "generator": "cuda/capture/capture_scaled_mm.py (torch._scaled_mm)",
        "seed": args.seed, "cases": [], "unsupported": [],
    }
    try:
        import subprocess
        manifest["driver"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True).stdout.strip()
        import datetime
        manifest["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except OSError:
        pass
    plan = EPILOGUES if args.plan == "epilogues" else SHAPE_TABLE
    offset = 0
    for si, shape in enumerate(args.shape):
        M, N, K = parse_shape(shape)
        g = torch.Generator().manual_seed(args.seed * 1000003 + si)
        a = (torch.randn((M, K), generator=g) * 2).to(E4M3)
        b = (torch.randn((N, K), generator=g) * 2).to(E4M3)
        ad, bd = a.to(dev), b.to(dev)
        bias_all = {o: (torch.randn((N,), generator=g) * 8).to(DTYPE[o]) for o in ("bf16", "f16")}
        wins = windows(M, N, args.window)
        stem = f"{M}x{N}x{K}"
        for wname, r0, c0, rows, cols in wins:
            np.save(os.path.join(args.out, f"{stem}_{wname}_a.npy"),
                    a[r0:r0 + rows].view(torch.uint8).numpy())
            np.save(os.path.join(args.out, f"{stem}_{wname}_b.npy"),
                    b[c0:c0 + cols].view(torch.uint8).numpy())
        for kind, o, with_bias, fa in plan:
            sa, sb = scales(kind, M, N, K, g, dev)
            bias = bias_all[o].to(dev) if with_bias else None
            tag = f"{stem}_{kind}_{o}{'_bias' if with_bias else ''}{'_fast' if fa else ''}"
            sync(dev)
            _, offset = log_tail(offset)
            try:
                d = torch._scaled_mm(ad, bd.t(), sa, sb, bias=bias, out_dtype=DTYPE[o],
                                     use_fast_accum=fa)
                sync(dev)
            except (RuntimeError, ValueError, TypeError, NotImplementedError) as e:
                manifest["unsupported"].append({"case": tag, "error": str(e).splitlines()[0][:300]})
                continue
            algo, offset = log_tail(offset)
            split = int(algo.get("numSplitsK", "1"))
            d = d.float().cpu()
            sa_c, sb_c = sa.float().cpu(), sb.float().cpu()
            for wname, r0, c0, rows, cols in wins:
                name = f"{tag}_{wname}"
                case = {
                    "name": name, "kernel": kernel_name(algo), "suite": args.plan,
                    "a_format": "e4m3", "b_format": "e4m3", "model": "hopper-wgmma",
                    "promote_every": 0 if fa else 128, "scaling": "none", "block": 128,
                    "scale_order": "cublaslt", "out_type": o, "M": rows, "N": cols, "K": K,
                    "a": f"{stem}_{wname}_a.npy", "b": f"{stem}_{wname}_b.npy", "c": None,
                    "sa": None, "sb": None, "d": f"{name}_d.npy",
                    "shape": [M, N, K], "window": [r0, c0], "scale_mode": kind,
                    "use_fast_accum": fa, "bias": None, "algo": algo, "split_k": split,
                    "split_k_align": 512 if kind == "block" else 128,
                }
                np.save(os.path.join(args.out, f"{name}_d.npy"),
                        np.ascontiguousarray(d[r0:r0 + rows, c0:c0 + cols].numpy()))
                if kind.startswith("tensor"):
                    case.update(scaling="tensor", sa=f"{name}_sa.npy", sb=f"{name}_sb.npy")
                    np.save(os.path.join(args.out, case["sa"]), sa_c.reshape(1, 1).numpy())
                    np.save(os.path.join(args.out, case["sb"]), sb_c.reshape(1, 1).numpy())
                elif kind == "row":
                    case.update(scaling="row", sa=f"{name}_sa.npy", sb=f"{name}_sb.npy")
                    np.save(os.path.join(args.out, case["sa"]),
                            np.ascontiguousarray(sa_c[r0:r0 + rows].numpy()))
                    np.save(os.path.join(args.out, case["sb"]),
                            np.ascontiguousarray(sb_c[:, c0:c0 + cols].t().numpy()))
                elif kind == "block":
                    # fp8sim's block layout: A (rows, K/128); B (ceil(cols/128), K/128) for
                    # the window's columns (they sit in one 128-column block when aligned).
                    case.update(scaling="block", sa=f"{name}_sa.npy", sb=f"{name}_sb.npy",
                                window_b_blocks=[c0 // 128, (c0 + cols - 1) // 128])
                    np.save(os.path.join(args.out, case["sa"]),
                            np.ascontiguousarray(sa_c[r0:r0 + rows].numpy()))
                    np.save(os.path.join(args.out, case["sb"]),
                            np.ascontiguousarray(sb_c.t()[c0 // 128:(c0 + cols - 1) // 128 + 1].numpy()))
                if bias is not None:
                    case["bias"] = f"{name}_bias.npy"
                    np.save(os.path.join(args.out, case["bias"]),
                            bias_all[o][c0:c0 + cols].float().numpy())
                manifest["cases"].append(case)
        print(f"{shape}: {len(manifest['cases'])} cases so far", flush=True)
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return check(args.out) if args.check else 0


def check(out: str) -> int:
    """fp8sim's replay of the capture, one line per shape: ok, or the first case that differs."""
    import fp8sim
    shapes: dict = {}
    for c in fp8sim.replay(out)["cases"]:
        shape = c["name"].split("_")[0]
        ok, first = shapes.get(shape, (True, ""))
        if c["matches"] != c["total"] and ok:
            ok, first = False, c["line"]
        shapes[shape] = (ok, first)
    for shape, (ok, first) in shapes.items():
        print(f"{shape}: {'ok' if ok else 'DIFFERS: ' + first}")
    return 0 if all(ok for ok, _ in shapes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
