"""fp8sim._cuda_tensors: quantize() and gemm() on torch CUDA tensors, read in place on their
device and torch's current stream (the CUDA engine), and fp8sim.torch's operands quantised and
multiplied without waiting for the GPU (codes and scales left on the device). Imported by
fp8sim, which calls these from quantize() and gemm()."""
from __future__ import annotations

import functools as _functools

from . import (Quantized, _core, _f32, _gemm_options, _host, _on_cuda, _same_format,
               _torch_format)


def _written_whole(shape, *, dtype, device):
    """A new CUDA tensor that a kernel of the library writes whole before anything reads it:
    not filled first, even under ``torch.use_deterministic_algorithms`` (whose
    ``fill_uninitialized_memory`` writes NaN into every new tensor; 233 fills a step of the
    wide training study, 0.6 ms of its GPU time)."""
    import torch
    import torch.utils.deterministic as det
    if not (torch.are_deterministic_algorithms_enabled() and det.fill_uninitialized_memory):
        return torch.empty(shape, dtype=dtype, device=device)
    layout = torch.empty(shape, dtype=dtype, device="meta")  # torch's strides, no memory
    storage = torch.UntypedStorage(layout.numel() * dtype.itemsize, device=device)
    return torch.empty(0, dtype=dtype, device=device).set_(storage, 0, layout.shape,
                                                           layout.stride())


def _quantize_cuda(x, fmt: str, scaling: str, role: str, tensor_rows: int,
                   count_saturated: bool = True) -> Quantized:
    """quantize() of a torch CUDA tensor on its device and torch's current stream: codes a
    uint8 CUDA tensor, scales on the host (the same bits as on the CPU; computed on the GPU
    and downloaded once). count_saturated False (fp8sim.torch's GEMM operands): ``saturated``
    is None, not counted, and on a stream other than the legacy default one the call returns
    once the scales are known, the codes following in stream order (no wait for them)."""
    import torch
    t = _float_input(x)
    codes = torch.empty(t.shape, dtype=torch.uint8, device=t.device)
    stream = torch.cuda.current_stream(t.device).cuda_stream
    q = Quantized(codes, *_core.quantize_cuda(t, codes, fmt, scaling, role, tensor_rows,
                                               stream, count_saturated))
    return q if count_saturated else q._replace(saturated=None)


def _quantize_cuda_deferred(x, fmt: str, scaling: str, role: str):
    """fp8sim.torch's GEMM operands on the GPU without waiting for it: (uint8 codes, float32
    scales) as CUDA tensors on x's device, written on torch's current stream (one level of
    scales, all rows under one tensor scale). An element that is not finite makes every scale
    NaN, and is raised (ValueError, "x: value at index i is v ...") by the next deferred
    quantisation or ``_core.check_deferred`` once the GPU has got there."""
    import torch
    t = _float_input(x)
    rows, cols = _scale_shape(t.shape[0], t.shape[1], scaling, role)
    new = _written_whole if t.numel() else torch.empty  # no rows: no scales written either
    codes = new(t.shape, dtype=torch.uint8, device=t.device)
    scales = new((rows, cols), dtype=torch.float32, device=t.device)
    _core.quantize_cuda_deferred(t, codes, scales, fmt, scaling, role,
                                 torch.cuda.current_stream(t.device).cuda_stream)
    return codes, scales


@_functools.lru_cache(maxsize=1024)
def _scale_shape(t: int, k: int, scaling: str, role: str) -> tuple:
    return tuple(_core.quantize_scale_shape(t, k, scaling, role))


def _float_input(x):
    """A torch CUDA tensor as the CUDA quantiser reads it: float32 or float64, C-contiguous,
    detached (bf16 and fp16 exactly as float32, other dtypes as float64, as the CPU reads
    them)."""
    import torch
    t = x.detach()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.float()  # exact
    elif t.dtype not in (torch.float32, torch.float64):
        t = t.double()  # as the CPU path reads them
    return t.contiguous()


def _gemm_cuda_scales_on_device(a, b, a_scales, b_scales, **options):
    """gemm() of CUDA codes with the scales ``_quantize_cuda_deferred`` left on the device
    (float32 CUDA tensors of the scale shapes): taken as they are (a NaN scale makes its
    outputs NaN), with no wait for the GPU where the engine reads them there; ``options`` as
    gemm()'s keywords (no c, no bias)."""
    import torch
    new = _written_whole if a.shape[1] else torch.empty  # K = 0: as the engine leaves it
    out = new((a.shape[0], b.shape[0]), dtype=torch.float32, device=a.device)
    _core.gemm_cuda_scales_on_device(a, b, None, out, a_scales, b_scales,
                                     _gemm_options(**options),
                                     torch.cuda.current_stream(a.device).cuda_stream)
    return out


def _gemm_cuda(a, b, c, a_scales, b_scales, bias, options, device):
    """gemm() on torch CUDA tensors: the CUDA engine reads them in place."""
    import torch
    if device not in (None, "cuda"):
        raise ValueError(f"device {device!r}: a and b are CUDA tensors (device must be None or "
                         "'cuda')")
    for name, t in (("a", a), ("b", b), ("c", c)):
        if t is None:
            continue
        if not _on_cuda(t):
            raise ValueError(f"{name}: on {getattr(t, 'device', 'the host')}, while the operands "
                             f"are CUDA tensors on {a.device if _on_cuda(a) else b.device}")
        if not t.is_contiguous():
            raise ValueError(f"{name}: not contiguous (CUDA operands are read in place; call "
                             ".contiguous() first)")

    def codes(t):
        t = t.detach() if t.requires_grad else t
        return t.view(torch.uint8) if t.dtype.itemsize == 1 and t.dtype.is_floating_point else t

    for name, t, fmt in (("a", a, options.a_format), ("b", b, options.b_format)):
        held = _torch_format(t)
        if held is not None and not _same_format(held, fmt):
            raise ValueError(f"{name}: a {t.dtype} tensor holds {held} codes, but the "
                             f"format is {fmt}: pass {name}_format={held!r}, or a uint8 view")

    out = torch.empty((a.shape[0], b.shape[0]), dtype=torch.float32, device=a.device)
    stream = torch.cuda.current_stream(a.device).cuda_stream
    _core.gemm_cuda(codes(a), codes(b), None if c is None else c.detach(), out,
                    _host(a_scales), _host(b_scales), _f32(bias), options, stream)
    return out
