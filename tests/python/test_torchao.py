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
