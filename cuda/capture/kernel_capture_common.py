"""kernel_capture_common: what cuda/capture/capture_deepgemm.py and cuda/capture/capture_cutlass_blockwise.py
share: the seeded operands, the shape plan with its windows, and the capture folder writer
(the format sim/io/capture.hpp reads; block scales in fp8sim's layout: sa (M, ceil(K/128)),
sb (ceil(N/128), ceil(K/128))).

numpy only (no torch), so the plan and the writer run anywhere; the kernels' own scripts
convert to their layouts.
"""
from __future__ import annotations

import datetime
import json
import os
import subprocess

import numpy as np

BLOCK = 128

# (M, N, K, window rows, window cols): window 0 = the whole D. Chosen for tiles that do not
# divide M, N (and, where the kernel allows, K): DeepGEMM picks BLOCK_M in {16,32,64,128,256}
# and BLOCK_N in 16..192 per shape; CUTLASS example 67 uses 256x128x128 tiles.
PLAN = [
    (1, 128, 128, 0, 0),
    (64, 256, 512, 0, 0),
    (129, 320, 256, 0, 0),
    (300, 136, 128, 0, 0),
    (132, 256, 320, 0, 0),      # K = 2.5 blocks of 128: a masked (TMA zero-filled) K tail
    (129, 1000, 512, 24, 40),
    (300, 1000, 7168, 16, 32),
    (129, 576, 2048, 24, 64),
    (1, 1000, 2048, 1, 64),
    (64, 576, 7168, 8, 16),
]

# DeepGEMM only: larger problems where its heuristic may pick a BLOCK_N that does not divide
# 128, so that some tiles straddle two 128-column blocks of B's scales (the kernel's
# num_former_iters path, sm90_fp8_gemm_1d2d.cuh:232-249, 288-291, 342). One window of 8 rows
# by 256 columns from (0, 0): it covers the tiles over the boundary at column 128.
PLAN_WIDE = [
    (4096, 7168, 512, 8, 256),
    (2048, 2112, 512, 8, 256),
    (1024, 4608, 512, 8, 256),
]


def e4m3_table() -> np.ndarray:
    """Value of each E4M3 (fn) code; NaN for 0x7f/0xff."""
    v = np.empty(256, np.float64)
    for c in range(256):
        s = -1.0 if c & 0x80 else 1.0
        e = (c >> 3) & 0xF
        m = c & 7
        if e == 15 and m == 7:
            v[c] = np.nan
        elif e == 0:
            v[c] = s * m / 8 * 2.0 ** -6
        else:
            v[c] = s * (1 + m / 8) * 2.0 ** (e - 7)
    return v


_TABLE = e4m3_table()
_FINITE = np.array([c for c in range(256) if np.isfinite(_TABLE[c])], np.uint8)
_ORDER = np.argsort(_TABLE[_FINITE], kind="stable")
_SORTED_VALS = _TABLE[_FINITE][_ORDER]
_SORTED_CODES = _FINITE[_ORDER]


def to_e4m3_codes(x: np.ndarray) -> np.ndarray:
    """Nearest finite E4M3 code of each value (saturating; ties to the lower neighbour: these
    are only test inputs, the codes themselves are what the capture records)."""
    x = np.clip(x, -448.0, 448.0)
    i = np.searchsorted(_SORTED_VALS, x)
    i = np.clip(i, 1, len(_SORTED_VALS) - 1)
    lo, hi = _SORTED_VALS[i - 1], _SORTED_VALS[i]
    pick = np.where(np.abs(x - lo) <= np.abs(hi - x), i - 1, i)
    return _SORTED_CODES[pick].astype(np.uint8)


