# test_reliability_args: the Python front-end under arguments it cannot take (issue 39): every
# public function's arguments are checked first (fp8sim._args), so an int beyond the C++
# type, a float, None or a Path where an int or a str is expected, a str where a list is,
# raise one line naming the argument (C4); probe's bounds (C2); FP8 tensors read by their
# dtype, never as raw codes of another format (W5); values that are not real numbers, or
# long doubles, refused wherever values go in (W6); encode's sr-only arguments (W2).
import pathlib

import numpy as np
import pytest

import fp8sim


def one_line(e: BaseException) -> str:
    msg = str(e)
    assert "\n" not in msg and len(msg) < 400, msg
    return msg


X = [0.3, 1.0]
CODES = np.array([0x38], np.uint8)
A = np.full((2, 32), 0x38, np.uint8)

# (call, the argument the error must name, the exception type): C4's class, one row a member.
BAD_ARGS = [
    (lambda: fp8sim.encode(X, "e4m3", rounding="sr", seed=2**64), "seed", ValueError),
    (lambda: fp8sim.encode(X, "e4m3", rounding="sr", seed=-1), "seed", ValueError),
    (lambda: fp8sim.encode(X, "e4m3", rounding="sr", seed=1.5), "seed", TypeError),
    (lambda: fp8sim.encode(X, "e4m3", rounding="sr", seed="7"), "seed", TypeError),
    (lambda: fp8sim.encode(X, "e4m3", threads=2**31), "threads", ValueError),
    (lambda: fp8sim.encode(X, "e4m3", threads=None), "threads", TypeError),
    (lambda: fp8sim.encode(X, "e4m3", threads=True), "threads", TypeError),
    (lambda: fp8sim.encode(X, None), "fmt", TypeError),
    (lambda: fp8sim.encode(X, pathlib.Path("e4m3")), "fmt", TypeError),
    (lambda: fp8sim.encode(X, 4), "fmt", TypeError),
    (lambda: fp8sim.encode(X, ""), "fmt", ValueError),
    (lambda: fp8sim.encode(X, "e4m3", rounding=None), "rounding", TypeError),
    (lambda: fp8sim.decode(CODES, b"e4m3"), "fmt", TypeError),
    (lambda: fp8sim.describe(None), "fmt", TypeError),
    (lambda: fp8sim.table(3), "fmt", TypeError),
    (lambda: fp8sim.next_up(CODES, None), "fmt", TypeError),
    (lambda: fp8sim.ulp(CODES, 1.0), "fmt", TypeError),
    (lambda: fp8sim.quantize([[1.0]], "e4m3", tensor_rows=2**40), "tensor_rows", ValueError),
    (lambda: fp8sim.quantize([[1.0]], "e4m3", threads=1.0), "threads", TypeError),
    (lambda: fp8sim.quantize([[1.0]], "e4m3", scaling=None), "scaling", TypeError),
    (lambda: fp8sim.gemm(A, A, promote_every=2**31), "promote_every", ValueError),
    (lambda: fp8sim.gemm(A, A, promote_every=12.0), "promote_every", TypeError),
    (lambda: fp8sim.gemm(A, A, split_k="2"), "split_k", TypeError),
    (lambda: fp8sim.gemm(A, A, model=5), "model", TypeError),
    (lambda: fp8sim.gemm(A, A, kernel=pathlib.Path("cublaslt")), "kernel", TypeError),
    (lambda: fp8sim.gemm(A, A, threads=-2**40), "threads", ValueError),
    (lambda: fp8sim.mma(A, A, model=None), "model", TypeError),
    (lambda: fp8sim.sweep(k=[2**40], trials=1), "k", ValueError),
    (lambda: fp8sim.sweep(k=4096, trials=1), "k", TypeError),
    (lambda: fp8sim.sweep(formats="e4m3", trials=1), "formats", TypeError),
    (lambda: fp8sim.sweep(rho=["0.5"], trials=1), "rho", TypeError),
    (lambda: fp8sim.sweep(trials=2**31), "trials", ValueError),
    (lambda: fp8sim.sweep(seed=2**64), "seed", ValueError),
    (lambda: fp8sim.sweep(skip_invalid="yes"), "skip_invalid", TypeError),
    (lambda: fp8sim.replay(None), "dir", TypeError),
    (lambda: fp8sim.replay(".", promote_every=2**31), "promote_every", ValueError),
    (lambda: fp8sim.replay(".", model=None), "model", TypeError),
    (lambda: fp8sim.probe(max_k=2**31), "max_k", ValueError),
    (lambda: fp8sim.probe(max_k=64.0), "max_k", TypeError),
    (lambda: fp8sim.probe(model=None), "model", TypeError),
    (lambda: fp8sim.analyze(np.ones((4, 32), np.float32), np.ones((4, 32), np.float32),
                            recipes="fast-accum"), "recipes", TypeError),
    (lambda: fp8sim.analyze(np.ones((4, 32), np.float32), np.ones((4, 32), np.float32),
                            seed=-1), "seed", ValueError),
    (lambda: fp8sim.analyze(np.ones((4, 32), np.float32), np.ones((4, 32), np.float32),
                            pairs=2**63), "pairs", ValueError),
    (lambda: fp8sim.analyze(np.ones((4, 32), np.float32), np.ones((4, 32), np.float32),
                            promote_every=[None]), "promote_every", TypeError),
    (lambda: fp8sim.encode(X, "e4m3", nonsense=1), "nonsense", TypeError),
]


