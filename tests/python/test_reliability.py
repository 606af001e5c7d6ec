# test_reliability: the Python front-end's error contract under hostile arguments (issue 29):
# bad values raise ValueError / RuntimeError with the CLI's one line and the CLI's limits,
# never a silent conversion; 0-d and empty inputs keep torch's shapes; the fake kernels give
# the real ops' shapes; analyze's outputs appear whole or not at all.
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fp8sim

from conftest import run_cli


def one_line(e: BaseException) -> str:
    msg = str(e)
    assert "\n" not in msg and len(msg) < 400, msg
    return msg


# ---- encode / decode: real numbers in, shapes kept -----------------------------------------

NOT_REAL = [
    np.array([1 + 2j, 3j]),                        # complex: the imaginary part would be lost
    np.array([1.0, None], dtype=object),            # object holding None
    np.array([1.5, 2.5], dtype=object),             # object holding floats
    np.array(["1.0", "2"]),                         # strings
    np.array([True, False]),                        # booleans
    np.array(["2026-01-01"], dtype="datetime64[D]"),
    np.array([(1.0, 2.0)], dtype=[("a", "f4"), ("b", "f4")]),  # structured
]


@pytest.mark.parametrize("x", NOT_REAL, ids=lambda x: str(x.dtype))
def test_encode_refuses_what_is_not_a_real_number(x):
    with pytest.raises(ValueError) as e:
        fp8sim.encode(x, "e4m3")
    assert "not a real number type" in one_line(e.value)


@pytest.mark.parametrize("x", NOT_REAL + [np.array([1.5, 2.0])], ids=lambda x: str(x.dtype))
@pytest.mark.parametrize("fn", [fp8sim.decode, fp8sim.next_up, fp8sim.next_down, fp8sim.ulp])
def test_code_functions_refuse_what_is_not_an_integer(fn, x):
    with pytest.raises((ValueError, RuntimeError)) as e:
        fn(x, "e4m3")
    msg = one_line(e.value)
    assert "not an integer type" in msg or "expected dtype |u1" in msg


def test_encode_refuses_integers_that_float64_would_round():
    with pytest.raises(ValueError, match="beyond 2\\^53"):
        fp8sim.encode(np.array([2**53 + 1], np.int64), "fp32")
    assert fp8sim.encode(np.array([1, 2, 448], np.int64), "e4m3").tolist() == [56, 64, 126]


@pytest.mark.parametrize("x", [np.float64(0.5), np.array(0.5), np.float32(448.0), 0.5])
def test_zero_d_in_zero_d_out(x):
    c = fp8sim.encode(x, "e4m3")
    assert c.shape == ()
    for fn in (fp8sim.decode, fp8sim.next_up, fp8sim.next_down, fp8sim.ulp):
        assert fn(c, "e4m3").shape == ()
    assert fp8sim.decode(np.uint8(0x38), "e4m3") == 1.0
    assert fp8sim.encode(np.zeros((2, 0, 3)), "e4m3").shape == (2, 0, 3)


def test_zero_d_torch_tensor():
    torch = pytest.importorskip("torch")
    assert fp8sim.encode(torch.tensor(0.5), "e4m3").shape == ()


# ---- limits: the CLI's, checked once in C++ ------------------------------------------------

A8 = np.full((4, 64), 0x38, np.uint8)
F64 = np.ones((4, 128), np.float32)

