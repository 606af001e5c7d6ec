"""capture_invariance: one input row's output at every batch size M, on a GPU, against the
batch-invariance report (issue 37, docs/invariance.md).

For each weight shape (--shape NxK) the script draws, on the CPU with NumPy (so that the
check can draw them again without the GPU), a seeded N(0, 1) activation row and N(0, 1)
weights, quantises them to E4M3 as each kernel takes them, and runs the SAME row, as row 0,
at every M of the list (at least 40 values from 1 to 4096; the other M - 1 rows are fresh
random codes and scales at every M, so that only the batch size and its plan are common):

  cublaslt  torch._scaled_mm: tensor scales (one per operand) and row scales (per row of A,
            per column of B), bf16 and f32 out (torch refuses some: kept as "unsupported"),
            fast accumulation off and on. cuBLASLt's own trace (CUBLASLT_LOG_LEVEL=5, read as
            capture_scaled_mm.py does) records the split-K it ran at each M.
  triton    with --triton-upstream vllm=PATH/fp8_utils.py: the Triton block-FP8 kernel taken
            unchanged from the upstream file (capture_triton.py's loading), 1x128 / 128x128
            scales, bf16 and f32 out; the launch config per M is vLLM's: the entry of a tuned
            config JSON (--triton-configs FOLDER: vLLM's configs/ folder, the file named for
            N, K and this GPU) whose M key is nearest, else the wrapper's default config. The
            config and the instruction its PTX uses (wgmma / mma.sync) are recorded per M.
  deepgemm  with --deepgemm DG_DIR: DeepGEMM's deep_gemm.fp8_gemm_nt (sm90_fp8_gemm_1d2d),
            the Triton case's block-quantised row, bf16 out, the config DeepGEMM picked per M
            (invariance_deepgemm.py: its build, parallel JIT warm-up and time budget).
            --deepgemm-only captures it alone and merges it into the capture in --out (or
            starts one there), leaving the cuBLASLt and Triton cases as they are.

Stored compactly (tests/data/hw/invariance/<gpu>/): per shape the row's codes and scales,
the weights' sha256 (the check draws them again), and per case the distinct row outputs (raw
bits: uint16 for bf16, uint32 for f32) with, for every M, the index of its row; the manifest
carries the provenance (GPU, driver, CUDA, torch, Triton, git revision, seed, command).

  python3 cuda/capture/capture_invariance.py --out tests/data/hw/invariance/h100 \\
      [--shape 576x7168 --shape 4096x14336 --shape 7168x2048] [--m 1-4096 | --m 1,2,4] \\
      [--triton-upstream vllm=PATH/fp8_utils.py[,version=...,commit=...]] \\
      [--triton-configs PATH/vllm/model_executor/layers/quantization/utils/configs] [--check]
      [--deepgemm DG_DIR [--deepgemm-commit SHA] [--deepgemm-only] [--deepgemm-budget S]]

--check (also on a machine without a GPU: `--check-only DIR`) compares every captured row
with the report's prediction: fp8sim.invariance gives the plan at each M (the GEMM options
the row runs with), fp8sim.gemm computes the row under it, and every captured row must have
those bits: every change of the row across M predicted, none predicted that did not happen.
An M the report refuses is listed as not predicted (never counted as agreement).
--plans picks where cuBLASLt's plan at each M comes from: the recorded tables (default: what
a user without a GPU gets), cuda (cuBLASLt asked on this machine's GPU, as torch asks it: the
live check) or traced (the split cuBLASLt's own trace shows for each captured call, kept in
the manifest: checks the arithmetic at every M on any machine); with cuda or traced every M
must be predicted.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SHAPES = ["576x7168", "4096x14336", "7168x2048"]  # DeepSeek-V3 kv_a_proj_with_mqa,
# Llama 3 8B down_proj (split-K at small M), DeepSeek-V3 expert down_proj (never splits)
# The recorded cuBLASLt grid's M (sim/data/cublaslt_plans_*.json, 1..4096) and M between them.
DEFAULT_M = sorted({1, 2, 3, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
                    1536, 2048, 3072, 4096, 5, 7, 12, 17, 20, 31, 33, 40, 63, 65, 100, 127, 129,
                    200, 255, 257, 300, 500, 1000, 2047, 2049, 4095})
E4M3_MAX = 448.0
CUBLASLT_CASES = [(s, o, fa) for s in ("tensor", "row") for o in ("bf16", "f32")
                  for fa in (False, True)]
TRITON_OUTS = ("bf16", "f32")


def parse_shape(s: str) -> tuple[int, int]:
    try:
        n, k = (int(v) for v in s.split("x"))
    except ValueError:
        raise SystemExit(f"capture_invariance: --shape {s!r}: expected NxK") from None
    if n < 1 or k < 1:
        raise SystemExit(f"capture_invariance: --shape {s!r}: N and K must be >= 1")
    return n, k


def parse_m(text: str) -> list:
    """'1-4096', '1,2,4' or both: sorted, distinct, each >= 1."""
    out = set()
    for item in text.split(","):
        lo, _, hi = item.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise SystemExit(f"capture_invariance: --m {text!r}: {item!r} is not M or LO-HI")
        a, b = int(lo), int(hi or lo)
        if a < 1 or b < a:
            raise SystemExit(f"capture_invariance: --m {text!r}: {item!r} is not >= 1 and increasing")
        out.update(range(a, b + 1))
    return sorted(out)


def e4m3_codes(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even E4M3 (fn) codes of float32 values within +-448, through torch's
    CPU cast (the same on the capture machine and the checking one)."""
    import torch
    return torch.from_numpy(np.ascontiguousarray(x, np.float32)).to(
        torch.float8_e4m3fn).view(torch.uint8).numpy()


