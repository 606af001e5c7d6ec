# test_torch: fp8sim.torch -- opcheck on every op, torch.compile, scaled_mm against
# torch._scaled_mm on CPU where torch computes the same thing, emulate(), zero-copy.
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import fp8sim  # noqa: E402
import fp8sim.torch as ft  # noqa: E402


def fp8(rng, shape, dtype=torch.float8_e4m3fn, integer=False):
    """Random FP8 values; integer=True: integers in [-16, 16] (exact sums in any order)."""
    x = rng.integers(-16, 17, size=shape) if integer else rng.normal(size=shape)
    return torch.from_numpy(np.asarray(x, np.float32)).to(dtype)


def test_opcheck_every_op(rng):
    a = fp8(rng, (4, 256)).view(torch.uint8)
    b = fp8(rng, (3, 256)).view(torch.uint8)
    x = torch.from_numpy(rng.normal(size=(4, 256)).astype(np.float32))
    samples = [
        (torch.ops.fp8sim.gemm.default, (a, b), {}),
        (torch.ops.fp8sim.gemm.default, (a, b, torch.zeros(4, 3), torch.ones(1, 1),
                                         torch.ones(1, 1)),
         dict(scaling="tensor", promote_every=128)),
        (torch.ops.fp8sim.quantize.default, (x,), dict(scaling="block128")),
        (torch.ops.fp8sim.quantize.default, (x,), dict(scaling="block128", role="b")),
        (torch.ops.fp8sim.quantize.default, (x,), dict(scaling="mx")),
        (torch.ops.fp8sim.encode.default, (x,), dict(fmt="e5m2")),
    ]
    for op, args, kwargs in samples:
        torch.library.opcheck(op, args, kwargs)


def test_scaled_mm_equals_torch_where_exact(rng):
    # torch's CPU _scaled_mm (float32 accumulation) and fp8sim's exact model agree wherever
    # the result is exact in fp32 whatever the order: integer-valued operands (|v| <= 16,
    # K = 256: every partial sum is an integer below 2^24) and power-of-two scales.
    for dta, dtb in [(torch.float8_e4m3fn, torch.float8_e4m3fn),
                     (torch.float8_e4m3fn, torch.float8_e5m2)]:
        a = fp8(rng, (16, 256), dta, integer=True)
        b = fp8(rng, (24, 256), dtb, integer=True).t()  # K x N, column-major
        for sa, sb in [(1.0, 1.0), (0.5, 4.0), (2.0 ** -6, 2.0 ** 3)]:
            sa_t, sb_t = torch.tensor(sa), torch.tensor(sb)
            for out in (torch.float32, torch.bfloat16):
                want = torch._scaled_mm(a, b, sa_t, sb_t, out_dtype=out)
                got = ft.scaled_mm(a, b, sa_t, sb_t, out_dtype=out, model="exact")
                assert got.dtype == want.dtype
                assert torch.equal(got, want), f"{dta} x {dtb} scales {sa},{sb} {out}"
                # every model agrees here: the default (cuBLASLt-like) included
                assert torch.equal(ft.scaled_mm(a, b, sa_t, sb_t, out_dtype=out), want)
        sa_r = torch.from_numpy(2.0 ** rng.integers(-4, 5, size=(16, 1)).astype(np.float32))
        sb_r = torch.from_numpy(2.0 ** rng.integers(-4, 5, size=(1, 24)).astype(np.float32))
        try:  # torch's CPU _scaled_mm has row-wise scales since 2.12 (2.11: per-tensor only)
            want = torch._scaled_mm(a, b, sa_r, sb_r, out_dtype=torch.bfloat16)
        except RuntimeError:
            want = None
        if want is not None:
            assert torch.equal(ft.scaled_mm(a, b, sa_r, sb_r, out_dtype=torch.bfloat16), want), "row"
        bias = torch.from_numpy(rng.integers(-8, 9, size=24).astype(np.float32)).to(torch.bfloat16)
        want = torch._scaled_mm(a, b, torch.tensor(1.0), torch.tensor(1.0), bias=bias,
                                out_dtype=torch.bfloat16)
        got = ft.scaled_mm(a, b, torch.tensor(1.0), torch.tensor(1.0), bias=bias,
                           out_dtype=torch.bfloat16)
        assert torch.equal(got, want), "bias"


