"""capture_triton: Triton FP8 GEMM kernels on a GPU, captured for fp8sim replay (issue 26).

Two kernel presets:

  triton-w8a8-block-fp8  the block-scaled FP8 GEMM that vLLM and SGLang run for DeepSeek-V3
                         style checkpoints (A e4m3 with 1x128 scales As (M, ceil(K/128)), B e4m3
                         with 128x128 scales Bs (ceil(N/128), ceil(K/128)), f32 accumulator).
                         The @triton.jit function is taken UNCHANGED from an upstream file
                         given with --upstream (never copied into this project: the script
                         reads its source with `ast`, writes it alone into a temporary module
                         and imports that, so Triton compiles the upstream text as written).
                         The launch re-implements the upstream wrapper's arithmetic (grid,
                         strides, masking flag); the launch config is the wrapper's own default
                         config dict, read from the wrapper's source (no tuned-config JSON).
  triton-fp8-dot         our own plain Triton FP8 `tl.dot` loop (fp8_dot_kernel below): e4m3
                         A (M,K) x B (N,K)^T, acc = tl.dot(a, b, acc, max_num_imprecise_acc=V)
                         over K in BLOCK_K steps, then D = acc * (sa * sb) (tensor scales, once,
                         after the loop; the scale product first), f32 or bf16 out. V = None
                         (Triton's default: 2**30 on sm_90, no promotion) and explicit values.

For each shape (MxNxK) the script draws seeded e4m3 operands (randn * 2) and scales
(rand * 3 + 0.05), runs the kernel with f32 and bf16 outputs, and writes a capture folder
(manifest.json + .npy, the format sim/io/capture.hpp reads): full D for small shapes, else
windows of D: the first and last rows, and columns from the first and the last (masked)
128-column block (each window's columns lie in one 128-block, so its block scales are one row
of Bs in fp8sim's layout). K not a multiple of 128 is kept as is (the kernel loads the tail
masked, as zeros).

  python3 cuda/capture/capture_triton.py --preset triton-w8a8-block-fp8 --out DIR \\
      --upstream vllm=PATH/fp8_utils.py[,repo=...,path=...,version=...,commit=...] \\
      --upstream sglang=PATH/fp8_kernel.py[,...]
  python3 cuda/capture/capture_triton.py --preset triton-fp8-dot --out DIR [--imprecise none,0,32,128]

Configs (issue 36; cuda/capture/triton_launch_configs.py). By default the block kernel runs
under its wrapper's default config and the fp8 dot under DOT_CONFIG. --config BM,BN,BK,WARPS,STAGES[,GROUP_M] (or named keys,
BLOCK_SIZE_M=16,BLOCK_SIZE_N=64,BLOCK_SIZE_K=128,num_warps=4,num_stages=3[,GROUP_SIZE_M=32];
repeatable) runs every shape under each config given. --triton-config vllm|sglang (block kernel
only; repeatable) runs each shape under the config that server picks for it on this GPU,
read from sim/data/triton_configs/<server>/ (the tuned JSON files of the released wheels) as
the server's wrapper does: file N=..,K=..,device_name=<torch device name, spaces as _>,
dtype=fp8_w8a8,block_shape=[128,128].json (vLLM; SGLang writes "[128, 128]"), the entry
whose M key is nearest to M (a tie to the key first in the file: min() keeps the first, and
every recorded file lists its keys ascending), else the wrapper's default config (read from
the --upstream file). The server's config is launched through that server's own kernel, so
--upstream must name it. Served shapes are given as --nk NxK with --m M1,M2,..; each (N, K)
draws one A of max(M) rows and one B, and every M takes the first M rows, so that one output
row is the same input at every M and the capture stays small (one window: the first min(M, 2)
rows and the last 8 columns of the last 128-column block; --window-rows, --window-cols; the
manifest written one line a case). Each case records its config ("launch_config", and
"triton_config" as BM,BN,BK,WARPS,STAGES), where it came from
("config_source") and the instruction the PTX shows ("instruction": wgmma or mma.sync).

  python3 cuda/capture/capture_triton.py --preset triton-w8a8-block-fp8 --out DIR \\
      --upstream vllm=PATH/fp8_utils.py --upstream sglang=PATH/fp8_kernel.py \\
      --triton-config vllm --triton-config sglang --served-defaults
  python3 cuda/capture/capture_triton.py --preset triton-w8a8-block-fp8 --out DIR \\
      --upstream vllm=PATH/fp8_utils.py --config 16,64,128,4,3 --config 64,128,64,4,3

--random N draws N shapes, each with its own random config (BLOCK_SIZE_M 16..128, N 32..256,
K 64 or 128, 4 or 8 warps, 2 to 5 stages; seeded by --seed): issue 36's held-out check, to be
captured live and kept out of development.

--served-defaults adds SERVED_NK (DeepSeek-V3's and Qwen3-8B's block-FP8 weight shapes) at
SERVED_M (the batch sizes of issue 36). --dry-run prints the cases (shape, config, source)
without a GPU.

--ptx DIR also writes each compiled kernel's PTX and a summary of its loop arithmetic
(wgmma, fma/mul/add f32, cvt) into DIR (the summary also goes into the manifest).
--check replays the capture through fp8sim.

What the PTX shows (Triton 3.6.0, sm_90; tests/data/hw/kernels/*/manifest.json
"ptx_summary"): the block kernel's `accumulator += tl.dot(a, b) * a_s[:, None] *
b_s[None, :]` is, per output and 128-wide K block, four chained wgmma m64n128k32 from zero
(scale-d 0 on the first), then `mul.f32 t, p, a_s` and `fma.rn.f32 acc, t, b_s, acc`
(enable_fp_fusion contracts the second multiply and the add). The fp8 dot with
max_num_imprecise_acc None never promotes; with V in 32..BLOCK_K it adds a fresh wgmma
partial into the accumulator (add.f32) every V products.
"""
from __future__ import annotations

