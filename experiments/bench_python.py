"""bench_python: the Python front-end's overhead over the GEMM engine (a benchmark, not a test).

Times fp8sim.gemm (1024 x 1024 x 4096 e4m3, hopper-wgmma, promotion every 128, 1 thread)
from Python against the engine alone, two ways:
  1. the per-call overhead: a 1 x 1 x 32 gemm from Python (argument checks, array views,
     result wrapping; it does not grow with the operands, which are never copied) as a
     percentage of the large GEMM's engine time;
  2. the large GEMM from Python against fp8sim-bench-gemm (C++, same size, same engine call,
     decoding included) when that binary is given (--bench build/experiments/fp8sim-bench-gemm).
With --device cuda, the same on torch CUDA tensors through the CUDA engine (operands read in
place): the large GEMM, the per-call cost of a 1 x 1 x 32 one (checks, the code tables'
upload, the launch and the synchronisation) as a share of it, and the NumPy route (operands
uploaded by the engine) for comparison; then quantize of an M x K float32 CUDA tensor in 1 x 128
tiles on the GPU against the host route (copied down, quantised on all CPU threads, codes
copied back: what fp8sim.torch did before), and one training step (Fprop, Dgrad, Wgrad) of an
M x K -> N Float8Linear under deepseek-v3 on CUDA tensors.
Target: overhead <= 5% of engine time.
"""
import argparse
import re
import subprocess
import time

import numpy as np

import fp8sim


def best_of(reps, f):
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--m", type=int, default=1024)
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--k", type=int, default=4096)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--bench", help="fp8sim-bench-gemm binary (the C++ engine timing)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    a = p.parse_args()
    rng = np.random.default_rng(1)
    A = fp8sim.encode(rng.normal(size=(a.m, a.k)).astype(np.float32), "e4m3")
    B = fp8sim.encode(rng.normal(size=(a.n, a.k)).astype(np.float32), "e4m3")
    if a.device == "cuda":
        return bench_cuda(a, A, B)
    kw = dict(model="hopper-wgmma", promote_every=128, threads=1)
    macs = a.m * a.n * a.k
    big = best_of(a.reps, lambda: fp8sim.gemm(A, B, **kw))
    tiny_a = A[:1, :32].copy()
    tiny = np.median([best_of(1, lambda: fp8sim.gemm(tiny_a, tiny_a, **kw)) for _ in range(2000)])
    print(f"python gemm {a.m}x{a.n}x{a.k} threads=1 {big:8.3f} s  {macs / big:.3g} emulated MAC/s")
    print(f"python per-call overhead (1x1x32 gemm, median of 2000): {tiny * 1e6:.1f} us = "
          f"{100 * tiny / big:.5f}% of the large GEMM")
    if a.bench:
        out = subprocess.run([a.bench, "--m", str(a.m), "--n", str(a.n), "--k", str(a.k),
                              "--promote-every", "128", "--reps", str(a.reps),
                              "--mmasim-rows", "0"], capture_output=True, text=True,
                             check=True).stdout
        engine = float(re.search(r"threads=1\s+([0-9.]+) s", out).group(1))
        print(f"engine (fp8sim-bench-gemm, C++) threads=1 {engine:8.3f} s")
        print(f"python / engine = {big / engine:.4f} (overhead {100 * (big - engine) / engine:+.2f}%)")


def bench_cuda(a, A, B):
    import torch
    kw = dict(model="hopper-wgmma", promote_every=128)
    At, Bt = torch.from_numpy(A).cuda(), torch.from_numpy(B).cuda()
    tiny_t = At[:1, :32].contiguous()

    def on_gpu(x, y):
        fp8sim.gemm(x, y, **kw)
        torch.cuda.synchronize()

    on_gpu(At, Bt)  # first call: context and module load
    macs = a.m * a.n * a.k
    big = best_of(a.reps, lambda: on_gpu(At, Bt))
    host = best_of(a.reps, lambda: fp8sim.gemm(A, B, device="cuda", **kw))
    tiny = np.median([best_of(1, lambda: on_gpu(tiny_t, tiny_t)) for _ in range(200)])
    print(f"cuda gemm on CUDA tensors {a.m}x{a.n}x{a.k} {big * 1e3:8.3f} ms  {macs / big:.3g} emulated MAC/s")
    print(f"cuda gemm on NumPy arrays (engine uploads) {host * 1e3:8.3f} ms")
    print(f"cuda per-call cost (1x1x32 gemm, median of 200): {tiny * 1e6:.1f} us = "
          f"{100 * tiny / big:.2f}% of the large GEMM")

    import fp8sim.torch as ft
    torch.manual_seed(0)
    x = torch.randn(a.m, a.k, device="cuda")

    def on_gpu_quantize():
        fp8sim.quantize(x, "e4m3", "tile128")
        torch.cuda.synchronize()

    def via_host_quantize():
        torch.from_numpy(fp8sim.quantize(x.cpu(), "e4m3", "tile128").codes).to(x.device)
        torch.cuda.synchronize()

    on_gpu_quantize()
    gpu_q = best_of(a.reps, on_gpu_quantize)
    host_q = best_of(a.reps, via_host_quantize)
    n = a.m * a.k
    print(f"cuda quantize {a.m}x{a.k} e4m3 tile128 on the GPU   {gpu_q * 1e3:8.3f} ms  "
          f"{n / gpu_q:.3g} values/s")
    print(f"cuda quantize {a.m}x{a.k} e4m3 tile128 via the host {host_q * 1e3:8.3f} ms  "
          f"({host_q / gpu_q:.1f}x the GPU's time)")
    lin = ft.Float8Linear(a.k, a.n, bias=False, recipe="deepseek-v3", device="cuda")
    xg = x.clone().requires_grad_()

    def step():
        lin(xg).sum().backward()
        torch.cuda.synchronize()

    step()
    t = best_of(a.reps, step)
    print(f"cuda Float8Linear {a.m}x{a.k}->{a.n} deepseek-v3 step (3 GEMMs) {t * 1e3:8.3f} ms  "
          f"{3 * macs / t:.3g} emulated MAC/s")


if __name__ == "__main__":
    main()
