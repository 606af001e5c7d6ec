"""MMA-Sim side of fp8sim-bench-gemm, at its best: D = A B^T with Hopper's FP8 wgmma model
(mmasim.nv_ptx.WGMMA "m64n256k32.f32.e4m3.e4m3"), through MMA-Sim's vectorised torch path:
its .dpa applied to whole tiles of D at once (every output of a tile of rows of A against
all of B, A and B broadcast to [rows, N, K] views), as MMA-Sim's own tests use it, on the
GPU when there is one. Each chunk of PROMOTE K elements (0: all of K) is one dpa call from
a zero accumulator (dpa runs its 32-product steps in order); the chunks' results are added
into an FP32 sum, in order. Usage: bench_mmasim.py DIR PROMOTE [REPS]. Reads DIR/A.npy (M x K
uint8) and DIR/B.npy (N x K uint8), writes DIR/D.npy (M x N float32) and DIR/seconds.npy
(the timed part: all dpa calls and sums, operands already on the device, after one warm-up
call; the best of REPS passes, default 1, as fp8sim's rates are: a later pass finds torch's
allocator holding the tiles' temporaries). Exits 3 without mmasim (or numpy, torch).
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
reps = max(1, int(sys.argv[3])) if len(sys.argv) > 3 else 1
dev = "cuda" if torch.cuda.is_available() else "cpu"
a = torch.from_numpy(np.load(f"{folder}/A.npy")).view(torch.float8_e4m3fn).to(dev)
b = torch.from_numpy(np.load(f"{folder}/B.npy")).view(torch.float8_e4m3fn).to(dev)
M, K = a.shape
N = b.shape[0]
chunk = promote or K
op = WGMMA("Hopper", "m64n256k32.f32.e4m3.e4m3")
# Outputs per dpa call: dpa's temporaries take about 3 KB per output of a tile (float64
# terms of one 32-product step), so a tile of 2^21 outputs needs about 6 GB of the GPU's
# memory; on the CPU, tiles of 2^16 outputs stay in its caches.
budget = 1 << (21 if dev == "cuda" else 16)
rows = max(1, min(M, budget // max(N, 1)))


def tile(m0, m1, n1):
    """Rows m0..m1 of D against the first n1 rows of B: chunks of K, promoted in order."""
    main = torch.zeros(m1 - m0, n1, dtype=torch.float32, device=dev)
    for k0 in range(0, K, chunk):
        k1 = min(K, k0 + chunk)
        av = a[m0:m1, None, k0:k1].expand(-1, n1, -1)
        bv = b[None, :n1, k0:k1].expand(m1 - m0, -1, -1)
        acc = torch.zeros(m1 - m0, n1, dtype=torch.float32, device=dev)
        main = main + op.dpa(av, bv, acc)
    return main


def timed_pass():
    """All of D, and its seconds."""
    if dev == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    d = torch.empty(M, N, dtype=torch.float32, device=dev)
    for m0 in range(0, M, rows):
        m1 = min(M, m0 + rows)
        d[m0:m1] = tile(m0, m1, N)
    if dev == "cuda":
        torch.cuda.synchronize()
    return d, time.perf_counter() - start


tile(0, 1, min(N, 8))  # warm-up: CUDA context, kernels loaded
out, seconds = timed_pass()
for _ in range(reps - 1):
    out, again = timed_pass()
    seconds = min(seconds, again)
np.save(f"{folder}/D.npy", out.cpu().numpy())
np.save(f"{folder}/seconds.npy", np.array([seconds]))