def operands(M: int, N: int, K: int, seed: int):
    """Seeded A (M,K), B (N,K) E4M3 codes (values ~ N(0, 2^2)) and positive f32 scales in
    fp8sim's block layout: sa (M, ceil(K/128)), sb (ceil(N/128), ceil(K/128)), uniform in
    [0.05, 3) with full 24-bit significands (so the order of sa*sb and the FMA matter)."""
    rng = np.random.default_rng([seed, M, N, K])
    kb, nb = -(-K // BLOCK), -(-N // BLOCK)
    a = to_e4m3_codes(rng.standard_normal((M, K)) * 2)
    b = to_e4m3_codes(rng.standard_normal((N, K)) * 2)
    sa = (rng.random((M, kb)) * 2.95 + 0.05).astype(np.float32)
    sb = (rng.random((nb, kb)) * 2.95 + 0.05).astype(np.float32)
    return a, b, sa, sb


def windows(M: int, N: int, wr: int, wc: int):
    """(tag, r0, c0, rows, cols): the whole D (wr == 0), else a first window at (0, 0) and a
    last one holding the last row and column (the masked edge tiles). A window's columns lie
    in one 128-column block of B's scales, or start at a multiple of 128, so fp8sim maps the
    window's column j to its scale block j // 128."""
    if wr == 0:
        return [("full", 0, 0, M, N)]
    wr, wc = min(wr, M), min(wc, N)
    out = [("first", 0, 0, wr, wc)]
    if wc > BLOCK:  # a wide window (PLAN_WIDE): the first one only
        return out
    r0, c0 = M - wr, N - wc
    if c0 // BLOCK != (N - 1) // BLOCK:
        c0 = ((N - 1) // BLOCK) * BLOCK
    out.append(("last", r0, c0, M - r0, N - c0))
    return out


def provenance(generator: str, seed: int) -> dict:
    def sh(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""
    gpu = sh(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    name, _, driver = gpu.partition(",")
    nvcc = sh(["nvcc", "--version"]).splitlines()
    here = os.path.dirname(os.path.abspath(__file__))
    return {
        "fp8sim_capture": 1,
        "device": name.strip(),
        "driver": driver.strip(),
        "cuda": nvcc[-1] if nvcc else "",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "git_revision": sh(["git", "-C", here, "rev-parse", "--short", "HEAD"]),
        "generator": generator,
        "seed": seed,
        "cases": [],
        "unsupported": [],
    }


class CaptureWriter:
    """Accumulates cases and writes DIR/manifest.json plus the .npy files."""

    def __init__(self, out: str, manifest: dict):
        self.out = out
        self.m = manifest
        os.makedirs(out, exist_ok=True)

    def save(self, name: str, x: np.ndarray) -> str:
        np.save(os.path.join(self.out, name), np.ascontiguousarray(x))
        return name

    def add_shape(self, M, N, K, wr, wc, a, b, sa, sb, outputs: dict, common: dict):
        """outputs: out_type -> full (M,N) float32 D of the kernel (bf16 as float32 values)."""
        stem = f"{M}x{N}x{K}"
        for tag, r0, c0, rows, cols in windows(M, N, wr, wc):
            w = f"{stem}_{tag}"
            b0, b1 = c0 // BLOCK, (c0 + cols - 1) // BLOCK
            files = {
                "a": self.save(f"{w}_a.npy", a[r0:r0 + rows]),
                "b": self.save(f"{w}_b.npy", b[c0:c0 + cols]),
                "sa": self.save(f"{w}_sa.npy", sa[r0:r0 + rows]),
                "sb": self.save(f"{w}_sb.npy", sb[b0:b1 + 1]),
            }
            for out_type, d in outputs.items():
                name = f"{w}_{out_type}"
                case = dict(common)
                case.update({
                    "name": name, "a_format": "e4m3", "b_format": "e4m3",
                    "model": "hopper-wgmma", "promote_every": 128, "scaling": "block",
                    "block": BLOCK, "scale_order": "deepgemm", "out_type": out_type,
                    "M": rows, "N": cols, "K": K, "c": None, "bias": None,
                    "d": self.save(f"{name}_d.npy",
                                   d[r0:r0 + rows, c0:c0 + cols].astype(np.float32)),
                    "shape": [M, N, K], "window": [r0, c0], "window_b_blocks": [b0, b1],
                    "prefix_k": None, "d_prefix": None,
                })
                case.update(files)
                self.m["cases"].append(case)

    def unsupported(self, what: str, error: str):
        self.m["unsupported"].append({"case": what, "error": error[:600]})

    def write(self):
        with open(os.path.join(self.out, "manifest.json"), "w") as f:
            json.dump(self.m, f, indent=1)


def bf16_bits_to_f32(u16: np.ndarray) -> np.ndarray:
    return (u16.astype(np.uint32) << 16).view(np.float32)
