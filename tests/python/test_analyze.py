# test_analyze: fp8sim.analyze against `fp8sim analyze` on the same inputs (the same three
# CSVs, byte for byte), input dtypes (float32, float16, bfloat16 from NumPy and torch) and
# bad input.
import os

import ml_dtypes
import numpy as np
import pytest

import fp8sim
from conftest import run_cli

FILES = ("analyze.csv", "analyze_rows.csv", "analyze_pairs.csv")


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_python_equals_cli(tmp_path, rng, dtype):
    a = (rng.normal(size=(48, 256)) * 3).astype(dtype)
    b = rng.standard_t(4, size=(40, 256)).astype(dtype)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    kw = dict(recipes=["deepseek-v3", "fast-accum"], formats=["e4m3", "e5m2"],
              scalings=["tensor", "block128"], models=["hopper-wgmma", "custom:group=32,frac=8,out=9"],
              promote_every=[0, 128], pairs=300, seed=7, skip_invalid=True)
    df = fp8sim.analyze(a, b, **kw, out=str(tmp_path / "py"))
    run_cli("analyze", "--a", str(tmp_path / "a.npy"), "--b", str(tmp_path / "b.npy"),
            "--recipes", "deepseek-v3,fast-accum", "--formats", "e4m3,e5m2",
            "--scalings", "tensor,block128", "--models", "hopper-wgmma",
            "--models", "custom:group=32,frac=8,out=9", "--promote-every", "0,128",
            "--pairs", "300", "--seed", "7", "--skip-invalid", "--quiet", "--out", str(tmp_path / "cli"))
    for f in FILES:
        assert (tmp_path / "py" / f).read_bytes() == (tmp_path / "cli" / f).read_bytes(), f
    # block128 is not run without promotion (4 of the 16 grid recipes): skipped, and said so.
    assert len(df) == 2 + 16 - 4 and len(df.attrs["skipped"]) == 4
    assert set(df.attrs["rows"]["axis"]) == {"row", "col"}
    assert len(df.attrs["pairs"]) == len(df) * 300


def test_torch_inputs_and_dtype_labels(rng):
    torch = pytest.importorskip("torch")
    x = rng.normal(size=(16, 128)).astype(np.float32)
    y = rng.normal(size=(8, 128)).astype(np.float32)
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        df = fp8sim.analyze(torch.from_numpy(x).to(dt), torch.from_numpy(y).to(dt),
                            recipes=["fast-accum"], stages=False, pairs=0)
        ref = fp8sim.analyze(torch.from_numpy(x).to(dt).float().numpy(),
                             torch.from_numpy(y).to(dt).float().numpy(),
                             recipes=["fast-accum"], stages=False, pairs=0)
        assert df["sqnr_db"].tolist() == ref["sqnr_db"].tolist()


def test_bad_input_is_one_line(rng):
    x = rng.normal(size=(8, 64))
    with pytest.raises(ValueError, match="float64"):
        fp8sim.analyze(x, x)  # float64 values that are not float32 values
    with pytest.raises(ValueError, match="K differs"):
        fp8sim.analyze(x.astype(np.float32), x[:, :32].astype(np.float32))
    bad = x.astype(np.float32)
    bad[3, 5] = np.inf
    with pytest.raises(ValueError, match=r"\(3, 5\) is inf"):
        fp8sim.analyze(bad, bad)
    with pytest.raises(ValueError, match="unknown"):
        fp8sim.analyze(x.astype(np.float32), x.astype(np.float32), recipes=["nope"])


def test_nvfp4_recipe_is_quantize_then_block_scaled_gemm(rng):
    """The nvfp4 recipe's output, recomposed from the public pieces: two-level quantize
    (UE4M3 block scales per 16, fp32 tensor scales), fp8sim.gemm with the nvfp4 MMA taking
    the block scales, the tensor scales on its fp32 result, bf16 out. Its stages: scale
    encoding and accumulation measured with the scales applied at promotion."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = (rng.normal(size=(24, 128)) * np.exp(rng.normal(size=(24, 1)))).astype(np.float32)
    b = rng.standard_t(4, size=(20, 128)).astype(np.float32)
    df = fp8sim.analyze(a, b, recipes=["nvfp4"], pairs=24 * 20)
    qa = fp8sim.quantize(a, "e2m1", "nvfp4")
    qb = fp8sim.quantize(b, "e2m1", "nvfp4", role="b")
    d = fp8sim.gemm(qa.codes, qb.codes, a_format="e2m1", b_format="e2m1", model="nvfp4",
                    a_scales=qa.scales, b_scales=qb.scales, scaling="mx", mx_block=16,
                    mx_scale="ue4m3")
    d = (d * (qa.tensor_scales * qb.tensor_scales.T)).astype(np.float32)
    want = d.astype(ml_dtypes.bfloat16).astype(np.float32)
    pairs = df.attrs["pairs"]
    got = np.zeros_like(want)
    got[pairs.m, pairs.n] = pairs.got
    np.testing.assert_array_equal(got, want)
    row = df.iloc[0]
    assert row.scaling == "nvfp4" and row.scale_encoding == "ue4m3" and row.model == "nvfp4"
    assert np.isfinite(row.scale_enc_share) and np.isfinite(row.accum_share)


def test_stage_the_mma_cannot_run_is_unmeasured(rng):
    """nvfp4's quant_a stage feeds fp32 values of A to MMA group sums of 16 exact products;
    values 2^200 apart do not fit one double, so that stage is left unmeasured (NaN), the
    others measured."""
    a = rng.normal(size=(8, 64)).astype(np.float32)
    a[:, 0] *= np.float32(2.0 ** 100)
    a[:, 1] *= np.float32(2.0 ** -100)
    b = rng.normal(size=(8, 64)).astype(np.float32)
    row = fp8sim.analyze(a, b, recipes=["nvfp4"], pairs=0).iloc[0]
    assert np.isnan(row.quant_a_share) and np.isnan(row.quant_a_exact_sqnr_db)
    assert np.isfinite(row.quant_b_share) and np.isfinite(row.sqnr_db)
