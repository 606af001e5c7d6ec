"""capture_deepgemm: DeepGEMM's SM90 FP8 GEMM with 1x128 activation / 128x128 weight scales
(sm90_fp8_gemm_1d2d, reached through deep_gemm.fp8_gemm_nt), captured on an H100 for fp8sim.

Given a DeepGEMM source tree (github:deepseek-ai/DeepGEMM with its third-party/cutlass and
third-party/fmt submodules filled in; never committed here):
  python3 cuda/capture/capture_deepgemm.py --upstream DG_DIR --build --out DIR [--commit SHA] [--jobs 10]
On the H100 machine the captures come from (torch 2.11.0+cu130, CUDA 13.0) it was built as
  CC=/usr/bin/gcc CXX=/usr/bin/g++ LDSHARED="/usr/bin/g++ -shared" \
      python3 cuda/capture/capture_deepgemm.py --upstream DG_DIR --build
because the image's default /opt/gcc/bin/g++ (a wrapper of the same GCC 13.3) links libstdc++
into _C.so statically (ldd shows no libstdc++): that build crashes (SIGSEGV) in std::regex,
under fp8_gemm_nt -> transform_sf_into_required_layout -> LaunchRuntime::generate, while torch's
shared libstdc++ is loaded; built with the system g++ (or run with LD_PRELOAD=libstdc++.so.6)
it works. DeepGEMM's source is unchanged either way.
--build builds it in place as its develop.sh does (CUTLASS's cute/ and cutlass/ linked into
deep_gemm/include, `python setup.py build_ext --inplace`; if setup.py cannot run, the same
source and flags through torch.utils.cpp_extension). The kernels are JIT-compiled by DeepGEMM
itself with NVCC (its default; DG_JIT_CACHE_DIR is set to a temporary folder), first in
--jobs parallel processes (one per shape, each printing DeepGEMM's DG_PRINT_CONFIGS line),
then every shape of kernel_capture_common.PLAN and PLAN_WIDE runs in this process on seeded
operands with positive scales: a (M,K), b (N,K) e4m3, sfa (M, ceil(K/128)) f32,
sfb (ceil(N/128), ceil(K/128)) f32 (DeepGEMM's own layouts, which are fp8sim's block
layouts), d (M,N) bf16. The whole D or windows of it go into an fp8sim capture folder
("kernel_preset": "deepgemm-sm90-1d2d"). An f32 D is tried at each shape too; DeepGEMM's
refusal is recorded under "unsupported".
"""
from __future__ import annotations

import argparse
import faulthandler
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_capture_common as kc  # noqa: E402

UPSTREAM = {
    "repo": "github:deepseek-ai/DeepGEMM",
    "path": "deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh",
    "host": "csrc/jit_kernels/impls/sm90_fp8_gemm_1d2d.hpp, csrc/apis/gemm.hpp (fp8_fp4_gemm_nt)",
    "entry": "deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), d) with the default recipe (1, 128, 128)",
}


def build(dg: str) -> str:
    """Builds deep_gemm._C in place (develop.sh's steps); returns a log."""
    inc = os.path.join(dg, "deep_gemm", "include")
    for sub in ("cutlass", "cute"):
        link = os.path.join(inc, sub)
        if not os.path.exists(link):
            os.symlink(os.path.join(dg, "third-party", "cutlass", "include", sub), link)
    env = dict(os.environ, MAX_JOBS=str(os.cpu_count() or 8))
    r = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=dg, env=env,
                       capture_output=True, text=True)
    log = "setup.py build_ext --inplace: rc %d\n%s\n%s\n" % (r.returncode, r.stdout[-4000:],
                                                           r.stderr[-4000:])
    if r.returncode == 0:
        return log
    # setup.py needs `wheel` and `packaging`; without them, the same source and flags.
    import torch
    from torch.utils.cpp_extension import CUDA_HOME, load
    cxx = ["-std=c++17", "-O3", "-fPIC", "-Wno-psabi", "-Wno-deprecated-declarations",
           f"-D_GLIBCXX_USE_CXX11_ABI={int(torch.compiled_with_cxx11_abi())}"]
    bdir = tempfile.mkdtemp(prefix="dg-build-")
    mod = load(name="_C", sources=[os.path.join(dg, "csrc", "python_api.cpp")],
               extra_cflags=cxx,
               extra_include_paths=[f"{CUDA_HOME}/include", f"{CUDA_HOME}/include/cccl",
                                    os.path.join(dg, "deep_gemm", "include"),
                                    os.path.join(dg, "third-party", "cutlass", "include"),
                                    os.path.join(dg, "third-party", "fmt", "include")],
               extra_ldflags=[f"-L{CUDA_HOME}/lib64", "-lcudart", "-lnvrtc"],
               build_directory=bdir, verbose=False)
    shutil.copy(mod.__file__, os.path.join(dg, "deep_gemm", os.path.basename(mod.__file__)))
    return log + f"fallback torch.utils.cpp_extension.load: {mod.__file__}\n"


