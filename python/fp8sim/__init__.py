"""fp8sim: bit-accurate FP8 numerics from Python, on the same C++ core as the ``fp8sim`` CLI.

Formats (``formats``, ``describe``, ``encode``, ``decode``, ``table``, ``next_up``,
``next_down``, ``ulp``), quantisation as the sweep engine does it (``quantize``), GEMMs
through tensor-core accumulator models (``gemm``, ``mma``, ``models``), sweeps (``sweep``), capture
replay (``replay``) and black-box probing (``probe``). PyTorch integration lives in
``fp8sim.torch`` (``import fp8sim.torch``).

Arrays: NumPy arrays and CPU torch tensors (FP8 dtypes included, viewed as uint8) reach the
core without copies; results are NumPy arrays. ``gemm`` also takes torch CUDA tensors: they
go to the CUDA engine as device pointers (no copy) and the result is a CUDA tensor. Bad input raises ValueError or RuntimeError
carrying the CLI's one-line message.
"""
from __future__ import annotations

import functools as _functools
from typing import Any, Callable, NamedTuple, Optional, Sequence, Union

import numpy as _np

from . import _args, _core

__all__ = [
    "formats", "describe", "encode", "decode", "table", "next_up", "next_down", "ulp",
    "Quantized", "quantize", "gemm", "explain", "kernels", "mma", "models", "sweep", "replay", "probe", "analyze",
    "invariance",
    "as_array", "ArrayLike", "git_revision",
]
__version__: str = _core.version  # CMakeLists.txt's project VERSION, as `fp8sim --version`
git_revision: str = _core.git_revision

ArrayLike = Any  # numpy.ndarray, torch.Tensor (CPU), or anything numpy.asarray takes


def as_array(x: ArrayLike, dtype: Optional[type] = None, fp8: str = "codes") -> _np.ndarray:
    """``x`` as a C-contiguous NumPy array, without a copy where ``x`` already is one.

    torch CPU tensors are viewed through ``Tensor.numpy()`` (shared memory); torch FP8
    tensors (``float8_e4m3fn``, ``float8_e5m2``, ...) are viewed as their uint8 codes
    (``fp8="codes"``) or converted to their float32 values (``fp8="values"``, what the
    functions that take values use), and bf16 tensors, which NumPy cannot hold, come as
    float32 copies (the same values).

    >>> as_array([1.0, 2.0]).dtype
    dtype('float64')
    """
    mod = type(x).__module__
    if mod.startswith("torch"):
        t = x.detach()
        if t.device.type != "cpu":
            raise ValueError(f"tensor on {t.device}: only gemm() and quantize() take CUDA "
                             "tensors; move this argument to the CPU")
        import torch
        if t.dtype.itemsize == 1 and t.dtype.is_floating_point:
            t = t.view(torch.uint8) if fp8 == "codes" else t.float()
        elif t.dtype == torch.bfloat16:
            t = t.float()  # NumPy has no bfloat16; every bf16 value is a float32 value
        x = t.numpy()
    a = _np.asarray(x) if dtype is None else _np.asarray(x, dtype=dtype)
    # _np.ascontiguousarray would make a 0-d array 1-d: a 0-d input keeps its shape ().
    return a if a.flags.c_contiguous else _np.ascontiguousarray(a)


def _real_dtype(a: _np.ndarray, what: str) -> None:
    """Refuses what is not a real number: complex (the imaginary part would be dropped),
    object (None, arbitrary Python objects), strings, booleans, dates; and long double
    (float128), whose values would be rounded twice (to float64, then to the format)."""
    if a.dtype.kind == "f" and a.dtype.itemsize > 8:
        raise ValueError(f"{what}: dtype {a.dtype} values would be rounded twice (to float64 "
                         "first); pass float64 or float32")
    if a.dtype.kind in "fiu" or (a.dtype.kind == "V" and a.dtype.type.__module__ == "ml_dtypes"):
        return
    raise ValueError(f"{what}: dtype {a.dtype} is not a real number type (float or integer "
                     "values only)")


