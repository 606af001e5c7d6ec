"""invariance_deepgemm: DeepGEMM's SM90 FP8 GEMM (deep_gemm.fp8_gemm_nt -> sm90_fp8_gemm_1d2d,
bf16 D) in the batch-invariance capture: capture_invariance.py --deepgemm DG_DIR (issue 37).

DG_DIR is a DeepGEMM source tree with third-party/cutlass/include (cute/, cutlass/) and
third-party/fmt/include filled in (never committed here); it is built in place by
capture_deepgemm.build unless deep_gemm/_C*.so is there already (on the H100 image with
CC=/usr/bin/gcc CXX=/usr/bin/g++ LDSHARED="/usr/bin/g++ -shared": capture_deepgemm.py says why).

For each weight shape N x K (K a multiple of 128) the same block-quantised row as the Triton
block case (capture_invariance.quantise(..., "block"): codes, 1x128 scales sa (1, K/128);
weights' 128x128 scales sb (ceil(N/128), K/128), DeepGEMM's own layouts) runs as row 0 of an
M x K activation at every M; rows 1.. are fresh seeded random codes and positive scales. The
row's bf16 bits are kept compactly (distinct rows and an index per M, as the other cases), with
the config DeepGEMM's heuristic picked at each M (its DG_PRINT_CONFIGS line, read from this
process's stdout around the call: block_m, block_n, cluster, stages, waves).

DeepGEMM JIT-compiles one kernel per config with NVCC, one at a time in a process: before the
capture, a pool of --deepgemm-jobs spawned processes runs every (shape, M) once on zeros, M far
apart first so that concurrent tasks rarely need the same kernel, filling the shared
DG_JIT_CACHE_DIR; the capture then only loads kernels. An M whose warm-up has not finished when
--deepgemm-budget seconds have passed since the script started is left out of that shape's
case (its "m" lists the M captured, "not_captured" the others and why), so that the command
ends within the device's time limit.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import sys
import tempfile
import time

import numpy as np

KERNEL = "deepgemm-sm90-1d2d"
CONFIG_KEYS = ("block_m", "block_n", "block_k", "cluster_m", "cluster_n", "swap_ab",
               "num_stages", "num_sms", "num_waves", "last_wave_util")
_STATE = {}  # a warm-up worker's deep_gemm and torch


def spread(ms: list) -> list:
    """The M list in an order where consecutive entries are far apart: the extremes first,
    then each gap's middle (bisection order), so that concurrent warm-up tasks rarely share
    DeepGEMM's config (one kernel per config)."""
    ms = sorted(ms)
    if len(ms) <= 2:
        return ms
    out, seen, spans = [ms[0], ms[-1]], {0, len(ms) - 1}, [(0, len(ms) - 1)]
    while spans:
        nxt = []
        for lo, hi in spans:
            if hi - lo > 1:
                mid = (lo + hi) // 2
                if mid not in seen:
                    seen.add(mid)
                    out.append(ms[mid])
                nxt += [(lo, mid), (mid, hi)]
        spans = nxt
    return out


def parse_config(text: str):
    """DeepGEMM's DG_PRINT_CONFIGS line ("GemmDesc(...): GemmConfig(layout=Layout(swap_ab=0,
    block_m=16, ...), ...), LayoutInfo(num_waves=1, ...)") as a dict of CONFIG_KEYS; None
    where no such line was printed."""
    for line in text.splitlines():
        at = line.find("GemmConfig(")
        if at < 0:
            continue
        fields = {}
        for key, value in re.findall(r"\b(\w+)=([\w.]+)", line[at:]):
            fields.setdefault(key, value)
        return {k: int(fields[k]) if fields[k].lstrip("-").isdigit() else fields[k]
                for k in CONFIG_KEYS if k in fields}
    return None


def stdout_of(fn) -> str:
    """Runs fn() with file descriptor 1 sent to a temporary file (DeepGEMM prints its config
    with std::cout from C++) and returns what was written there."""
    sys.stdout.flush()
    with tempfile.TemporaryFile() as tmp:
        saved = os.dup(1)
        os.dup2(tmp.fileno(), 1)
        try:
            fn()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        tmp.seek(0)
        return tmp.read().decode(errors="replace")