BAD_LIMITS = [
    ("encode threads -1", lambda: fp8sim.encode([1.0], "e4m3", threads=-1), "kMaxThreads"),
    ("encode threads 1025", lambda: fp8sim.encode([1.0], "e4m3", threads=1025), "kMaxThreads"),
    ("encode sr threads 10**6",
     lambda: fp8sim.encode([1.0], "e4m3", rounding="sr", threads=10**6), "kMaxThreads"),
    ("gemm threads -1", lambda: fp8sim.gemm(A8, A8, threads=-1), "kMaxThreads"),
    ("gemm threads 10**6", lambda: fp8sim.gemm(A8, A8, threads=10**6), "kMaxThreads"),
    ("gemm promote_every -32", lambda: fp8sim.gemm(A8, A8, promote_every=-32), "negative"),
    ("gemm promote_every 2**30+32",
     lambda: fp8sim.gemm(A8, A8, promote_every=2**30 + 32), "kMaxDim"),
    ("gemm split_k 2**31-1", lambda: fp8sim.gemm(A8, A8, split_k=2**31 - 1), "kMaxDim"),
    ("gemm block 0", lambda: fp8sim.gemm(A8, A8, a_scales=np.ones((4, 1), np.float32),
                                         b_scales=np.ones((1, 1), np.float32), scaling="block",
                                         block=0), "block"),
    ("quantize tensor_rows -1",
     lambda: fp8sim.quantize(F64, tensor_rows=-1), "tensor_rows = -1 is negative"),
    ("quantize threads -1", lambda: fp8sim.quantize(F64, threads=-1), "kMaxThreads"),
    ("sweep threads 1025", lambda: fp8sim.sweep(k=[32], trials=1, threads=1025), "kMaxThreads"),
    ("analyze threads -1",
     lambda: fp8sim.analyze(F64, F64, recipes=["fast-accum"], threads=-1), "kMaxThreads"),
    ("analyze pairs -1",
     lambda: fp8sim.analyze(F64, F64, recipes=["fast-accum"], pairs=-1), "pairs = -1"),
    ("analyze promote_every -5",
     lambda: fp8sim.analyze(F64, F64, promote_every=[-5]), "promote_every = -5"),
]


@pytest.mark.parametrize("name,call,needle", BAD_LIMITS, ids=[b[0] for b in BAD_LIMITS])
def test_python_limits_are_the_clis(name, call, needle):
    with pytest.raises((ValueError, RuntimeError)) as e:
        call()
    assert needle in one_line(e.value)


@pytest.mark.parametrize("pe", [-5, -2, 2**30 + 1])
def test_replay_promote_every_range(data_dir, pe):
    d = os.path.join(data_dir, "hw", "cublaslt_default")
    with pytest.raises(ValueError) as e:
        fp8sim.replay(d, promote_every=pe, case="one-large_k2048")
    assert "promote_every" in one_line(e.value)
    with pytest.raises(ValueError):
        fp8sim.replay(d, threads=-1, case="one-large_k2048")


@pytest.mark.parametrize("threads,ok", [(0, True), (1024, True), (1025, False), (-1, False)])
def test_threads_accepted_alike_by_cli_and_python(tmp_path, threads, ok):
    np.save(tmp_path / "A.npy", A8)
    r = run_cli("gemm", "--a", str(tmp_path / "A.npy"), "--b", str(tmp_path / "A.npy"),
                "--out", str(tmp_path / "D.npy"), "--threads", str(threads), check=False)
    assert (r.returncode == 0) == ok
    try:
        fp8sim.gemm(A8, A8, threads=threads)
        py_ok = True
    except ValueError:
        py_ok = False
    assert py_ok == ok


# ---- empty inputs --------------------------------------------------------------------------

@pytest.mark.parametrize("m,n", [(0, 3), (3, 0), (0, 0)])
def test_gemm_empty_result_as_torch(m, n):
    d = fp8sim.gemm(np.zeros((m, 64), np.uint8), np.zeros((n, 64), np.uint8))
    assert d.shape == (m, n) and d.dtype == np.float32


def test_gemm_k0_refused():
    with pytest.raises(RuntimeError) as e:
        fp8sim.gemm(np.zeros((3, 0), np.uint8), np.zeros((2, 0), np.uint8))
    assert "K = 0" in one_line(e.value)


# ---- analyze: values checked whether used or not; outputs whole or none --------------------

@pytest.mark.parametrize("kw,needle", [
    (dict(recipes=["fast-accum"], out_type="bf8"), "bf8"),
    (dict(recipes=["fast-accum"], out_type="bf16"), "applies to the grid only"),
    (dict(formats=["e4m3"], out_type=""), "out_type"),
    (dict(formats=["e4m3"], out_type="e4m3"), "e4m3"),
    (dict(recipes=["fast-accum"], encodings=["pow3"]), "pow3"),
    (dict(scalings=["mx"], encodings=["pow2"]), "encodings apply to none"),
])
def test_analyze_options_that_apply_to_nothing(kw, needle):
    with pytest.raises(ValueError) as e:
        fp8sim.analyze(F64, F64, **kw)
    assert needle in one_line(e.value)


