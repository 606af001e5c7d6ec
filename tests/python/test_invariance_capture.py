# test_invariance_capture: the batch-invariance live check (cuda/capture/capture_invariance.py).
#   - its CPU parts: the M list, the operand draws and quantisation, the compact row store,
#     vLLM's nearest-M config rule, and the check itself on a capture fp8sim writes (it passes)
#     and on one whose row moves where the report predicts none (it fails, naming the M);
#   - the DeepGEMM case (invariance_deepgemm.py): its config line, warm-up order, merge into
#     a capture, and the check of a row that must not move across M (and one that does);
#   - every capture under tests/data/hw/invariance/ against the report: every change of the
#     row across M predicted, none predicted that did not happen (waived until captured).
import glob
import importlib.util
import json
import os

import numpy as np
import pytest

from conftest import ROOT

fp8sim = pytest.importorskip("fp8sim")
pytest.importorskip("pandas")
torch = pytest.importorskip("torch")

spec = importlib.util.spec_from_file_location(
    "capture_invariance", os.path.join(ROOT, "cuda", "capture", "capture_invariance.py"))
ci = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ci)


def test_m_list_and_config_rule():
    assert len(ci.DEFAULT_M) >= 40 and ci.DEFAULT_M[0] == 1 and ci.DEFAULT_M[-1] == 4096
    assert ci.DEFAULT_M == sorted(set(ci.DEFAULT_M))
    assert ci.parse_m("1-3,8,2") == [1, 2, 3, 8]
    configs = {"1": {"BLOCK_SIZE_M": 16}, "64": {"BLOCK_SIZE_M": 64}, "128": {"BLOCK_SIZE_M": 128}}
    # vLLM: min(keys, key=lambda x: abs(x - M)), the first of equally near keys
    assert [ci.nearest_config(configs, m)["BLOCK_SIZE_M"] for m in (1, 32, 33, 96, 97, 4096)] == \
        [16, 16, 64, 64, 128, 128]


def test_compact_round_trip(rng):
    rows = [rng.integers(0, 9, 5).astype(np.uint16) for _ in range(3)]
    seq = [rows[0], rows[0], rows[1], rows[0], rows[2], rows[1]]
    uniq, index = ci.compact(seq)
    assert index == [0, 0, 1, 0, 2, 1] and len(uniq) == 3
    assert all(np.array_equal(uniq[i], r) for i, r in zip(index, seq))


@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
def test_quantise_is_the_kernel_operand(scaling):
    a, b = ci.draws(37, 200, 256)
    a2, b2 = ci.draws(37, 200, 256)
    assert np.array_equal(a, a2) and np.array_equal(b, b2)  # seeded, drawn again the same
    q = ci.quantise(a, b, scaling)
    va = fp8sim.decode(q["a"], "e4m3")
    vb = fp8sim.decode(q["b"], "e4m3")
    if scaling == "block":
        sa = np.repeat(q["sa"][0], 128)
        sb = np.repeat(np.repeat(q["sb"], 128, axis=0)[:200], 128, axis=1)
    else:
        sa = q["sa"][0]
        sb = q["sb"][:, None] if scaling == "row" else q["sb"][0]
    # each element within half an E4M3 step of its value (3 mantissa bits: 2^-4 relative)
    assert np.all(np.abs(va * sa - a) <= np.abs(a) * 2.0**-4 + 2.0**-9 * np.max(sa))
    assert np.all(np.abs(vb * sb - b) <= np.abs(b) * 2.0**-4 + 2.0**-9 * np.max(sb))
    assert np.abs(va).max() == 448.0  # the row's largest value lands on E4M3's max


def fake_capture(folder, ms, split_of, n=576, k=7168, seed=37):
    """A capture folder as capture_invariance writes it, its rows computed by fp8sim.gemm with
    the split split_of(m) (tensor scales, f32 out, fast accumulation) in place of a GPU."""
    a, b = ci.draws(seed, n, k)
    q = ci.quantise(a, b, "tensor")
    rows = [ci.row_bits(fp8sim.gemm(q["a"][None, :], q["b"], a_scales=q["sa"], b_scales=q["sb"],
                                     kernel="cublaslt-fast-accum", out_type="f32",
                                     split_k=split_of(m))[0], "f32") for m in ms]
    uniq, index = ci.compact(rows)
    os.makedirs(folder, exist_ok=True)
    np.save(os.path.join(folder, "a.npy"), q["a"])
    np.save(os.path.join(folder, "rows.npy"), uniq)
    man = {"device": "NVIDIA H100 80GB HBM3 (fake: fp8sim.gemm)", "seed": seed, "m": ms,
           "shapes": [{"n": n, "k": k, "cases": [{
               "name": "fake", "kernel": "cublaslt", "scaling": "tensor", "out_type": "f32",
               "fast_accum": True, "a": "a.npy", "sa": q["sa"].tolist(),
               "b_sha256": ci.sha256(q["b"].tobytes()), "rows": "rows.npy", "m_index": index,
               "traced_split_k": {str(m): split_of(m) for m in ms}}]}]}
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        json.dump(man, f)


