# test_cli_parity: the Python API and the fp8sim CLI give the same bits and the same errors.
import numpy as np
import ml_dtypes
import pytest

import fp8sim
from conftest import run_cli

FORMATS = ["e4m3", "e5m2", "e5m6", "e4m3fnuz", "e3m4", "e2m1", "ue8m0", "fp16", "bf16"]


def values(rng, n=64):
    v = np.concatenate([rng.normal(size=n) * 2.0 ** rng.integers(-12, 12, size=n),
                        [0.0, -0.0, 448.0, 464.0, 500.0, 1e-3, np.inf, -np.inf]])
    return v.astype(np.float32)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("rounding", ["rne", "rz", "ru", "rd", "rna", "sr"])
def test_encode_matches_cli(fmt, rounding, rng):
    x = values(rng)
    if fmt in ("e2m1", "ue8m0"):
        x = x[np.isfinite(x) & (x > 0 if fmt == "ue8m0" else True)]
    sr = rounding == "sr"  # the seed applies to stochastic rounding only (else refused)
    args = ["encode", "--format", fmt, "--rounding", rounding, *(["--seed", "7"] if sr else []),
            "--"]
    want = run_cli(*args, *[float(v).hex() for v in x]).stdout.split()
    got = fp8sim.encode(x, fmt, rounding=rounding, **({"seed": 7} if sr else {}))
    assert len(got) == len(want)
    for v, g, w in zip(x, got.tolist(), want):
        assert g == int(w, 16), f"encode {fmt} {rounding} x={float(v).hex()} => got {g:#x} want {w}"


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e2m1", "ue8m0"])
def test_decode_and_table_match_cli(fmt):
    codes, vals = fp8sim.table(fmt)
    lines = run_cli("table", "--format", fmt).stdout.splitlines()
    assert len(lines) == len(codes)
    for c, v, line in zip(codes.tolist(), vals.tolist(), lines):
        wc, wv = line.split()
        assert c == int(wc, 16) and (np.isnan(v) if wv == "nan" else v == float(wv)), line
    dec = fp8sim.decode(codes, fmt)
    np.testing.assert_array_equal(dec, vals)


GEMM_CASES = [
    dict(),
    dict(model="exact"),
    dict(model="hopper-wgmma", promote_every=128, out_type="bf16"),
    dict(model="hopper-mma-sync-f16", b_format="e5m2", out_type="f16"),
    dict(model="custom:group=16,frac=20,out=12,cut=rne", promote_every=64),
    dict(model="blackwell-fp8", c=True),
    dict(scaling="tensor", scale_order="cublaslt", promote_every=128),
    dict(scaling="row", promote_every=128),
    dict(scaling="block", promote_every=128),
    dict(scaling="mx", promote_every=32, mx_codes=True),
]


def save(tmp_path, name, a):
    p = tmp_path / name
    np.save(p, a)
    return str(p)


@pytest.mark.parametrize("case", GEMM_CASES, ids=[str(c) for c in GEMM_CASES])
def test_gemm_matches_cli(case, tmp_path, rng):
    case = dict(case)
    M, N, K = 5, 130, 256
    af, bf = case.get("a_format", "e4m3"), case.pop("b_format", "e4m3")
    a = rng.normal(size=(M, K)).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    b = rng.normal(size=(N, K)).astype(getattr(ml_dtypes, {"e4m3": "float8_e4m3fn",
                                                           "e5m2": "float8_e5m2"}[bf])).view(np.uint8)
    args = ["gemm", "--a", save(tmp_path, "a.npy", a), "--b", save(tmp_path, "b.npy", b),
            "--b-format", bf, "--out", str(tmp_path / "d.npy")]
    kw = dict(b_format=bf)
    if case.pop("c", False):
        c = rng.normal(size=(M, N)).astype(np.float32)
        args += ["--c", save(tmp_path, "c.npy", c)]
        kw["c"] = c
    scaling = case.get("scaling")
    if scaling:
        shapes = {"tensor": ((1,), (1,)), "row": ((M,), (N,)),
                  "block": ((M, K // 128), (-(-N // 128), K // 128)),
                  "mx": ((M, K // 32), (N, K // 32))}[scaling]
        if case.pop("mx_codes", False):
            sa, sb = (rng.integers(120, 134, size=s).astype(np.uint8) for s in shapes)
        else:
            sa, sb = ((2.0 ** rng.uniform(-4, 4, size=s)).astype(np.float32) for s in shapes)
        args += ["--a-scales", save(tmp_path, "sa.npy", sa), "--b-scales",
                 save(tmp_path, "sb.npy", sb)]
        kw.update(a_scales=sa, b_scales=sb)
    for k, v in case.items():
        args += ["--" + k.replace("_", "-"), str(v)]
        kw[k] = v
    run_cli(*args)
    want = np.load(tmp_path / "d.npy")
    got = fp8sim.gemm(a, b, **kw)
    assert got.dtype == np.float32 and got.shape == want.shape
    bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    assert bad.size == 0, (f"gemm {case} (m,n)={np.unravel_index(bad[0], got.shape)} got "
                           f"{got.view(np.uint32).flat[bad[0]]:#010x} want {want.view(np.uint32).flat[bad[0]]:#010x}")


@pytest.mark.parametrize("kw,cli,fragment", [
    (dict(model="custom:group=24"), ["--model", "custom:group=24"], "not a multiple of model"),
    (dict(out_type="f64"), ["--out-type", "f64"], "unknown --out-type 'f64'"),
    (dict(scaling="block"), ["--scaling", "block"], "needs --a-scales"),
    (dict(model="nope"), ["--model", "nope"], "nope"),
    (dict(a_format="e9m9"), ["--a-format", "e9m9"], "e9m9"),
])
def test_errors_carry_the_cli_message(kw, cli, fragment, tmp_path):
    a = np.full((2, 256), 0x38, np.uint8)
    r = run_cli("gemm", "--a", save(tmp_path, "a.npy", a), "--b", save(tmp_path, "b.npy", a),
                "--out", str(tmp_path / "d.npy"), *cli, check=False)
    assert r.returncode == 2
    line = r.stderr.strip().removeprefix("fp8sim: error: ")
    with pytest.raises((ValueError, RuntimeError)) as e:
        fp8sim.gemm(a, a, **kw)
    assert fragment in str(e.value) and str(e.value) == line


def test_bad_arrays_are_one_line_errors():
    a = np.zeros((2, 32), np.uint8)
    with pytest.raises(ValueError, match="a: float32 values, but gemm takes e4m3 codes \\(uint8\\): "
                                         "quantize first"):
        fp8sim.gemm(a.astype(np.float32), a)
    with pytest.raises(RuntimeError, match="K differs"):
        fp8sim.gemm(a, np.zeros((2, 64), np.uint8))
    with pytest.raises(RuntimeError, match="c: expected shape"):
        fp8sim.gemm(a, a, c=np.zeros((3, 3), np.float32))
    with pytest.raises(RuntimeError, match="a_scales: scale at index 0 is nan"):
        fp8sim.gemm(a, a, a_scales=np.float32([np.nan]), b_scales=np.float32([1]))
    assert fp8sim.gemm([[0x38] * 32], [[0x38] * 32]).tolist() == [[32.0]]  # Python ints
    with pytest.raises(RuntimeError, match="a: expected dtype \\|u1, got <i8"):
        fp8sim.gemm([[-1] * 32], [[0x38] * 32])
    with pytest.raises(ValueError, match="bad code '0x100' at index 1"):
        fp8sim.decode(np.array([1, 256], np.uint16), "e4m3")
