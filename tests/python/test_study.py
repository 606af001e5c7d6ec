# test_study: sweep() gives the experiments' rows, replay() the CLI's verdicts on the golden
# captures, probe() recovers a model through a Python kernel; the docstring examples run.
import doctest
import glob
import json
import os
import subprocess

import numpy as np
import pandas as pd
import pytest

import fp8sim
from conftest import ROOT, run_cli


def test_sweep_rows_are_the_experiment_rows(tmp_path):
    exe = os.path.join(ROOT, "build", "experiments", "exp_b_promotion")
    if not os.path.exists(exe):
        pytest.skip(f"waived: {exe} not built")
    subprocess.run([exe, "--out", str(tmp_path), "--trials", "8", "--seed", "5"], check=True,
                   capture_output=True)
    want = pd.read_csv(tmp_path / "b_promotion.csv", keep_default_na=False, na_values=["nan"])
    got = fp8sim.sweep(k=[256, 1024, 4096, 16384], scalings=["tensor"],
                       promote_every=[0, 32, 64, 128, 512], trials=8, seed=5, threads=1)
    assert list(want.columns) == ["experiment"] + list(got.columns)
    pd.testing.assert_frame_equal(got, want.drop(columns="experiment"), check_exact=True)


def test_sweep_does_not_depend_on_threads():
    kw = dict(distributions=["gaussian", "llm"], k=[512], scalings=["tensor", "block128", "mx"],
              models=["hopper-wgmma", "exact"], promote_every=[0, 128], trials=6,
              skip_invalid=True)
    a, b = fp8sim.sweep(threads=1, **kw), fp8sim.sweep(threads=2, **kw)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert a.attrs["skipped"] == b.attrs["skipped"] and a.attrs["skipped"]
    with pytest.raises(ValueError, match="unknown scaling 'nope'"):
        fp8sim.sweep(scalings=["nope"])


def test_replay_agrees_with_the_cli(data_dir):
    dirs = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(data_dir, "hw", "*", "manifest.json"))
                  if "fp8sim_capture" in json.load(open(p)))
    assert dirs, f"no captures under {data_dir}/hw"
    for d in dirs:
        r = fp8sim.replay(d)
        cli = run_cli("replay", "--captures", d, check=False)
        assert r["all_match"] == (cli.returncode == 0), d
        for c in r["cases"]:
            assert c["line"] in cli.stdout, f"{d}: {c['line']}"
        assert all(c["matches"] == c["total"] for c in r["cases"]) == r["all_match"]
    one = fp8sim.replay(dirs[0], promote_every=256)
    assert not one["all_match"] or dirs[0].endswith("never")  # a wrong interval is caught
    with pytest.raises(RuntimeError, match="manifest.json"):
        fp8sim.replay(os.path.join(data_dir, "no-such-folder"))


def test_probe_through_a_python_kernel():
    # A Python kernel (the engine per dot product via gemm with c) is probed like hardware.
    def kernel(a, b, c):
        return np.array([fp8sim.gemm(a[t:t + 1], b[t:t + 1], c=c[t].reshape(1, 1),
                                     model="hopper-wgmma")[0, 0] for t in range(len(c))],
                        np.float32)

    r = fp8sim.probe(kernel, max_k=256, k_multiple=32)
    assert (r["group"], r["frac_bits"], r["term_cut"], r["c_joins"]) == (32, 13, "rz", True)
    assert r["evidence"]
    with pytest.raises(RuntimeError, match="returned 1 results"):
        fp8sim.probe(lambda a, b, c: np.zeros(1, np.float32))


@pytest.mark.parametrize("module", ["fp8sim", "fp8sim._invariance", "fp8sim.torch",
                                    "fp8sim._torch_ops",
                                    "fp8sim._torch_plan", "fp8sim._torch_linear",
                                    "fp8sim._torch_reuse"])
def test_docstring_examples_run(module, data_dir, monkeypatch):
    if module.startswith("fp8sim.torch") or module.startswith("fp8sim._torch"):
        pytest.importorskip("torch")
    monkeypatch.setenv("FP8SIM_TEST_DATA", data_dir)
    mod = __import__(module, fromlist=["_"])
    r = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert r.failed == 0 and r.attempted > 0