def test_check_passes_on_the_prediction_and_fails_on_a_move_it_did_not_predict(tmp_path):
    # 576x7168, H100, f32 tensor fast1: split 2 at the recorded M up to 192, split 1 from 256.
    ms = [1, 2, 4, 8, 256, 512]
    fake_capture(str(tmp_path / "good"), ms, lambda m: 2 if m < 256 else 1)
    r = ci.check_capture(str(tmp_path / "good"), log=lambda *_: None)
    assert r["ok"] and r["cases"][0]["agree"] == len(ms) and r["cases"][0]["captured_changes"] == 1
    # The GPU did not split at M = 4: the row moved there, and the check must say so.
    fake_capture(str(tmp_path / "bad"), ms, lambda m: 2 if m < 256 and m != 4 else 1)
    r = ci.check_capture(str(tmp_path / "bad"), log=lambda *_: None)
    assert not r["ok"]
    lines = r["cases"][0]["mismatches"]
    assert any(line.startswith("fake M=4: predicted split-K 2") for line in lines), lines
    assert any("M=4: plan split-K 2, cuBLASLt's trace 1" in line for line in lines), lines


def test_traced_check_fails_where_the_trace_says_another_split(tmp_path):
    # The row was computed with split 1 at M = 4, but the trace says 2: the traced check
    # computes split 2 there and must name M = 4.
    ms = [1, 4, 256]
    fake_capture(str(tmp_path / "c"), ms, lambda m: 2 if m < 4 else 1)
    assert ci.check_capture(str(tmp_path / "c"), log=lambda *_: None, plans="traced")["ok"]
    path = tmp_path / "c" / "manifest.json"
    man = json.loads(path.read_text())
    man["shapes"][0]["cases"][0]["traced_split_k"]["4"] = 2
    path.write_text(json.dumps(man))
    r = ci.check_capture(str(tmp_path / "c"), log=lambda *_: None, plans="traced")
    assert not r["ok"]
    assert any(line.startswith("fake M=4: predicted split-K 2 (trace)")
               for line in r["cases"][0]["mismatches"]), r["cases"][0]["mismatches"]


def test_check_refuses_weights_it_cannot_draw_again(tmp_path):
    fake_capture(str(tmp_path / "c"), [1, 2], lambda m: 2)
    path = tmp_path / "c" / "manifest.json"
    man = json.loads(path.read_text())
    man["seed"] = 38
    path.write_text(json.dumps(man))
    with pytest.raises(SystemExit, match="sha256 differs"):
        ci.check_capture(str(tmp_path / "c"), log=lambda *_: None)


spec_dg = importlib.util.spec_from_file_location(
    "invariance_deepgemm", os.path.join(ROOT, "cuda", "capture", "invariance_deepgemm.py"))
dgi = importlib.util.module_from_spec(spec_dg)
spec_dg.loader.exec_module(dgi)

# One config line as DeepGEMM 2.6.1 printed it on the H100 (DG_PRINT_CONFIGS, 1x128x128 case of
# tests/data/hw/kernels/deepgemm_sm90_1d2d/manifest.json).
DG_LINE = ("GemmDesc(gemm_type=0, kernel_type=1, m=1, n=128, k=128, num_groups=1, major_a=0, "
           "cd_dtype=BFloat16, num_sms=132, tc_util=100, compiled_dims=nk): GemmConfig(layout="
           "Layout(swap_ab=0, block_m=16, block_n=16, block_k=128, cluster_m=1, cluster_n=1), "
           "storage_config=StorageConfig(load_block_m=16, load_block_n=16, store_block_m=16, "
           "store_block_n=16, swizzle_a_mode=128, swizzle_b_mode=128, swizzle_cd_mode=32), "
           "pipeline_config=PipelineConfig(smem_size=68872, num_stages=16), launch_config="
           "LaunchConfig(num_sms=132, num_sms_per_cluster=1, num_threads=256)), "
           "LayoutInfo(num_waves=1, last_wave_util=8, num_cycles=115)")