@pytest.mark.parametrize("call,name,exc", BAD_ARGS, ids=[f"{i}-{r[1]}" for i, r in
                                                         enumerate(BAD_ARGS)])
def test_an_argument_the_core_cannot_take_is_one_line_naming_it(call, name, exc):
    with pytest.raises(exc) as e:
        call()
    assert name in one_line(e.value)


def test_good_spellings_still_work():
    assert fp8sim.encode(X, "e4m3", rounding="sr", seed=np.uint64(2**64 - 1)).shape == (2,)
    assert fp8sim.encode(X, "e4m3", threads=np.int32(1)).tolist() == fp8sim.encode(X, "e4m3").tolist()
    assert fp8sim.sweep(k=np.array([256]), trials=1).shape[0] == 1
    assert fp8sim.sweep(k=(256,), rho=[0], trials=1).shape[0] == 1  # an int is a real number


def test_replay_takes_a_path(data_dir):
    d = pathlib.Path(data_dir) / "hw" / "cublaslt_default"
    r = fp8sim.replay(d, case="one-large_k2048")
    assert r["cases"][0]["line"] == "one-large_k2048: 1024/1024 match"


def test_encode_seed_and_sr_bits_apply_to_sr_only():
    for kw in ({"seed": 0}, {"seed": 3}, {"sr_bits": 8}, {"seed": 1, "sr_bits": 32}):
        for rounding in ("rne", "rz", "rna"):
            with pytest.raises(ValueError, match="stochastic rounding only"):
                fp8sim.encode(X, "e4m3", rounding=rounding, **kw)
    assert fp8sim.encode([0.3] * 4, "e5m2", rounding="sr", seed=7).tolist() == [53, 52, 53, 52]


# ---- C2: probe's bounds ---------------------------------------------------------------------

@pytest.mark.parametrize("kw,needle", [
    ({"max_k": 32}, "max_k = 32"), ({"max_k": 16}, "max_k = 16"), ({"max_k": 1}, "max_k = 1"),
    ({"max_k": 0}, "max_k"), ({"max_k": -5}, "max_k"), ({"max_k": 2**21}, "max_k"),
    ({"max_group": 1}, "max_group"), ({"max_group": 10**6}, "max_group"),
    ({"k_multiple": 0}, "k_multiple"), ({"k_multiple": 2**21}, "k_multiple"),
])
def test_probe_bounds_are_one_line(kw, needle):
    """max_k at or below the model's group (32 for hopper-wgmma) crashed the interpreter."""
    with pytest.raises(ValueError) as e:
        fp8sim.probe(model="hopper-wgmma", **kw)
    assert needle in one_line(e.value)


def test_probe_just_above_the_group_still_answers():
    r = fp8sim.probe(model="hopper-wgmma", promote_every=0, max_k=64)
    assert r["group"] == 32


# ---- W6: values that are not real numbers, wherever values go in ----------------------------

NOT_REAL = [
    np.array([[1 + 2j, 3j]]), np.array([["1.0", "2"]]), np.array([[True, False]]),
    np.array([[1.0, None]], dtype=object),
]
if np.dtype(np.longdouble).itemsize > 8:
    NOT_REAL.append(np.array([[1.0, 2.0]], dtype=np.longdouble))


@pytest.mark.parametrize("x", NOT_REAL, ids=lambda x: str(x.dtype))
@pytest.mark.parametrize("where", ["encode", "quantize", "mma.c", "gemm.c", "gemm.bias"])
def test_values_must_be_real_numbers(x, where):
    a = np.full((1, 32), 0x38, np.uint8)
    b = np.full((2, 32), 0x38, np.uint8)
    calls = {
        "encode": lambda: fp8sim.encode(x, "e4m3"),
        "quantize": lambda: fp8sim.quantize(x, "e4m3"),
        "mma.c": lambda: fp8sim.mma(a, a, x[0, :1]),
        "gemm.c": lambda: fp8sim.gemm(a, b, c=x),
        "gemm.bias": lambda: fp8sim.gemm(a, b, bias=x[0]),
    }
    with pytest.raises(ValueError) as e:
        calls[where]()
    msg = one_line(e.value)
    assert str(x.dtype) in msg or "rounded twice" in msg


