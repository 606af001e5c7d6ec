# test_cuda: torch CUDA tensors through the CUDA engine -- the CPU engine's bits, in place
# (device pointers, no operand copies), on torch's current stream; ops, opcheck, compile and
# Float8Linear on CUDA. Needs a GPU and a module built with the CUDA engine: skipped otherwise.
import re
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import fp8sim  # noqa: E402
import fp8sim.torch as ft  # noqa: E402

pytestmark = pytest.mark.gpu


def _cuda_engine_reason():
    if not torch.cuda.is_available():
        return "waived: no CUDA device"
    a = torch.zeros(1, 32, dtype=torch.uint8, device="cuda")
    try:
        fp8sim.gemm(a, a)
    except RuntimeError as e:
        return f"waived: {e}"
    return None


@pytest.fixture(scope="module", autouse=True)
def need_cuda_engine():
    reason = _cuda_engine_reason()
    if reason:
        pytest.skip(reason)


def codes(rng, shape, fmt="e4m3", special=False):
    """Random codes of an 8-bit format: normal draws encoded, plus NaN/Inf/zero/subnormal
    codes where special=True."""
    x = rng.normal(scale=4.0, size=shape)
    c = fp8sim.encode(x, fmt).astype(np.uint8)
    if special:
        all_codes, values = fp8sim.table(fmt)
        odd = ~np.isfinite(values) | (values == 0) | (np.abs(values) < 2.0 ** -6)
        pool = all_codes[odd].astype(np.uint8)
        mask = rng.random(size=shape) < 0.02
        c[mask] = rng.choice(pool, size=int(mask.sum()))
    return c


def same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    """Equal bits, NaN equal to any NaN (the engines' NaN payloads differ)."""
    nx, ny = np.isnan(x), np.isnan(y)
    return bool(np.array_equal(nx, ny) and np.array_equal(x.view(np.uint32)[~nx],
                                                          y.view(np.uint32)[~ny]))


GRID = [
    dict(model="hopper-wgmma", promote_every=0),
    dict(model="hopper-wgmma", promote_every=128),
    dict(model="hopper-mma-sync"),
    dict(model="hopper-wgmma-f16", out_type="f16"),
    dict(model="exact", out_type="bf16"),
    dict(model="custom:group=16,frac=20,out=24,cut=rne"),
    dict(model="hopper-wgmma", promote_every=128, scaling="row"),
    dict(model="hopper-wgmma", promote_every=128, scaling="block", scale_order="cublaslt"),
    dict(model="hopper-wgmma", a_format="e5m2", b_format="e4m3"),
    # The library GEMM on the device (split-K slices summed there, the epilogue in place):
    dict(model="hopper-wgmma", scaling="tensor", scale_order="cublaslt", out_type="bf16"),
    dict(model="hopper-wgmma", promote_every=128, scaling="row", scale_order="cublaslt",
         split_k=3, out_type="f16"),
    dict(model="hopper-wgmma", promote_every=128, split_k=2, bias=True, out_type="bf16"),
    dict(model="hopper-wgmma", scaling="block", promote_every=128, split_k=2, split_k_align=128),
]