def test_deepgemm_config_line_and_warm_order():
    assert dgi.parse_config("NVCC warning\n" + DG_LINE + "\n") == {
        "block_m": 16, "block_n": 16, "block_k": 128, "cluster_m": 1, "cluster_n": 1,
        "swap_ab": 0, "num_stages": 16, "num_sms": 132, "num_waves": 1, "last_wave_util": 8}
    assert dgi.parse_config("nothing printed") is None
    order = dgi.spread(ci.DEFAULT_M)
    assert sorted(order) == ci.DEFAULT_M  # every M once
    assert order[:3] == [1, 4096, ci.DEFAULT_M[(len(ci.DEFAULT_M) - 1) // 2]]  # then the middle


def fake_deepgemm(folder, ms, moved=(), n=576, k=7168, seed=37):
    """A DeepGEMM case as invariance_deepgemm writes it, merged into the capture in folder:
    the row computed by fp8sim.gemm under the preset, or at the M of `moved` under another
    arithmetic (promotion every 32 K in place of 128: a kernel the report does not predict)."""
    a, b = ci.draws(seed, n, k)
    q = ci.quantise(a, b, "block")
    base = dict(a_scales=q["sa"], b_scales=q["sb"], out_type="bf16", scaling="block", block=128)
    preset = fp8sim.gemm(q["a"][None, :], q["b"], kernel="deepgemm-sm90-1d2d", **base)[0]
    other = fp8sim.gemm(q["a"][None, :], q["b"], model="hopper-wgmma", promote_every=32,
                        scale_order="deepgemm", **base)[0]
    assert (ci.row_bits(preset, "bf16") != ci.row_bits(other, "bf16")).sum() > 0  # it can fail
    uniq, index = ci.compact([ci.row_bits(other if m in moved else preset, "bf16") for m in ms])
    name = f"deepgemm_{n}x{k}_block_bf16"
    np.save(os.path.join(folder, name + "_rows.npy"), uniq)
    np.save(os.path.join(folder, f"{n}x{k}_block_a.npy"), q["a"])
    case = {"name": name, "kernel": dgi.KERNEL, "scaling": "block", "out_type": "bf16",
            "a": f"{n}x{k}_block_a.npy", "sa": q["sa"].tolist(),
            "b_sha256": ci.sha256(q["b"].tobytes()), "rows": name + "_rows.npy", "m": ms,
            "m_index": index, "launch": {str(m): {"block_m": 64} for m in ms}, "not_captured": {}}
    return dgi.merge(folder, {(n, k): case}, {"commit": "fake"},
                     {"gpu": "h100", "seed": seed, "m": ms})


def test_deepgemm_case_checked_and_merged(tmp_path):
    # Beside a cuBLASLt case of 6 M, DeepGEMM's of 5 other M (its own "m" list): the report
    # predicts one preset at every M, so the row must be the same bits at every M.
    folder = str(tmp_path / "good")
    fake_capture(folder, [1, 2, 4, 8, 256, 512], lambda m: 2 if m < 256 else 1)
    dg_ms = [1, 17, 300, 2048, 4096]
    man = fake_deepgemm(folder, dg_ms)
    fake_deepgemm(folder, dg_ms)  # merged again: replaced, not added
    man = json.loads((tmp_path / "good" / "manifest.json").read_text())
    assert [c["kernel"] for c in man["shapes"][0]["cases"]] == ["cublaslt", dgi.KERNEL]
    r = ci.check_capture(folder, log=lambda *_: None)
    dg = r["cases"][1]
    assert r["ok"] and dg["agree"] == len(dg_ms) and dg["captured_changes"] == 0, r
    # The GPU's row moved at M = 17 (another arithmetic): the check names that M (the case's
    # own M, not the capture's list).
    folder = str(tmp_path / "bad")
    fake_capture(folder, [1, 2, 4, 8, 256, 512], lambda m: 2 if m < 256 else 1)
    fake_deepgemm(folder, dg_ms, moved=(17,))
    r = ci.check_capture(folder, log=lambda *_: None)
    lines = r["cases"][1]["mismatches"]
    assert not r["ok"] and len(lines) == 1 and r["cases"][1]["captured_changes"] == 2
    assert lines[0].startswith("deepgemm_576x7168_block_bf16 M=17: predicted preset"), lines
    # A capture of another seed is not merged into this one.
    with pytest.raises(SystemExit, match="seed 37"):
        dgi.merge(folder, {}, {}, {"seed": 38})


CAPTURES = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "hw", "invariance", "*", "manifest.json")))


@pytest.mark.skipif(not CAPTURES, reason="waived: no invariance capture yet (run "
                    "cuda/capture/capture_invariance.py on an H100: docs/invariance.md)")
@pytest.mark.parametrize("manifest", CAPTURES, ids=lambda p: os.path.basename(os.path.dirname(p)))
def test_captured_rows_are_the_prediction(manifest):
    # tables: what a user without a GPU gets (M off the tables' reach refused, listed);
    # traced: the plans cuBLASLt's trace showed, so every M is predicted and checked. The
    # second check reuses the rows the first computed.
    memo = {}
    for plans in ("tables", "traced"):
        r = ci.check_capture(os.path.dirname(manifest), log=print, plans=plans, memo=memo)
        bad = [line for c in r["cases"] for line in c["mismatches"]]
        assert not bad, plans + ": " + "\n".join(bad[:20])
        assert sum(c["agree"] for c in r["cases"]) > 0
    assert r["ok"] and not any(c["refused"] for c in r["cases"])  # traced: every M


def test_capture_without_a_gpu_says_so(tmp_path):
    # The GPU path's imports (capture_scaled_mm's trace set-up, torch) load, then it stops.
    import subprocess
    import sys
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the capture itself would run")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "cuda", "capture", "capture_invariance.py"),
                        "--out", str(tmp_path / "cap")], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip() == "capture_invariance: no CUDA device"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "cuda", "capture", "capture_invariance.py"),
                        "--out", str(tmp_path / "cap"), "--deepgemm", str(tmp_path / "dg"),
                        "--deepgemm-only"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip() == "capture_invariance: no CUDA device"
