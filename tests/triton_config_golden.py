#!/usr/bin/env python3
"""triton_config_golden: the configs vLLM and SGLang pick, from their own code, as a golden file.

Writes tests/data/triton_config_golden.json, which test_triton_config checks
sim/kernel/triton_config.cpp against (every M from 1 to M_MAX at every case). Run once, by
hand, where the released wheels are unzipped (never installed; nothing of them is kept but
this output):

    pip download --no-deps vllm==0.33.0 -d /tmp/w && pip download --no-deps sglang==0.5.23 -d /tmp/w
    mkdir /tmp/w/vllm /tmp/w/sglang
    unzip -q /tmp/w/vllm-0.33.0-*.whl -d /tmp/w/vllm && unzip -q /tmp/w/sglang-0.5.23-*.whl -d /tmp/w/sglang
    python3 tests/triton_config_golden.py --vllm /tmp/w/vllm --sglang /tmp/w/sglang

The oracle is the servers' own source text: the functions that pick a config are cut out of
the unzipped wheels with `ast` and executed unchanged, with only their imports stood in for:
  vLLM 0.33.0: vllm/utils/platform_utils.py get_device_name_as_file_name (current_platform's
    get_device_name answers the GPU's name), vllm/model_executor/layers/quantization/utils/
    fp8_utils.py get_w8a8_block_fp8_configs (reading the wheel's own configs/ folder; logger
    stubbed) and, from w8a8_triton_block_scaled_mm, the statement that picks the entry
    (`config = configs[min(...)]`) and the default-config dict, each executed as written
    (envs.VLLM_BATCH_INVARIANT false).
  SGLang 0.5.23: sglang/srt/utils/common.py get_device_name (torch.cuda answers the GPU's
    name), sglang/kernels/ops/gemm/fp8_kernel.py get_w8a8_block_fp8_configs (the wheel's
    configs/ folder; torch._dynamo.is_compiling false, _is_cuda true) and, from
    w8a8_block_fp8_matmul_triton, the picking statement and the default-config dict.
So the golden file also checks that sim/data/triton_configs holds every file these GPUs read.

Cases: each server x GPU (NVIDIA H100 80GB HBM3, NVIDIA H200) x every (N, K) of a recorded
file of either server or GPU, plus unrecorded shapes. For each, the picks for M = 1..M_MAX
as runs [m_first, m_last, file (or null: the default), key (or null), config].
"""
import argparse
import ast
import datetime
import functools
import hashlib
import json
import os
import re
import sys
import types
import typing

M_MAX = 8192
GPUS = {"h100": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200"}
EXTRA_NK = [(6144, 4096), (4096, 4096), (24576, 4096), (4096, 12288), (1000, 1000)]
VLLM_UTILS = "vllm/model_executor/layers/quantization/utils"
SGLANG_GEMM = "sglang/kernels/ops/gemm"


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def function_source(path, name):
    """The text of top-level function `name` in `path`, decorators included."""
    with open(path) as f:
        src = f.read()
    tree = ast.parse(src)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    first = min([d.lineno for d in fn.decorator_list] + [fn.lineno])
    return "".join(src.splitlines(keepends=True)[first - 1:fn.end_lineno]), fn


def wrapper_statements(path, wrapper):
    """From the wrapper: the `config = configs[...]` statement and the default-config dict
    (the `config = {...}` with BLOCK_SIZE_M), as source text."""
    with open(path) as f:
        src = f.read()
    _, fn = function_source(path, wrapper)
    pick = default = None
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "config" for t in node.targets):
            if isinstance(node.value, ast.Subscript):
                pick = ast.get_source_segment(src, node)
            elif isinstance(node.value, ast.Dict) and any(
                    isinstance(k, ast.Constant) and k.value == "BLOCK_SIZE_M"
                    for k in node.value.keys):
                default = ast.get_source_segment(src, node.value)
    assert pick and default, (path, wrapper)
    return pick, default


class _Log:
    def info(self, *a, **k):
        pass

    warning = info


def server_pick(ns, state, pick_src, default_src, file_name):
    """pick(M, N, K, device) -> (config, tuned file name or None, its M key or None): the
    server's own statements run in `ns` (its get_w8a8_block_fp8_configs loaded there), with
    `state["device"]` the GPU name its device query returns; file_name(N, K) is the tuned
    file's name as the server spells it."""
    def pick(M, N, K, device):
        state["device"] = device
        configs = ns["get_w8a8_block_fp8_configs"](N, K, 128, 128)
        loc = {"configs": configs, "M": M, "block_size": [128, 128]}
        if configs:
            exec(pick_src, loc)  # noqa: S102
            key = next(k for k, v in configs.items() if v is loc["config"])
            return loc["config"], file_name(N, K), key
        return eval(default_src, loc), None, None  # noqa: S307
    return pick


