# test_torchao: torchao's float8 training, unmodified, under fp8sim.torch.emulate(): every
# scaled_mm it issues (forward and both backward GEMMs of each Linear) runs through fp8sim.
import numpy as np
import pytest

torch = pytest.importorskip("torch")
float8 = pytest.importorskip("torchao.float8")
import fp8sim.torch as ft  # noqa: E402


def model(seed):
    torch.manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Linear(256, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64))
    float8.convert_to_float8_training(m)
    return m


def test_torchao_float8_training_runs_through_fp8sim(rng, monkeypatch):
    x = torch.from_numpy(rng.normal(size=(32, 256)).astype(np.float32))
    seen = []
    real = ft.scaled_mm

    def recording(*args, **kw):
        d = real(*args, **kw)
        seen.append((args, kw, d))
        return d

    monkeypatch.setattr(ft, "scaled_mm", recording)
    m = model(0)
    with ft.emulate(model="custom:group=32,frac=4,out=24") as mode:
        y = m(x)
        y.square().sum().backward()
    # Two Linears, each Fprop, Dgrad and Wgrad: six scaled_mm calls, all routed.
    assert mode.calls == 6 and len(seen) == 6
    # torchao's operands are FP8 with per-tensor scales: recompute each call directly.
    for args, kw, d in seen:
        assert args[0].dtype in ft.FORMAT_OF_DTYPE and args[1].dtype in ft.FORMAT_OF_DTYPE
        assert torch.equal(real(*args, **kw), d)
    # The route changes the numbers: a 5-bit accumulator is not torch's float32 one.
    monkeypatch.setattr(ft, "scaled_mm", real)
    y_torch = model(0)(x)
    assert not torch.equal(y.detach(), y_torch.detach())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nvfp4_quantize_matches_torchao(seed):
    """fp8sim's nvfp4 scaling against torchao's nvfp4_quantize (two-level: the fp32 tensor
    scale amax / (6 * 448), UE4M3 block scales per 16, E2M1 elements): the same tensor
    scale, block scales and element codes, bit for bit."""
    import fp8sim
    nv = pytest.importorskip("torchao.prototype.mx_formats.nvfp4_tensor")
    kernels = pytest.importorskip("torchao.prototype.mx_formats.kernels")
    rng = np.random.default_rng(seed)
    T, K = 128, 512
    # Blocks spread over 2^-17 .. 2^17 around the tensor's scale, some all zero, so block
    # scales cover UE4M3's range, its clamp at 2^-6 and elements its whole grid.
    x = rng.standard_normal((T, K)) * np.exp2(rng.uniform(-17, 17, (T, K // 16))).repeat(16, 1)
    x[:, :16] *= rng.integers(0, 2, (T, 1))
    x = x.astype(np.float32)
    q = fp8sim.quantize(x, "e2m1", "nvfp4")
    t = torch.from_numpy(x)
    g = nv.per_tensor_amax_to_scale(t.abs().max())
    scales, packed = nv.nvfp4_quantize(t, 16, g)
    assert q.scaling == "mx" and q.block == 16
    assert np.all(q.tensor_scales == np.float32(g.item()))
    np.testing.assert_array_equal(q.scales, scales.float().numpy())
    np.testing.assert_array_equal(q.codes, kernels.unpack_uint4(packed).numpy().reshape(T, K))