def _values(x: ArrayLike, what: str, dtype: Optional[type] = None) -> _np.ndarray:
    """Real values (FP8 tensors as their values, never their codes), checked by _real_dtype,
    then as `dtype` when given (every value of the checked types is one of float64)."""
    a = as_array(x, fp8="values")
    _real_dtype(a, what)
    return a if dtype is None else _np.ascontiguousarray(a, dtype=dtype)


def _floats(x: ArrayLike) -> _np.ndarray:
    a = _values(x, "x")
    if a.dtype in (_np.float32, _np.float64):
        return a
    f = a.astype(_np.float64)
    if a.dtype.kind in "iu" and a.size and not _np.array_equal(f.astype(a.dtype), a):
        raise ValueError(f"x: {a.dtype} values beyond 2^53 are not all float64 values (they "
                         "would be rounded twice); pass floats")
    return f


def _torch_format(x: ArrayLike) -> Optional[str]:
    """The format a torch FP8 tensor's dtype names (float8_e4m3fn: "e4m3fn"), else None."""
    if not type(x).__module__.startswith("torch"):
        return None
    name = str(x.dtype).replace("torch.", "")
    return name[len("float8_"):] if name.startswith("float8_") else None


@_functools.lru_cache(maxsize=256)
def _same_format(a: str, b: str) -> bool:
    """Whether two format names are one format (aliases: e4m3 and e4m3fn); remembered, as a
    CUDA GEMM on float8 tensors asks it at every call."""
    def key(f):
        d = dict(_core.describe(f))
        d.pop("name", None)
        return sorted(d.items())
    return a == b or key(a) == key(b)


def _codes(x: ArrayLike, dtype: type = _np.uint32, fmt: Optional[str] = None,
           name: str = "codes") -> _np.ndarray:
    """Codes as given; Python ints (int64 arrays) become `dtype` when they all fit it. A
    torch FP8 tensor's codes are those of its dtype's format: `fmt` must be that format."""
    held = _torch_format(x)
    if held is not None and fmt is not None and not _same_format(held, fmt):
        raise ValueError(f"{name}: a {x.dtype} tensor holds {held} codes, but the format "
                         f"is {fmt}: pass {held!r} as the format, or a uint8 view of codes")
    a = as_array(x)
    if a.dtype.kind not in "iu":  # values (float, complex, bool) are encoded first
        raise ValueError(f"{name}: dtype {a.dtype} is not an integer type (codes are unsigned "
                         "integers; values go through fp8sim.encode first)")
    if a.dtype.kind == "i" and (a.size == 0 or (a.min() >= 0 and a.max() <= _np.iinfo(dtype).max)):
        a = a.astype(dtype)
    return a


def formats() -> list[str]:
    """Names of the preset formats (aliases excluded); any ``eXmY`` works too.

    >>> formats()[:4]
    ['e4m3', 'e5m2', 'e5m6', 'e4m3fnuz']
    """
    return list(_core.formats())


def describe(fmt: str) -> dict:
    """A format's fields (widths, bias, special-value convention) and derived values.

    >>> d = describe("e4m3"); d["max"], d["min_subnormal"], d["specials"]
    (448.0, 0.001953125, 'fn')
    """
    return _core.describe(fmt)


def encode(x: ArrayLike, fmt: str, rounding: str = "rne", overflow: str = "saturate",
           seed: Optional[int] = None, sr_bits: Optional[int] = None,
           threads: int = 0) -> _np.ndarray:
    """Codes of ``x`` rounded into ``fmt`` (same bits as ``fp8sim encode``).

    ``rounding`` rne|rz|ru|rd|rna|sr (sr: element i draws ``random_u64(seed, 0, i)``, as the
    CLI does for its i-th value; ``seed``, default 0, and ``sr_bits``, default 32, are for
    sr only), ``overflow`` saturate|nonsat. float32 and float64 inputs
    are rounded from their exact value; the result has x's shape and the smallest unsigned
    dtype that holds the format's codes.

    >>> encode([0.1, 448, 500, 1e-3], "e4m3")
    array([ 29, 126, 126,   1], dtype=uint8)
    >>> encode([0.3] * 4, "e5m2", rounding="sr", seed=7)
    array([53, 52, 53, 52], dtype=uint8)
    """
    for name, value in (("seed", seed), ("sr_bits", sr_bits)):
        if value is not None and rounding != "sr":
            raise ValueError(f"encode: {name} applies to stochastic rounding only "
                             f"(rounding='sr'; rounding is {rounding!r})")
    return _core.encode(_floats(x), fmt, rounding, overflow, 0 if seed is None else seed,
                        32 if sr_bits is None else sr_bits, threads)