import argparse
import ast
import datetime
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
import triton
import triton.language as tl

from triton_launch_configs import (CONFIG_DIR, CONFIG_KEYS, SERVED_M, SERVED_NK, config_tag,
                                   config_text, parse_config, random_cases, served_config,
                                   served_windows)

E4M3 = torch.float8_e4m3fn
OUT_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
DEFAULT_SHAPES = ["1x128x128", "7x200x512", "64x128x1024", "129x200x1000", "64x576x1000",
                  "300x1000x512", "129x1000x2048", "300x576x7168"]
FULL_LIMIT = 200_000  # (M + N) * K bytes of operands up to which D is kept whole

# The upstream kernels' function names and the wrappers whose default config is used.
UPSTREAM_KERNELS = {
    # vLLM vllm/model_executor/layers/quantization/utils/fp8_utils.py: w8a8_triton_block_scaled_mm
    "vllm": ("_w8a8_triton_block_scaled_mm", "w8a8_triton_block_scaled_mm"),
    # SGLang fp8_kernel.py: w8a8_block_fp8_matmul_triton (on sm_90 without a tuned config it
    # launches _w8a8_block_fp8_matmul: the Hopper variant only for SWAP_AB / SPLIT_K configs)
    "sglang": ("_w8a8_block_fp8_matmul", "w8a8_block_fp8_matmul_triton"),
}