def tensors(M, N, K, seed, torch):
    a, b, sa, sb = kc.operands(M, N, K, seed)
    dev = torch.device("cuda")
    e4m3 = torch.float8_e4m3fn
    ta = torch.from_numpy(a).to(dev).view(e4m3)
    tb = torch.from_numpy(b).to(dev).view(e4m3)
    return (a, b, sa, sb), (ta, torch.from_numpy(sa).to(dev)), (tb, torch.from_numpy(sb).to(dev))


def warm(M, N, K, seed) -> int:
    """One GEMM at this shape: DeepGEMM compiles its kernel (cached) and prints its config."""
    import torch
    import deep_gemm
    _, A, B = tensors(M, N, K, seed, torch)
    d = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")
    deep_gemm.fp8_gemm_nt(A, B, d)
    torch.cuda.synchronize()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--upstream", required=True, help="DeepGEMM source tree")
    ap.add_argument("--build", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--commit", default="")
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--jobs", type=int, default=10)
    ap.add_argument("--warm", nargs=3, type=int, metavar=("M", "N", "K"))
    ap.add_argument("--build-note", default="",
                    help="how the upstream tree was built, for the manifest")
    args = ap.parse_args()
    if not os.environ.get("FP8SIM_NO_FAULTHANDLER"):
        faulthandler.enable()
    sys.path.insert(0, os.path.abspath(args.upstream))
    os.environ.setdefault("DG_JIT_CACHE_DIR", os.path.join(tempfile.gettempdir(), "dg-jit-cache"))
    os.environ.setdefault("DG_PRINT_CONFIGS", "1")
    if args.warm:
        return warm(*args.warm, args.seed)
    if args.build:
        print(build(args.upstream), flush=True)
    if not args.out:
        return 0

    # Kernels compiled in parallel: one process per shape.
    configs, procs = {}, []
    plan = kc.PLAN + kc.PLAN_WIDE
    pending = list(plan)
    while pending or procs:
        while pending and len(procs) < args.jobs:
            M, N, K, _, _ = pending.pop(0)
            cmd = [sys.executable, os.path.abspath(__file__), "--upstream", args.upstream,
                   "--seed", str(args.seed), "--warm", str(M), str(N), str(K)]
            procs.append(((M, N, K), subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                                       stderr=subprocess.STDOUT, text=True)))
        (shape, p) = procs.pop(0)
        out, _ = p.communicate()
        configs[shape] = (p.returncode, out)
        print(f"warm {shape}: rc {p.returncode}\n{out[-1500:]}", flush=True)

    import torch
    import deep_gemm
    m = kc.provenance("cuda/capture/capture_deepgemm.py", args.seed)
    m["upstream"] = dict(UPSTREAM, commit=args.commit,
                         version=getattr(deep_gemm, "__version__", ""), build=args.build_note)
    m["torch"] = f"torch {torch.__version__}, CUDA {torch.version.cuda}"
    m["jit"] = "NVCC (DG_JIT_USE_NVRTC unset), compiled_dims 'nk' (fp8_gemm_nt's default)"
    w = kc.CaptureWriter(args.out, m)
    for M, N, K, wr, wc in plan:
        (a, b, sa, sb), A, B = tensors(M, N, K, args.seed, torch)
        rc, log = configs.get((M, N, K), (0, ""))
        cfg = " ".join(ln.strip() for ln in log.splitlines() if ln.startswith("GemmDesc("))
        outs = {}
        for o, dt in (("bf16", torch.bfloat16), ("f32", torch.float32)):
            d = torch.full((M, N), float("nan"), dtype=dt, device="cuda")
            try:
                deep_gemm.fp8_gemm_nt(A, B, d)
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 (DeepGEMM raises RuntimeError on its asserts)
                msg = " ".join(str(e).split())
                w.unsupported(f"{M}x{N}x{K}_{o}", msg)
                print(f"{M}x{N}x{K} {o}: refused: {msg[:300]}", flush=True)
                continue
            dn = d.float().cpu().numpy()
            if np.isnan(dn).any():
                w.unsupported(f"{M}x{N}x{K}_{o}", "NaN in D (an output not written)")
                continue
            outs[o] = dn
        if outs:
            kernel = f"DeepGEMM sm90_fp8_gemm_1d2d via fp8_gemm_nt; {cfg or log[-400:]}"
            w.add_shape(M, N, K, wr, wc, a, b, sa, sb, outs,
                        {"kernel": kernel,
                         "suite": "kernel-preset", "kernel_preset": "deepgemm-sm90-1d2d"})
        print(f"{M}x{N}x{K}: {', '.join(outs) or 'nothing'}", flush=True)
    w.write()
    print(f"wrote {args.out}: {len(m['cases'])} cases, {len(m['unsupported'])} unsupported")
    return 0


if __name__ == "__main__":
    sys.exit(main())