def decode(codes: ArrayLike, fmt: str) -> _np.ndarray:
    """Exact float64 values of ``codes`` (uint8/16/32, or a torch FP8 tensor).

    >>> decode([0x7e, 0x01, 0x7f], "e4m3").tolist()
    [448.0, 0.001953125, nan]
    """
    return _core.decode(_codes(codes, fmt=fmt), fmt)


def table(fmt: str) -> tuple[_np.ndarray, _np.ndarray]:
    """Every code of ``fmt`` (at most 16 bits) and its value, as ``fp8sim table``.

    >>> codes, values = table("e2m1"); values[:4]
    array([0. , 0.5, 1. , 1.5])
    """
    return _core.table(fmt)


def next_up(codes: ArrayLike, fmt: str) -> _np.ndarray:
    """Codes of the next larger values (NaN stays NaN; max steps to Inf where there is one).

    >>> next_up([0x7d, 0x80], "e4m3")
    array([126,   1], dtype=uint8)
    """
    return _core.next_up(_codes(codes, fmt=fmt), fmt)


def next_down(codes: ArrayLike, fmt: str) -> _np.ndarray:
    """Codes of the next smaller values.

    >>> next_down([0x00], "e4m3")
    array([129], dtype=uint8)
    """
    return _core.next_down(_codes(codes, fmt=fmt), fmt)


def ulp(codes: ArrayLike, fmt: str) -> _np.ndarray:
    """Unit in the last place at each code: the gap to the next value away from zero (at the
    largest finite value, the gap below it); NaN for Inf and NaN codes.

    >>> ulp([0x38, 0x7e], "e4m3")
    array([ 0.125, 32.   ])
    """
    return _core.ulp(_codes(codes, fmt=fmt), fmt)


class Quantized(NamedTuple):
    """A quantised operand: ``x ~= scales * decode(codes)`` per scale block (times
    ``tensor_scales`` per row for two-level NVFP4 scales).

    ``scales`` has the shape ``gemm`` takes for ``scaling`` (A and its rows; B's blocks one
    row per block); pass ``scaling`` on to ``gemm``, and ``block`` with block scaling
    (``mx_block`` with mx; given with another scaling, they are refused). With ``"nvfp4"``
    the block scales are UE4M3 values for the MMA and ``tensor_scales`` (T x 1, float32) the
    second level: D = fl32(acc * fl32(g_a * g_b)).
    """
    codes: _np.ndarray
    scales: _np.ndarray
    scaling: str
    block: int
    saturated: Optional[int]  # None: not counted (CUDA operands of fp8sim.torch)
    tensor_scales: Optional[_np.ndarray] = None


def quantize(x: ArrayLike, fmt: str = "e4m3", scaling: str = "tensor", rounding: str = "rne",
             role: str = "a", tensor_rows: int = 0, threads: int = 0) -> Quantized:
    """Quantises a T x K array exactly as the sweep engine does (``sim/scaling/scaling.hpp``).

    scaling, the library's names (as ``fp8sim gemm --scaling``, the sweeps and the recipes
    spell them): ``"none"``, ``"tensor"``, ``"row"``, ``"tile128"`` (1 x 128 along K),
    ``"block128"`` (A in 1 x 128 tiles, B -- ``role="b"`` -- in 128 x 128 blocks:
    DeepSeek-V3), ``"mx"`` (1 x 32, E8M0; ``"mx16"`` 1 x 16), ``"nvfp4"`` (1 x 16 UE4M3
    scales under an fp32 tensor scale, NVIDIA's recipe), each optionally with the scales'
    encoding: ``":fp32"`` (default), ``":pow2"``, ``":e8m0"`` (mx: ``":e8m0"`` or
    ``":ue4m3"``), e.g. ``"block128:pow2"``. Elements are ``RNE(x / s)`` with saturation: the
    engine's only rounding, so ``rounding`` must be ``"rne"``. ``tensor_rows`` (0: all T)
    rows share a tensor scale. A torch CUDA tensor (float32, float64, bf16 or fp16; formats of
    at most 8 bits) is quantised on its GPU, read in place: ``codes`` is then a uint8 CUDA
    tensor on that device, the scales NumPy arrays as always, every bit as on the CPU.

    >>> q = quantize([[1.0, -2.0, 896.0, 0.5]], "e4m3")
    >>> q.scales.tolist(), decode(q.codes, "e4m3").tolist(), q.scaling
    ([[2.0]], [[0.5, -1.0, 448.0, 0.25]], 'tensor')
    """
    if rounding != "rne":
        raise ValueError(f"quantize: rounding '{rounding}': the sweep engine quantises with rne")
    if _on_cuda(x):
        return _quantize_cuda(x, fmt, scaling, role, tensor_rows)
    a = _values(x, "x", _np.float64)
    return Quantized(*_core.quantize(a, fmt, scaling, role, tensor_rows, threads))