@pytest.mark.parametrize("kw", GRID, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_cuda_tensors_give_cpu_bits(rng, kw):
    M, N, K = 33, 70, 512
    kw = dict(kw)
    a = codes(rng, (M, K), kw.get("a_format", "e4m3"), special=True)
    b = codes(rng, (N, K), kw.get("b_format", "e4m3"), special=True)
    c = rng.normal(size=(M, N)).astype(np.float32)
    scales = {}
    if kw.pop("bias", False):
        scales["bias"] = rng.normal(size=N).astype(np.float32)
    if kw.get("scaling") == "tensor":
        scales.update(a_scales=np.float32([rng.uniform(0.1, 4)]),
                      b_scales=np.float32([rng.uniform(0.1, 4)]))
    elif kw.get("scaling") == "row":
        scales.update(a_scales=rng.uniform(0.1, 4, size=(M, 1)).astype(np.float32),
                      b_scales=rng.uniform(0.1, 4, size=(N, 1)).astype(np.float32))
    elif kw.get("scaling") == "block":
        scales.update(a_scales=rng.uniform(0.1, 4, size=(M, K // 128)).astype(np.float32),
                      b_scales=rng.uniform(0.1, 4, size=((N + 127) // 128, K // 128)).astype(np.float32))
    want = fp8sim.gemm(a, b, c, **kw, **scales)
    dev = {k: torch.from_numpy(v).cuda() for k, v in scales.items()}
    got = fp8sim.gemm(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(),
                      torch.from_numpy(c).cuda(), **kw, **dev)
    assert got.device.type == "cuda" and got.dtype == torch.float32
    assert same_bits(want, got.cpu().numpy())


def test_fp8_dtypes_in_place_and_on_the_current_stream(rng):
    a = torch.from_numpy(rng.normal(size=(64, 256)).astype(np.float32)).cuda().to(torch.float8_e4m3fn)
    b = torch.from_numpy(rng.normal(size=(48, 256)).astype(np.float32)).cuda().to(torch.float8_e4m3fn)
    pa, pb = a.data_ptr(), b.data_ptr()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        got = fp8sim.gemm(a, b)
    s.synchronize()
    # Operands read in place: neither was replaced, moved or converted by the call.
    assert (a.data_ptr(), b.data_ptr()) == (pa, pb) and a.dtype == torch.float8_e4m3fn
    want = fp8sim.gemm(a.cpu(), b.cpu())
    assert same_bits(want, got.cpu().numpy())


def test_bad_input_on_cuda_is_one_line(rng):
    a = torch.zeros(4, 64, dtype=torch.uint8, device="cuda")
    with pytest.raises(ValueError, match="not contiguous"):
        fp8sim.gemm(a[:, ::2], a[:, ::2])
    with pytest.raises(ValueError, match="CUDA tensors"):
        fp8sim.gemm(a, a.cpu())
    with pytest.raises(RuntimeError, match="K differs|K"):
        fp8sim.gemm(a, a[:, :32].contiguous())
    bad = torch.full((4, 64), 0xF0, dtype=torch.uint8, device="cuda")
    with pytest.raises((ValueError, RuntimeError), match="is not a code of e2m1"):
        fp8sim.gemm(bad, bad, a_format="e2m1", b_format="e2m1")


def test_ops_opcheck_and_compile_on_cuda(rng):
    a = torch.from_numpy(codes(rng, (8, 256))).cuda()
    b = torch.from_numpy(codes(rng, (5, 256))).cuda()
    x = torch.from_numpy(rng.normal(size=(8, 256)).astype(np.float32)).cuda()
    for op, args, kwargs in [
        (torch.ops.fp8sim.gemm.default, (a, b), dict(promote_every=128)),
        (torch.ops.fp8sim.quantize.default, (x,), dict(scaling="block128")),
        (torch.ops.fp8sim.encode.default, (x,), dict(fmt="e5m2")),
    ]:
        torch.library.opcheck(op, args, kwargs)

    def f(a, b):
        return torch.ops.fp8sim.gemm(a, b, promote_every=128) * 2

    got = torch.compile(f, fullgraph=True)(a, b)
    assert same_bits(f(a.cpu(), b.cpu()).numpy(), got.cpu().numpy())


def test_scaled_mm_and_float8_linear_on_cuda_match_cpu(rng):
    a = torch.from_numpy(rng.normal(size=(32, 256)).astype(np.float32)).to(torch.float8_e4m3fn)
    b = torch.from_numpy(rng.normal(size=(64, 256)).astype(np.float32)).to(torch.float8_e4m3fn)
    sa, sb = torch.tensor(0.1234567), torch.tensor(7.654321)
    want = ft.scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16)
    got = ft.scaled_mm(a.cuda(), b.cuda().t(), sa.cuda(), sb.cuda(), out_dtype=torch.bfloat16)
    assert got.device.type == "cuda" and torch.equal(want, got.cpu())

    torch.manual_seed(0)
    cpu = ft.Float8Linear(256, 128, recipe="deepseek-v3")
    gpu = ft.Float8Linear(256, 128, recipe="deepseek-v3").cuda()
    gpu.load_state_dict(cpu.state_dict())
    x = torch.from_numpy(rng.normal(size=(128, 256)).astype(np.float32))
    xc = x.cuda().requires_grad_()
    x.requires_grad_()
    y, yc = cpu(x), gpu(xc)
    y.square().sum().backward()
    yc.square().sum().backward()
    assert torch.equal(y.detach(), yc.detach().cpu())
    assert torch.equal(x.grad, xc.grad.cpu())
    assert torch.equal(cpu.weight.grad, gpu.weight.grad.cpu())


def cpu_and_cuda_linears(rng, recipe, out_features: int, seed: int):
    """A Float8Linear(512, out_features) on the CPU, its copy on CUDA, and one input batch
    (256 x 512, float32, each a leaf that requires grad) for each."""
    torch.manual_seed(seed)
    cpu = ft.Float8Linear(512, out_features, recipe=recipe)
    gpu = ft.Float8Linear(512, out_features, recipe=recipe).cuda()
    gpu.load_state_dict(cpu.state_dict())
    x = torch.from_numpy(rng.normal(scale=3.0, size=(256, 512)).astype(np.float32))
    xc = x.cuda().requires_grad_()
    return cpu, gpu, x.requires_grad_(), xc


@pytest.mark.parametrize("name", ["fast-accum", "frac10", "tensor", "deepseek-v3", "mxfp8"])
def test_float8_linear_recipes_on_cuda_match_cpu_and_are_timed(rng, name):
    """Eager CUDA Float8Linear calls the library directly (codes and scales left on the GPU;
    tensor scales in cuBLASLt's order applied by the library's epilogue there; mxfp8's scales
    downloaded for the engine's host route): the CPU's bits in Fprop, Dgrad and Wgrad; timed()
    sees the CUDA engine's kernels there and none on the CPU."""
    g = ft.GemmRecipe(promote_every=128)
    r = {"tensor": ft.Recipe("tensor", g, g, g),
         "frac10": ft.with_model(ft.recipe("fast-accum"), "custom:group=32,frac=10,out=11", 0),
         }.get(name, name)
    cpu, gpu, x, xc = cpu_and_cuda_linears(rng, r, 256, seed=1)
    with ft.timed() as t_cpu:
        cpu(x).square().sum().backward()
    t0 = time.perf_counter()
    with ft.timed() as t_gpu:
        gpu(xc).square().sum().backward()
    wall = time.perf_counter() - t0  # the block waits for its GEMMs' kernels as it ends
    assert torch.equal(x.grad, xc.grad.cpu())
    assert torch.equal(cpu.weight.grad, gpu.weight.grad.cpu())
    assert (t_cpu.gemm_calls, t_gpu.gemm_calls) == (3, 3)
    # A GEMM on CUDA tensors may return before its kernels end: their time is at most the
    # block's, not the calls'.
    assert t_cpu.kernel_s == 0 and 0 < t_gpu.kernel_s <= wall


@pytest.mark.parametrize("name", ["fast-accum", "deepseek-v3"])
def test_float8_linear_on_cuda_under_deterministic_algorithms(rng, name):
    """Under torch.use_deterministic_algorithms, which fills every new tensor with NaN, but
    not the library's codes, scales, transposed codes and outputs (its kernels write them
    whole): the CPU's bits in the output and both gradients."""
    cpu, gpu, x, xc = cpu_and_cuda_linears(rng, name, 384, seed=2)
    y = cpu(x)
    y.square().sum().backward()
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yc = gpu(xc)
        yc.square().sum().backward()
        torch.cuda.synchronize()
    finally:
        torch.use_deterministic_algorithms(was)
    assert torch.equal(y, yc.cpu())
    assert torch.equal(x.grad, xc.grad.cpu())
    assert torch.equal(cpu.weight.grad, gpu.weight.grad.cpu())


@pytest.mark.parametrize("model,fmt,scale,M,N", [("mxf8f6f4", "e4m3", "ue8m0", 40, 24),
                                                 ("nvfp4", "e2m1", "ue4m3", 40, 24),
                                                 ("nvfp4", "e2m1", "ue4m3", 300, 260),
                                                 ("mxf4", "e2m1", "ue8m0", 300, 260)])
@pytest.mark.parametrize("c", ["none", "finite", "inf"])
def test_block_scaled_models_on_cuda_tensors(rng, model, fmt, scale, M, N, c):
    """Block-scaled MMAs on CUDA tensors: the codes stay on the device for group sums (nvfp4,
    mxf4: the CUDA engine's group-sum kernels) unless C holds an Inf (then, as for mxf8f6f4's
    folded scales, they make a round trip through the host entry), and D comes back on the
    operands' device with the CPU engine's bits."""
    block = 16 if scale == "ue4m3" else 32
    K = 256
    a = codes(rng, (M, K), fmt)
    b = codes(rng, (N, K), fmt)
    sa = fp8sim.decode(fp8sim.encode(np.exp2(rng.integers(-6, 7, (M, K // block))), scale), scale)
    sb = fp8sim.decode(fp8sim.encode(np.exp2(rng.integers(-6, 7, (N, K // block))), scale), scale)
    cm = None if c == "none" else rng.normal(size=(M, N)).astype(np.float32)
    if c == "inf":
        cm[1, 2] = np.inf
    kw = dict(a_format=fmt, b_format=fmt, model=model, scaling="mx", mx_block=block,
              mx_scale=scale)
    want = fp8sim.gemm(a, b, cm, a_scales=sa.astype(np.float32), b_scales=sb.astype(np.float32),
                       **kw)
    got = fp8sim.gemm(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(),
                      None if cm is None else torch.from_numpy(cm).cuda(),
                      a_scales=torch.from_numpy(sa.astype(np.float32)).cuda(),
                      b_scales=torch.from_numpy(sb.astype(np.float32)).cuda(), **kw)
    assert got.is_cuda
    np.testing.assert_array_equal(got.cpu().numpy().view(np.uint32), want.view(np.uint32))


QUANT_FORMATS = ["e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e3m4", "e2m3", "e3m2", "e2m1", "e3m3"]
QUANT_SCALINGS = [("none", "a"), ("tensor", "a"), ("tensor:pow2", "a"), ("tensor:e8m0", "b"),
                  ("row", "a"), ("row:pow2", "b"), ("row:e8m0", "a"), ("tile128", "a"),
                  ("tile128:pow2", "b"), ("tile128:e8m0", "a"), ("block128", "a"),
                  ("block128", "b"), ("block128:pow2", "b"), ("block128:e8m0", "b"),
                  ("mx", "a"), ("mx16", "b"), ("mx:ue4m3", "a"), ("nvfp4", "b")]


def check_quantize_cuda(x, fmt, scaling, role, tensor_rows, where):
    """quantize of the CUDA tensor x against the CPU quantiser on its values as float64:
    every code, scale, tensor scale (bits) and the saturation count; then fp8sim.torch's GEMM
    operands (no saturation count, and the codes not waited for), for tensor_rows and 0 (all
    rows): the same codes and scales, read after the stream's work."""
    x64 = x.double().cpu().numpy()
    want = fp8sim.quantize(x64, fmt, scaling, role=role, tensor_rows=tensor_rows)
    got = fp8sim.quantize(x.cuda(), fmt, scaling, role=role, tensor_rows=tensor_rows)
    assert got.codes.is_cuda and got.codes.dtype == torch.uint8, where
    np.testing.assert_array_equal(got.codes.cpu().numpy(), want.codes, err_msg=where)
    np.testing.assert_array_equal(got.scales.view(np.uint32), want.scales.view(np.uint32),
                                  err_msg=where)
    assert (got.scaling, got.block, got.saturated) == \
        (want.scaling, want.block, want.saturated), where
    assert (got.tensor_scales is None) == (want.tensor_scales is None), where
    if want.tensor_scales is not None:
        np.testing.assert_array_equal(got.tensor_scales.view(np.uint32),
                                      want.tensor_scales.view(np.uint32), err_msg=where)
    # On torch's default stream (the engine's null stream: it waits for the codes) and on a
    # stream of its own (it waits for the scales only, the codes following in stream order).
    for rows in (tensor_rows, 0):
        same = fp8sim.quantize(x64, fmt, scaling, role=role, tensor_rows=rows)
        for stream in (None, side_stream()):
            with torch.cuda.stream(stream):
                fast = fp8sim._quantize_cuda(x.cuda(), fmt, scaling, role, rows,
                                             count_saturated=False)
                codes = fast.codes.cpu().numpy()
            assert fast.saturated is None, where
            np.testing.assert_array_equal(codes, same.codes, err_msg=where)
            np.testing.assert_array_equal(fast.scales.view(np.uint32),
                                          same.scales.view(np.uint32), err_msg=where)
            if same.tensor_scales is not None:
                np.testing.assert_array_equal(fast.tensor_scales.view(np.uint32),
                                              same.tensor_scales.view(np.uint32), err_msg=where)
    # fp8sim.torch's operands, quantised without waiting for the GPU: one level of scales,
    # all rows under one tensor scale, codes and scales left on the device.
    if fp8sim._core.gemm_scaling(scaling) == "none" or \
            fp8sim._core.scaling_is_two_level(scaling):
        return
    same = fp8sim.quantize(x64, fmt, scaling, role=role)
    with torch.cuda.stream(side_stream()):
        c, sc = fp8sim._quantize_cuda_deferred(x.cuda(), fmt, scaling, role)
        c, sc = c.cpu().numpy(), sc.cpu().numpy()
    np.testing.assert_array_equal(c, same.codes, err_msg=where + " deferred")
    np.testing.assert_array_equal(sc.view(np.uint32), same.scales.view(np.uint32),
                                  err_msg=where + " deferred")


_side = []


def side_stream():
    """A CUDA stream of the tests' own (not torch's default one), made once."""
    if not _side:
        _side.append(torch.cuda.Stream())
    return _side[0]


def quant_inputs(rng, fmt, T=200, K=256):
    """Hostile inputs for the quantiser: draws over 2^-40..2^40, and rows where the scale is
    1 (their largest magnitude the format's max, pow2 scales) holding every value of the
    format, every midpoint between neighbours (ties), values just off them, signed zeros and
    magnitudes below half the smallest subnormal."""
    x = rng.normal(size=(T, K)) * np.exp2(rng.integers(-40, 40, size=(T, 1)))
    x[rng.random(size=x.shape) < 0.05] = 0.0
    _, values = fp8sim.table(fmt)
    v = np.unique(np.abs(values[np.isfinite(values)]))
    mids = (v[:-1] + v[1:]) / 2
    special = np.concatenate([v, mids, np.nextafter(mids, 0), np.nextafter(mids, np.inf),
                              [-0.0, v[1] / 2, v[1] / 4, v[-1] * 1.01]])
    special = np.concatenate([special, -special])
    rows = -(-special.size // (K - 1))
    tail = np.zeros(rows * (K - 1))
    tail[:special.size] = rng.permutation(special)
    x[:rows, :-1] = tail.reshape(rows, K - 1)
    x[:rows, -1] = v[-1]  # each such row's largest magnitude: the format's max
    return x


@pytest.mark.parametrize("fmt", QUANT_FORMATS)
def test_quantize_on_cuda_gives_cpu_bits(rng, fmt):
    """quantize of a CUDA tensor (GPU: amax per block, scales, codes) against the CPU
    quantiser: every code, scale, tensor scale and saturation count, for every scaling, in
    float64 (values float32 cannot hold), float32, bf16 and int64 (read as float64, as the CPU
    reads it)."""
    x64 = quant_inputs(rng, fmt)
    for dtype in (torch.float64, torch.float32, torch.bfloat16, torch.int64):
        xt = torch.from_numpy(x64).to(dtype)
        for scaling, role in QUANT_SCALINGS:
            check_quantize_cuda(xt, fmt, scaling, role, 64, f"{fmt} {scaling} role {role} {dtype}")


SCALE_EDGE_SCALINGS = [
    ("none", "a"), ("tensor", "a"), ("tensor:pow2", "b"), ("tensor:e8m0", "a"), ("row", "b"),
    ("row:pow2", "a"), ("row:e8m0", "b"), ("tile32", "a"), ("tile16:pow2", "b"),
    ("tile32:e8m0", "a"), ("block16", "b"), ("block32:pow2", "b"), ("block16:e8m0", "a"),
    ("block32", "a"), ("mx", "a"), ("mx16", "b"), ("mx:ue4m3", "b"), ("mx16:ue4m3", "a")]


def scale_edge_inputs(rng, fmt, T, K, dtype, ue4m3_points):
    """T x K values whose blocks of 16 have chosen largest magnitudes (one element each, the
    rest below it): with ue4m3_points False, powers of two over the dtype's whole range and
    their neighbours, the format's largest value times powers of two, subnormals, the largest
    values and draws; with True, x[0, 0] = 448 * fmax * 2^k (the tensor's largest, so its
    two-level tensor scale is 2^k) and each block's largest a UE4M3 value, midpoint or
    neighbour times fmax * 2^k (the quotient the UE4M3 scale rounds is that point)."""
    info = np.finfo(dtype)
    _, values = fp8sim.table(fmt)
    fmax = float(np.max(np.abs(values[np.isfinite(values)])))
    if ue4m3_points:
        _, u = fp8sim.table("ue4m3")
        u = np.unique(u[np.isfinite(u)])
        pts = np.concatenate([u, (u[:-1] + u[1:]) / 2])
        pts = np.concatenate([pts, np.nextafter(pts, 0), np.nextafter(pts, np.inf)])
        k = int(rng.integers(-20, 20))
        pool = pts[(pts > 0) & (pts < 448)] * fmax * 2.0 ** k
    else:
        e = np.arange(int(np.log2(info.smallest_subnormal)), int(info.maxexp) - 1)
        p2 = np.ldexp(1.0, e).astype(dtype)
        pool = np.concatenate([p2, np.nextafter(p2, dtype(0)), np.nextafter(p2, dtype(np.inf)),
                               (fmax * np.ldexp(1.0, np.arange(-120, 100))).astype(dtype),
                               np.arange(1, 50) * info.smallest_subnormal,
                               [info.max, info.max / 2, info.tiny],
                               rng.normal(size=50) * 1e3]).astype(np.float64)
        pool = np.abs(pool[np.isfinite(pool) & (pool != 0)])
    blocks = T * (K // 16)
    m = rng.choice(pool, size=blocks).astype(dtype).astype(np.float64)
    x = rng.uniform(-1, 1, size=(blocks, 16)) * m[:, None]
    x[np.arange(blocks), rng.integers(16, size=blocks)] = m * rng.choice([-1, 1], size=blocks)
    x = x.reshape(T, K).astype(dtype)
    if ue4m3_points:
        x[0, 0] = 448 * fmax * 2.0 ** k
    return x


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e2m1", "e3m2", "e4m3fnuz"])
def test_quantize_on_cuda_scale_edges(rng, fmt):
    """The scales the GPU computes from its block maxima (every granularity and encoding, B's
    Nc-row blocks included) against the CPU's, on maxima at every edge of scale_for_amax:
    powers of two and their neighbours over float64's and float32's whole range, subnormals,
    the largest values, and UE4M3 values and midpoints under an exact tensor scale; shapes
    with a partial tensor group and a partial block of B's rows."""
    for T, K in [(1, 64), (5, 96), (37, 160), (130, 64)]:
        for dtype in (np.float64, np.float32):
            for points in (False, True):
                x = torch.from_numpy(scale_edge_inputs(rng, fmt, T, K, dtype, points))
                for scaling, role in SCALE_EDGE_SCALINGS:
                    rows = T if points else 5
                    check_quantize_cuda(x, fmt, scaling, role, rows,
                                        f"{fmt} {scaling} role {role} {T}x{K} {dtype.__name__} "
                                        f"{'ue4m3 points' if points else 'edges'}")


def test_quantize_on_cuda_long_rows(rng):
    """Rows longer than one warp's piece (2048 elements): each row's, and the tensor's,
    largest magnitude found across pieces, wherever it lies; and a two-level tensor scale
    over more block maxima than one block of the GPU reduces."""
    for T, K in [(3, 8192), (1, 40960)]:
        x = rng.normal(size=(T, K))
        for t in range(T):
            x[t, rng.integers(K)] = 1e6 * (t + 1)  # one large value per row, anywhere
        for gran in ("tensor", "row", "tile128"):
            want = fp8sim.quantize(x, "e4m3", gran)
            got = fp8sim.quantize(torch.from_numpy(x).cuda(), "e4m3", gran)
            np.testing.assert_array_equal(got.scales, want.scales, err_msg=f"{T}x{K} {gran}")
            np.testing.assert_array_equal(got.codes.cpu().numpy(), want.codes,
                                          err_msg=f"{T}x{K} {gran}")
    # Two-level tensor scales over more block maxima than one piece of the GPU's reduction
    # (8192): 700 x 512 is 22400 maxima in 1 x 16 blocks, 11200 in 1 x 32, the largest in a
    # later piece (and, 300 rows a tensor scale, pieces of two groups).
    x = rng.normal(size=(700, 512))
    x[int(rng.integers(600, 700)), int(rng.integers(512))] = 1e5
    for scaling in ("nvfp4", "mx:ue4m3"):
        for rows in (700, 300):
            check_quantize_cuda(torch.from_numpy(x), "e2m1", scaling, "a", rows,
                                f"700x512 {scaling} tensor_rows {rows}")


def test_quantize_on_cuda_any_row_length(rng):
    """Rows of any length (the encode kernel takes four elements a thread where K is a
    multiple of 4, one elsewhere) and more rows than its grid has blocks (each block walks
    several): the CPU quantiser's codes and scales."""
    for T, K in [(1, 1), (3, 5), (2, 7), (1200, 131), (3000, 12), (2, 4099), (2500, 64)]:
        if K >= 64:
            x = quant_inputs(rng, "e4m3", T, K)
        else:
            x = rng.normal(size=(T, K)) * np.exp2(rng.integers(-40, 40, size=(T, 1)))
        for dtype in (torch.float64, torch.float32):
            for scaling, role in (("tensor", "a"), ("row", "b"), ("none", "a")):
                check_quantize_cuda(torch.from_numpy(x).to(dtype), "e4m3", scaling, role, T,
                                    f"{T}x{K} {scaling} {dtype}")


def test_transposed_codes_on_cuda(rng):
    """The library's transpose of CUDA codes (fp8sim.torch's reused operands) against torch's,
    on shapes with partial tiles on either side, in words and in bytes, on a stream of the
    tests' own; bad arrays refused in one line."""
    for R, C in [(1, 1), (1, 300), (300, 1), (64, 64), (65, 129), (127, 4099), (4096, 1024),
                 (3, 70001), (132, 4100), (4, 68), (8, 6)]:  # 4-byte words where both sides
        # are multiples of 4, single bytes elsewhere
        src = torch.from_numpy(rng.integers(0, 256, size=(R, C), dtype=np.uint8)).cuda()
        out = torch.empty((C, R), dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()  # src copied on the default stream, read on the side stream
        with torch.cuda.stream(side_stream()):
            fp8sim._core.transpose_codes_cuda(src, out, side_stream().cuda_stream)
            got = out.cpu()
        assert torch.equal(got, src.cpu().t().contiguous()), f"{R}x{C}"
    src = torch.zeros(8, 16, dtype=torch.uint8, device="cuda")
    cases = [(src.t(), torch.empty(8, 16, dtype=torch.uint8, device="cuda"),
              r"^src: expected a C-contiguous 2-D uint8 array$"),
             (src, torch.empty(8, 16, dtype=torch.uint8, device="cuda"),
              r"^dst: expected a C-contiguous \(16, 8\) uint8 array$"),
             (src, src.view(16, 8), r"^dst: overlaps src")]
    for a, b, want in cases:
        with pytest.raises(ValueError, match=want):
            fp8sim._core.transpose_codes_cuda(a, b, 0)


def test_one_row_views_are_contiguous_at_every_cuda_entry(rng):
    """torch's rule for C-contiguous arrays at every CUDA entry of the core: a side of 1 may
    have any stride (a one-row slice of a wider tensor is contiguous for torch, and
    .contiguous() returns it as it is). Codes, scales, D and transposes written into such
    views equal those written into fresh tensors; a view torch calls non-contiguous is still
    refused."""
    K, N = 256, 8

    def one_row(dtype, cols):  # row 1 of a wider tensor: stride(0) is cols + 40, not cols
        view = torch.zeros(3, cols + 40, dtype=dtype, device="cuda")[1:2, :cols]
        assert view.is_contiguous() and view.stride(0) != cols
        return view

    x = torch.from_numpy(rng.standard_normal((1, K)).astype(np.float32)).cuda()
    w = torch.from_numpy(rng.standard_normal((N, K)).astype(np.float32)).cuda()
    got, want = one_row(torch.uint8, K), torch.empty(1, K, dtype=torch.uint8, device="cuda")
    scales = [fp8sim._core.quantize_cuda(x, c, "e4m3", "tensor", "a", 0, 0, True)
              for c in (got, want)]
    assert torch.equal(got, want) and str(scales[0]) == str(scales[1])
    rows, cols = fp8sim._cuda_tensors._scale_shape(1, K, "block128", "a")
    assert (rows, cols) == (1, 2)
    codes = [one_row(torch.uint8, K), torch.empty(1, K, dtype=torch.uint8, device="cuda")]
    sc = [one_row(torch.float32, cols), torch.empty(rows, cols, device="cuda")]
    for c, s in zip(codes, sc):
        fp8sim._core.quantize_cuda_deferred(x, c, s, "e4m3", "block128", "a", 0)
    assert torch.equal(codes[0], codes[1]) and torch.equal(sc[0], sc[1])
    wc, ws = fp8sim._quantize_cuda_deferred(w, "e4m3", "block128", "b")
    options = fp8sim._gemm_options(scaling="block128", model="hopper-wgmma", promote_every=128,
                                   scale_order="deepgemm")
    outs = [one_row(torch.float32, N), torch.empty(1, N, device="cuda")]
    for out in outs:
        fp8sim._core.gemm_cuda_scales_on_device(codes[1], wc, None, out, sc[1], ws, options, 0)
    assert same_bits(outs[0].cpu().numpy(), outs[1].cpu().numpy())
    src = one_row(torch.uint8, K)
    src.copy_(want)
    dst = torch.empty(K, 1, dtype=torch.uint8, device="cuda")
    fp8sim._core.transpose_codes_cuda(src, dst, 0)
    assert torch.equal(dst.cpu(), want.cpu().t())
    two_rows = torch.empty(2, K + 40, dtype=torch.uint8, device="cuda")[:, :K]
    with pytest.raises(ValueError, match=r"^codes: expected a C-contiguous \(2, 256\) uint8 "
                                         r"array$"):
        fp8sim._core.quantize_cuda(torch.ones(2, K, device="cuda"), two_rows, "e4m3", "tensor",
                                   "a", 0, 0, True)


def test_quantize_on_cuda_refuses_bad_input_in_one_line():
    x = torch.ones(4, 256, device="cuda")
    x[2, 7] = float("nan")
    with pytest.raises(ValueError, match=r"^x: value at index 519 is nan$"):
        fp8sim.quantize(x, "e4m3", "none")
    with pytest.raises(ValueError, match=r"^x: value at index 519 is nan$"):
        fp8sim.quantize(x, "e4m3", "tile128")
    torch.cuda.synchronize()  # x written on the default stream, read on the side stream
    for scaling in ("tensor", "tile128", "nvfp4"):  # no count, on a stream of its own
        with torch.cuda.stream(side_stream()):
            with pytest.raises(ValueError, match=r"^x: value at index 519 is nan$"):
                fp8sim._quantize_cuda(x, "e4m3", scaling, "a", 0, count_saturated=False)
    with pytest.raises(ValueError, match="format 'fp16' is 16 bits wide"):
        fp8sim.quantize(torch.ones(4, 256, device="cuda"), "fp16")
    with pytest.raises(ValueError, match="not a multiple of the block length 128"):
        fp8sim.quantize(torch.ones(4, 200, device="cuda"), "e4m3", "tile128")
    codes, scales = torch.ops.fp8sim.quantize(torch.ones(3, 32, device="cuda"))
    assert codes.is_cuda and scales.is_cuda


def test_deferred_quantisation_reports_a_bad_value_later():
    """fp8sim.torch's quantisation that does not wait for the GPU: a value that is not finite
    makes every scale NaN (so every output of a GEMM reading them), is raised once by the
    next check (one line, the index and value), and a later quantisation raises it too."""
    fp8sim._core.check_deferred(True)
    for bad, text in ((float("nan"), "nan"), (float("-inf"), "-inf")):
        x = torch.ones(4, 256, device="cuda")
        x[2, 7] = bad
        torch.cuda.synchronize()  # x written on the default stream, read on the side stream
        with torch.cuda.stream(side_stream()):
            w, sw = fp8sim._quantize_cuda_deferred(torch.ones(8, 256, device="cuda"), "e4m3",
                                                   "tensor", "b")
            c, sc = fp8sim._quantize_cuda_deferred(x, "e4m3", "tensor", "a")  # no raise
            d = fp8sim._gemm_cuda_scales_on_device(c, w, sc, sw, scaling="tensor",
                                                   kernel="cublaslt")
            assert torch.isnan(sc).all() and not torch.isnan(sw).any()
            assert torch.isnan(d).all() and d.shape == (4, 8)
        want = rf"^x: value at index 519 is {re.escape(text)} \(found on the GPU after the " \
               r"quantisation returned; every output of the GEMMs that read it is NaN\)$"
        with pytest.raises(ValueError, match=want):
            fp8sim._core.check_deferred(True)
        fp8sim._core.check_deferred(True)  # reported once
    x = torch.ones(4, 256, device="cuda")
    x[0, 3] = float("inf")
    torch.cuda.synchronize()
    with torch.cuda.stream(side_stream()):
        fp8sim._quantize_cuda_deferred(x, "e5m2", "block128", "a")
        side_stream().synchronize()
        with pytest.raises(ValueError, match=r"^x: value at index 3 is inf "):
            fp8sim._quantize_cuda_deferred(torch.ones(4, 256, device="cuda"), "e5m2", "tensor",
                                           "a")
    # Float8Linear: the error by the end of a timed block at the latest (at the weight's
    # quantisation already where the GPU has got there by then).
    lin = ft.Float8Linear(256, 128, recipe="fast-accum").cuda()
    x = torch.ones(16, 256, device="cuda")
    x[1, 1] = float("nan")
    with pytest.raises(ValueError, match=r"^x: value at index 257 is nan \(found on the GPU"):
        with ft.timed():
            lin(x)
    with pytest.raises(ValueError, match="two levels of scales"):
        fp8sim._quantize_cuda_deferred(torch.ones(4, 256, device="cuda"), "e2m1", "nvfp4", "a")
    with pytest.raises(ValueError, match="scaling none has no scales"):
        fp8sim._quantize_cuda_deferred(torch.ones(4, 256, device="cuda"), "e4m3", "none", "a")


DEVICE_SCALE_GEMMS = [  # (the scaling of A and of B, gemm keywords)
    ("tensor", dict(kernel="cublaslt-fast-accum")),
    ("tensor", dict(kernel="cublaslt", split_k=3)),
    ("row", dict(model="hopper-wgmma", promote_every=128, scale_order="cublaslt")),
    ("row", dict(model="hopper-wgmma", promote_every=0, scale_order="deepgemm", split_k=2)),
    ("block128", dict(model="hopper-wgmma", promote_every=128, scale_order="deepgemm")),
    ("block128", dict(kernel="deepgemm-sm90-1d2d")),
    ("block128", dict(model="hopper-wgmma", promote_every=128, split_k=2,
                      split_k_align=512)),
    ("mx", dict(model="mxf8f6f4")),
]


@pytest.mark.parametrize("scaling,kw", DEVICE_SCALE_GEMMS,
                         ids=lambda v: v if isinstance(v, str) else ",".join(
                             f"{k}={x}" for k, x in v.items()))
def test_gemm_with_scales_on_the_device_gives_host_scales_bits(rng, scaling, kw):
    """fp8sim.torch's GEMM of operands quantised on the GPU, the scales read there (or, where
    the engine reads them on the host, downloaded once): the bits of fp8sim.gemm with the same
    scales from the host, on the CPU engine."""
    M, N, K = 96, 80, 1024
    x = torch.from_numpy(rng.normal(scale=3.0, size=(M, K))).float().cuda()
    w = torch.from_numpy(rng.normal(size=(N, K))).float().cuda()
    torch.cuda.synchronize()  # x and w copied on the default stream, read on the side stream
    with torch.cuda.stream(side_stream()):
        ca, sa = fp8sim._quantize_cuda_deferred(x, "e4m3", scaling, "a")
        cb, sb = fp8sim._quantize_cuda_deferred(w, "e4m3", scaling, "b")
        got = fp8sim._gemm_cuda_scales_on_device(ca, cb, sa, sb, scaling=scaling, **kw)
        got = got.cpu().numpy()
    want = fp8sim.gemm(ca.cpu().numpy(), cb.cpu().numpy(), a_scales=sa.cpu().numpy(),
                       b_scales=sb.cpu().numpy(), scaling=scaling, **kw)
    assert same_bits(got, want)


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e4m3fnuz", "e2m1", "ue8m0"])
def test_encode_op_on_cuda_gives_cpu_codes(rng, fmt):
    """fp8sim::encode of a CUDA tensor (GPU for finite values rounded rne with saturation;
    the CPU for NaN/Inf, other roundings and unsigned formats) against the CPU's codes, in the
    input's shape, ties and values beyond the format's range included."""
    _, values = fp8sim.table(fmt)
    v = np.unique(np.abs(values[np.isfinite(values)]))
    ties = (v[:-1] + v[1:]) / 2
    x = np.concatenate([rng.normal(size=4000) * np.exp2(rng.integers(-30, 30, 4000)), ties,
                        -ties, [0.0, -0.0, v[-1] * 3, -v[-1] * 3]])
    x = np.clip(x[: x.size // 4 * 4], -3e38, 3e38).reshape(4, 2, -1).astype(np.float32)
    special = x.copy()
    special[0, 0, :3] = [np.nan, np.inf, -np.inf]
    for arr, kw in [(x, {}), (special, {}), (x, dict(rounding="rz")), (x, dict(overflow="nonsat"))]:
        try:
            want = torch.ops.fp8sim.encode(torch.from_numpy(arr), fmt, **kw)
        except ValueError as e:  # e2m1 has no NaN: NaN and nonsat overflow are refused
            with pytest.raises(ValueError, match=re.escape(str(e))):
                torch.ops.fp8sim.encode(torch.from_numpy(arr).cuda(), fmt, **kw)
            continue
        got = torch.ops.fp8sim.encode(torch.from_numpy(arr).cuda(), fmt, **kw)
        assert got.is_cuda and got.shape == want.shape, (fmt, kw)
        assert torch.equal(got.cpu(), want), (fmt, kw)


def test_analyze_cli_device_cuda_writes_device_cpu_csvs(tmp_path, rng):
    """`fp8sim analyze --device cuda` (nvfp4's unquantised-operand stages on the GPU's
    reference step with block scales) writes the same three CSVs as --device cpu."""
    import ml_dtypes
    from conftest import run_cli

    x = rng.normal(size=(64, 256))
    x[:, rng.choice(256, 4, replace=False)] *= 30
    w = 0.02 * rng.normal(size=(48, 256))
    np.save(tmp_path / "x.npy", x.astype(ml_dtypes.bfloat16))
    np.save(tmp_path / "w.npy", w.astype(ml_dtypes.bfloat16))
    for device in ("cpu", "cuda"):
        run_cli("analyze", "--a", str(tmp_path / "x.npy"), "--b", str(tmp_path / "w.npy"),
                "--recipes", "nvfp4,mxfp8,deepseek-v3", "--pairs", "200", "--quiet",
                "--device", device, "--out", str(tmp_path / device))
    for f in ("analyze.csv", "analyze_rows.csv", "analyze_pairs.csv"):
        assert (tmp_path / "cpu" / f).read_bytes() == (tmp_path / "cuda" / f).read_bytes(), f