def test_scaled_mm_is_the_gemm(rng):
    # scaled_mm is fp8sim.gemm with the cuBLASLt default: promote every 128 without fast
    # accumulation, never with it; row-wise scales go to the engine as row scales.
    a, b = fp8(rng, (8, 512)), fp8(rng, (16, 512))
    sa = torch.from_numpy((2.0 ** rng.uniform(-3, 3, size=(8, 1))).astype(np.float32))
    sb = torch.from_numpy((2.0 ** rng.uniform(-3, 3, size=(1, 16))).astype(np.float32))
    for fast, promote in [(False, 128), (True, 0)]:
        got = ft.scaled_mm(a, b.t(), sa, sb, out_dtype=torch.float32, use_fast_accum=fast)
        want = fp8sim.gemm(a, b, a_scales=sa.numpy(), b_scales=sb.numpy().T.copy(), scaling="row",
                           promote_every=promote, scale_order="cublaslt")
        assert np.array_equal(got.numpy().view(np.uint32), want.view(np.uint32))
    # FP8 output: the scaled result rounded with saturation. No plans are recorded for FP8
    # outputs: the split rule decides where it can (K = 512 <= 5120 never splits), and in its
    # split zone, outside the fill boxes (1x1024x20480: 16 tiles x 7 slices), the call is refused.
    one = torch.tensor(1.0)
    d8 = ft.scaled_mm(a, b.t(), one, one, scale_result=torch.tensor(0.5), gpu="h100")
    assert torch.equal(d8.view(torch.uint8), ft.scaled_mm(
        a, b.t(), one, one, scale_result=torch.tensor(0.5), split_k=1).view(torch.uint8))
    long_a, long_b = fp8(rng, (1, 20480)), fp8(rng, (1024, 20480))
    with pytest.raises(ValueError, match="e4m3 tensor fast0"):
        ft.scaled_mm(long_a, long_b.t(), one, one, scale_result=torch.tensor(0.5), gpu="h100")
    d32 = ft.scaled_mm(a, b.t(), one, one, out_dtype=torch.float32)
    assert d8.dtype == torch.float8_e4m3fn
    assert torch.equal(d8.view(torch.uint8),
                       torch.from_numpy(fp8sim.encode(d32.numpy() * np.float32(0.5), "e4m3")))


def test_emulate_routes_unmodified_code(rng):
    a, b = fp8(rng, (8, 256)), fp8(rng, (16, 256))
    one = torch.tensor(1.0)

    def user_code():  # knows nothing of fp8sim
        return torch._scaled_mm(a, b.t(), one, one, out_dtype=torch.float32, use_fast_accum=True)

    with ft.emulate() as mode:
        got = user_code()
    assert mode.calls == 1
    want = fp8sim.gemm(a, b, a_scales=np.ones(1, np.float32), b_scales=np.ones(1, np.float32),
                       scale_order="cublaslt", promote_every=0)
    assert np.array_equal(got.numpy(), want)
    with ft.emulate(model="exact") as mode:
        got = user_code()
    assert np.array_equal(got.numpy(), fp8sim.gemm(a, b, model="exact"))
    if hasattr(torch.nn.functional, "scaled_mm") and hasattr(torch.ops.aten, "_scaled_mm_v2"):
        from torch.nn.functional import ScalingType
        with ft.emulate(model="exact") as mode:
            got = torch.nn.functional.scaled_mm(a, b.t(), one, ScalingType.TensorWise, one,
                                                ScalingType.TensorWise,
                                                output_dtype=torch.float32)
        assert mode.calls == 1 and np.array_equal(got.numpy(), fp8sim.gemm(a, b, model="exact"))