def gemm(a: ArrayLike, b: ArrayLike, c: Optional[ArrayLike] = None,
         a_format: Optional[str] = None, b_format: Optional[str] = None,
         model: Optional[str] = None, promote_every: Optional[int] = None,
         a_scales: Optional[ArrayLike] = None, b_scales: Optional[ArrayLike] = None,
         scaling: Optional[str] = None, block: Optional[int] = None,
         scale_order: Optional[str] = None, out_type: Optional[str] = None,
         device: Optional[str] = None, threads: Optional[int] = None,
         bias: Optional[ArrayLike] = None, split_k: Optional[int] = None,
         split_k_align: Optional[int] = None, mx_block: Optional[int] = None,
         mx_scale: Optional[str] = None, kernel: Optional[str] = None,
         config: Optional[str] = None, gpu: Optional[str] = None) -> _np.ndarray:
    """D = A B^T through an accumulator model: the same bits as ``fp8sim gemm``.

    ``a`` (M x K) and ``b`` (N x K: each row one column, cuBLASLt's TN) are uint8 codes of
    ``a_format`` / ``b_format`` (default e4m3; or torch FP8 tensors); ``c`` float32 M x N
    enters the first K chunk. Keywords are the CLI's options, every default the library's
    own (``GemmOptions``; None: that default): ``model`` (hopper-wgmma), ``promote_every`` (0 never; default 0), ``a_scales`` /
    ``b_scales`` (float32; MX: uint8 E8M0 codes or float32) with ``scaling``
    none|tensor|row|block|mx (default tensor when scales are given), ``block``,
    ``scale_order`` deepgemm (scales at each chunk) | cublaslt (tensor and row scales once
    after K, as cuBLASLt), ``out_type`` f32|bf16|f16 (D holds the float32 values of that
    type), ``device`` cpu|cuda, ``threads`` (0 all; never changes a result), ``bias`` (N
    float32 values added before the output rounding), ``split_k`` (K slices reduced in fp32,
    cuBLASLt's numSplitsK) and ``split_k_align`` (slice lengths round up to a multiple of it:
    cuBLASLt 128, its block-scaled kernels 512). ``mx_block`` and ``mx_scale`` set MX
    scaling's block and scale format (default: the model's own block scales, as in
    ``model="nvfp4"`` with e2m1 operands and ue4m3 scales per 16, else 32 and ue8m0); with a
    block-scaled model the scales go inside the MMA, not at promotion. ``kernel`` names a
    kernel preset (``kernels()``, ``fp8sim kernels``): it sets the model, the promotion, the
    scale order, the split alignment and the K tail as that kernel does, so those are left
    out. With a Triton kernel (``triton-w8a8-block-fp8``, ``triton-fp8-dot``), ``config`` is
    its launch config, ``"BM,BN,BK,WARPS,STAGES"`` or named keys (``"BLOCK_SIZE_M=16,..."``),
    or ``"vllm"`` / ``"sglang"`` for the config that server picks for this shape on ``gpu``
    (``"h100"`` or ``"h200"``; default h100): the config decides what Triton lowers the dot to
    (``explain``), and one it lowers to an instruction no preset models yet is refused.
    Operands are not copied; the engine decodes each once.

    torch CUDA tensors for ``a`` and ``b`` (and ``c``) run on the CUDA engine on their own
    device and torch's current stream, as device pointers (no copy; they must be
    C-contiguous), and D comes back as a float32 CUDA tensor on that device; ``device`` is
    then None or ``"cuda"``. Scales may be CUDA tensors too (they are small: they are
    copied to the host). FP4 group-sum models (nvfp4, mxf4) read the codes in place; other
    block-scaled models' operands go through the host (one copy each way), as the library's
    dispatcher decides.

    >>> import numpy as np, ml_dtypes; r = np.random.default_rng(0)
    >>> A = r.normal(size=(2, 256)).astype(ml_dtypes.float8_e4m3fn)
    >>> B = r.normal(size=(3, 256)).astype(ml_dtypes.float8_e4m3fn)
    >>> gemm(A.view(np.uint8), B.view(np.uint8))
    array([[ -7.03125  ,  21.326172 ,  -7.1191406],
           [  3.2016602,  30.339844 , -11.560547 ]], dtype=float32)
    """
    options = _gemm_options(a_format=a_format, b_format=b_format, model=model,
                            promote_every=promote_every, scaling=scaling, block=block,
                            scale_order=scale_order, out_type=out_type, threads=threads,
                            split_k=split_k, split_k_align=split_k_align, mx_block=mx_block,
                            mx_scale=mx_scale, kernel=kernel, triton_config=config,
                            gpu=gpu)
    if _on_cuda(a) or _on_cuda(b):
        return _gemm_cuda(a, b, c, a_scales, b_scales, bias, options, device)
    if device is not None:
        options.device = device
    return _core.gemm(_operand(a, "a", options.a_format), _operand(b, "b", options.b_format),
                      None if c is None else _values(c, "c"), _host(a_scales),
                      _host(b_scales), _f32(bias, "bias"), options)


