"""record_cublaslt_plans: cuBLASLt's algorithm for torch._scaled_mm over a grid, on this GPU.

Records, with fp8sim.cublaslt_plan.query (cuBLASLt's own heuristic, asked exactly as torch
asks it), the algorithm torch._scaled_mm runs for every (M, N, K) of a grid and every
variant (output f32/bf16/f16, fast accumulation off/on, tensor and row scales; block scales
without fast accumulation, as torch allows), into one data file with its provenance (GPU,
SMs, driver, CUDA, cuBLASLt, torch, date, git revision, seconds taken):

    python3 cuda/capture/record_cublaslt_plans.py --table sim/data/cublaslt_plans_h100.json

--outs (default f32,bf16,f16; e4m3 too), --grid zone (a finer grid of the split zone, for study,
not for sim/data) and, for --traced, --bias-dtypes f32,bf16,f16 (every variant with each bias
torch allows; its refusals are recorded) widen what is recorded. With --table and --traced
together it then re-derives the split rule for this GPU (cuda/capture/derive_cublaslt_rule.py
--write: the constants go into the table's "split_rule" only if the rule is exact at every
recorded point and traced call it decides).

--traced FILE (with --count N) also runs torch._scaled_mm on N random shapes (M 1..16384; N,
K from LLM layers or random multiples of 16; none on the table's grid) in every variant, with
cuBLASLt's trace on (CUBLASLT_LOG_LEVEL=5, in a child process), and writes for each call
what the trace says cuBLASLt ran and what query() answered: the check of query() against
cuBLASLt and, kept out of the tables, the held-out set for the tables' rules. Both together:

    python3 cuda/capture/record_cublaslt_plans.py --table sim/data/cublaslt_plans_h200.json \
        --traced tests/data/cublaslt_heldout_h200.json --count 320

Table format: PATH.json holds "axes" m, n, k; "variants" ("<out> <scale> fast<0|1>");
"fields" and "configs" (the distinct algorithms: algo id, tile, stages, split-K, reduction,
custom option, cluster, CTA swizzling, inner shape, workspace needed); the provenance; and
"rules", the no-split rule each variant's points show (no_split_rules, descriptive), and after
derive_cublaslt_rule.py --write "split_rule", the rule the library decides by. PATH.bin holds, per
variant in that order, the index into "configs" of every grid point in (m, n, k) order, 65535
where cuBLASLt returns no algorithm, as runs: (index, count) pairs of little-endian uint16. The library
builds the tables in sim/data/ into itself (sim/kernel/cublaslt_plan.hpp); a table elsewhere is
used by its .json path (gpu=PATH, --gpu PATH).
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # cuda/capture/ -> the checkout


def load_plan_module():
    """fp8sim/cublaslt_plan.py by path: no need to build or install fp8sim's C++ core."""
    path = os.path.join(ROOT, "python", "fp8sim", "cublaslt_plan.py")
    spec = importlib.util.spec_from_file_location("fp8sim_cublaslt_plan", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---- the grid -------------------------------------------------------------------------------
# M: tokens. All powers of two 1..16384 and some between.
M_AXIS = sorted({2 ** i for i in range(15)} | {3, 24, 48, 96, 192, 384, 768, 1536, 3072, 6144, 12288})

# N and K: layer dimensions of open LLM families, from each model's config.json on Hugging Face
# (hidden_size, intermediate_size, moe_intermediate_size, num_attention_heads x head_dim,
# num_key_value_heads x head_dim, vocab_size; fused projections are sums of those).
LLM_DIMS = {
    # meta-llama/Llama-2-{7b,13b,70b}-hf: hidden 4096/5120/8192, intermediate 11008/13824/28672,
    # 70B: 8 KV heads x 128; fused QKV 12288 (7B), 15360 (13B), 10240 (70B); gate+up 22016 (7B).
    "llama2": [4096, 11008, 12288, 22016, 5120, 13824, 15360, 8192, 28672, 1024, 10240, 32000],
    # meta-llama/Llama-3.1-{8B,70B,405B}: hidden 4096/8192/16384, intermediate 14336/28672/53248,
    # 8 KV heads x 128 = 1024, fused QKV 6144/10240/18432, gate+up 28672/57344/106496,
    # vocab 128256.
    "llama3": [4096, 14336, 1024, 6144, 28672, 8192, 10240, 57344, 16384, 53248, 18432,
               106496, 128256],
    # Qwen/Qwen2.5-{0.5B,1.5B,3B,7B,14B,32B,72B}: hidden 896/1536/2048/3584/5120/5120/8192,
    # intermediate 4864/8960/11008/18944/13824/27648/29568, fused QKV 1152/2048/2560/4608/7168/
    # 7168/10240, KV 128/256/256/512/1024/1024/1024, vocab 151936.
    "qwen2": [896, 4864, 1152, 128, 1536, 8960, 2048, 256, 11008, 2560, 3584, 18944, 4608, 512,
              5120, 13824, 7168, 27648, 8192, 29568, 10240, 151936],
    # Qwen/Qwen3-{0.6B,1.7B,4B,8B,14B,32B,30B-A3B,235B-A22B}: hidden 1024/2048/2560/4096/5120/
    # 5120/2048/4096, intermediate 3072/6144/9728/12288/17408/25600, MoE expert intermediate
    # 768 (30B-A3B) and 1536 (235B-A22B), Q heads x 128 = 2048/4096/8192, KV 8 or 4 x 128.
    "qwen3": [1024, 3072, 2048, 6144, 2560, 9728, 4096, 12288, 5120, 17408, 25600, 8192, 768,
              1536, 512],
    # mistralai/Mistral-7B-v0.1 and Mixtral-8x7B: hidden 4096, intermediate 14336 (per expert),
    # 8 KV heads x 128, vocab 32000 (32768 from v0.3); Mixtral-8x22B: hidden 6144,
    # intermediate 16384, vocab 32768.
    "mistral": [4096, 14336, 1024, 6144, 32000, 32768, 16384],
    # google/gemma-2-{2b,9b,27b}: hidden 2304/3584/4608, intermediate 9216/14336/36864,
    # Q 2048/4096/4096, KV 1024/2048/2048, vocab 256000. google/gemma-3-{1b,4b,12b,27b}:
    # hidden 1152/2560/3840/5376, intermediate 6912/10240/15360/21504, vocab 262208.
    "gemma": [2304, 9216, 3584, 14336, 4608, 36864, 2048, 4096, 1024, 256000, 1152, 6912, 2560,
              10240, 3840, 15360, 5376, 21504, 256, 262208],
    # deepseek-ai/DeepSeek-V3: hidden 7168, intermediate 18432 (dense layers), MoE expert
    # intermediate 2048 (gate+up 4096), q_lora_rank 1536, kv_lora_rank 512 + rope 64 = 576,
    # q_b 128 heads x 192 = 24576, kv_b 128 x 256 = 32768, o_proj in 128 x 128 = 16384, fused
    # q_a+kv_a 2112, router 256 experts, vocab 129280.
    "deepseek_v3": [7168, 18432, 36864, 2048, 4096, 1536, 576, 512, 24576, 32768, 16384, 2112,
                    256, 129280],
}
POW2 = [2 ** i for i in range(4, 18)]  # 16 .. 131072
VOCAB = {32000, 128256, 129280, 151936, 256000, 262208}
N_AXIS = sorted(set(POW2) | {d for ds in LLM_DIMS.values() for d in ds})
K_AXIS = sorted((set(POW2) | {d for ds in LLM_DIMS.values() for d in ds}) - (VOCAB - {32000}))
OUTS = ("f32", "bf16", "f16")
ALL_OUTS = ("f32", "bf16", "f16", "e4m3")  # --outs: e4m3 as torch's float8_e4m3fn output


def variants_for(outs) -> list:
    """(out, scale, fast) for every output type: tensor and row scales with fast accumulation
    off and on, block scales without (torch refuses fast accumulation with them)."""
    return ([(o, s, fa) for s in ("tensor", "row") for o in outs for fa in (False, True)]
            + [(o, "block", False) for o in outs])


VARIANTS = variants_for(OUTS)

# --grid zone: the split zone (M*N up to ~130k, K above 5120) of decode-like shapes, finer than
# the LLM grid, to study how cuBLASLt's split changes between the LLM grid's points
# (cuda/capture/derive_cublaslt_rule.py; docs/cublaslt.md). Not for sim/data: its axes leave
# most shapes out. About 82k points a variant.
ZONE_M = sorted(set(range(1, 17)) | {20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128})
ZONE_N = sorted(set(range(256, 8193, 256)) | {n for n in N_AXIS if n <= 16384})
ZONE_K = sorted(set(range(5120, 16385, 512)) | set(range(17408, 32769, 1024))
                | {k for k in K_AXIS if k > 32768})
GRIDS = {"llm": (M_AXIS, N_AXIS, K_AXIS), "zone": (ZONE_M, ZONE_N, ZONE_K)}
FIELDS = ["algo_id", "tile", "stages", "split_k", "reduction", "custom", "cluster", "swizzle",
          "inner_shape", "workspace_size"]
NONE = 65535


def variant_key(out: str, scale: str, fast: bool) -> str:
    return f"{out} {scale} fast{int(fast)}"


def git_revision(given: str) -> str:
    if given:
        return given
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def provenance(plan, git_rev: str) -> dict:
    v = plan.versions()
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        driver = ""
    v.update(driver=driver, git_revision=git_revision(git_rev),
             date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
             script="cuda/capture/record_cublaslt_plans.py",
             call="torch._scaled_mm(a (M x K, row-major e4m3), b (K x N, column-major e4m3), "
                  "scale_a, scale_b, out_dtype=out, use_fast_accum=fast), no bias; "
                  "fp8sim.cublaslt_plan.query")
    return v


def record_table(plan, path: str, git_rev: str, variants=None, grid: str = "llm") -> None:
    prov = provenance(plan, git_rev)
    prov["grid"] = grid
    axes = GRIDS[grid]
    configs, index, plans = [], {}, {}
    t0 = time.time()
    n_q = 0
    for out, scale, fast in variants or VARIANTS:
        codes = bytearray()
        for m in axes[0]:
            for n in axes[1]:
                for k in axes[2]:
                    n_q += 1
                    try:
                        q = plan.query(m, n, k, out, use_fast_accum=fast, scale_mode=scale)
                    except plan.PlanUnavailable:
                        codes += NONE.to_bytes(2, "little")
                        continue
                    row = tuple(q[f] for f in FIELDS)
                    if row not in index:
                        index[row] = len(configs)
                        configs.append(list(row))
                    codes += index[row].to_bytes(2, "little")
        plans[variant_key(out, scale, fast)] = bytes(codes)
        print(f"table: {variant_key(out, scale, fast)} done, {n_q} queries, "
              f"{time.time() - t0:.1f} s", flush=True)
    prov["seconds"] = round(time.time() - t0, 1)
    prov["queries"] = n_q
    prov["us_per_query"] = round(1e6 * (time.time() - t0) / max(1, n_q), 1)
    write_table(path, prov, configs, plans, axes)


def no_split_rules(configs: list, plans: dict, axes=None) -> list:
    """Per variant, the rule its recorded points show with no exception: it never splits, or
    it splits nowhere with M*N above the largest M*N that splits, nor with K below the smallest
    K that splits: a description of the grid only (its K bound is the grid's gap: 1x2160x5280
    splits); the library decides off the grid by "split_rule" (derive_cublaslt_rule.py)."""
    import array
    fi = FIELDS.index("split_k")
    ms, ns, ks = axes or (M_AXIS, N_AXIS, K_AXIS)
    pts = [(m, n, k) for m in ms for n in ns for k in ks]
    rules = []
    for key, codes in plans.items():
        a = array.array("H")
        a.frombytes(codes)
        sp = [None if c == NONE else configs[c][fi] for c in a]
        splits = [p for p, s_ in zip(pts, sp) if s_ is not None and s_ > 1]
        points = sum(s_ is not None for s_ in sp)
        if not splits:
            rules.append({"variant": key, "never_splits": True, "points": points})
        else:
            rules.append({"variant": key, "no_split_above_mn": max(m * n for m, n, k in splits),
                          "no_split_below_k": min(k for m, n, k in splits), "points": points})
    return rules


def bias_evidence(table_path: str, traced_path: str) -> None:
    """Records in the table, per variant, how often a bias changed cuBLASLt's split in the
    traced calls (the same shape run with and without one): "bias_same_split" lists the
    variants where it never did, with their counts (sim/kernel/cublaslt_plan.cpp then takes a call
    with a bias as the call without; the other variants refuse a bias)."""
    with open(traced_path) as f:
        h = json.load(f)
    fi = {name: i for i, name in enumerate(h["fields"])}
    key = lambda r: tuple(r[:6])  # noqa: E731  (m, n, k, out, scale, fast)
    plain = {key(r): r[fi["split_k"]] for r in h["cases"]
             if r[fi["bias"]] is None and r[fi["error"]] is None}
    same: dict = {}
    for r in h["cases"]:
        if r[fi["bias"]] is None or r[fi["error"]] is not None or key(r) not in plain:
            continue
        v = variant_key(r[3], r[4], r[5])
        ok, n = same.get(v, (True, 0))
        same[v] = (ok and plain[key(r)] == r[fi["split_k"]], n + 1)
    with open(table_path) as f:
        doc = json.load(f)
    doc["bias_same_split"] = [{"variant": v, "calls": n} for v, (ok, n) in sorted(same.items()) if ok]
    with open(table_path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(f"table: {table_path}: a bias never changed the split in {doc['bias_same_split']}")


def run_lengths(codes: bytes) -> bytes:
    """uint16 codes as (code, count) pairs of little-endian uint16, count 1..65535, in order."""
    import array
    a = array.array("H")
    a.frombytes(codes)
    out = array.array("H")
    i = 0
    while i < len(a):
        j = i
        while j < len(a) and a[j] == a[i] and j - i < 65535:
            j += 1
        out.extend((a[i], j - i))
        i = j
    return out.tobytes()


def write_table(path: str, prov: dict, configs: list, plans: dict, axes=None) -> None:
    """The table as sim/kernel/cublaslt_plan.hpp reads it: PATH (.json: axes, variants, configurations,
    provenance, rules) and PATH's .bin (each variant's uint16 configuration indices, M-major,
    then N, then K, in the variants' order, as run_lengths)."""
    doc = {"format": "fp8sim-cublaslt-plans-2", "provenance": prov,
           "axes": dict(zip("mnk", axes or (M_AXIS, N_AXIS, K_AXIS))), "llm_dims": LLM_DIMS,
           "variants": list(plans), "fields": FIELDS, "configs": configs, "none": NONE,
           "rules": no_split_rules(configs, plans, axes)}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    with open(path[:-len(".json")] + ".bin", "wb") as f:
        f.write(run_lengths(b"".join(plans.values())))
    print(f"table: {path}: {prov['queries']} queries in {prov['seconds']} s ({prov['us_per_query']} us "
          f"each), {len(configs)} distinct algorithms", flush=True)


# ---- traced calls ---------------------------------------------------------------------------

def random_shapes(count: int, seed: int) -> list:
    """Random (M, N, K): M log-uniform 1..16384; N and K half from LLM layers, half random
    multiples of 16 (log-uniform 16..131072); none on the table's grid; sizes kept so that one
    call stays small (M*N <= 2^28, (M+N)*K <= 2^31, M*N*K <= 2^42)."""
    rng = random.Random(seed)
    dims = sorted({d for ds in LLM_DIMS.values() for d in ds if d <= 131072})
    grid = (set(M_AXIS), set(N_AXIS), set(K_AXIS))
    out, seen = [], set()

    def dim():
        if rng.random() < 0.5:
            return rng.choice(dims)
        return max(16, int(round(2 ** rng.uniform(4, 17) / 16)) * 16)

    while len(out) < count:
        m = max(1, min(16384, int(round(2 ** rng.uniform(0, 14)))))
        if rng.random() < 0.5:
            m = rng.randint(1, 16384) if rng.random() < 0.3 else m
        n, k = dim(), dim()
        if m * n > 2 ** 28 or (m + n) * k > 2 ** 31 or m * n * k > 2 ** 42:
            continue
        if m in grid[0] and n in grid[1] and k in grid[2]:
            continue
        if (m, n, k) in seen:
            continue
        seen.add((m, n, k))
        out.append((m, n, k))
    return out


TRACED_FIELDS = ["m", "n", "k", "out", "scale", "fast", "bias", "algo_id", "tile", "stages",
                 "split_k", "reduction", "custom", "cluster", "query_agrees", "error"]


def grid_shapes(count: int, seed: int) -> list:
    """Random points of the table's grid, under random_shapes' size limits."""
    rng = random.Random(seed)
    out, seen = [], set()
    while len(out) < count:
        m, n, k = rng.choice(M_AXIS), rng.choice(N_AXIS), rng.choice(K_AXIS)
        if m * n > 2 ** 28 or (m + n) * k > 2 ** 31 or m * n * k > 2 ** 42 or (m, n, k) in seen:
            continue
        seen.add((m, n, k))
        out.append((m, n, k))
    return out


def compact_traced(cases: list, prov: dict, count: int, seed: int) -> dict:
    """The traced calls as one row each (TRACED_FIELDS): the algorithm cuBLASLt's trace names
    (fields it leaves out at their defaults filled in: split-K 1, reduction NONE, custom 0),
    or torch's error; whether query() gave the same; full records where the two differ."""
    rows, differences = [], []
    for c in cases:
        t = dict({"split_k": 1, "reduction": "NONE", "custom": 0}, **c["traced"]) if c.get("traced") else None
        err = c.get("torch_error")
        if err and "CUBLAS_STATUS_" in err:
            err = "CUBLAS_STATUS_" + err.split("CUBLAS_STATUS_", 1)[1].split()[0].strip(":`")
        rows.append([c["m"], c["n"], c["k"], c["out"], c["scale"], c["fast"], c["bias"]]
                    + [t.get(f) if t else None for f in TRACED_FIELDS[7:14]]
                    + [bool(c.get("agree")), err])
        if not c.get("agree"):
            differences.append(c)
    agree = sum(r[14] for r in rows)
    return {"format": "fp8sim-cublaslt-traced-2", "provenance": prov,
            "note": "torch._scaled_mm on random shapes kept off the tables' grid (e4m3 operands, "
                    "no bias unless 'bias'): the algorithm cuBLASLt's own trace "
                    "(CUBLASLT_LOG_LEVEL=5) names for each call, or torch's error, and whether "
                    "fp8sim.cublaslt_plan.query answered the same",
            "shapes": count, "seed": seed, "calls": len(rows), "agree": agree,
            "differ": len(rows) - agree, "fields": TRACED_FIELDS, "cases": rows,
            "differences": differences}


def traced_variants(outs, bias_dtypes) -> list:
    """The traced calls' variants: every (out, scale, fast) without a bias, and with each of
    bias_dtypes (torch refuses some: recorded as its error), or by default the two with a bias
    the tables' bias rule rests on (bf16 tensor fast0 with bf16, f16 row fast1 with f16)."""
    plain = variants_for(outs)
    if not bias_dtypes:
        return plain + [("bf16", "tensor", False, "bf16"), ("f16", "row", True, "f16")]
    return plain + [v + (b,) for v in plain for b in bias_dtypes]


def traced_child(path: str, count: int, seed: int, git_rev: str, log: str,
                 table_path: str = "", outs=OUTS, bias_dtypes=()) -> int:
    import torch
    plan = load_plan_module()
    table = plan.load_table(table_path) if table_path else None
    table_checked = table_agree = 0
    dev = torch.device("cuda")
    prov = provenance(plan, git_rev)
    dt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16,
          "e4m3": torch.float8_e4m3fn}
    variants = traced_variants(outs, bias_dtypes)
    offset = 0

    def log_tail():
        nonlocal offset
        with open(log, "r", errors="replace") as f:
            f.seek(offset)
            text = f.read()
            offset = f.tell()
        algo, lines = {}, 0
        for ln in text.splitlines():
            if "[Trace][cublasLtMatmul]" in ln:
                algo, lines = plan.trace_algo(ln), lines + 1
                algo["_raw"] = ln[ln.find("algo="):][:400]
        return algo, lines

    cases, agree, differ, t0 = [], 0, 0, time.time()
    shapes = grid_shapes(count, seed) if table else random_shapes(count, seed)
    for si, (M, N, K) in enumerate(shapes):
        g = torch.Generator(device=dev).manual_seed(seed * 7919 + si)
        a = torch.randint(0, 0x7f, (M, K), generator=g, device=dev, dtype=torch.uint8).view(torch.float8_e4m3fn)
        b = torch.randint(0, 0x7f, (N, K), generator=g, device=dev, dtype=torch.uint8).view(torch.float8_e4m3fn)
        for v in variants:
            out, scale, fast = v[:3]
            bias_t = v[3] if len(v) > 3 else None
            if scale == "tensor":
                sa, sb = torch.tensor(0.5, device=dev), torch.tensor(2.0, device=dev)
            elif scale == "row":
                sa, sb = torch.ones((M, 1), device=dev), torch.ones((1, N), device=dev)
            else:
                sa = torch.ones((K // 128 + (K % 128 > 0), M), device=dev).t()
                sb = torch.ones(((N + 127) // 128, K // 128 + (K % 128 > 0)), device=dev).t()
            bias = torch.zeros(N, device=dev, dtype=dt[bias_t]) if bias_t else None
            rec = {"m": M, "n": N, "k": K, "out": out, "scale": scale, "fast": fast, "bias": bias_t}
            torch.cuda.synchronize()
            log_tail()
            try:
                torch._scaled_mm(a, b.t(), sa, sb, bias=bias, out_dtype=dt[out], use_fast_accum=fast)
                torch.cuda.synchronize()
                traced, nlines = log_tail()
                rec["traced"] = traced
                if nlines != 1:
                    rec["trace_lines"] = nlines
            except (RuntimeError, ValueError) as e:
                log_tail()
                rec["torch_error"] = str(e).splitlines()[0][:200]
            try:
                q = plan.query(M, N, K, out, use_fast_accum=fast, scale_mode=scale, bias_dtype=bias_t)
                rec["query"] = {f: q[f] for f in FIELDS + ["workspace_limit", "waves"]}
            except (plan.PlanUnavailable, ValueError) as e:
                rec["query_error"] = str(e)[:200]
            if "traced" in rec and "query" in rec:
                d = plan.same_choice(rec["query"], {kk: vv for kk, vv in rec["traced"].items()
                                                    if not kk.startswith("_")})
                ok = not d and bool(rec["traced"])
            else:
                d, ok = [], ("torch_error" in rec) == ("query_error" in rec)
            rec["agree"] = ok
            if table is not None and bias_t is None:
                want = table.lookup(M, N, K, out, fast, scale)
                if "traced" in rec and want is not None:
                    tr = dict({"split_k": 1, "reduction": "NONE", "custom": 0}, **rec["traced"])
                    good = all(str(want[f]) == str(tr[f]) for f in FIELDS[:7] if f in tr)
                else:
                    good = ("traced" in rec) == (want is not None)
                table_checked += 1
                table_agree += good
                rec["table_agrees"] = good
                if not good:
                    print(f"TABLE DIFFERS {M}x{N}x{K} {variant_key(out, scale, fast)}: table {want} "
                          f"trace {rec.get('traced') or rec.get('torch_error')}", flush=True)
            if d:
                rec["diff"] = d
            agree += ok
            differ += not ok
            if not ok and differ <= 20:
                print(f"DIFFERS {M}x{N}x{K} {variant_key(out, scale, fast)} bias {bias_t}: "
                      f"{d or rec.get('torch_error') or rec.get('query_error')}", flush=True)
            cases.append(rec)
        del a, b
        if si % 50 == 0:
            print(f"traced: {si + 1} shapes, {agree} agree, {differ} differ, "
                  f"{time.time() - t0:.0f} s", flush=True)
    prov["seconds"] = round(time.time() - t0, 1)
    doc = compact_traced(cases, prov, count, seed)
    if table is not None:
        doc["table"] = {"path": table_path, "checked": table_checked, "agree": table_agree}
        doc["note"] = ("torch._scaled_mm at random points of the table's grid: the traced "
                       "algorithm against the table's entry (no bias) and against query()")
        print(f"table {table_path}: {table_agree} of {table_checked} traced calls agree with it", flush=True)
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(f"traced: {len(cases)} calls on {count} shapes: {agree} agree, {differ} differ; "
          f"{path} {os.path.getsize(path)} bytes, {prov['seconds']} s", flush=True)
    return 0 if differ == 0 else 1


# ---- what the tables show -------------------------------------------------------------------

def analyse(table_path: str, heldout_path: str = "") -> None:
    """Rules that hold with no exception in a recorded table, with their counts, and how each
    does on a held-out file (calls without bias that torch ran)."""
    import array
    plan = load_plan_module()
    t = plan.load_table(table_path)
    ms, ns, ks = t.axes["m"], t.axes["n"], t.axes["k"]
    nn, nk = len(ns), len(ks)
    split = {}
    for v in t.variants:
        a = array.array("H")
        a.frombytes(t._codes[v])
        split[v] = [None if c == t.none else t.configs[c]["split_k"] for c in a]
    print(f"table {table_path}: {t.provenance.get('gpu')}, cuBLASLt {t.provenance.get('cublaslt_version')}, "
          f"{len(ms)} M x {len(ns)} N x {len(ks)} K x {len(t.variants)} variants, "
          f"{len(t.configs)} distinct algorithms")
    print("  algo ids:", sorted({c["algo_id"] for c in t.configs}), "stages:",
          sorted({c["stages"] for c in t.configs}), "swizzle:", sorted({c["swizzle"] for c in t.configs}),
          "reductions (split 1 / >1):", sorted({c["reduction"] for c in t.configs if c["split_k"] == 1}),
          sorted({c["reduction"] for c in t.configs if c["split_k"] > 1}))
    pts = [(m, n, k) for m in ms for n in ns for k in ks]
    rules = {}
    for key, sp in split.items():
        ok = [s_ for s_ in sp if s_ is not None]
        splits = [(m, n, k) for (m, n, k), s_ in zip(pts, sp) if s_ is not None and s_ > 1]
        none = len(sp) - len(ok)
        if not splits:
            print(f"  {key}: never splits ({len(ok)} points; {none} without an algorithm)")
            rules[key] = (None, None)
            continue
        mn = max(m * n for m, n, k in splits)
        kmin = min(k for m, n, k in splits)
        above = sum(1 for (m, n, k), s_ in zip(pts, sp) if s_ is not None and m * n > mn)
        below = sum(1 for (m, n, k), s_ in zip(pts, sp) if s_ is not None and k < kmin)
        either = sum(1 for (m, n, k), s_ in zip(pts, sp) if s_ is not None and (m * n > mn or k < kmin))
        print(f"  {key}: {len(splits)} of {len(ok)} points split (up to {max(s_ for s_ in ok)}); none where "
              f"M*N > {mn} ({above} points) or K < {kmin} ({below}); either: {either} points "
              f"({none} without an algorithm)")
        rules[key] = (mn, kmin)
    for out in OUTS:
        for sc in ("tensor", "row"):
            a, b = split[variant_key(out, sc, False)], split[variant_key(out, sc, True)]
            print(f"  fast accumulation changes the split ({out}, {sc}): {sum(x != y for x, y in zip(a, b))} "
                  f"of {len(a)} points")
    for sc, fasts in (("tensor", (False, True)), ("row", (False, True)), ("block", (False,))):
        for fa in fasts:
            for o1, o2 in (("f32", "bf16"), ("f32", "f16"), ("bf16", "f16")):
                a, b = split[variant_key(o1, sc, fa)], split[variant_key(o2, sc, fa)]
                d = [p_ for p_, x, y in zip(pts, a, b) if x != y]
                print(f"  out {o1} vs {o2} ({sc}, fast{int(fa)}): split differs at {len(d)} points"
                      + (f", all with M*N <= {max(m * n for m, n, k in d)} and K >= {min(k for m, n, k in d)}" if d else ""))
    if not heldout_path:
        return
    with open(heldout_path) as f:
        h = json.load(f)
    fi = {name: i for i, name in enumerate(h["fields"])}
    rows = [r for r in h["cases"] if r[fi["error"]] is None and r[fi["bias"]] is None]
    right = wrong = 0
    for r in rows:
        m, n, k, out, sc, fa = r[:6]
        mn, kmin = rules[variant_key(out, sc, fa)]
        if mn is None or m * n > mn or k < kmin:
            if r[fi["split_k"]] == 1:
                right += 1
            else:
                wrong += 1
                print("  held-out exception:", r)
    print(f"held-out {heldout_path}: {len(rows)} calls; the no-split rules above apply to {right + wrong}: "
          f"{right} right, {wrong} wrong; {len(rows) - right - wrong} left to a recorded point or refusal")


def _names(text: str, allowed, what: str) -> tuple:
    names = tuple(x for x in text.split(",") if x)
    bad = [x for x in names if x not in allowed]
    if bad:
        raise argparse.ArgumentTypeError(f"{what} {','.join(bad)}: expected some of {','.join(allowed)}")
    return names


def out_list(text: str) -> tuple:
    names = _names(text, ALL_OUTS, "output types")
    if not names:
        raise argparse.ArgumentTypeError("output types: none given")
    return names


def bias_list(text: str) -> tuple:
    return _names(text, ("f32", "bf16", "f16"), "bias dtypes")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", help="write the grid's table here (.json)")
    ap.add_argument("--traced", help="write traced torch._scaled_mm calls vs query() here (.json)")
    ap.add_argument("--count", type=int, default=320, help="random shapes for --traced")
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--git-rev", default="", help="when the tree has no .git")
    ap.add_argument("--check-table", metavar="TABLE", help="with --traced: run the traced calls at "
                    "random points of TABLE's grid and compare cuBLASLt's trace with the table")
    ap.add_argument("--analyse", metavar="TABLE", help="print the rules a recorded table shows "
                    "(with --traced FILE: how they do on that held-out file); needs no GPU")
    ap.add_argument("--outs", default=",".join(OUTS), type=out_list,
                    help="output types to record, of " + ",".join(ALL_OUTS) + " (default %(default)s)")
    ap.add_argument("--bias-dtypes", default="", type=bias_list,
                    help="with --traced: every variant also with a bias of each of these dtypes "
                         "(f32,bf16,f16; default: the two bias variants the tables' bias rule uses)")
    ap.add_argument("--grid", choices=sorted(GRIDS), default="llm",
                    help="--table's grid: llm (sim/data's tables) or zone (the split zone, finer)")
    ap.add_argument("--no-derive", action="store_true",
                    help="with --table and --traced: do not re-derive the split rule afterwards")
    ap.add_argument("--traced-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.analyse:
        analyse(args.analyse, args.traced or "")
        return 0
    if args.traced_child:
        return traced_child(args.traced, args.count, args.seed, args.git_rev,
                            os.environ["CUBLASLT_LOG_FILE"], args.check_table or "",
                            args.outs, args.bias_dtypes)
    rc = 0
    if args.table:
        plan = load_plan_module()
        try:
            plan.versions()
        except plan.PlanUnavailable as e:
            print(e, file=sys.stderr)
            return 2
        record_table(plan, args.table, args.git_rev, variants_for(args.outs), args.grid)
    if args.traced:
        import tempfile
        log = os.path.join(tempfile.mkdtemp(prefix="fp8sim-lt-"), "cublaslt.log")
        env = dict(os.environ, CUBLASLT_LOG_LEVEL="5", CUBLASLT_LOG_FILE=log)
        rc = subprocess.run([sys.executable, os.path.abspath(__file__), "--traced-child",
                             "--traced", args.traced, "--count", str(args.count),
                             "--seed", str(args.seed), "--git-rev", git_revision(args.git_rev),
                             "--outs", ",".join(args.outs), "--bias-dtypes", ",".join(args.bias_dtypes)]
                            + (["--check-table", args.check_table] if args.check_table else []),
                            env=env).returncode
        if args.table and rc == 0:
            bias_evidence(args.table, args.traced)
            if not args.no_derive and args.grid == "llm":
                rc = derive_rule(args.table, args.traced)
    return rc


def derive_rule(table: str, traced: str) -> int:
    """cuda/capture/derive_cublaslt_rule.py --write on the new table and held-out set: the split
    rule's constants re-derived for this GPU and checked (not written if it is wrong anywhere)."""
    spec = importlib.util.spec_from_file_location(
        "derive_cublaslt_rule", os.path.join(HERE, "derive_cublaslt_rule.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main(["--table", table, "--traced", traced, "--write"])


if __name__ == "__main__":
    sys.exit(main())
