# test_float8_linear: Float8Linear's three GEMMs under autograd equal the same three GEMMs
# called directly through the NumPy API (fp8sim.quantize + fp8sim.gemm).
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import fp8sim  # noqa: E402
import fp8sim.torch as ft  # noqa: E402


def direct_mm(g, a, b):
    """A (M x K) times B^T (B: N x K) under GemmRecipe g, with the NumPy API only."""
    qa = fp8sim.quantize(a, g.a_format, g.a_scaling, role="a")
    qb = fp8sim.quantize(b, g.b_format, g.b_scaling, role="b")
    scaled = qa.scaling != "none"
    return fp8sim.gemm(qa.codes, qb.codes, a_format=g.a_format, b_format=g.b_format,
                       model=g.model, promote_every=g.promote_every,
                       a_scales=qa.scales if scaled else None,
                       b_scales=qb.scales if scaled else None,
                       scaling=qa.scaling, scale_order=g.scale_order,
                       block=qa.block if qa.scaling == "block" else None)  # else refused


@pytest.mark.parametrize("name", ["deepseek-v3", "te-tensorwise", "mxfp8", "fast-accum"])
def test_gradients_are_the_three_gemms(name, rng):
    T, IN, OUT = 128, 256, 128
    x = torch.from_numpy(rng.normal(size=(T, IN)).astype(np.float32)).requires_grad_()
    lin = ft.Float8Linear(IN, OUT, recipe=name)
    dy = torch.from_numpy(rng.normal(size=(T, OUT)).astype(np.float32) * 1e-3)
    y = lin(x)
    y.backward(dy)
    r = ft.recipe(name)
    xn, wn, dyn = x.detach().numpy().astype(np.float64), lin.weight.detach().numpy().astype(
        np.float64), dy.numpy().astype(np.float64)
    want_y = direct_mm(r.fprop, xn, wn) + lin.bias.detach().numpy()
    want_dx = direct_mm(r.dgrad, dyn, wn.T.copy())
    want_dw = direct_mm(r.wgrad, dyn.T.copy(), xn.T.copy())
    assert np.array_equal(y.detach().numpy(), want_y), "Fprop"
    assert np.array_equal(x.grad.numpy(), want_dx), "Dgrad"
    assert np.array_equal(lin.weight.grad.numpy(), want_dw), "Wgrad"
    assert torch.equal(lin.bias.grad, dy.sum(0))  # plain torch: bias is not an FP8 GEMM
    # and it is close to the float32 layer (a sanity bound, not the oracle)
    ref = torch.nn.functional.linear(x.detach(), lin.weight.detach(), lin.bias.detach())
    rel = (y.detach() - ref).norm() / ref.norm()
    assert rel < 0.1, f"{name}: relative error {rel:.3g}"


def test_bf16_layers_are_the_three_gemms_on_their_values(rng):
    """A bf16 Float8Linear (NumPy has no bfloat16) quantises the bf16 values themselves: its
    outputs and gradients are the direct GEMMs on those values, rounded to bf16."""
    T, IN, OUT = 128, 256, 128
    r = ft.recipe("deepseek-v3")
    x = torch.from_numpy(rng.normal(size=(T, IN)).astype(np.float32)).bfloat16().requires_grad_()
    lin = ft.Float8Linear(IN, OUT, bias=False, recipe=r).bfloat16()
    dy = torch.from_numpy(rng.normal(size=(T, OUT)).astype(np.float32)).bfloat16()
    y = lin(x)
    y.backward(dy)
    xn, wn, dyn = (t.detach().double().numpy() for t in (x, lin.weight, dy))
    bf16 = lambda d: torch.from_numpy(d).bfloat16()  # noqa: E731
    assert y.dtype == torch.bfloat16 and torch.equal(y.detach(), bf16(direct_mm(r.fprop, xn, wn)))
    assert torch.equal(x.grad, bf16(direct_mm(r.dgrad, dyn, wn.T.copy())))
    assert torch.equal(lin.weight.grad, bf16(direct_mm(r.wgrad, dyn.T.copy(), xn.T.copy())))
    q, want = fp8sim.quantize(x.detach(), "e4m3", "tile128"), fp8sim.quantize(xn, "e4m3", "tile128")
    assert np.array_equal(q.codes, want.codes) and np.array_equal(q.scales, want.scales)


def test_convert_replaces_linears_and_shares_parameters():
    m = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.ReLU(),
                            torch.nn.Sequential(torch.nn.Linear(128, 128)))
    w = m[0].weight
    ft.convert(m, recipe="fast-accum", filter_fn=lambda name, mod: True)
    assert isinstance(m[0], ft.Float8Linear) and isinstance(m[2][0], ft.Float8Linear)
    assert m[0].weight is w
    custom = ft.with_model(ft.recipe("fast-accum"), "exact", 0)
    assert ft.Float8Linear(128, 128, recipe=custom).recipe.fprop.model == "exact"
    with pytest.raises(ValueError, match="unknown recipe 'nope'"):
        ft.recipe("nope")


def test_named_recipes_follow_their_sources(rng):
    """The library's table as Transformer Engine defines per-tensor scaling: its Fprop is
    fast-accum's bit for bit (cuBLASLt fast accumulation), its Dgrad is not (E5M2 gradient,
    split accumulator); DeepSeek-V3 promotes every 128 in all three GEMMs."""
    te, fast = ft.recipe("te-tensorwise"), ft.recipe("fast-accum")
    assert te.fprop == fast.fprop
    assert (te.dgrad.a_format, te.dgrad.promote_every) == ("e5m2", 128)
    assert (te.wgrad.a_format, te.wgrad.promote_every) == ("e5m2", 128)
    ds = ft.recipe("deepseek-v3")
    assert {g.promote_every for g in (ds.fprop, ds.dgrad, ds.wgrad)} == {128}
    assert ds.fprop.a_scaling == "block128"
    T, IN, OUT = 64, 256, 128
    x = torch.from_numpy(rng.normal(size=(T, IN)).astype(np.float32))
    dy = torch.from_numpy(rng.normal(size=(T, OUT)).astype(np.float32))
    out = {}
    for name in ("te-tensorwise", "fast-accum"):
        torch.manual_seed(0)
        lin = ft.Float8Linear(IN, OUT, recipe=name)
        xi = x.clone().requires_grad_()
        y = lin(xi)
        y.backward(dy)
        out[name] = (y.detach(), xi.grad)
    assert torch.equal(out["te-tensorwise"][0], out["fast-accum"][0])
    assert not torch.equal(out["te-tensorwise"][1], out["fast-accum"][1])
    with pytest.raises(ValueError, match="nvfp4.*not modelled by Float8Linear"):
        ft.recipe("nvfp4")