def _gemm_options(**given) -> "_core.GemmOptions":
    """The core's GemmOptions with the arguments given (None: the library's default)."""
    options = _core.GemmOptions()
    for name, value in given.items():
        if value is not None:
            setattr(options, name, value)
    # Given at all (not None): a kernel preset refuses the options it sets even at their
    # default values, and an option that applies to nothing is refused (gemm_inputs.hpp).
    options.given = [name for name, value in given.items() if value is not None]
    return options


def explain(m: int, n: int, k: int, kernel: str, config: Optional[str] = None,
            gpu: str = "h100") -> str:
    """A Triton kernel preset's launch config for an M x N x K GEMM, where it came from, and
    the instruction Triton 3.6 lowers it to on sm_90, as ``fp8sim explain --kernel``
    prints it (``sim/kernel/triton_config.hpp``). ``config``: ``"vllm"`` / ``"sglang"`` (the
    config that server picks on ``gpu``), ``"BM,BN,BK,WARPS,STAGES"`` or named keys, or None
    (the kernel's default). Raises ValueError with one line (a bad config, a GPU with no
    recorded files).

    >>> print(explain(1, 7168, 1024, "triton-w8a8-block-fp8", config="vllm").splitlines()[1])
    config: BLOCK_SIZE_M 16, BLOCK_SIZE_N 64, BLOCK_SIZE_K 128, GROUP_SIZE_M 1, num_warps 4, num_stages 3 (16,64,128,4,3)
    """
    text = _core.triton_plan(kernel, m, n, k, config or "", gpu)[5]
    return f"{kernel} {m}x{n}x{k} on {gpu}\n{text}"


def kernels() -> list[tuple[str, str, str, str, str, str]]:
    """(name, description, parameters, upstream, evidence, not modelled) of every kernel
    preset, as ``fp8sim kernels`` lists them; any name is a ``kernel=`` argument.

    >>> [k[0] for k in kernels()][:2]
    ['cublaslt', 'cublaslt-fast-accum']
    """
    return list(_core.kernels())


