"""capture_cutlass_blockwise: CUTLASS's Hopper FP8 GEMM with blockwise scaling (example 67,
group-wise: A scales 1x128, B scales 128x128), captured on a GPU for fp8sim replay.

Needs the two binaries of cuda/capture/capture_cutlass_blockwise.sh (built from a CUTLASS checkout):
  bash cuda/capture/capture_cutlass_blockwise.sh CUTLASS_DIR BIN_DIR
  python3 cuda/capture/capture_cutlass_blockwise.py --bin BIN_DIR --out DIR [--cutlass-commit SHA]
For each shape of kernel_capture_common.PLAN it writes seeded operands and scales (converted to
CUTLASS's layouts: SFA M-major sfa[m + kb*M], SFB K-major sfb[nb*Kb + kb]), runs the bf16
kernel (the example's) and the f32 one (ElementD = float, the one change), and writes the whole
D or windows of it as an fp8sim capture folder ("kernel_preset": "cutlass-sm90-blockwise").
A shape CUTLASS's can_implement refuses is listed under "unsupported" with its message: with
1x128 A scales the mainloop loads SFA by TMA (ScaleMsPerTile 256 >= 32), which needs the M-major
SFA rows 16-byte aligned, M % 4 == 0 (can_implement in sm90_mma_tma_gmma_ss_warpspecialized_
fp8_blockwise_scaling.hpp), so M = 1 and 129 are refused (Status kInvalid, "Invalid status").
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_capture_common as kc  # noqa: E402

UPSTREAM = {
    "repo": "github:NVIDIA/cutlass",
    "path": "examples/67_hopper_fp8_warp_specialized_gemm_with_blockwise_scaling/"
            "67_hopper_fp8_warp_specialized_gemm_with_groupwise_scaling.cu",
    "mainloop": "include/cutlass/gemm/collective/"
                "sm90_mma_tma_gmma_ss_warpspecialized_fp8_blockwise_scaling.hpp",
}


def run_kernel(binary: str, M, N, K, a, b, sa, sb, tmp: str):
    """D (M,N) float32 from one binary, or (None, message)."""
    kb = sa.shape[1]
    paths = {k: os.path.join(tmp, f"{k}.bin") for k in ("a", "b", "sfa", "sfb", "d")}
    a.tofile(paths["a"])
    b.tofile(paths["b"])
    np.ascontiguousarray(sa.T).astype(np.float32).tofile(paths["sfa"])   # sfa[m + kb*M]
    np.ascontiguousarray(sb).astype(np.float32).tofile(paths["sfb"])     # sfb[nb*Kb + kb]
    assert sa.shape == (M, kb)
    r = subprocess.run([binary, str(M), str(N), str(K), paths["a"], paths["b"], paths["sfa"],
                        paths["sfb"], paths["d"]], capture_output=True, text=True, timeout=120)
    lines = (r.stdout + r.stderr).strip().splitlines()
    config = next((ln[len("config: "):] for ln in lines if ln.startswith("config: ")), "")
    if r.returncode != 0:
        return None, config, " | ".join(ln for ln in lines if not ln.startswith("config: "))
    raw = np.fromfile(paths["d"], dtype=np.uint16 if binary.endswith("bf16") else np.float32)
    d = kc.bf16_bits_to_f32(raw) if binary.endswith("bf16") else raw
    return d.reshape(M, N), config, ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True,
                    help="folder of capture_cutlass_blockwise.sh's binaries")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--cutlass-commit", default="")
    args = ap.parse_args()
    m = kc.provenance("cuda/capture/capture_cutlass_blockwise.py (+ .cu, .sh)", args.seed)
    m["upstream"] = dict(UPSTREAM, commit=args.cutlass_commit)
    w = kc.CaptureWriter(args.out, m)
    bins = {o: os.path.join(args.bin, f"capture_cutlass_blockwise_{o}") for o in ("bf16", "f32")}
    with tempfile.TemporaryDirectory() as tmp:
        for M, N, K, wr, wc in kc.PLAN:
            a, b, sa, sb = kc.operands(M, N, K, args.seed)
            outs, configs = {}, {}
            for o, binary in bins.items():
                d, cfg, err = run_kernel(binary, M, N, K, a, b, sa, sb, tmp)
                if cfg:
                    configs[o] = cfg
                    m.setdefault("kernel_config", {})[o] = cfg
                if d is None:
                    w.unsupported(f"{M}x{N}x{K}_{o}", err)
                    print(f"{M}x{N}x{K} {o}: {err}", flush=True)
                    continue
                if np.isnan(d).any():
                    w.unsupported(f"{M}x{N}x{K}_{o}", "NaN in D (an output not written)")
                    continue
                outs[o] = d
            for o, d in outs.items():
                kernel = ("CUTLASS example 67 groupwise (KernelTmaWarpSpecializedCooperativeFP8"
                          f"Blockwise){' with f32 D' if o == 'f32' else ''}, {configs.get(o, '')}")
                w.add_shape(M, N, K, wr, wc, a, b, sa, sb, {o: d},
                            {"kernel": kernel, "suite": "kernel-preset",
                             "kernel_preset": "cutlass-sm90-blockwise"})
            print(f"{M}x{N}x{K}: {', '.join(outs) or 'nothing'}", flush=True)
    w.write()
    print(f"wrote {args.out}: {len(m['cases'])} cases, {len(m['unsupported'])} unsupported")
    return 0


if __name__ == "__main__":
    sys.exit(main())