def _worker_init(dg: str, log_dir: str) -> None:
    log = os.open(os.path.join(log_dir, f"warm-{os.getpid()}.log"),
                  os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.path.insert(0, os.path.abspath(dg))
    import torch
    import deep_gemm
    _STATE.update(torch=torch, deep_gemm=deep_gemm)


def _warm_task(task):
    """One GEMM of this (N, K, M) on zeros with unit scales: DeepGEMM picks and compiles (or
    finds in its cache) the kernel the capture will run. Returns (task, seconds, error)."""
    n, k, m = task
    torch, dg = _STATE["torch"], _STATE["deep_gemm"]
    t0 = time.monotonic()
    try:
        dev = torch.device("cuda")
        a = torch.zeros((m, k), dtype=torch.float8_e4m3fn, device=dev)
        b = torch.zeros((n, k), dtype=torch.float8_e4m3fn, device=dev)
        sa = torch.ones((m, k // 128), dtype=torch.float32, device=dev)
        sb = torch.ones(((n + 127) // 128, k // 128), dtype=torch.float32, device=dev)
        d = torch.empty((m, n), dtype=torch.bfloat16, device=dev)
        dg.fp8_gemm_nt((a, sa), (b, sb), d)
        torch.cuda.synchronize()
        return task, time.monotonic() - t0, None
    except Exception as e:  # noqa: BLE001 (DeepGEMM raises RuntimeError on its asserts)
        return task, time.monotonic() - t0, " ".join(str(e).split())[:300]


def warm(dg: str, tasks: list, jobs: int, deadline: float, log) -> tuple[set, dict]:
    """Runs every task in a pool of `jobs` spawned processes until time.monotonic() reaches
    `deadline`; returns (the tasks done, {task: error}). Workers' stdout (DeepGEMM's configs
    and NVCC's complaints) goes to log files under a temporary folder, named in the log."""
    import multiprocessing as mp
    log_dir = tempfile.mkdtemp(prefix="dg-warm-")
    done, errors = set(), {}
    pool = mp.get_context("spawn").Pool(jobs, _worker_init, (dg, log_dir))
    try:
        it = pool.imap_unordered(_warm_task, tasks, chunksize=1)
        while len(done) + len(errors) < len(tasks):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                task, secs, err = it.next(timeout=left)
            except mp.TimeoutError:
                break
            if err:
                errors[task] = err
                log(f"deepgemm warm {task}: {err}")
            else:
                done.add(task)
    finally:
        pool.terminate()
        pool.join()
    log(f"deepgemm warm-up: {len(done)} of {len(tasks)} (N, K, M) ready, {len(errors)} failed, "
        f"{len(tasks) - len(done) - len(errors)} not reached in time (worker logs: {log_dir})")
    return done, errors


def build_if_needed(dg: str, here: str, log) -> str:
    """capture_deepgemm.build unless deep_gemm/_C*.so exists; returns how it was built."""
    pkg = os.path.join(dg, "deep_gemm")
    if any(f.startswith("_C") and f.endswith(".so") for f in os.listdir(pkg)):
        return "already built in place"
    sys.path.insert(0, here)
    import capture_deepgemm as cdg
    t0 = time.monotonic()
    text = cdg.build(dg)
    log(text[-3000:])
    if not any(f.startswith("_C") and f.endswith(".so") for f in os.listdir(pkg)):
        raise SystemExit("capture_invariance: DeepGEMM's _C did not build (log above)")
    cxx = os.environ.get("CXX", "the default C++ compiler")
    return (f"capture_deepgemm.build (setup.py build_ext --inplace, else torch.utils."
            f"cpp_extension) with CXX={cxx}, {time.monotonic() - t0:.0f} s")


def capture(ci, args, shapes: list, ms: list, out: str, t_start: float, log) -> tuple[dict, dict]:
    """Runs the DeepGEMM case of every shape; returns ({(n, k): case}, provenance)."""
    dg = os.path.abspath(args.deepgemm)
    os.environ.setdefault("DG_JIT_CACHE_DIR", os.path.join(tempfile.gettempdir(), "dg-jit-cache"))
    os.environ["DG_PRINT_CONFIGS"] = "1"
    built = build_if_needed(dg, ci.HERE, log)
    log(f"deepgemm: {built} ({time.monotonic() - t_start:.0f} s since start)")
    sys.path.insert(0, dg)
    import torch
    import deep_gemm  # here first: a tree that does not load fails now, not in every worker
    usable = [(n, k) for n, k in shapes if k % 128 == 0]
    tasks = [(n, k, m) for m in spread(ms) for n, k in usable]  # shapes interleaved
    done, errors = warm(dg, tasks, args.deepgemm_jobs, t_start + args.deepgemm_budget, log)
    log(f"deepgemm: warm-up over ({time.monotonic() - t_start:.0f} s since start)")
    dev = torch.device("cuda")
    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    cases = {}
    for n, k in usable:
        a, b = ci.draws(args.seed, n, k)
        q = ci.quantise(a, b, "block")
        stem = f"{n}x{k}"
        bd = torch.from_numpy(q["b"]).view(torch.float8_e4m3fn).to(dev)
        sb = torch.from_numpy(q["sb"]).to(dev)
        row = torch.from_numpy(q["a"]).view(torch.float8_e4m3fn)[None, :]
        rows, took, per_m, missing = [], [], {}, {}
        for m in ms:
            if (n, k, m) not in done:
                missing[str(m)] = errors.get((n, k, m),
                                             "warm-up not finished within --deepgemm-budget")
                continue
            A = torch.cat([row, (torch.randn((m - 1, k), generator=gen) * 2).to(
                torch.float8_e4m3fn)]).to(dev)
            sa = torch.cat([torch.from_numpy(q["sa"]), torch.rand(
                (m - 1, k // 128), generator=gen) * 0.05 + 0.001]).to(dev)
            d = torch.empty((m, n), dtype=torch.bfloat16, device=dev)

            def run():
                deep_gemm.fp8_gemm_nt((A, sa), (bd, sb), d)
                torch.cuda.synchronize()
            try:
                printed = stdout_of(run)
            except Exception as e:  # noqa: BLE001
                missing[str(m)] = " ".join(str(e).split())[:300]
                continue
            per_m[str(m)] = parse_config(printed) or {"printed": printed.strip()[-300:]}
            rows.append(ci.row_bits(d[0].float().cpu().numpy(), "bf16"))
            took.append(m)
        if not rows:
            log(f"deepgemm {stem}: nothing captured ({next(iter(missing.values()), '')})")
            continue
        name = f"deepgemm_{stem}_block_bf16"
        uniq, index = ci.compact(rows)
        np.save(os.path.join(out, f"{name}_rows.npy"), uniq)
        a_file = os.path.join(out, f"{stem}_block_a.npy")
        if os.path.exists(a_file) and not np.array_equal(np.load(a_file), q["a"]):
            raise SystemExit(f"capture_invariance: {a_file} is not this seed's row: capture into "
                             "a folder of the same seed")
        np.save(a_file, q["a"])
        cases[(n, k)] = {
            "name": name, "kernel": KERNEL, "scaling": "block", "out_type": "bf16",
            "a": f"{stem}_block_a.npy", "sa": q["sa"].tolist(),
            "b_sha256": ci.sha256(q["b"].tobytes()), "rows": f"{name}_rows.npy",
            "m": took, "m_index": index, "launch": per_m,
            "not_captured": missing}
        log(f"{name}: {len(uniq)} distinct rows over {len(took)} M"
            + (f" ({len(missing)} M not captured)" if missing else ""))
    prov = {"repo": "github:deepseek-ai/DeepGEMM", "commit": args.deepgemm_commit,
            "version": getattr(deep_gemm, "__version__", ""),
            "entry": "deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), d), bf16 d, default recipe "
                     "(1, 128, 128), compiled_dims 'nk'; JIT by NVCC (DG_JIT_USE_NVRTC unset)",
            "build": built, "jit_warm_jobs": args.deepgemm_jobs,
            "budget_s": args.deepgemm_budget,
            "generator": "cuda/capture/capture_invariance.py " + " ".join(sys.argv[1:]),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "seconds": round(time.monotonic() - t_start)}
    return cases, prov


def merge(folder: str, cases: dict, prov: dict, fresh: dict) -> dict:
    """Puts the DeepGEMM cases into folder/manifest.json: into the capture already there (same
    seed; its DeepGEMM cases replaced, other cases kept) or, where none is, into `fresh` (a
    new manifest with the capture's provenance). Returns the manifest written."""
    path = os.path.join(folder, "manifest.json")
    if os.path.exists(path):
        with open(path) as f:
            man = json.load(f)
        if man.get("seed") != fresh["seed"]:
            raise SystemExit(f"capture_invariance: {path} has seed {man.get('seed')}, this "
                             f"capture {fresh['seed']}: give --seed {man.get('seed')}")
    else:
        man = fresh
    shapes = {(s["n"], s["k"]): s for s in man.setdefault("shapes", [])}
    for (n, k), case in cases.items():
        if (n, k) not in shapes:
            shapes[(n, k)] = {"n": n, "k": k, "cases": []}
            man["shapes"].append(shapes[(n, k)])
        entry = shapes[(n, k)]
        entry["cases"] = [c for c in entry["cases"] if c["kernel"] != KERNEL] + [case]
    man["deepgemm"] = prov
    with open(path, "w") as f:
        json.dump(man, f, indent=1)
    return man