def mma(a: ArrayLike, b: ArrayLike, c: Optional[ArrayLike] = None, model: str = "hopper-wgmma",
        a_format: str = "e4m3", b_format: str = "e4m3", a_scales: Optional[ArrayLike] = None,
        b_scales: Optional[ArrayLike] = None) -> _np.ndarray:
    """T independent tensor-core dot products: ``D[t]`` is the model's chain of instructions
    over row t of ``a`` and ``b`` (both T x K codes: uint8, uint16 or uint32, so FP16, BF16
    and TF32 operands too) with ``c[t]`` (float32, default 0) entering the first; each a value
    of the model's output (fp32, or fp16 held in float32), with no promotion or epilogue.

    For a block-scaled model (``models()``'s ``scale=`` models: mxf8f6f4, mxf4, nvfp4)
    ``a_scales`` and ``b_scales`` are T x (K / block) scale codes (uint8) or float32 values of
    the model's scale format; they are applied inside each step, as the hardware does.
    This is the entry the MMA-Sim differential tests use.

    >>> import numpy as np, ml_dtypes
    >>> a = np.array([[1.5, 2, 0.25, -3] * 8], ml_dtypes.float8_e4m3fn).view(np.uint8)
    >>> mma(a, a, np.array([1e-3], np.float32), model="hopper-wgmma")  # c below the cut
    array([122.5], dtype=float32)
    """
    def scales(x):
        return None if x is None else as_array(x)
    return _core.mma(_codes(a, fmt=a_format, name="a"), _codes(b, fmt=b_format, name="b"),
                     None if c is None else _values(c, "c", _np.float32), scales(a_scales),
                     scales(b_scales), a_format, b_format, model)


def _operand(x: ArrayLike, name: str, fmt: str) -> _np.ndarray:
    """A GEMM operand's uint8 codes; float values are refused with what to do instead."""
    a = as_array(x) if _torch_format(x) is None else None  # FP8 tensors: codes, below
    if a is not None and (a.dtype.kind in "fc" or a.dtype.name == "bfloat16"):
        raise ValueError(
            f"{name}: {a.dtype} values, but gemm takes {fmt} codes (uint8): quantize first "
            f"(q = fp8sim.quantize(x, '{fmt}'): codes and scales, as gemm's a_scales/b_scales) "
            f"or encode (fp8sim.encode(x, '{fmt}'): codes, no scaling)")
    return _codes(x, _np.uint8, fmt=fmt, name=name)


def _require_pandas(what: str):
    """pandas, or one line saying how to install it (the [sweep] extra)."""
    try:
        import pandas
    except ModuleNotFoundError:
        raise ModuleNotFoundError(f"fp8sim.{what} needs pandas: pip install 'fp8sim[sweep]' "
                                  "(or pip install pandas)") from None
    return pandas


def _on_cuda(x: ArrayLike) -> bool:
    return type(x).__module__.startswith("torch") and x.device.type == "cuda"


def _f32(x: Optional[ArrayLike], what: str = "bias") -> Optional[_np.ndarray]:
    """A bias (any real array, torch tensors on any device) as float32 host values."""
    if x is None:
        return None
    if type(x).__module__.startswith("torch"):
        if x.dtype.is_complex or x.dtype == _torch_bool():
            raise ValueError(f"{what}: dtype {x.dtype} is not a real number type (float or "
                             "integer values only)")
        x = x.detach().float().cpu()
    return _values(x, what, _np.float32)


def _torch_bool():
    import torch
    return torch.bool


def _host(x: Optional[ArrayLike]) -> Optional[_np.ndarray]:
    """A small argument (scales) as a host array; torch tensors on any device are copied."""
    if x is None:
        return None
    if type(x).__module__.startswith("torch"):
        x = x.detach().cpu()
    return as_array(x)


def models() -> list[tuple[str, str, str, str, str]]:
    """(name, aliases, instruction, parameters, evidence) of every accumulator preset, as
    ``fp8sim models`` lists them. Any name or alias is a ``model=`` argument.

    >>> [m[:2] for m in models() if "hopper-wgmma" in m[1].split()]
    [('sm_90a.wgmma.m64nNk32.f32.f8', 'hopper-wgmma')]
    """
    return list(_core.models())