def test_torch_compile_fullgraph(rng):
    a, b = fp8(rng, (8, 256)), fp8(rng, (16, 256))
    one = torch.tensor(1.0)

    def f(a, b):
        return ft.scaled_mm(a, b.t(), one, one, out_dtype=torch.float32) * 2

    got = torch.compile(f, fullgraph=True, backend="aot_eager")(a, b)
    assert torch.equal(got, f(a, b))
    if tuple(int(v) for v in torch.__version__.split(".")[:2]) < (2, 15):
        pytest.skip("waived: torch < 2.15: aot_eager gives Float8Linear zero input gradients")
    lin = ft.Float8Linear(128, 256, recipe="deepseek-v3")
    x = torch.randn(128, 128, generator=torch.Generator().manual_seed(1), requires_grad=True)
    y = torch.compile(lin, fullgraph=True, backend="aot_eager")(x)
    y.sum().backward()
    x2 = x.detach().clone().requires_grad_()
    y2 = lin(x2)
    y2.sum().backward()
    assert torch.equal(y, y2) and torch.equal(x.grad, x2.grad)


def test_zero_copy_by_data_pointer(rng, monkeypatch):
    # The arrays the core receives are the caller's memory: NumPy arrays, torch CPU tensors
    # and torch FP8 tensors (viewed as uint8).
    seen = {}
    real = fp8sim._core.gemm

    def spy(a, b, *rest):
        seen["a"], seen["b"] = a.__array_interface__["data"][0], b.__array_interface__["data"][0]
        return real(a, b, *rest)

    monkeypatch.setattr(fp8sim._core, "gemm", spy)
    an = fp8(rng, (4, 256)).view(torch.uint8).numpy()
    fp8sim.gemm(an, an)
    assert seen["a"] == an.ctypes.data
    t = fp8(rng, (4, 256))
    fp8sim.gemm(t, t.view(torch.uint8))
    assert seen["a"] == t.data_ptr() and seen["b"] == t.data_ptr()
    d = ft.scaled_mm(t, t.t(), torch.tensor(1.0), torch.tensor(1.0), out_dtype=torch.float32,
                     split_k=1)  # 4 x 4 x 256: N below the recorded plans' range
    assert seen["a"] == t.data_ptr() and seen["b"] == t.data_ptr() and d.shape == (4, 4)
    # results come back without a copy either: the tensor shares the engine's buffer
    out = fp8sim.gemm(an, an)
    assert torch.from_numpy(out).data_ptr() == out.ctypes.data


def test_scaled_mm_block_scales_are_the_gemm(rng):
    # DeepSeek-style scales: scale_a M x K/128 (1 x 128 tiles), scale_b K/128 x N/128.
    a, b = fp8(rng, (8, 256)), fp8(rng, (256, 256))
    sa = torch.from_numpy((2.0 ** rng.uniform(-3, 3, size=(8, 2))).astype(np.float32))
    sb = torch.from_numpy((2.0 ** rng.uniform(-3, 3, size=(2, 2))).astype(np.float32))
    got = ft.scaled_mm(a, b.t(), sa, sb.t(), out_dtype=torch.float32)
    want = fp8sim.gemm(a, b, a_scales=sa.numpy(), b_scales=sb.numpy(), scaling="block",
                       promote_every=128, scale_order="cublaslt")
    assert np.array_equal(got.numpy().view(np.uint32), want.view(np.uint32))
    with pytest.raises(ValueError, match="not tensor-wise, row-wise"):
        ft.scaled_mm(a, b.t(), sa[:, :1].t(), sb, out_dtype=torch.float32)


@pytest.mark.parametrize("deterministic", [False, True])
def test_tensors_the_kernels_write_whole_are_plain_tensors(deterministic):
    """fp8sim's buffers for codes, scales and GEMM outputs (_written_whole): a new tensor of
    the shape, dtype, device and strides torch.empty gives, also where deterministic
    algorithms would fill every new tensor (then not filled: the kernels write them whole)."""
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(deterministic)
    try:
        for shape, dtype in [((3, 5), torch.uint8), ((0, 4), torch.float32), ((7,), torch.float32),
                             ((2, 0, 3), torch.uint8), ((1, 1), torch.float32)]:
            t = fp8sim._written_whole(shape, dtype=dtype, device="cpu")
            e = torch.empty(shape, dtype=dtype)
            assert (t.shape, t.stride(), t.dtype, t.device) == (e.shape, e.stride(), e.dtype,
                                                                e.device)
            assert t.is_contiguous() and t.storage_offset() == 0
            t.fill_(3)  # writable, and its own memory
            assert bool((t == 3).all())
    finally:
        torch.use_deterministic_algorithms(was)
