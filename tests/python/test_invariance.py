# test_invariance: fp8sim.invariance and `fp8sim invariance` (sim/analysis/invariance.hpp):
# the movement numbers against an independent computation (fp8sim.quantize and fp8sim.gemm
# under each region's plan, then NumPy on the output bits), the DataFrame against the CLI's
# CSV, the model view, and the bad-input table (one line, exit 2 / ValueError).
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import run_cli

fp8sim = pytest.importorskip("fp8sim")
pd = pytest.importorskip("pandas")


def ordinal_f32(x: np.ndarray) -> np.ndarray:
    b = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.int64)
    return np.where(b >> 31, -(b & 0x7FFFFFFF), b & 0x7FFFFFFF)


def test_movement_against_quantize_and_gemm(rng):
    # Llama 3 8B down_proj (N 4096, K 14336) with fast accumulation: cuBLASLt splits K in two
    # below M = 32 on the H100 (recorded points), not from 32 on.
    n, k = 512, 14336
    a = rng.standard_normal(k).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32)
    ms = [1, 2, 4, 8, 16, 24, 32, 48, 64]
    df = fp8sim.invariance(4096, k, ms, fast_accum=True, out_type="f32", rows=False)
    splits = {p["m"]: p["split_k"] for p in df.attrs["points"]}
    assert splits[16] == 2 and splits[32] == 1
    # Our own row and weights (N 512 keeps it small; the plan is looked up for N 512 here).
    df = fp8sim.invariance(n, k, ms, fast_accum=True, out_type="f32", a_row=a, b=b)
    qa = fp8sim.quantize(a[None, :], "e4m3", "tensor")
    qb = fp8sim.quantize(b, "e4m3", "tensor", role="b")
    rows = {}
    for p in (SimpleNamespace(**p) for p in df.attrs["points"]):
        if p.refused:
            continue
        d = fp8sim.gemm(qa.codes, qb.codes, a_scales=qa.scales.reshape(1), b_scales=qb.scales[:1, 0],
                        kernel="cublaslt-fast-accum", out_type="f32", split_k=int(p.split_k))[0]
        rows[p.m] = d
        want = np.array(df.attrs["rows"][p.variant], np.float32)
        assert np.array_equal(d.view(np.uint32), want.view(np.uint32))
    changes = df.attrs["changes"]
    assert len(changes) >= 1
    for c in (SimpleNamespace(**c) for c in changes):
        x, y = rows[c.m_before], rows[c.m_after]
        diff = x.view(np.uint32) != y.view(np.uint32)
        assert c.changed == diff.sum()
        assert c.changed_share == pytest.approx(diff.mean(), abs=0, rel=1e-12)
        assert c.max_ulp == np.abs(ordinal_f32(x) - ordinal_f32(y)).max()
        rel = np.abs(y.astype(np.float64) - x) / np.abs(x.astype(np.float64))
        assert float(c.max_rel) == pytest.approx(rel[diff].max(), rel=1e-12)
    fix = df.attrs["fix"]
    assert fix["setting"] == "split_k=1" and fix["checked"] and fix["invariant"]
    assert not df.attrs["invariant"]


def test_dataframe_is_the_cli_csv(tmp_path):
    path = tmp_path / "regions.csv"
    run_cli("invariance", "--n", "576", "--k", "7168", "--m", "1-300", "--no-rows", "--csv", str(path))
    cli = pd.read_csv(path, keep_default_na=False)
    df = fp8sim.invariance(576, 7168, "1-300", rows=False)
    assert list(cli.m_lo) == list(df.m_lo) and list(cli.m_hi) == list(df.m_hi)
    assert list(cli.plan) == list(df.plan) and list(cli.source) == list(df.sources)
    assert list(cli.refused) == [int(x) for x in df.refused]


def test_deepgemm_invariant_and_model_view():
    df = fp8sim.invariance(7168, 2048, "1-4096", kernel="deepgemm-sm90-1d2d")
    assert df.attrs["invariant"] and len(df) == 1 and df.attrs["fix"] is None
    assert np.array(df.attrs["rows"]).shape == (1, 7168)
    print(df)  # a wide frame prints (its attrs hold no arrays pandas cannot compare)
    m = fp8sim.invariance(m="1-4096", model="deepseek-v3", kernel="deepgemm-sm90-1d2d", rows=False)
    layers = pd.DataFrame(m.attrs["layers"])
    assert list(layers.layer)[:2] == ["q_a_proj", "q_b_proj"]
    assert layers.invariant.all()
    c = fp8sim.invariance(m="1-4096", model="llama-3-8b", fast_accum=True, rows=False)
    v = pd.DataFrame(c.attrs["layers"]).set_index("layer")
    assert not v.loc["down_proj", "invariant"] and v.loc["q_proj", "invariant"]