def sweep(distributions: Sequence[str] = ("gaussian",), k: Sequence[int] = (4096,),
          rho: Sequence[float] = (0.0,), formats: Sequence[str] = ("e4m3",),
          scalings: Sequence[str] = ("none",), promote_every: Sequence[int] = (0,),
          models: Sequence[str] = ("hopper-wgmma",), trials: int = 64, tensor_rows: int = 128,
          seed: int = 1, threads: int = 0, skip_invalid: bool = False):
    """A declarative SNR sweep on the experiments' engine (``sim/analysis/sweep.hpp``): every
    combination of the axes, ``trials`` dot products each, as a pandas DataFrame with the
    experiments' tidy-CSV columns (distribution, k, rho, format, scaling, scale_encoding,
    promote_every, model, group, frac_bits, trial, ref, ref_q, ref_q32, got, snr_db,
    snr_accum_db, rel_err, rel_err_accum, ulp_err, ulp_err_accum). ``df.attrs["skipped"]``
    lists skipped combinations (``skip_invalid=True``). Needs pandas.

    >>> df = sweep(k=[256, 1024], promote_every=[0, 128], trials=4)
    >>> df.groupby(["k", "promote_every"]).size().tolist()
    [4, 4, 4, 4]
    """
    import io
    pd = _require_pandas("sweep")
    csv, skipped = _core.sweep_csv(list(distributions), list(k), list(rho), list(formats),
                                   list(scalings), list(promote_every), list(models), trials,
                                   tensor_rows, seed, threads, skip_invalid)
    df = pd.read_csv(io.StringIO(csv), keep_default_na=False, na_values=["nan"])
    df.attrs["skipped"] = list(skipped)
    return df


def replay(dir: str, model: str = "", promote_every: int = -1, case: str = "",
           threads: int = 0, kernel: str = "") -> dict:
    """Replays a capture folder (``DIR/manifest.json``) as ``fp8sim replay --json`` does:
    the JSON report as a dict (``all_match``; per case ``matches``, ``total``,
    ``first_mismatch``, ``divergence``), each case with the CLI's one-line summary in
    ``line``. ``kernel`` (a kernel preset), ``model`` / ``promote_every`` override every
    case's when given.

    >>> import os; d = os.path.join(os.environ.get("FP8SIM_TEST_DATA", "tests/data"), "hw", "cublaslt_default")
    >>> replay(d, case="one-large_k2048")["cases"][0]["line"]
    'one-large_k2048: 1024/1024 match'
    """
    import json
    text, lines = _core.replay(dir, model, promote_every, case, threads, kernel)
    report = json.loads(text)
    for c, line in zip(report["cases"], lines):
        c["line"] = line
    return report


def _analysis_input(x: ArrayLike, name: str) -> tuple[_np.ndarray, str]:
    """A 2-D float input as float32 values and the dtype they were (f32, bf16, f16)."""
    if type(x).__module__.startswith("torch"):
        import torch
        t = x.detach()
        label = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}.get(t.dtype)
        if label is None:
            raise ValueError(f"{name}: torch dtype {t.dtype}: expected float32, bfloat16 or float16")
        return _np.ascontiguousarray(t.float().cpu().numpy()), label
    a = _np.asarray(x)
    label = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}.get(a.dtype.name)
    if label is None:
        if a.dtype == _np.float64 and _np.array_equal(a.astype(_np.float32).astype(_np.float64), a):
            label = "f32"  # float64 holding float32 values (e.g. Python floats)
        else:
            raise ValueError(f"{name}: dtype {a.dtype}: expected float32, bfloat16 or float16 "
                             "values")
    return _np.ascontiguousarray(a.astype(_np.float32)), label