def draws(seed: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The activation row (K) and the weights (N x K): seeded N(0, 1) float32."""
    g = np.random.default_rng([seed, n, k])
    return g.standard_normal(k, dtype=np.float32), g.standard_normal((n, k), dtype=np.float32)


def quantise(a: np.ndarray, b: np.ndarray, scaling: str) -> dict:
    """The row's and the weights' codes and scales as the kernel takes them, fp8sim.gemm's
    shapes: tensor sa (1,), sb (1,); row sa (1,), sb (N,); block sa (1, K/128), sb (N/128, K/128)
    (scale = amax / 448 in float32, codes = E4M3(x / scale))."""
    n, k = b.shape
    f32 = np.float32
    if scaling == "tensor":
        sa = np.array([np.abs(a).max() / f32(E4M3_MAX)], f32)
        sb = np.array([np.abs(b).max() / f32(E4M3_MAX)], f32)
        return dict(a=e4m3_codes(a / sa[0]), b=e4m3_codes(b / sb[0]), sa=sa, sb=sb)
    if scaling == "row":
        sa = np.array([np.abs(a).max() / f32(E4M3_MAX)], f32)
        sb = (np.abs(b).max(axis=1) / f32(E4M3_MAX)).astype(f32)
        return dict(a=e4m3_codes(a / sa[0]), b=e4m3_codes(b / sb[:, None]), sa=sa, sb=sb)
    if scaling == "block":
        if k % 128:
            raise SystemExit(f"capture_invariance: block scales need K % 128 == 0 (K = {k})")
        kb, nb = k // 128, (n + 127) // 128
        sa = (np.abs(a.reshape(kb, 128)).max(axis=1) / f32(E4M3_MAX)).astype(f32)[None, :]
        bp = np.zeros((nb * 128, k), f32)
        bp[:n] = b
        sb = (np.abs(bp.reshape(nb, 128, kb, 128)).max(axis=(1, 3)) / f32(E4M3_MAX)).astype(f32)
        sb = np.where(sb == 0, f32(1), sb)
        qa = a / np.repeat(sa[0], 128)
        qb = b / np.repeat(np.repeat(sb, 128, axis=0)[:n], 128, axis=1)
        return dict(a=e4m3_codes(qa), b=e4m3_codes(qb), sa=sa, sb=sb)
    raise SystemExit(f"capture_invariance: unknown scaling {scaling}")


def row_bits(d: np.ndarray, out: str) -> np.ndarray:
    """A row of float values of the output type as its raw bits (uint16 bf16, uint32 f32)."""
    d = np.ascontiguousarray(d, np.float32)
    return (d.view(np.uint32) >> 16).astype(np.uint16) if out == "bf16" else d.view(np.uint32)


def compact(rows: list) -> tuple[np.ndarray, list]:
    """Distinct rows (in order of first appearance) and each row's index among them."""
    uniq, index = [], []
    for r in rows:
        for i, u in enumerate(uniq):
            if np.array_equal(u, r):
                index.append(i)
                break
        else:
            index.append(len(uniq))
            uniq.append(r)
    return np.stack(uniq), index


def nearest_config(configs: dict, m: int) -> dict:
    """vLLM's choice from a tuned config file: the entry whose M key is nearest to m."""
    keys = [int(x) for x in configs]
    return configs[str(min(keys, key=lambda x: abs(x - m)))]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def gpu_name(device: str) -> str:
    """The recorded-plan name of a device string: 'NVIDIA H100 80GB HBM3' -> 'h100'."""
    for g in ("h100", "h200"):
        if g in device.lower():
            return g
    return ""


# ---- the check (CPU) -------------------------------------------------------------------------

def check_capture(folder: str, log=print, plans: str = "tables", memo=None) -> dict:
    """Every captured row against the report's prediction. Returns {"cases": [...], "ok"}:
    per case the M agreeing, the M refused by the report (not predicted), and one line per
    mismatch; ok when nothing mismatches (refused M are listed, not counted as agreement).
    cuBLASLt's plans come from `plans`: "tables" (the recorded tables, as without a GPU),
    "cuda" (cuBLASLt asked on this machine's GPU: the live check) or "traced" (the split
    cuBLASLt's own trace shows for each captured call: checks the arithmetic at every M).
    `memo`: a dict kept between checks of one capture (the rows computed, by case and GEMM
    options), so that a second check computes only the rows the first did not."""
    if plans not in ("tables", "cuda", "traced"):
        raise ValueError(f"plans {plans!r}: expected tables, cuda or traced")
    import fp8sim
    with open(os.path.join(folder, "manifest.json")) as f:
        man = json.load(f)
    ms = man["m"]
    gpu = man.get("gpu") or gpu_name(man.get("device", ""))
    result, ok = [], True
    for shape in man["shapes"]:
        n, k = shape["n"], shape["k"]
        a, b = draws(man["seed"], n, k)
        for case in shape["cases"]:
            q = quantise(a, b, case["scaling"])
            if sha256(q["b"].tobytes()) != case["b_sha256"]:
                raise SystemExit(f"capture_invariance: {folder} {case['name']}: the weights drawn "
                                 "here are not the captured ones (sha256 differs)")
            if not np.array_equal(np.load(os.path.join(folder, case["a"])), q["a"]):
                raise SystemExit(f"capture_invariance: {folder} {case['name']}: the row drawn "
                                 "here is not the captured one")
            rows = np.load(os.path.join(folder, case["rows"]))
            captured = {m: rows[i] for m, i in zip(case.get("m", ms), case["m_index"]) if i >= 0}
            out = {"name": case["name"], "agree": 0, "refused": [], "mismatches": []}
            kw = dict(kernel=case["kernel"], gpu=gpu, out_type=case["out_type"],
                      scaling=case["scaling"], fast_accum=case.get("fast_accum", False),
                      rows=False)
            if plans == "cuda":
                kw["gpu"] = "cuda"
            elif plans == "traced" and case["kernel"].startswith("cublaslt"):
                traced_at = case.get("traced_split_k", {})
                kw["cublaslt_plan"] = lambda m, *_, t=traced_at: (
                    dict(split_k=int(t[str(m)]), source="trace",
                         reduction="COMPUTE_TYPE" if int(t[str(m)]) > 1 else "NONE",
                         why="cuBLASLt's trace of the captured call")
                    if str(m) in t else f"M={m}: no trace captured")
            if case["kernel"] == "triton-w8a8-block-fp8":  # the server's pick, as it ran
                # (the tuned file the capture read, kept beside it, is the built-in one)
                kw["triton_config"] = case.get("upstream", "vllm")
            try:
                pts = fp8sim.invariance(n, k, list(captured), **kw).attrs["points"]
                at = {p["m"]: p for p in pts}
            except ValueError as e:  # every M refused: the report's one line says why
                at = {}
                out["reason"] = str(e)
            computed = (memo if memo is not None else {}).setdefault(case["name"], {})
            for m, got in captured.items():
                p = at.get(m)
                if p is None or p["refused"]:
                    out["refused"].append(m)
                    continue
                opts = dict(p["options"])
                key = json.dumps(opts, sort_keys=True)
                if key not in computed:
                    computed[key] = row_bits(fp8sim.gemm(
                        q["a"][None, :], q["b"], a_scales=q["sa"], b_scales=q["sb"], **opts)[0],
                        case["out_type"])
                want = computed[key]
                if np.array_equal(want, got):
                    out["agree"] += 1
                else:
                    out["mismatches"].append(
                        f"{case['name']} M={m}: predicted {p['plan']} ({p['source']}), the captured row "
                        f"differs at {int((want != got).sum())} of {n} outputs")
                traced = case.get("traced_split_k", {}).get(str(m))
                if traced is not None and int(traced) != int(p["split_k"]):
                    out["mismatches"].append(f"{case['name']} M={m}: plan split-K {p['split_k']}, "
                                             f"cuBLASLt's trace {traced}")
            # With the GPU's or the traces' plans every M must be predicted.
            ok = ok and not out["mismatches"] and (plans == "tables" or not out["refused"])
            # The changes of the row across M, as captured (consecutive M of the list).
            idx = [i for i in case["m_index"] if i >= 0]
            out["captured_changes"] = sum(x != y for x, y in zip(idx, idx[1:]))
            log(f"{case['name']}: {out['agree']} of {len(captured)} M agree, "
                f"{len(out['refused'])} not predicted (refused), {len(out['mismatches'])} "
                f"mismatches; the row changes {out['captured_changes']} times across M"
                + (f" ({out['reason']})" if "reason" in out else ""))
            for line in out["mismatches"][:10]:
                log("  " + line)
            result.append(out)
    return {"cases": result, "ok": ok}


# ---- the capture (GPU) -----------------------------------------------------------------------

def provenance() -> dict:
    import torch
    p = torch.cuda.get_device_properties(0)
    drv = ""
    try:
        drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    try:
        import triton
        tv = triton.__version__
    except ImportError:
        tv = None
    return {"device": f"{p.name} (sm_{p.major}{p.minor}, {p.multi_processor_count} SMs)",
            "gpu": gpu_name(p.name), "driver": drv, "cuda": torch.version.cuda,
            "torch": torch.__version__, "triton": tv,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def capture(args) -> int:
    t_start = time.monotonic()
    sys.path.insert(0, HERE)
    if args.deepgemm_only:
        return capture_deepgemm_only(args, t_start)
    import capture_scaled_mm as csm  # sets CUBLASLT_LOG_LEVEL=5 before torch loads cuBLASLt
    import torch
    if not torch.cuda.is_available():
        print("capture_invariance: no CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    os.makedirs(args.out, exist_ok=True)
    ms = parse_m(args.m) if args.m else DEFAULT_M
    man = provenance()
    man.update(fp8sim_capture_invariance=1, seed=args.seed, m=ms, git_revision=args.git_revision,
               generator="cuda/capture/capture_invariance.py " + " ".join(sys.argv[1:]),
               shapes=[], unsupported=[])
    dtype = {"bf16": torch.bfloat16, "f32": torch.float32}
    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    others = lambda rows, k: (torch.randn((rows, k), generator=gen) * 2).to(torch.float8_e4m3fn)  # noqa: E731
    triton = None
    if args.triton_upstream:
        import capture_triton as ct
        flavour, rest = args.triton_upstream.split("=", 1)
        path, *meta = rest.split(",")
        kname, wname = ct.UPSTREAM_KERNELS[flavour]
        kern, info = ct.load_upstream(path, kname, wname)
        info.update(dict(x.split("=", 1) for x in meta))
        man["triton_upstream"] = {flavour: info}
        triton = (ct, kern, flavour, info)
    for shape in args.shape or DEFAULT_SHAPES:
        n, k = parse_shape(shape)
        a, b = draws(args.seed, n, k)
        entry = {"n": n, "k": k, "cases": []}
        stem = f"{n}x{k}"
        for scaling, out, fast in CUBLASLT_CASES:
            q = quantise(a, b, scaling)
            name = f"cublaslt_{stem}_{scaling}_{out}{'_fast' if fast else ''}"
            bd = torch.from_numpy(q["b"]).view(torch.float8_e4m3fn).to(dev)
            sb = (torch.tensor(q["sb"][0]) if scaling == "tensor"
                  else torch.from_numpy(q["sb"]).reshape(1, n)).to(dev)
            rows, traced, offset, failed = [], {}, 0, None
            for m in ms:
                A = torch.cat([torch.from_numpy(q["a"]).view(torch.float8_e4m3fn)[None, :],
                               others(m - 1, k)]).to(dev)
                if scaling == "tensor":
                    sa = torch.tensor(q["sa"][0]).to(dev)
                else:
                    sa = torch.cat([torch.from_numpy(q["sa"]), torch.rand(m - 1, generator=gen)
                                    * 0.05 + 0.001]).reshape(m, 1).to(dev)
                torch.cuda.synchronize()
                _, offset = csm.log_tail(offset)
                try:
                    d = torch._scaled_mm(A, bd.t(), sa, sb, out_dtype=dtype[out], use_fast_accum=fast)
                    torch.cuda.synchronize()
                except (RuntimeError, ValueError, TypeError, NotImplementedError) as e:
                    failed = str(e).splitlines()[0][:300]
                    break
                algo, offset = csm.log_tail(offset)
                if algo:
                    traced[str(m)] = int(algo.get("numSplitsK", "1"))
                rows.append(row_bits(d[0].float().cpu().numpy(), out))
            if failed:
                man["unsupported"].append({"case": name, "error": failed})
                continue
            uniq, index = compact(rows)
            np.save(os.path.join(args.out, f"{name}_rows.npy"), uniq)
            np.save(os.path.join(args.out, f"{stem}_{scaling}_a.npy"), q["a"])
            entry["cases"].append({
                "name": name, "kernel": "cublaslt", "scaling": scaling, "out_type": out,
                "fast_accum": fast, "a": f"{stem}_{scaling}_a.npy", "sa": q["sa"].tolist(),
                "b_sha256": sha256(q["b"].tobytes()), "rows": f"{name}_rows.npy",
                "m_index": index, "traced_split_k": traced})
            print(f"{name}: {len(uniq)} distinct rows over {len(ms)} M", flush=True)
        if triton is not None and k % 128 == 0:
            ct, kern, flavour, info = triton
            q = quantise(a, b, "block")
            cfg_file, configs = None, None
            if args.triton_configs:
                dname = torch.cuda.get_device_name().replace(" ", "_")
                fname = f"N={n},K={k},device_name={dname},dtype=fp8_w8a8,block_shape=[128,128].json"
                p = os.path.join(args.triton_configs, fname)
                if os.path.exists(p):
                    with open(p) as f:
                        configs = json.load(f)
                    cfg_file = f"triton_configs_{stem}.json"
                    with open(os.path.join(args.out, cfg_file), "w") as f:
                        json.dump(configs, f, indent=1)
            bd = torch.from_numpy(q["b"]).view(torch.float8_e4m3fn).to(dev)
            Bs = torch.from_numpy(q["sb"]).to(dev)
            for out in TRITON_OUTS:
                name = f"triton_{stem}_block_{out}"
                rows, per_m = [], {}
                for m in ms:
                    cfg = nearest_config(configs, m) if configs else info["default_config"]
                    A = torch.cat([torch.from_numpy(q["a"]).view(torch.float8_e4m3fn)[None, :],
                                   others(m - 1, k)]).to(dev)
                    As = torch.cat([torch.from_numpy(q["sa"]),
                                    torch.rand((m - 1, k // 128), generator=gen) * 0.05 + 0.001]).to(dev)
                    C = torch.empty((m, n), dtype=dtype[out], device=dev)
                    compiled = ct.launch_block(kern, flavour, cfg, A, bd, As, Bs, C)
                    torch.cuda.synchronize()
                    counts, _ = ct.ptx_summary(compiled) if compiled is not None else ({}, "")
                    per_m[str(m)] = {"config": cfg, "wgmma": counts.get("wgmma.mma_async"),
                                     "mma_sync": counts.get("mma.sync")}
                    rows.append(row_bits(C[0].float().cpu().numpy(), out))
                uniq, index = compact(rows)
                np.save(os.path.join(args.out, f"{name}_rows.npy"), uniq)
                np.save(os.path.join(args.out, f"{stem}_block_a.npy"), q["a"])
                entry["cases"].append({
                    "name": name, "kernel": "triton-w8a8-block-fp8", "scaling": "block",
                    "out_type": out, "a": f"{stem}_block_a.npy", "sa": q["sa"].tolist(),
                    "b_sha256": sha256(q["b"].tobytes()), "rows": f"{name}_rows.npy",
                    "m_index": index, "triton_config": cfg_file, "upstream": flavour,
                    "launch": per_m})
                print(f"{name}: {len(uniq)} distinct rows over {len(ms)} M", flush=True)
        man["shapes"].append(entry)
    if args.deepgemm:
        import invariance_deepgemm as dgi
        cases, man["deepgemm"] = dgi.capture(sys.modules[__name__], args, [
            (e["n"], e["k"]) for e in man["shapes"]], ms, args.out, t_start, print)
        for e in man["shapes"]:
            e["cases"] += [cases[(e["n"], e["k"])]] if (e["n"], e["k"]) in cases else []
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(man, f, indent=1)
    return 0 if not args.check else (0 if check_capture(args.out, plans=args.plans)["ok"] else 1)


def capture_deepgemm_only(args, t_start: float) -> int:
    """The DeepGEMM case alone, merged into the capture in args.out (its M list unless --m)."""
    import invariance_deepgemm as dgi
    import torch
    if not torch.cuda.is_available():
        print("capture_invariance: no CUDA device", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "manifest.json")
    old = None
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
    ms = parse_m(args.m) if args.m else (old["m"] if old else DEFAULT_M)
    shapes = [parse_shape(s) for s in args.shape or ([] if old else DEFAULT_SHAPES)] or [
        (e["n"], e["k"]) for e in old["shapes"]]
    fresh = provenance()
    fresh.update(fp8sim_capture_invariance=1, seed=args.seed, m=ms, git_revision=args.git_revision,
                 generator="cuda/capture/capture_invariance.py " + " ".join(sys.argv[1:]),
                 shapes=[], unsupported=[])
    cases, prov = dgi.capture(sys.modules[__name__], args, shapes, ms, args.out, t_start, print)
    if not cases:
        print("capture_invariance: no DeepGEMM case captured (log above); nothing merged",
              file=sys.stderr)
        return 1
    prov["device"], prov["driver"] = fresh["device"], fresh["driver"]
    prov["torch"], prov["cuda"] = fresh["torch"], fresh["cuda"]
    dgi.merge(args.out, cases, prov, fresh)
    print(f"wrote {path}: {len(cases)} DeepGEMM cases ({time.monotonic() - t_start:.0f} s)")
    return 0 if not args.check else (0 if check_capture(args.out, plans=args.plans)["ok"] else 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="capture folder (tests/data/hw/invariance/<gpu>)")
    ap.add_argument("--shape", action="append", default=[], help="NxK of the weights (repeat)")
    ap.add_argument("--m", default="", help="M list: 1-4096, 1,2,4 (default: 44 M from 1 to 4096)")
    ap.add_argument("--seed", type=int, default=37)
    ap.add_argument("--triton-upstream", default="", help="vllm=PATH/fp8_utils.py[,version=V,commit=C]")
    ap.add_argument("--triton-configs", default="", help="vLLM's tuned configs/ folder")
    ap.add_argument("--git-revision", default="")
    ap.add_argument("--check", action="store_true", help="check the capture after writing it")
    ap.add_argument("--check-only", default="", help="check an existing capture folder (CPU)")
    ap.add_argument("--plans", default="tables", choices=("tables", "cuda", "traced"),
                    help="cuBLASLt's plans for the check: the recorded tables (default), asked "
                    "of this machine's GPU, or the captured calls' traces")
    ap.add_argument("--deepgemm", default="", help="DeepGEMM source tree (built in place if "
                    "needed)")
    ap.add_argument("--deepgemm-commit", default="", help="its commit, for the manifest")
    ap.add_argument("--deepgemm-only", action="store_true", help="only the DeepGEMM case, merged "
                    "into the capture in --out")
    ap.add_argument("--deepgemm-jobs", type=int, default=os.cpu_count() or 8,
                    help="processes JIT-compiling DeepGEMM's kernels before the capture")
    ap.add_argument("--deepgemm-budget", type=float, default=480, help="seconds from the start "
                    "after which M not yet compiled are left out of the DeepGEMM case")
    args = ap.parse_args()
    if args.deepgemm_only and not args.deepgemm:
        ap.error("--deepgemm-only needs --deepgemm DG_DIR")
    if args.check_only:
        return 0 if check_capture(args.check_only, plans=args.plans)["ok"] else 1
    if not args.out:
        ap.error("--out is required (or --check-only DIR)")
    return capture(args)


if __name__ == "__main__":
    sys.exit(main())
