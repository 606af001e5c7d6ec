"""MMA-Sim side of fp8sim-bench-gemm: D = A B^T with Hopper's FP8 wgmma model
(mmasim.nv_ptx.WGMMA, m64n{N}k32 f32.e4m3.e4m3), promoting to an FP32 sum every PROMOTE
K elements (0: never). Usage: bench_mmasim.py DIR PROMOTE. Reads DIR/A.npy (M x K uint8)
and DIR/B.npy (N x K uint8), writes DIR/D.npy and DIR/seconds.npy. Exits 3 without mmasim (or numpy, torch).
"""
import sys
import time

try:
    import numpy as np
    import torch
    from mmasim.nv_ptx import WGMMA
except ImportError:
    sys.exit(3)

folder, promote = sys.argv[1], int(sys.argv[2])
# On the GPU when there is one (MMA-Sim's torch ops run there), else on the CPU.
dev = "cuda" if torch.cuda.is_available() else "cpu"
a = torch.from_numpy(np.load(f"{folder}/A.npy")).view(torch.float8_e4m3fn).to(dev)
b = torch.from_numpy(np.load(f"{folder}/B.npy")).view(torch.float8_e4m3fn).to(dev)
M, K = a.shape
N = b.shape[0]
chunk = promote or K
start = time.perf_counter()
out = torch.zeros(M, N, dtype=torch.float32, device=dev)
for m0 in range(0, M, 64):
    rows = slice(m0, min(M, m0 + 64))
    for n0 in range(0, N, 256):
        cols = slice(n0, min(N, n0 + 256))
        n = cols.stop - cols.start
        op = WGMMA("Hopper", f"m64n{n}k32.f32.e4m3.e4m3")
        main = torch.zeros(rows.stop - rows.start, n, dtype=torch.float32, device=dev)
        for k0 in range(0, K, chunk):
            acc = torch.zeros_like(main)
            for k in range(k0, min(K, k0 + chunk), 32):
                acc = op(a[rows, k:k + 32], b[cols, k:k + 32].T, acc)
            main = main + acc
        out[rows, cols] = main
if dev == "cuda":
    torch.cuda.synchronize()
seconds = time.perf_counter() - start
np.save(f"{folder}/D.npy", out.cpu().numpy())
np.save(f"{folder}/seconds.npy", np.array([seconds]))