@triton.jit
def fp8_dot_kernel(A, B, C, SA, SB, M, N, K,
                   stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   IMPRECISE: tl.constexpr):
    """D = (A @ B^T) * (sa * sb): one f32 accumulator, tl.dot(a, b, acc) per BLOCK_K step."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = A + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = B + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_ok = offs_k < K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, max_num_imprecise_acc=IMPRECISE)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    scale = tl.load(SA) * tl.load(SB)
    d = acc * scale
    c_ptrs = C + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, d.to(C.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


DOT_CONFIG = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3}

def parse_shape(s: str) -> tuple[int, int, int]:
    m = re.fullmatch(r"(\d+)x(\d+)x(\d+)", s)
    if not m:
        raise SystemExit(f"capture_triton: --shape {s!r}: expected MxNxK")
    return tuple(int(v) for v in m.groups())


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def load_upstream(path: str, kernel: str, wrapper: str, block_size=(128, 128)):
    """The upstream @triton.jit `kernel` (its source unchanged) and the `wrapper`'s default
    launch config. The kernel's text (decorator included) is cut from the file by its `ast`
    line range, written alone into a temporary module after `import triton` /
    `import triton.language as tl`, and imported, so that Triton reads a real file."""
    with open(path) as f:
        src = f.read()
    tree = ast.parse(src)
    lines = src.splitlines(keepends=True)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == kernel), None)
    if fn is None:
        raise SystemExit(f"capture_triton: {path}: no function {kernel}")
    first = min([d.lineno for d in fn.decorator_list] + [fn.lineno])
    text = "".join(lines[first - 1:fn.end_lineno])
    if "@triton.jit" not in text.splitlines()[0]:
        raise SystemExit(f"capture_triton: {path}: {kernel} is not decorated @triton.jit")
    mod_dir = tempfile.mkdtemp(prefix="fp8sim-upstream-")
    mod_path = os.path.join(mod_dir, f"upstream_{kernel.strip('_')}.py")
    with open(mod_path, "w") as f:
        f.write("import triton\nimport triton.language as tl\n\n\n" + text)
    spec = importlib.util.spec_from_file_location(os.path.basename(mod_path)[:-3], mod_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # The wrapper's default config: the dict literal assigned to `config` whose keys include
    # BLOCK_SIZE_M (the `else:` branch taken when no tuned JSON exists), evaluated with the
    # wrapper's block_size.
    wr = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == wrapper), None)
    if wr is None:
        raise SystemExit(f"capture_triton: {path}: no wrapper {wrapper}")
    config, config_line = None, None
    for node in ast.walk(wr):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
                and any(isinstance(t, ast.Name) and t.id == "config" for t in node.targets)):
            keys = [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
            if "BLOCK_SIZE_M" in keys:
                config = eval(compile(ast.Expression(node.value), path, "eval"),  # noqa: S307
                              {"__builtins__": {}}, {"block_size": list(block_size)})
                config_line = node.lineno
    if config is None:
        raise SystemExit(f"capture_triton: {path}: no default config in {wrapper}")
    return mod.__dict__[kernel], {
        "kernel": kernel, "kernel_lines": [first, fn.end_lineno], "wrapper": wrapper,
        "default_config": config, "default_config_line": config_line,
        "file_sha256": sha256(path), "kernel_source_sha256":
            hashlib.sha256(text.encode()).hexdigest()}


def launch_block(kernel, flavour: str, config: dict, A, B, As, Bs, C, block=(128, 128)):
    """The upstream wrapper's launch (vLLM w8a8_triton_block_scaled_mm, SGLang
    w8a8_block_fp8_matmul_triton): 1-D grid cdiv(M, BM) * cdiv(N, BN); strides as the
    wrappers pass them (B's as (stride(1), stride(0)): b is loaded K x N); SGLang adds
    needs_masking = K % BLOCK_SIZE_K != 0 (vLLM always masks)."""
    M, K = A.shape
    N = B.shape[0]
    grid = (triton.cdiv(M, config["BLOCK_SIZE_M"]) * triton.cdiv(N, config["BLOCK_SIZE_N"]),)
    extra = {"needs_masking": bool(K % config["BLOCK_SIZE_K"] != 0)} if flavour == "sglang" else {}
    return kernel[grid](A, B, C, As, Bs, M, N, K, block[0], block[1],
                        A.stride(-2), A.stride(-1), B.stride(1), B.stride(0),
                        C.stride(-2), C.stride(-1), As.stride(-2), As.stride(-1),
                        Bs.stride(1), Bs.stride(0), **config, **extra)


def launch_dot(imprecise, A, B, sa, sb, C, cfg=DOT_CONFIG):
    M, K = A.shape
    N = B.shape[0]
    grid = (triton.cdiv(M, cfg["BLOCK_M"]), triton.cdiv(N, cfg["BLOCK_N"]))
    return fp8_dot_kernel[grid](A, B, C, sa, sb, M, N, K, A.stride(0), A.stride(1),
                                B.stride(0), B.stride(1), C.stride(0), C.stride(1),
                                BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"],
                                BLOCK_K=cfg["BLOCK_K"], IMPRECISE=imprecise,
                                num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])


def windows(M: int, N: int, K: int):
    """[(name, rows, cols)]: one window of all of D for small operands, else the first and
    last 8 rows with (a) columns 0-7 and 120-127 of the first 128-block, (b) the first and
    last 8 columns of the last 128-block (the masked tile when N % 128 != 0)."""
    if (M + N) * K <= FULL_LIMIT:
        return [("full", list(range(M)), list(range(N)))]
    rows = sorted(set(range(min(8, M))) | set(range(max(0, M - 8), M)))
    out = []
    for name, blk in (("first", 0), ("last", (N - 1) // 128)):
        lo, hi = blk * 128, min(N, blk * 128 + 128)
        cols = sorted(set(range(lo, min(lo + 8, hi))) | set(range(max(lo, hi - 8), hi)))
        if name == "last" and blk == 0:
            break
        out.append((name, rows, cols))
    return out


def ptx_summary(compiled) -> tuple[dict, str]:
    """Counts of the arithmetic the PTX does (wgmma, f32 fma/mul/add, cvt) and its text."""
    try:
        ptx = compiled.asm["ptx"]
    except (AttributeError, KeyError, TypeError):
        return {}, ""
    pats = {"wgmma.mma_async": r"wgmma\.mma_async[.\w]*", "fma.rn.f32": r"\bfma\.rn\.f32\b",
            "mul.f32": r"\bmul(\.rn)?\.f32\b", "add.f32": r"\badd(\.rn)?\.f32\b",
            "cvt.rn.bf16.f32": r"cvt\.rn\.bf16(x2)?\.f32", "mma.sync": r"\bmma\.sync\.aligned"}
    counts = {k: len(re.findall(p, ptx)) for k, p in pats.items()}
    shapes = sorted(set(re.findall(r"(?:wgmma\.mma_async|mma)\.sync\.aligned\.([.\w]+)", ptx)))
    counts["wgmma_shapes"] = shapes
    return counts, ptx


def fp_fusion_default():
    """Triton's enable_fp_fusion default here (mul + add contracted to fma when true)."""
    try:
        return bool(triton.knobs.language.fp_fusion_enabled(None))
    except AttributeError:
        try:
            return bool(triton.knobs.language.default_fp_fusion)
        except AttributeError:
            return os.environ.get("TRITON_DEFAULT_FP_FUSION", "1") != "0"


def provenance(dev) -> dict:
    p = torch.cuda.get_device_properties(dev)
    drv = ""
    try:
        drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    return {
        "fp8sim_capture": 1,
        "device": f"{p.name} (sm_{p.major}{p.minor}, {p.multi_processor_count} SMs)",
        "driver": drv,
        "cuda": f"CUDA {torch.version.cuda}, torch {torch.__version__}, "
                f"triton {triton.__version__}",
        "torch": torch.__version__, "triton": triton.__version__,
        "triton_fp_fusion_default": fp_fusion_default(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def span(idx: list) -> list:
    """[first, end) for a contiguous run of indices, else the indices themselves."""
    return [idx[0], idx[-1] + 1] if idx == list(range(idx[0], idx[-1] + 1)) else idx


def save(out: str, name: str, x: np.ndarray) -> str:
    np.save(os.path.join(out, name), np.ascontiguousarray(x))
    return name


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", required=True, choices=["triton-w8a8-block-fp8", "triton-fp8-dot"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--upstream", action="append", default=[],
                    help="FLAVOUR=PATH[,repo=R,path=P,version=V,commit=C] (vllm or sglang)")
    ap.add_argument("--shape", action="append", default=[], help="MxNxK (repeatable)")
    ap.add_argument("--config", action="append", default=[],
                    help="BM,BN,BK,WARPS,STAGES[,GROUP_M] or BLOCK_SIZE_M=..,.. (repeatable)")
    ap.add_argument("--triton-config", action="append", default=[], choices=["vllm", "sglang"],
                    help="the config this server picks per shape (block kernel; repeatable)")
    ap.add_argument("--nk", action="append", default=[],
                    help="NxK weight shape served at every --m (repeatable)")
    ap.add_argument("--m", default="", help="batch sizes for --nk, e.g. 1,2,16 "
                    "(default: SERVED_M)")
    ap.add_argument("--served-defaults", action="store_true",
                    help="add SERVED_NK at SERVED_M (DeepSeek-V3's and Qwen3-8B's weights)")
    ap.add_argument("--random", type=int, default=0,
                    help="N random shapes, each with its own random config (issue 36's "
                         "held-out check; seeded by --seed)")
    ap.add_argument("--window-rows", type=int, default=2,
                    help="served captures: D's first rows kept (default 2)")
    ap.add_argument("--window-cols", type=int, default=8,
                    help="served captures: columns kept of the last 128-block (default 8)")
    ap.add_argument("--device-name", default="",
                    help="the GPU name the servers' lookup uses (default: torch's; for --dry-run)")
    ap.add_argument("--imprecise", default="none,32,64,128",
                    help="max_num_imprecise_acc values for triton-fp8-dot ('none' = default)")
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--git-revision", default="")
    ap.add_argument("--ptx", default="", help="folder for PTX and its arithmetic summary")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--dry-run", action="store_true",
                    help="print each shape's launches (config and its source), run nothing")
    args = ap.parse_args(argv)
    args.configs = [parse_config(c) for c in args.config]
    if not 1 <= args.window_rows <= 64 or not 1 <= args.window_cols <= 64:
        ap.error("--window-rows and --window-cols take 1 to 64")
    if args.preset == "triton-fp8-dot":
        if args.triton_config:
            ap.error("--triton-config picks the block kernel's config (vLLM's and SGLang's "
                     "files); triton-fp8-dot takes --config")
        if args.upstream:
            ap.error("triton-fp8-dot is our own kernel: drop --upstream")
    elif not args.upstream:
        ap.error("--upstream FLAVOUR=PATH is required for triton-w8a8-block-fp8")
    args.flavours = []
    for spec in args.upstream:
        flavour, eq, rest = spec.partition("=")
        if flavour not in UPSTREAM_KERNELS or not eq or not rest:
            ap.error(f"--upstream {spec!r}: expected vllm=PATH or sglang=PATH[,key=value..]")
        if flavour in args.flavours:
            ap.error(f"--upstream {flavour} given twice")
        args.flavours.append(flavour)
    for server in args.triton_config:
        if server not in args.flavours:
            ap.error(f"--triton-config {server} runs {server}'s kernel: give --upstream "
                     f"{server}=PATH")
    if args.triton_config and args.configs:
        ap.error("--triton-config and --config are separate captures: give one")
    for s_ in args.shape:
        parse_shape(s_)
    nk = list(args.nk) + (SERVED_NK if args.served_defaults else [])
    args.served = []
    if args.m and not nk:
        ap.error("--m goes with --nk or --served-defaults")
    ms = SERVED_M
    if args.m:
        if (not re.fullmatch(r"[0-9]+(,[0-9]+)*", args.m)
                or min(int(v) for v in args.m.split(",")) < 1):
            ap.error(f"--m {args.m!r}: expected positive integers separated by commas")
        ms = [int(v) for v in args.m.split(",")]
    for i, t in enumerate(nk):
        mt = re.fullmatch(r"(\d+)x(\d+)", t)
        if not mt:
            ap.error(f"--nk {t!r}: expected NxK")
        args.served.append((i, int(mt.group(1)), int(mt.group(2)), ms))
    args.random_configs = []
    if args.random:
        if args.configs or args.triton_config or args.shape or args.served:
            ap.error("--random draws its own shapes and configs: drop --config, "
                     "--triton-config, --shape, --nk")
        if not 1 <= args.random <= 1000:
            ap.error("--random takes 1 to 1000")
        for shape, cfg in random_cases(args.random, args.seed):
            args.shape.append(shape)
            args.random_configs.append(cfg)
    if not args.shape and not args.served:
        args.shape = DEFAULT_SHAPES
    return args


def launches(args, kernels: dict, device_name: str, M: int, N: int, K: int,
             shape_index: int = -1) -> list:
    """[(tag, run(A, B, As, Bs, sa, sb, C) -> compiled, case fields)] for one shape (the
    shape_index-th of --shape, whose own config --random drew)."""
    out = []
    if args.random_configs and 0 <= shape_index < len(args.random_configs):
        args = argparse.Namespace(**{**vars(args), "configs": [args.random_configs[shape_index]],
                                     "random_config_source": True})
    if args.preset == "triton-w8a8-block-fp8":
        picks = []  # (tag, flavour, cfg, source)
        if args.triton_config:
            for server in args.triton_config:
                info = kernels[server][1]
                cfg, src = served_config(server, N, K, M, device_name, info["default_config"],
                                         f"{info['wrapper']} line {info['default_config_line']}")
                picks.append((f"{server}_{config_tag(cfg)}", server, cfg, src))
        elif args.configs:
            for flavour in args.flavours:
                for cfg in args.configs:
                    picks.append((f"{flavour}_{config_tag(cfg)}", flavour, cfg,
                                  "--random" if getattr(args, "random_config_source", False)
                                  else "--config"))
        else:
            for flavour in args.flavours:
                info = kernels[flavour][1]
                picks.append((flavour, flavour, info["default_config"],
                              f"{flavour} default config ({info['wrapper']} line "
                              f"{info['default_config_line']})"))
        for tag, flavour, cfg, src in picks:
            kern, info = kernels[flavour]

            def run(A, B, As, Bs, sa, sb, C, kern=kern, flavour=flavour, cfg=cfg):
                return launch_block(kern, flavour, cfg, A, B, As, Bs, C)
            out.append((tag, run, {
                "kernel": f"{flavour} {info['kernel']} (manifest upstream.{flavour}) config "
                          + config_text(cfg),
                "kernel_preset": "triton-w8a8-block-fp8", "upstream": flavour,
                "launch_config": cfg, "triton_config": config_text(cfg), "config_source": src,
                "scaling": "block", "block": 128, "model": "hopper-wgmma",
                "promote_every": cfg["BLOCK_SIZE_K"], "scale_order": "triton"}))
        return out
    dot_cfgs = ([(config_tag(c), {"BLOCK_M": c["BLOCK_SIZE_M"], "BLOCK_N": c["BLOCK_SIZE_N"],
                                   "BLOCK_K": c["BLOCK_SIZE_K"], "num_warps": c["num_warps"],
                                   "num_stages": c["num_stages"]}, c,
                  "--random" if getattr(args, "random_config_source", False) else "--config")
                 for c in args.configs] or
                [("", DOT_CONFIG, {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128,
                                   "num_warps": 4, "num_stages": 3, "GROUP_SIZE_M": 1},
                  "DOT_CONFIG (cuda/capture/capture_triton.py)")])
    for v in args.imprecise.split(","):
        imp = None if v == "none" else int(v)
        for ctag, dcfg, cfg, src in dot_cfgs:
            def run(A, B, As, Bs, sa, sb, C, imp=imp, dcfg=dcfg):
                return launch_dot(imp, A, B, sa, sb, C, dcfg)
            # Triton on sm_90: None -> 2**30 (never promoted); V <= BLOCK_K -> a partial
            # accumulator added into the main one every max(V, 32) products (wgmma K = 32).
            pe = 0 if imp is None else max(32, min(imp, dcfg["BLOCK_K"]))
            # The kernel preset of each value (sim/kernel/kernel.cpp); below 32 Triton takes
            # mma.sync on FP16 operands (the case is then relabelled from its PTX, below).
            preset = ("triton-fp8-dot" if imp is None else
                      f"triton-fp8-dot-imprecise-acc-{imp}" if imp in (32, 64, 128) else None)
            out.append((f"imp{v}" + (f"_{ctag}" if ctag else ""), run, {
                "kernel": f"triton-fp8-dot fp8_dot_kernel (cuda/capture/capture_triton.py) "
                          f"max_num_imprecise_acc={v} config " + json.dumps(dcfg, sort_keys=True),
                "kernel_preset": preset, "max_num_imprecise_acc": imp,
                "launch_config": dcfg, "triton_config": config_text(cfg), "config_source": src,
                "scaling": "tensor", "model": "hopper-wgmma",
                "promote_every": pe, "scale_order": "cublaslt"}))
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    shapes = [(parse_shape(s_), None) for s_ in args.shape]
    for i, N, K, ms in args.served:
        shapes += [((M, N, K), (i, max(ms))) for M in ms]
    kernels, upstream = {}, {}
    for spec in args.upstream:  # the upstream kernels (read with `ast`; no GPU needed)
        flavour, rest = spec.split("=", 1)
        path, *meta = rest.split(",")
        kname, wname = UPSTREAM_KERNELS[flavour]
        kern, info = load_upstream(path, kname, wname)
        info.update(dict(m.split("=", 1) for m in meta))
        upstream[flavour] = info
        kernels[flavour] = (kern, info)
    if args.dry_run:
        device_name = args.device_name or "NVIDIA H100 80GB HBM3"
        for i, ((M, N, K), _) in enumerate(shapes):
            for tag, _, fields in launches(args, kernels, device_name, M, N, K, i):
                print(f"{M}x{N}x{K} {tag}: {fields['triton_config']} from "
                      f"{fields['config_source']}")
        return 0
    if not torch.cuda.is_available():
        print("capture_triton: no CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    device_name = args.device_name or torch.cuda.get_device_name(dev)
    os.makedirs(args.out, exist_ok=True)
    if args.ptx:
        os.makedirs(args.ptx, exist_ok=True)
    manifest = provenance(dev)
    manifest.update(git_revision=args.git_revision, seed=args.seed, kernel_preset=args.preset,
                    generator=f"cuda/capture/capture_triton.py --preset {args.preset}"
                    + "".join(f" --triton-config {t}" for t in args.triton_config)
                    + "".join(f" --config {config_text(c)}" for c in args.configs),
                    device_name_for_lookup=device_name, cases=[])
    if args.triton_config:
        manifest["triton_config_files"] = {
            srv: json.load(open(os.path.join(CONFIG_DIR, srv, "provenance.json")))["version"]
            for srv in args.triton_config}
    if upstream:
        manifest["upstream"] = upstream
    else:
        manifest["launch_config"] = DOT_CONFIG

    ptx_done: dict = {}
    drawn: dict = {}   # served (N, K) index -> its operands (A and As of max(M) rows)
    written: set = set()

    def save_once(name, x):
        if name not in written:
            save(args.out, name, x)
            written.add(name)
        return name

    for si, ((M, N, K), served) in enumerate(shapes):
        kb, nb = triton.cdiv(K, 128), triton.cdiv(N, 128)
        if served is None:
            g = torch.Generator().manual_seed(args.seed * 1000003 + si)
            a = (torch.randn((M, K), generator=g) * 2).to(E4M3)
            b = (torch.randn((N, K), generator=g) * 2).to(E4M3)
            As = torch.rand((M, kb), generator=g) * 3 + 0.05        # 1x128 activation scales
            Bs = torch.rand((nb, kb), generator=g) * 3 + 0.05       # 128x128 weight scales
            sa = torch.rand((1,), generator=g) * 3 + 0.05           # tensor scales (fp8 dot)
            sb = torch.rand((1,), generator=g) * 3 + 0.05
        else:
            idx, m_max = served
            if idx not in drawn:  # one draw per (N, K): every M takes A's first M rows
                g = torch.Generator().manual_seed(args.seed * 1000003 + 7919 * (idx + 1))
                drawn[idx] = ((torch.randn((N, K), generator=g) * 2).to(E4M3),
                              torch.rand((nb, kb), generator=g) * 3 + 0.05,
                              torch.rand((1,), generator=g) * 3 + 0.05,
                              torch.rand((1,), generator=g) * 3 + 0.05,
                              (torch.randn((m_max, K), generator=g) * 2).to(E4M3),
                              torch.rand((m_max, kb), generator=g) * 3 + 0.05)
            b, Bs, sa, sb, a_all, as_all = drawn[idx]
            a, As = a_all[:M].contiguous(), as_all[:M].contiguous()
        ad, bd, Asd, Bsd, sad, sbd = (x.to(dev) for x in (a, b, As, Bs, sa, sb))
        stem = f"{M}x{N}x{K}"
        wins = (windows(M, N, K) if served is None else
                served_windows(M, N, args.window_rows, args.window_cols))
        a_u8, b_u8 = a.view(torch.uint8).numpy(), b.view(torch.uint8).numpy()
        files = {}
        for wname, rows, cols in wins:
            if served is None:
                astem, bstem = (f"{stem}_{'full' if wname == 'full' else 'rows'}",
                                f"{stem}_{wname}")
            else:  # shared by every M of this (N, K)
                astem, bstem = f"{N}x{K}_rows{len(rows)}", f"{N}x{K}_{wname}"
            files[wname] = {  # the windows share their rows: one file of A's rows
                "a": save_once(f"{astem}_a.npy", a_u8[rows]),
                "b": save_once(f"{bstem}_b.npy", b_u8[cols]),
            }
            if args.preset == "triton-w8a8-block-fp8":
                blk = cols[0] // 128
                files[wname]["sa"] = save_once(f"{astem}_sa.npy" if served else
                                               f"{stem}_{wname}_sa.npy", As.numpy()[rows])
                files[wname]["sb"] = save_once(f"{bstem}_sb.npy",
                                               Bs.numpy()[blk:(cols[-1] // 128) + 1])
            else:
                sstem = stem if served is None else f"{N}x{K}"
                files[wname]["sa"] = save_once(f"{sstem}_sa.npy", sa.numpy().reshape(1, 1))
                files[wname]["sb"] = save_once(f"{sstem}_sb.npy", sb.numpy().reshape(1, 1))
        first_d = {}  # (out, window) -> (name of d file, array): identical outputs share a file
        for tag, run, fields in launches(args, kernels, device_name, M, N, K, si):
            for o, dt in OUT_DTYPES.items():
                C = torch.empty((M, N), dtype=dt, device=dev)
                C.fill_(float("nan"))
                compiled = run(ad, bd, Asd, Bsd, sad, sbd, C)
                torch.cuda.synchronize()
                d = C.float().cpu().numpy()
                counts, ptx = ptx_summary(compiled) if compiled is not None else ({}, "")
                if (tag, o) not in ptx_done:
                    ptx_done[(tag, o)] = counts
                    manifest.setdefault("ptx_summary", {})[f"{tag}_{o}"] = counts
                    if args.ptx and ptx:
                        with open(os.path.join(args.ptx, f"{args.preset}_{tag}_{o}.ptx"), "w") as f:
                            f.write(ptx)
                instruction = ("wgmma" if counts.get("wgmma.mma_async", 0) > 0 else
                               "mma.sync" if counts.get("mma.sync", 0) > 0 else "unknown")
                for wname, rows, cols in wins:
                    dw = d[np.ix_(rows, cols)]
                    name = f"{tag}_{stem}_{wname}_{o}"
                    key = (o, wname)
                    same_as = None
                    if key in first_d and np.array_equal(first_d[key][1], dw, equal_nan=True):
                        dfile, same_as = first_d[key][0], first_d[key][2]
                    else:
                        dfile = save(args.out, f"{name}_d.npy", dw)
                        first_d.setdefault(key, (dfile, dw, name))
                    case = dict(fields)
                    if instruction == "mma.sync":
                        # Triton falls back to mma.sync (cvt e4m3x2 -> f16x2, then
                        # mma.sync.m16n8k16.f32.f16, C chained) when the CTA's M is not a
                        # multiple of 64 or max_num_imprecise_acc < 32 (lib/Analysis/Utility.cpp
                        # supportMMA). Its preset is the -mma-f16 variant (issue 36).
                        base = ("triton-w8a8-block-fp8" if args.preset == "triton-w8a8-block-fp8"
                                else "triton-fp8-dot")
                        case["kernel_preset"] = f"{base}-mma-f16"
                    if case.get("kernel_preset"):
                        # The preset (and the case's triton_config) sets the model, the
                        # promotion and the scale order: no loose keys beside it.
                        for key in ("model", "promote_every", "scale_order"):
                            case.pop(key, None)
                    if case.get("max_num_imprecise_acc") is not None and \
                            case["max_num_imprecise_acc"] < 32:
                        # fp8sim's triton_config routes by the config alone (imprecise
                        # accumulation at its default): this case's preset is its own label.
                        del case["triton_config"]
                    case.update({
                        "name": name, "suite": stem, "a_format": "e4m3", "b_format": "e4m3",
                        "out_type": o, "M": len(rows), "N": len(cols), "K": K,
                        "a": files[wname]["a"], "b": files[wname]["b"], "c": None,
                        "sa": files[wname]["sa"], "sb": files[wname]["sb"], "d": dfile,
                        "shape": [M, N, K], "window": wname,
                        "rows": span(rows), "cols": span(cols), "instruction": instruction,
                        "mma_shapes": counts.get("wgmma_shapes", []),
                        "bit_identical_to": same_as,
                        "nan_outputs": int(np.isnan(dw).sum()),
                    })
                    manifest["cases"].append(case)
        print(f"{M}x{N}x{K}: {len(manifest['cases'])} cases so far", flush=True)
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        if args.served:  # ~1000 cases: one line each
            f.write(json.dumps({k: v for k, v in manifest.items() if k != "cases"},
                               indent=1)[:-2] + ',\n "cases": [\n')
            f.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in manifest["cases"]))
            f.write("\n ]\n}\n")
        else:
            json.dump(manifest, f, indent=1)
    return check(args.out) if args.check else 0


def check(out: str) -> int:
    """fp8sim's replay of the capture with the options written in it: matches per case."""
    import fp8sim
    bad = 0
    for c in fp8sim.replay(out)["cases"]:
        if c["matches"] != c["total"]:
            bad += 1
        print(c["line"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