# ---- W5: FP8 tensors read by their dtype ----------------------------------------------------

def test_fp8_tensors_are_read_by_their_dtype():
    torch = pytest.importorskip("torch")
    one = torch.tensor([1.0, -0.5, 448.0])
    for dtype, fmt in ((torch.float8_e4m3fn, "e4m3"), (torch.float8_e5m2, "e5m2")):
        t = one.to(dtype)
        assert fp8sim.decode(t, fmt).tolist() == t.float().tolist()
        # Values in, where values are expected: encode and quantize read the values.
        assert fp8sim.decode(fp8sim.encode(t, fmt), fmt).tolist() == t.float().tolist()
        q = fp8sim.quantize(t.reshape(1, -1), "e4m3", "none")
        assert fp8sim.decode(q.codes, "e4m3").ravel().tolist() == t.float().tolist()
    # A dtype that disagrees with the format: refused, for every function taking codes.
    e5 = one.to(torch.float8_e5m2)
    a = torch.ones(2, 32).to(torch.float8_e5m2)
    for call in (lambda: fp8sim.decode(e5, "e4m3"), lambda: fp8sim.next_up(e5, "e4m3"),
                 lambda: fp8sim.next_down(e5, "e4m3"), lambda: fp8sim.ulp(e5, "e4m3"),
                 lambda: fp8sim.gemm(a, a), lambda: fp8sim.gemm(a, a, a_format="e5m2"),
                 lambda: fp8sim.mma(a, a), lambda: fp8sim.mma(a.view(torch.uint8).numpy(), a)):
        with pytest.raises(ValueError) as e:
            call()
        assert "float8_e5m2" in one_line(e.value)
    # The alias of a dtype's format is the same format.
    assert fp8sim.decode(one.to(torch.float8_e4m3fn), "e4m3fn").tolist() == one.tolist()
    # A float tensor where codes are expected: refused.
    with pytest.raises(ValueError):
        fp8sim.decode(torch.tensor([1.0]), "e4m3")


# ---- W1, W2: presets and options that apply to nothing, as the CLI refuses them ------------

@pytest.mark.parametrize("kw,needle", [
    (dict(kernel="cublaslt", promote_every=0), "drop promote_every"),
    (dict(kernel="cublaslt", promote_every=128), "drop promote_every"),
    (dict(kernel="cublaslt", model="hopper-wgmma"), "drop model"),
    (dict(kernel="cublaslt-fast-accum", scale_order="deepgemm"), "drop scale_order"),
    (dict(kernel="cublaslt", split_k=2, split_k_align=128), "drop split_k_align"),
    (dict(block=64), "block applies"),
    (dict(block=128), "block applies"),
    (dict(mx_block=32), "mx_block applies"),
    (dict(mx_scale="ue8m0"), "mx_scale applies"),
    (dict(split_k_align=256), "split_k_align applies"),
])
def test_gemm_refuses_what_a_preset_sets_or_what_applies_to_nothing(kw, needle):
    a = np.full((2, 256), 0x38, np.uint8)
    one = np.ones((1, 1), np.float32)
    scales = dict(a_scales=one, b_scales=one) if "kernel" in kw else {}
    with pytest.raises(ValueError) as e:
        fp8sim.gemm(a, a, **scales, **kw)
    assert needle in one_line(e.value)


def test_the_quick_binding_is_signature_bind():
    """fp8sim._args binds the calls it can at once (_binder) and leaves the rest to
    Signature.bind: on every public function's signature, random calls (positional and
    keyword arguments, unknown or repeated names, missing required ones) bind to the same
    arguments, args and kwargs, and it declines exactly the calls Signature.bind refuses."""
    import inspect
    import random

    from fp8sim import _args
    rng = random.Random(20261127)
    fns = [f for f in vars(fp8sim).values() if callable(f) and hasattr(f, "__wrapped__")]
    assert len(fns) >= 10
    seen = {"bound": 0, "declined": 0}
    for f in fns:
        sig = inspect.signature(f.__wrapped__)
        bind, names = _args._binder(sig), list(sig.parameters)
        for _ in range(300):
            args = tuple(object() for _ in range(rng.randint(0, len(names) + 1)))
            keys = rng.sample(names + ["not_a_parameter"], rng.randint(0, min(4, len(names))))
            kwargs = {k: object() for k in keys}
            got = bind(args, kwargs)
            try:
                want = sig.bind(*args, **kwargs)
            except TypeError:
                assert got is None, (f.__name__, len(args), keys)
                seen["declined"] += 1
                continue
            assert got is not None, (f.__name__, len(args), keys)
            assert list(got.arguments.items()) == list(want.arguments.items())
            assert got.args == want.args and got.kwargs == want.kwargs
            seen["bound"] += 1
    assert seen["bound"] > 100 and seen["declined"] > 100, seen