@pytest.mark.parametrize("args,message", [
    (["--n", "64", "--k", "256", "--m", "0"], "M: 0 is not in 1.."),
    (["--n", "64", "--k", "256", "--m", "4-1"], "M: range '4-1' runs backwards"),
    (["--n", "64", "--k", "256", "--m", "1,x"], "M: 'x' is not a whole number"),
    (["--k", "256", "--m", "1"], "give --n and --k (or --model)"),
    (["--model", "deepseek-v3", "--n", "64", "--m", "1"], "--model gives each layer's N and K"),
    (["--model", "gpt-5", "--m", "1"], "unknown model 'gpt-5'"),
    (["--n", "64", "--k", "256", "--m", "1", "--kernel", "nope"], "unknown kernel 'nope'"),
    (["--n", "64", "--k", "256", "--m", "1", "--kernel", "deepgemm-sm90-1d2d", "--fast-accum"],
     "--fast-accum is cuBLASLt's"),
    (["--n", "64", "--k", "256", "--m", "1", "--split-k", "2"], "kernel cublaslt sets the model"),
    (["--n", "64", "--k", "256", "--m", "1", "--out-type", "f8"], "unknown out_type 'f8'"),
    (["--n", "64", "--k", "1000", "--m", "1", "--scaling", "block"], "K a multiple of 128"),
    (["--n", "64", "--k", "256", "--m", "1", "--kernel", "triton-w8a8-block-fp8",
      "--triton-config", "vllm", "--gpu", "a100"], "every M refused: gpu 'a100'"),
    (["--n", "1024", "--k", "9728", "--m", "87"], "every M refused: torch._scaled_mm 87x1024x9728"),
    (["--n", "64", "--k", "256", "--m", "1", "--gpu", "a100"], "gpu 'a100': no recorded cuBLASLt plans"),
    (["--n", "129280", "--k", "7168", "--m", "1"], "more than 2^28 weights"),
    (["--n", "64", "--k", "256", "--m", "1", "--gpu", "cuda"], "use fp8sim.invariance(..., gpu='cuda')"),
    (["--n", "64", "--k", "256", "--m", "1", "--a-row", "/nonexistent.npy"], "/nonexistent.npy"),
])
def test_cli_errors(args, message):
    r = run_cli("invariance", *args, check=False)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout == ""
    lines = r.stderr.strip().split("\n")
    assert len(lines) == 1 and lines[0].startswith("fp8sim: error: ") and message in lines[0], lines


def test_cli_a_row_wrong_k(tmp_path):
    np.save(tmp_path / "a.npy", np.ones((2, 128), np.float32))
    r = run_cli("invariance", "--n", "64", "--k", "256", "--m", "1", "--a-row", str(tmp_path / "a.npy"),
                check=False)
    assert r.returncode == 2 and "128 columns, but K = 256" in r.stderr
    assert len(r.stderr.strip().split("\n")) == 1


@pytest.mark.parametrize("kwargs,message", [
    (dict(n=64, k=256, m=[0]), "M, N, K: 0 is not a whole number >= 1"),
    (dict(n=64, k=256, m="1", kernel="deepgemm-sm90-1d2d", fast_accum=True), "fast_accum is cuBLASLt's"),
    (dict(n=64, k=256, m="1", split_k=2), "kernel cublaslt sets the model"),
    (dict(k=256, m="1"), "give n and k (or model)"),
    (dict(n=64, k=256, m="1", a_row=np.ones(3)), "a_row: 3 values, but K = 256"),
    (dict(n=64, k=256, m="1", kernel="triton-w8a8-block-fp8", triton_config="16,64,128,4",
          gpu="h100"), "triton config '16,64,128,4': 4 values given"),
    (dict(n=64, k=256, m="1", gpu="cuda", cublaslt_plan=lambda *a: {}), "gpu='cuda' (cuBLASLt "
     "asked on this GPU) or cublaslt_plan, not both"),
])
def test_python_errors(kwargs, message):
    with pytest.raises(ValueError) as e:
        fp8sim.invariance(**kwargs)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_cublaslt_plan_function_gives_every_plan():
    # A plan function (e.g. a trace's splits) answers at every M, in place of the tables; its
    # refusal (a str, or an exception's message) refuses that M; the splits it gives are the
    # arithmetic (two splits: two distinct rows).
    seen = []

    def plan(m, n, k, out, fast, scale, bias):
        seen.append((m, n, k, out, fast, scale, bias))
        if m == 3:
            return "no trace at M=3"
        if m == 5:
            raise RuntimeError("query failed at M=5")
        return dict(split_k=2 if m < 100 else 1, source="trace", why="a test's splits")
    df = fp8sim.invariance(64, 1024, [1, 2, 3, 5, 200], out_type="f32", fast_accum=True,
                           cublaslt_plan=plan)
    assert seen[0] == (1, 64, 1024, "f32", True, "tensor", False)
    assert [s[0] for s in seen] == [1, 2, 3, 5, 200]
    pts = {p["m"]: p for p in df.attrs["points"]}
    assert pts[3]["refused"] and pts[3]["why"] == "no trace at M=3"
    assert pts[5]["refused"] and pts[5]["why"] == "query failed at M=5"
    assert pts[1]["source"] == "trace" and pts[1]["split_k"] == 2 and pts[200]["split_k"] == 1
    q = fp8sim.invariance(64, 1024, [1, 200], out_type="f32", fast_accum=True,
                          cublaslt_plan=plan)
    rows = np.asarray(q.attrs["rows"], np.float32)
    assert len(rows) == 2 and not np.array_equal(rows[0], rows[1])


def test_gpu_cuda_without_a_gpu_says_so():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: gpu='cuda' asks it (the GPU suite checks that)")
    with pytest.raises(ValueError) as e:
        fp8sim.invariance(64, 256, "1", gpu="cuda", rows=False)
    assert "no CUDA GPU here to ask cuBLASLt" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.gpu
def test_gpu_cuda_asks_cublaslt_as_explain_does():
    # On a GPU, gpu='cuda' takes each M's plan from cuBLASLt, as fp8sim.torch.explain asks it
    # (the live check of a capture is tests/run_gpu.sh's invariance stage).
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from fp8sim.torch import explain
    ms = [1, 5, 100, 300, 2048]
    df = fp8sim.invariance(576, 7168, ms, out_type="f32", fast_accum=True, gpu="cuda", rows=False)
    for p in df.attrs["points"]:
        want = explain(p["m"], 576, 7168, out_dtype=torch.float32, use_fast_accum=True)
        assert p["source"] == "gpu-query" and want.source == "gpu-query"
        assert p["split_k"] == want.split_k, (p["m"], p["split_k"], want.split_k)
