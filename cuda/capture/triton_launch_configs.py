"""triton_launch_configs: the launch configs capture_triton.py runs the Triton kernels under
(issue 36): config strings (--config), the config vLLM's and SGLang's wrappers pick for a shape
from their tuned files (--triton-config; the files in sim/data/triton_configs, copied from the
released wheels), the served shapes and batch sizes, the random held-out configs (--random),
and the served captures' window. No torch, no triton: --dry-run and the tests use it alone.
"""
from __future__ import annotations

import json
import os
import random
import re

# Served shapes (issue 36): (N, K) of block-FP8 weights, and the batch sizes M.
SERVED_NK = [
    # DeepSeek-V3 (hidden 7168): q_a 1536x7168, kv_a 576x7168, q_a+kv_a fused 2112x7168, q_b
    # 24576x1536, kv_b 32768x512, o 7168x16384, dense gate_up 36864x7168 and down 7168x18432,
    # shared expert gate_up 4096x7168 and down 7168x2048, o at TP 16 7168x1024.
    "1536x7168", "576x7168", "2112x7168", "24576x1536", "32768x512", "7168x16384",
    "36864x7168", "7168x18432", "4096x7168", "7168x2048", "7168x1024",
    # Qwen3-8B-FP8 (hidden 4096, 32 + 2x8 heads of 128, intermediate 12288): qkv 6144x4096,
    # o 4096x4096, gate_up 24576x4096, down 4096x12288 (no tuned files: default configs).
    "6144x4096", "4096x4096", "24576x4096", "4096x12288",
]
SERVED_M = [1, 2, 3, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, 1024]
CONFIG_KEYS = ["BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "num_warps", "num_stages",
               "GROUP_SIZE_M"]
DEFAULT_GROUP_M = 32  # both wrappers' default GROUP_SIZE_M (it orders the CTAs, not the sums)
CONFIG_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sim", "data",
                          "triton_configs")


def parse_config(text: str) -> dict:
    """A --config value as a launch dict: 'BM,BN,BK,WARPS,STAGES[,GROUP_M]' or named keys
    (CONFIG_KEYS; GROUP_SIZE_M optional). Exits with one line on anything else."""
    def bad(why):
        raise SystemExit(f"capture_triton: --config {text!r}: {why} (expected "
                         "BM,BN,BK,WARPS,STAGES[,GROUP_M] or BLOCK_SIZE_M=..,BLOCK_SIZE_N=..,"
                         "BLOCK_SIZE_K=..,num_warps=..,num_stages=..[,GROUP_SIZE_M=..])")
    parts = [p.strip() for p in text.split(",")]
    if all("=" in p for p in parts):
        cfg = {}
        for p in parts:
            k, v = p.split("=", 1)
            if k not in CONFIG_KEYS:
                bad(f"unknown key {k!r}")
            if k in cfg:
                bad(f"{k} given twice")
            cfg[k] = v
        missing = [k for k in CONFIG_KEYS[:5] if k not in cfg]
        if missing:
            bad("missing " + ", ".join(missing))
    elif any("=" in p for p in parts):
        bad("mixes positional values and named keys")
    else:
        if len(parts) not in (5, 6):
            bad(f"{len(parts)} values")
        cfg = dict(zip(CONFIG_KEYS, parts))
    out = {}
    for k in CONFIG_KEYS:
        v = cfg.get(k, str(DEFAULT_GROUP_M))
        if not re.fullmatch(r"[0-9]+", v) or int(v) < 1 or int(v) > 1024:
            bad(f"{k} {v!r} is not an integer in 1..1024")
        out[k] = int(v)
    for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "num_warps"):
        if out[k] & (out[k] - 1):
            bad(f"{k} {out[k]} is not a power of two (Triton needs one)")
    return out


def config_text(cfg: dict) -> str:
    """BM,BN,BK,WARPS,STAGES (the form fp8sim's --triton-config takes)."""
    return ",".join(str(cfg[k]) for k in CONFIG_KEYS[:5])


