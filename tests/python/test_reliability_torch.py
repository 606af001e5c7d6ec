# test_reliability_torch: fp8sim.torch under inputs it must refuse (issue 39): the quantize
# op's two-level scalings (W8: the tensor scale would be dropped), integer inputs to
# Float8Linear (W9), explain()'s arguments (W10), and the Python entries' argument checks
# (C4: one line naming the argument, not torch's schema dump).
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import fp8sim  # noqa: E402
import fp8sim.torch as ft  # noqa: E402


def one_line(e: BaseException) -> str:
    msg = str(e)
    assert "\n" not in msg and len(msg) < 500, msg
    return msg


TWO_LEVEL = [("e2m1", "nvfp4"), ("e2m1", "mx16:ue4m3"), ("e4m3", "mx:ue4m3"),
             ("e2m1", "mx32:ue4m3")]


@pytest.mark.parametrize("fmt,scaling", TWO_LEVEL)
def test_quantize_op_refuses_two_level_scalings(fmt, scaling):
    """W8: codes and block scales alone decoded to x / 126.9 (the tensor scale dropped)."""
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(1))
    with pytest.raises(ValueError) as e:
        torch.ops.fp8sim.quantize(x, fmt, scaling, "a")
    assert "tensor scale" in one_line(e.value)
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode, pytest.raises(ValueError):
        torch.ops.fp8sim.quantize(mode.from_tensor(x), fmt, scaling, "a")
    # fp8sim.quantize gives both levels, and they decode to x's neighbourhood.
    q = fp8sim.quantize(x.numpy(), fmt, scaling)
    assert q.tensor_scales is not None


@pytest.mark.parametrize("fmt,scaling", TWO_LEVEL[:2])
def test_float8linear_refuses_a_two_level_custom_recipe(fmt, scaling):
    g = ft.GemmRecipe(a_format=fmt, b_format=fmt, a_scaling=scaling, b_scaling=scaling,
                      model="nvfp4", promote_every=0)
    with pytest.raises(ValueError) as e:
        ft.Float8Linear(64, 64, recipe=ft.Recipe("custom-nvfp4", g, g, g))
    assert "tensor scale" in one_line(e.value)


INTEGER_DTYPES = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]


@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=str)
def test_float8linear_refuses_integer_input(dtype):
    """W9: integer input came back as integers (truncated; wrapped for uint8)."""
    lin = ft.Float8Linear(128, 128, recipe="fast-accum")
    with pytest.raises(TypeError) as e:
        lin(torch.ones(2, 128, dtype=dtype))
    assert str(dtype) in one_line(e.value)
    with pytest.raises(RuntimeError):  # nn.Linear refuses them too
        torch.nn.Linear(128, 128)(torch.ones(2, 128, dtype=dtype))


BAD_EXPLAIN = [
    (dict(m=0, n=-5, k=0, split_k=2), "m = 0"),
    (dict(m=64, n=-5, k=64, split_k=2), "n = -5"),
    (dict(m=64, n=64, k=0, split_k=2), "k = 0"),
    (dict(m=64, n=64, k=64, split_k=2**70), "split_k"),
    (dict(m=64, n=64, k=64, split_k=0), "split_k"),
    (dict(m=2**31, n=64, k=64, gpu="h100"), "m = "),
    (dict(m=64, n=64, k=64, split_k=2, out_dtype="f64"), "out_dtype"),
    (dict(m=64, n=64, k=64, split_k=2, out_dtype=torch.float64), "out_dtype"),
    (dict(m=64, n=64, k=64, split_k=2, gpu="h900"), "h900"),
    (dict(m=64, n=64, k=64, split_k=2, gpu="missing.json"), "missing.json"),
    (dict(m=64, n=64, k=64, gpu="h100", scale="block2"), "scale"),
    (dict(m=64.0, n=64, k=64, gpu="h100"), "m"),
    (dict(m=64, n=64, k=64, gpu=3), "gpu"),
    (dict(m=64, n=64, k=64, gpu="h100", use_fast_accum="yes"), "use_fast_accum"),
]


@pytest.mark.parametrize("kw,needle", BAD_EXPLAIN, ids=[str(i) for i in range(len(BAD_EXPLAIN))])
def test_explain_refuses_what_is_no_call(kw, needle):
    """W10: explain(m=0, n=-5, k=0, split_k=2) returned a plan."""
    with pytest.raises((ValueError, TypeError)) as e:
        ft.explain(**kw)
    assert needle in one_line(e.value)


def test_explain_good_calls():
    assert ft.explain(64, 64, 64, split_k=2, gpu="h100").split_k == 2
    assert ft.explain(np.int64(64), 64, 65536, out_dtype="f32", use_fast_accum=np.True_,
                      gpu="h100").split_k == 22


BAD_OPS = [
    (lambda: ft.encode(torch.ones(2), seed=2**64, rounding="sr"), "seed", ValueError),
    (lambda: ft.encode(torch.ones(2), seed=1.5, rounding="sr"), "seed", TypeError),
    (lambda: ft.encode(torch.ones(2), fmt=None), "fmt", TypeError),
    (lambda: ft.encode(torch.ones(2), seed=3), "stochastic rounding only", ValueError),
    (lambda: ft.quantize(torch.ones(2, 32), fmt=4), "fmt", TypeError),
    (lambda: ft.gemm(torch.ones(2, 32, dtype=torch.uint8), torch.ones(2, 32, dtype=torch.uint8),
                     promote_every=2**70), "promote_every", ValueError),
    (lambda: ft.gemm(torch.ones(2, 32, dtype=torch.uint8), torch.ones(2, 32, dtype=torch.uint8),
                     model=5), "model", TypeError),
    (lambda: ft.Float8Linear(2**70, 1), "in_features", ValueError),
    (lambda: ft.Float8Linear(64, -1), "out_features", ValueError),
    (lambda: ft.Float8Linear(64.0, 64), "in_features", TypeError),
    (lambda: ft.Float8Linear(64, 64, bias="no"), "bias", TypeError),
]


@pytest.mark.parametrize("call,needle,exc", BAD_OPS, ids=[str(i) for i in range(len(BAD_OPS))])
def test_torch_entries_check_their_arguments(call, needle, exc):
    with pytest.raises(exc) as e:
        call()
    assert needle in one_line(e.value)


def test_scaled_mm_passes_only_what_applies():
    """The presets (cublaslt) and the block size: scaled_mm no longer passes the options a
    preset sets, nor a block without block scales (the library now refuses them)."""
    a = torch.ones(16, 256).to(torch.float8_e4m3fn)
    one = torch.tensor(1.0)
    for fast in (False, True):
        d = ft.scaled_mm(a, a.t(), one, one, out_dtype=torch.float32, use_fast_accum=fast,
                         gpu="h100")
        assert d[0, 0].item() == 256.0
    d = ft.scaled_mm(a, a.t(), one, one, out_dtype=torch.float32, split_k=2, gpu="h100")
    assert d[0, 0].item() == 256.0
    with pytest.raises(ValueError, match="split_k_align applies"):
        ft.scaled_mm(a, a.t(), one, one, out_dtype=torch.float32, split_k_align=256)