def vllm_picker(root):
    """(pick(M, N, K, device) -> (config, file or None), provenance)."""
    utils = os.path.join(root, VLLM_UTILS, "fp8_utils.py")
    plat = os.path.join(root, "vllm/utils/platform_utils.py")
    dev_src, _ = function_source(plat, "get_device_name_as_file_name")
    cfg_src, _ = function_source(utils, "get_w8a8_block_fp8_configs")
    pick_src, default_src = wrapper_statements(utils, "w8a8_triton_block_scaled_mm")
    state = {"device": None}
    platform = types.SimpleNamespace(get_device_name=lambda device_id=0: state["device"])
    sys.modules.setdefault("vllm", types.ModuleType("vllm"))
    sys.modules["vllm.platforms"] = types.SimpleNamespace(current_platform=platform)
    ns = {"re": re, "cache": lambda f: f, "os": os, "json": json, "functools": functools,
          "logger": _Log(), "Any": typing.Any, "__file__": utils}
    exec(compile(dev_src, plat, "exec"), ns)  # noqa: S102
    exec(compile(cfg_src.replace("@functools.lru_cache\n", ""), utils, "exec"), ns)  # noqa: S102

    pick = server_pick(ns, state, pick_src, default_src, lambda N, K: (
        f"N={N},K={K},device_name={ns['get_device_name_as_file_name']()},"
        "dtype=fp8_w8a8,block_shape=[128,128].json"))
    prov = {"fp8_utils.py": sha256(utils), "platform_utils.py": sha256(plat),
            "functions": "get_device_name_as_file_name, get_w8a8_block_fp8_configs, "
                         "w8a8_triton_block_scaled_mm's pick and default config"}
    return pick, prov


def sglang_picker(root):
    kern = os.path.join(root, SGLANG_GEMM, "fp8_kernel.py")
    common = os.path.join(root, "sglang/srt/utils/common.py")
    dev_src, _ = function_source(common, "get_device_name")
    cfg_src, _ = function_source(kern, "get_w8a8_block_fp8_configs")
    pick_src, default_src = wrapper_statements(kern, "w8a8_block_fp8_matmul_triton")
    state = {"device": None}
    torch = types.SimpleNamespace(
        mps=types.SimpleNamespace(is_available=lambda: False),
        cuda=types.SimpleNamespace(is_available=lambda: True,
                                   get_device_name=lambda i=0: state["device"]),
        _dynamo=types.SimpleNamespace(is_compiling=lambda: False))
    ns = {"torch": torch, "is_musa": lambda: False, "os": os, "json": json,
          "functools": functools, "logger": _Log(), "log_info_on_rank0": lambda *a, **k: None,
          "_is_cuda": True, "Optional": typing.Optional, "Dict": typing.Dict,
          "Any": typing.Any, "__file__": kern}
    exec(compile(dev_src, common, "exec"), ns)  # noqa: S102
    exec(compile(cfg_src.replace("@functools.lru_cache\n", ""), kern, "exec"), ns)  # noqa: S102

    pick = server_pick(ns, state, pick_src, default_src, lambda N, K: (
        f"N={N},K={K},device_name={ns['get_device_name']().replace(' ', '_')},"
        "dtype=fp8_w8a8,block_shape=[128, 128].json"))
    prov = {"fp8_kernel.py": sha256(kern), "common.py": sha256(common),
            "functions": "get_device_name, get_w8a8_block_fp8_configs, "
                         "w8a8_block_fp8_matmul_triton's pick and default config"}
    return pick, prov


def recorded_nk(root, sub):
    out = set()
    for f in os.listdir(os.path.join(root, sub, "configs")):
        m = re.match(r"N=(\d+),K=(\d+),device_name=NVIDIA_(H100_80GB_HBM3|H200),dtype=fp8_w8a8,"
                     r"block_shape=\[128, ?128\]\.json$", f)
        if m:
            out.add((int(m.group(1)), int(m.group(2))))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm", required=True, help="the unzipped vllm 0.33.0 wheel")
    ap.add_argument("--sglang", required=True, help="the unzipped sglang 0.5.23 wheel")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "data",
                                                  "triton_config_golden.json"))
    args = ap.parse_args()
    pickers = {"vllm": vllm_picker(args.vllm), "sglang": sglang_picker(args.sglang)}
    nks = sorted(recorded_nk(args.vllm, VLLM_UTILS) | recorded_nk(args.sglang, SGLANG_GEMM)
                 | set(EXTRA_NK))
    keys = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps",
            "num_stages")
    cases = []
    for server, (pick, _) in pickers.items():
        for gpu, device in GPUS.items():
            for N, K in nks:
                runs = []
                for M in range(1, M_MAX + 1):
                    cfg, name, key = pick(M, N, K, device)
                    assert set(cfg) == set(keys), cfg  # no SWAP_AB / SPLIT_K in these files
                    row = [name, key, [cfg[k] for k in keys]]
                    if runs and runs[-1][2:] == row:
                        runs[-1][1] = M
                    else:
                        runs.append([M, M] + row)
                cases.append({"server": server, "gpu": gpu, "N": N, "K": K, "runs": runs})
    out = {
        "what": "the Triton block-FP8 config vLLM 0.33.0 and SGLang 0.5.23 pick for M x N x K "
                "on the H100 and H200, from their own code (tests/triton_config_golden.py); "
                "runs are [m_first, m_last, file or null (default config), entry key or null, "
                "[BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M, num_warps, "
                "num_stages]]",
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "generator": "tests/triton_config_golden.py --vllm <unzipped vllm-0.33.0 wheel> "
                     "--sglang <unzipped sglang-0.5.23 wheel>",
        "sources": {s: p[1] for s, p in pickers.items()},
        "m_max": M_MAX, "gpus": GPUS, "cases": cases,
    }
    with open(args.out, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"{args.out}: {len(cases)} cases, "
          f"{sum(len(c['runs']) for c in cases)} runs over M = 1..{M_MAX}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
