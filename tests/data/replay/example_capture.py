"""Write an fp8sim capture of your own FP8 GEMM kernel, for `fp8sim replay`.

Usage: python example_capture.py OUT_DIR [FP8SIM]
`my_kernel` stands in for your kernel; here it runs `fp8sim gemm` (path FP8SIM) so the
example is self-contained. Replace it with a call to your kernel returning float32 D.
"""
import json
import os
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

out_dir = sys.argv[1]
fp8sim = sys.argv[2] if len(sys.argv) > 2 else "fp8sim"


def my_kernel(a, b, c):
    """D = A @ B.T + C: A (M,K) and B (N,K) uint8 E4M3 codes, C (M,N) float32."""
    with tempfile.TemporaryDirectory() as t:
        for name, x in (("a", a), ("b", b), ("c", c)):
            np.save(f"{t}/{name}.npy", np.ascontiguousarray(x))
        subprocess.run([fp8sim, "gemm", "--a", f"{t}/a.npy", "--b", f"{t}/b.npy",
                        "--c", f"{t}/c.npy", "--model", "hopper-wgmma",
                        "--out", f"{t}/d.npy"], check=True)
        return np.load(f"{t}/d.npy")


# 1. Inputs: E4M3 codes as uint8 (ml_dtypes rounds to nearest even), C as float32.
rng = np.random.default_rng(1)
M, N, K = 64, 16, 256
a = rng.standard_normal((M, K)).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
b = rng.standard_normal((N, K)).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
c = rng.standard_normal((M, N)).astype(np.float32)

# 2. Outputs: D on the whole K, and on prefixes of K (to locate where a mismatch starts).
prefix_k = [32, 64, 128, 192]
d = my_kernel(a, b, c).astype(np.float32)
d_prefix = np.stack([my_kernel(a[:, :k], b[:, :k], c) for k in prefix_k]).astype(np.float32)

# 3. Files and manifest (paths relative to OUT_DIR).
os.makedirs(out_dir, exist_ok=True)
for name, x in (("a", a), ("b", b), ("c", c), ("d", d), ("d_prefix", d_prefix)):
    np.save(os.path.join(out_dir, f"{name}.npy"), x)
case = {"name": "my_kernel_random_normal", "kernel": "my_kernel", "suite": "random-normal",
        "a_format": "e4m3", "b_format": "e4m3", "model": "hopper-wgmma", "promote_every": 0,
        "scaling": "none", "out_type": "f32", "M": M, "N": N, "K": K,
        "a": "a.npy", "b": "b.npy", "c": "c.npy", "sa": None, "sb": None, "d": "d.npy",
        "prefix_k": prefix_k, "d_prefix": "d_prefix.npy"}
manifest = {"fp8sim_capture": 1, "device": "simulator (fp8sim gemm)", "driver": "", "cuda": "",
            "date": "", "git_revision": "", "generator": "example_capture.py", "seed": 1,
            "cases": [case]}
with open(os.path.join(out_dir, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=1)
print(f"wrote {out_dir}/manifest.json")