def test_analyze_full_disk_leaves_nothing(tmp_path):
    # In a child under a 2 KB file size limit (SIGXFSZ ignored: write() fails with EFBIG).
    out = tmp_path / "out"
    out.mkdir()
    for n in ("analyze.csv", "analyze_rows.csv", "analyze_pairs.csv"):
        (out / n).write_text("old")
    code = textwrap.dedent(f"""
        import resource, signal, numpy as np, fp8sim
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))
        x = np.ones((64, 256), np.float32)
        try:
            fp8sim.analyze(x, x, recipes=["fast-accum"], out={str(out)!r})
        except RuntimeError as e:
            print("ERROR", e)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=os.environ)
    assert "ERROR" in r.stdout and "write failed" in r.stdout, r.stdout + r.stderr
    assert sorted(os.listdir(out)) == ["analyze.csv", "analyze_pairs.csv", "analyze_rows.csv"]
    assert all((out / n).read_text() == "old" for n in os.listdir(out))


# ---- torch ---------------------------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "uint8", "bool", "float64",
                                   "complex64", "int16"])
def test_scaled_mm_refuses_out_dtypes_torch_does_not_produce(dtype):
    torch = _torch()
    import fp8sim.torch as ft
    a = torch.ones(2, 32).to(torch.float8_e4m3fn)
    one = torch.tensor(1.0)
    with pytest.raises(ValueError) as e:
        ft.scaled_mm(a, a.t(), one, one, out_dtype=getattr(torch, dtype))
    assert "out_dtype" in one_line(e.value)
    for ok in (torch.float32, torch.bfloat16, torch.float16, torch.float8_e4m3fn,
               torch.float8_e5m2, None):
        assert ft.scaled_mm(a, a.t(), one, one, out_dtype=ok, split_k=1).shape == (2, 2)


SCALINGS = [
    ("none", "a"), ("tensor", "a"), ("tensor:pow2", "a"), ("row", "a"), ("row:e8m0", "b"),
    ("tile32", "a"), ("tile128", "b"), ("block128", "a"), ("block128", "b"),
    ("block32:pow2", "b"), ("mx", "a"), ("mx", "b"), ("mx16", "a"),
]  # two-level scalings (nvfp4, mx16:ue4m3) the op refuses: test_reliability_torch.py


@pytest.mark.parametrize("T", [1, 130, 256])
@pytest.mark.parametrize("scaling,role", SCALINGS, ids=[f"{s}-{r}" for s, r in SCALINGS])
def test_quantize_fake_kernel_gives_the_real_scale_shapes(scaling, role, T):
    torch = _torch()
    import fp8sim.torch  # noqa: F401  (registers the ops)
    from torch._subclasses.fake_tensor import FakeTensorMode
    fmt = "e2m1" if scaling == "nvfp4" else "e4m3"
    x = torch.randn(T, 256, generator=torch.Generator().manual_seed(T))
    codes, scales = torch.ops.fp8sim.quantize(x, fmt, scaling, role)
    with FakeTensorMode() as mode:
        fc, fs = torch.ops.fp8sim.quantize(mode.from_tensor(x), fmt, scaling, role)
    assert (tuple(fc.shape), tuple(fs.shape)) == (tuple(codes.shape), tuple(scales.shape))
    torch.library.opcheck(torch.ops.fp8sim.quantize.default, (x, fmt, scaling, role),
                          test_utils=("test_schema", "test_faketensor"))


def test_quantize_under_torch_compile_every_scaling():
    torch = _torch()
    import fp8sim.torch  # noqa: F401
    x = torch.randn(256, 256, generator=torch.Generator().manual_seed(3))

    def f(x):
        out = []
        for scaling, role in SCALINGS:
            fmt = "e2m1" if scaling == "nvfp4" else "e4m3"
            c, s = torch.ops.fp8sim.quantize(x, fmt, scaling, role)
            out.append(s.sum() + s.shape[0] * 1000 + s.shape[1])
        return torch.stack(out)

    got = torch.compile(f, fullgraph=True, backend="aot_eager")(x)
    assert torch.equal(got, f(x))


@pytest.mark.parametrize("shape", [(0, 128), (2, 0, 128)])
def test_float8_linear_on_an_empty_batch(shape):
    torch = _torch()
    import fp8sim.torch as ft
    lin = ft.Float8Linear(128, 256, recipe="deepseek-v3")
    x = torch.zeros(shape, requires_grad=True)
    y = lin(x)
    assert y.shape == (*shape[:-1], 256)
    y.sum().backward()
    assert x.grad.shape == x.shape
    assert lin.weight.grad is not None and torch.count_nonzero(lin.weight.grad) == 0
    ref = torch.nn.Linear(128, 256)
    assert ref(x).shape == y.shape
