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