def config_tag(cfg: dict) -> str:
    return "m{BLOCK_SIZE_M}n{BLOCK_SIZE_N}k{BLOCK_SIZE_K}w{num_warps}s{num_stages}".format(**cfg)


def served_file_name(server: str, N: int, K: int, device_name: str, block=(128, 128)) -> str:
    """The tuned-config file name the server's get_w8a8_block_fp8_configs opens. vLLM 0.33.0
    fp8_utils.py: device name with runs of whitespace and '/' as '_' (platform_utils
    get_device_name_as_file_name), block_shape=[{n},{k}]; SGLang 0.5.23 fp8_kernel.py: spaces
    as '_', block_shape=[{n}, {k}]."""
    if server == "vllm":
        dev = re.sub(r"[\s/]+", "_", device_name)
        return (f"N={N},K={K},device_name={dev},dtype=fp8_w8a8,"
                f"block_shape=[{block[0]},{block[1]}].json")
    dev = device_name.replace(" ", "_")
    return f"N={N},K={K},device_name={dev},dtype=fp8_w8a8,block_shape=[{block[0]}, {block[1]}].json"


def served_config(server: str, N: int, K: int, M: int, device_name: str, default: dict,
                  default_where: str, block=(128, 128)) -> tuple[dict, str]:
    """(config, where it came from) as the server's wrapper picks it for this launch: the
    tuned file's entry nearest to M (ties to the smaller key), else the wrapper's default.
    SGLang also raises an entry's BLOCK_SIZE_K to block_k when it is smaller and not a divisor
    of block_k (on CUDA); an entry with keys the kernel path here does not run (SWAP_AB,
    SPLIT_K: SGLang's Hopper variant) is refused."""
    name = served_file_name(server, N, K, device_name, block)
    path = os.path.join(CONFIG_DIR, server, name)
    if not os.path.exists(path):
        return dict(default), f"{server} default config ({default_where}; no file {name})"
    with open(path) as f:
        table = {int(k): v for k, v in json.load(f).items()}
    key = min(table.keys(), key=lambda x: abs(x - M))
    cfg = dict(table[key])
    extra = sorted(set(cfg) - set(CONFIG_KEYS))
    if extra:
        raise SystemExit(f"capture_triton: {name} entry {key}: keys {extra} (SGLang's Hopper "
                         "variant) are not captured by this script")
    if server == "sglang" and cfg["BLOCK_SIZE_K"] < block[1] and block[1] % cfg["BLOCK_SIZE_K"]:
        cfg["BLOCK_SIZE_K"] = block[1]
    return cfg, f"{server} sim/data/triton_configs/{server}/{name} entry {key}"


def random_cases(n: int, seed: int) -> list:
    """n (MxNxK, config) pairs drawn from `seed`, as issue 36's held-out check asks:
    BLOCK_SIZE_M in 16..128, BLOCK_SIZE_N in 32..256, BLOCK_SIZE_K 64 or 128, 4 or 8 warps,
    2 to 5 stages; M 1..333, N 1..1000, K 1..7168 (tails off every tile)."""
    r = random.Random(seed * 7919 + 36)
    out = []
    for _ in range(n):
        cfg = {"BLOCK_SIZE_M": r.choice([16, 32, 64, 128]),
               "BLOCK_SIZE_N": r.choice([32, 64, 128, 256]),
               "BLOCK_SIZE_K": r.choice([64, 128]), "num_warps": r.choice([4, 8]),
               "num_stages": r.randint(2, 5), "GROUP_SIZE_M": r.choice([1, 8, 16, 32, 64])}
        out.append((f"{r.randint(1, 333)}x{r.randint(1, 1000)}x{r.randint(1, 7168)}", cfg))
    return out


def served_windows(M: int, N: int, n_rows: int, n_cols: int):
    """The served captures' one window: the first min(M, n_rows) rows and the last n_cols
    columns of the last 128-column block (the masked tile when N % 128 != 0)."""
    return [("last", list(range(min(M, n_rows))),
             list(range(max((N - 1) // 128 * 128, N - n_cols), N)))]