def analyze(a: ArrayLike, b: ArrayLike, recipes: Sequence[str] = (),
            formats: Sequence[str] = (), scalings: Sequence[str] = (),
            encodings: Sequence[str] = (), models: Sequence[str] = (),
            promote_every: Sequence[int] = (), out_type: Optional[str] = None, stages: bool = True,
            pairs: int = 4096, seed: int = 1, threads: int = 0, device: str = "cpu",
            skip_invalid: bool = False, out: Optional[str] = None):
    """FP8 error analysis of your own tensors, as ``fp8sim analyze``: A (M x K) and B (N x K)
    (float32, bfloat16 or float16; NumPy, ml_dtypes or torch) through named ``recipes``
    ("all": every one) and the grid of ``formats`` x ``scalings`` x ``encodings``
    x ``models`` x ``promote_every``; every named recipe when nothing is asked. Returns a
    pandas DataFrame with the CLI's ``analyze.csv`` columns (one row per recipe: SQNR, its
    row/column quantiles, each stage's share of the error, the pairs' correlation);
    ``df.attrs`` holds ``rows`` and ``pairs`` (the other two CSVs as DataFrames) and
    ``skipped``. ``out``: a folder to write the three CSVs into, byte for byte the CLI's
    (the CLI adds the JSON manifest; ``experiments/plot_analyze.py`` draws the figure),
    written as the CLI writes them: all three or none (a full disk leaves no temporary).
    ``out_type`` (f32|bf16|f16, default f32) applies to the grid only.

    >>> import numpy as np; r = np.random.default_rng(0)
    >>> df = analyze(r.normal(size=(64, 256)).astype(np.float32),
    ...              r.normal(size=(32, 256)).astype(np.float32), recipes=["fast-accum"])
    >>> df[["recipe", "k"]].values.tolist()
    [['fast-accum', 256]]
    """
    import io
    pd = _require_pandas("analyze")
    A, a_dtype = _analysis_input(a, "a")
    B, b_dtype = _analysis_input(b, "b")
    texts = _core.analyze_csv(A, B, a_dtype, b_dtype, list(recipes), list(formats),
                              list(scalings), list(encodings), list(models), list(promote_every),
                              out_type, stages, pairs, seed, threads, device, skip_invalid,
                              "" if out is None else str(out))
    read = lambda t: pd.read_csv(io.StringIO(t), keep_default_na=False, na_values=["nan"])  # noqa: E731
    df = read(texts[0])
    df.attrs.update(rows=read(texts[1]), pairs=read(texts[2]), skipped=list(texts[3]))
    return df


def probe(kernel: Optional[Callable[[_np.ndarray, _np.ndarray, _np.ndarray], ArrayLike]] = None,
          model: str = "hopper-wgmma", promote_every: int = 0, format: str = "e4m3",
          b_format: Optional[str] = None, max_k: int = 4096, max_group: int = 256,
          k_multiple: int = 1) -> dict:
    """Infers a black-box dot-product kernel's accumulator parameters (``sim/analysis/probe.hpp``).

    ``kernel(a, b, c)`` gets T x K uint8 codes ``a``, ``b`` and float32 ``c`` (T,) and
    returns T float32 results of ``c[t] + dot(a[t], b[t])``. Without a kernel the probe
    runs ``model`` promoted every ``promote_every`` (a self-check). The dict holds the
    inferred fields, ``model`` (one line as ``fp8sim models`` prints) and ``evidence``.

    >>> probe(model="hopper-wgmma", promote_every=128)["model"]
    'group=32 frac=13 cut=rz c=join renorm=0 out=e8m13 outround=rz promote_every=128'
    """
    wrapped = None
    if kernel is not None:
        def wrapped(a, b, c):
            return _np.ascontiguousarray(as_array(kernel(a, b, c)), dtype=_np.float32)
    return _core.probe(wrapped, model, promote_every, format, b_format, max_k, max_group,
                       k_multiple)


from ._invariance import invariance  # noqa: E402 (below the helpers it uses)
from ._cuda_tensors import (  # noqa: E402 (below the helpers they use)
    _gemm_cuda, _gemm_cuda_scales_on_device, _quantize_cuda, _quantize_cuda_deferred,
    _written_whole)


# Every public function's arguments checked against its annotations first (_args.py): a
# value the core cannot take raises one line naming the argument.
for _name, _extra in {"describe": {}, "encode": {}, "decode": {}, "table": {}, "next_up": {},
                      "next_down": {}, "ulp": {}, "quantize": {}, "gemm": {}, "mma": {},
                      "sweep": {}, "replay": {"paths": ("dir",)}, "probe": {},
                      "analyze": {"paths": ("out",)}, "explain": {},
                      "invariance": {}}.items():
    globals()[_name] = _args.checked(globals()[_name], name=f"fp8sim.{_name}", **_extra)
del _name, _extra

# The public namespace is __all__ (plus the submodule torch, once imported): the typing names
# this module used at import time go (annotations are strings: `from __future__ import
# annotations`), numpy is _np.
del annotations, Any, Callable, NamedTuple, Optional, Sequence, Union
