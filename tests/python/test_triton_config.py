# test_triton_config: Triton launch configs from Python and the capture script (issue 36): the
# recorded config files against their provenance, fp8sim.gemm's config= and fp8sim.explain
# (the CLI's text and messages), and cuda/capture/capture_triton.py's argument handling.
import hashlib
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import fp8sim
from conftest import ROOT, run_cli

CONFIGS = os.path.join(ROOT, "sim", "data", "triton_configs")
CAPTURE = os.path.join(ROOT, "cuda", "capture", "capture_triton.py")


@pytest.mark.parametrize("server,version", [("vllm", "0.33.0"), ("sglang", "0.5.23")])
def test_recorded_files_match_their_provenance(server, version):
    prov = json.load(open(os.path.join(CONFIGS, server, "provenance.json")))
    assert prov["package"] == server and prov["version"] == version
    listed = {f["file"]: f["sha256"] for f in prov["files"]}
    on_disk = {f for f in os.listdir(os.path.join(CONFIGS, server)) if f != "provenance.json"}
    assert set(listed) == on_disk
    for name, digest in listed.items():
        with open(os.path.join(CONFIGS, server, name), "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == digest, name
        assert ("NVIDIA_H100_80GB_HBM3" in name or "NVIDIA_H200," in name) and "fp8_w8a8" in name


def _block_problem(rng, m=3, n=200, k=384):
    a = rng.integers(0, 0x77, (m, k), dtype=np.uint8)
    b = rng.integers(0, 0x77, (n, k), dtype=np.uint8)
    sa = rng.uniform(0.1, 2, (m, -(-k // 128))).astype(np.float32)
    sb = rng.uniform(0.1, 2, (-(-n // 128), -(-k // 128))).astype(np.float32)
    return a, b, sa, sb


def test_gemm_config_routes_as_the_cli(rng, tmp_path):
    a, b, sa, sb = _block_problem(rng)
    kw = dict(a_scales=sa, b_scales=sb, scaling="block", kernel="triton-w8a8-block-fp8")
    preset = fp8sim.gemm(a, b, **kw)
    # The default config lowers to wgmma with BLOCK_SIZE_K 128: the preset itself.
    assert np.array_equal(fp8sim.gemm(a, b, config="64,128,128,4,2", **kw), preset)
    # The CLI gives the same bits for a served config.
    paths = {}
    for name, x in (("a", a), ("b", b), ("sa", sa), ("sb", sb)):
        paths[name] = str(tmp_path / f"{name}.npy")
        np.save(paths[name], x)
    out = str(tmp_path / "d.npy")
    r = run_cli("gemm", "--a", paths["a"], "--b", paths["b"], "--a-scales", paths["sa"],
                "--b-scales", paths["sb"], "--scaling", "block", "--kernel",
                "triton-w8a8-block-fp8", "--triton-config", "64,128,64,4,3", "--out", out)
    assert r.stderr == "fp8sim: triton config 64,128,64,4,3, wgmma (given)\n"
    assert np.array_equal(np.load(out), fp8sim.gemm(a, b, config="64,128,64,4,3", **kw))


@pytest.mark.parametrize("config,fragment", [
    ("16,64", "2 values given, not 5 or 6"),
    ("BLOCK_SIZE_M=64", "BLOCK_SIZE_N is missing"),
    ("64,128,256,4,3", "does not divide the 128-wide scale block"),
])
def test_gemm_config_errors_are_the_clis(config, fragment, rng, tmp_path):
    a, b, sa, sb = _block_problem(rng)
    with pytest.raises(ValueError) as e:
        fp8sim.gemm(a, b, a_scales=sa, b_scales=sb, scaling="block",
                    kernel="triton-w8a8-block-fp8", config=config)
    assert fragment in str(e.value) and "\n" not in str(e.value)
    for name, x in (("a", a), ("b", b), ("sa", sa), ("sb", sb)):
        np.save(tmp_path / f"{name}.npy", x)
    r = run_cli("gemm", "--a", str(tmp_path / "a.npy"), "--b", str(tmp_path / "b.npy"),
                "--a-scales", str(tmp_path / "sa.npy"), "--b-scales", str(tmp_path / "sb.npy"),
                "--scaling", "block", "--kernel", "triton-w8a8-block-fp8", "--triton-config",
                config, "--out", str(tmp_path / "d.npy"), check=False)
    assert r.returncode == 2 and r.stderr == f"fp8sim: error: {e.value}\n"


def test_explain_is_the_clis():
    for args in [(1, 7168, 1024, "triton-w8a8-block-fp8", "vllm", "h100"),
                 (24, 576, 7168, "triton-w8a8-block-fp8", "sglang", "h200"),
                 (5, 300, 1000, "triton-fp8-dot", "BLOCK_SIZE_M=32,BLOCK_SIZE_N=64,"
                  "BLOCK_SIZE_K=64,num_warps=4,num_stages=2", "h100")]:
        m, n, k, kernel, config, gpu = args
        text = fp8sim.explain(m, n, k, kernel, config=config, gpu=gpu)
        cli = run_cli("explain", "--kernel", kernel, "--triton-config", config, "--m", str(m),
                      "--n", str(n), "--k", str(k), "--gpu", gpu).stdout
        assert text + "\n" == cli
    with pytest.raises(ValueError, match="no recorded SGLang config files"):
        fp8sim.explain(1, 7168, 1024, "triton-w8a8-block-fp8", config="sglang", gpu="a100")


def _capture(*args):
    return subprocess.run([sys.executable, CAPTURE, *args], capture_output=True, text=True)


@pytest.fixture
def have_triton():
    if importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None:
        pytest.skip("waived: capture_triton.py needs torch and triton")


def test_capture_script_configs(have_triton, tmp_path):
    r = _capture("--preset", "triton-fp8-dot", "--out", str(tmp_path), "--shape", "5x300x256",
                 "--imprecise", "none,16", "--config", "16,64,128,4,3", "--config",
                 "BLOCK_SIZE_M=64,BLOCK_SIZE_N=64,BLOCK_SIZE_K=64,num_warps=4,num_stages=2",
                 "--dry-run")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "5x300x256 impnone_m16n64k128w4s3: 16,64,128,4,3 from --config",
        "5x300x256 impnone_m64n64k64w4s2: 64,64,64,4,2 from --config",
        "5x300x256 imp16_m16n64k128w4s3: 16,64,128,4,3 from --config",
        "5x300x256 imp16_m64n64k64w4s2: 64,64,64,4,2 from --config"]


@pytest.mark.parametrize("args,fragment", [
    (["--config", "16,64,128,4"], "4 values"),
    (["--config", "24,64,128,4,3"], "not a power of two"),
    (["--config", "BLOCK_SIZE_M=16,SPLIT_K=2"], "unknown key 'SPLIT_K'"),
    (["--triton-config", "vllm"], "triton-fp8-dot takes --config"),
    (["--m", "1,2"], "--m goes with --nk"),
    (["--nk", "7168"], "expected NxK"),
])
def test_capture_script_refuses_bad_arguments(have_triton, args, fragment, tmp_path):
    r = _capture("--preset", "triton-fp8-dot", "--out", str(tmp_path), "--dry-run", *args)
    assert r.returncode != 0 and fragment in r.stderr, r.stderr
    assert not os.listdir(tmp_path)


def test_capture_script_random_configs(have_triton, tmp_path):
    # --random N: N shapes, each with its own config in issue 36's ranges, the same per seed.
    args = ("--preset", "triton-fp8-dot", "--out", str(tmp_path), "--imprecise", "none",
            "--random", "40", "--seed", "7", "--dry-run")
    r = _capture(*args)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 40 and lines == _capture(*args).stdout.splitlines()
    for line in lines:
        shape, _, config, *source = line.split()
        m, n, k = map(int, shape.split("x"))
        bm, bn, bk, warps, stages = map(int, config.split(","))
        assert 1 <= m <= 333 and 1 <= n <= 1000 and 1 <= k <= 7168
        assert bm in (16, 32, 64, 128) and bn in (32, 64, 128, 256) and bk in (64, 128)
        assert warps in (4, 8) and 2 <= stages <= 5 and source == ["from", "--random"]
    assert len(set(lines)) == 40
