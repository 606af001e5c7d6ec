"""Convert the public tensor-core validation vectors (shared/data/tensor-core-validation,
Khattak & Mikaitis, arXiv 2512.07004, BSD 2-Clause: see LICENCE here) into compact .npy
files that CI replays: <GPU>_<FMT>_a.npy / _b.npy (uint8 FP8 codes, T x 32), _c.npy and
_d_fp32.npy / _d_fp16.npy (float32 bit patterns as measured, T).

Usage: python make_npy.py [SOURCE_DIR]   (default ../../../../shared/data/tensor-core-validation)
"""
import pathlib
import sys

import ml_dtypes
import numpy as np

here = pathlib.Path(__file__).resolve().parent
src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else here / "../../../../shared/data/tensor-core-validation")
dtypes = {"E4M3": ml_dtypes.float8_e4m3fn, "E5M2": ml_dtypes.float8_e5m2}

for gpu in ["H100", "H200", "Ada", "B200"]:
    for fmt, dt in dtypes.items():
        d = src / gpu / fmt
        if not d.is_dir():
            continue
        for name in ["a", "b"]:
            hexes = [line.split() for line in (d / f"{name}_{gpu}_{fmt}.txt").read_text().splitlines() if line]
            vals = np.array([[int(h, 16) for h in row] for row in hexes], dtype=np.uint32).view(np.float32)
            codes = vals.astype(dt)
            assert np.array_equal(codes.astype(np.float32), vals), f"{d}: {name} not exact in {fmt}"
            np.save(here / f"{gpu}_{fmt}_{name}.npy", codes.view(np.uint8))
        for col in ["c_fp32", "d_fp32", "d_fp16"]:
            letter, acc = col.split("_")
            f = d / f"{letter}_{gpu}_{acc}.txt"
            if f.exists():
                bits = np.array([int(line, 2) for line in f.read_text().splitlines() if line], dtype=np.uint32)
                np.save(here / f"{gpu}_{fmt}_{letter if letter == 'c' else col}.npy", bits.view(np.float32))
