# test_torch_reuse: Float8Linear quantises an operand once where a later GEMM of the step
# would quantise its transpose to the same bits (Dgrad's W^T from Fprop's W; per-tensor
# scaling also Wgrad's X^T and dY^T), and never elsewhere. The oracle is a fresh quantisation
# of the transpose by fp8sim.quantize (the library's own quantiser, which the reuse skips).
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import fp8sim  # noqa: E402
import fp8sim.torch as ft  # noqa: E402
from fp8sim import _torch_reuse as reuse  # noqa: E402
from fp8sim import _torch_linear  # noqa: E402

SCALINGS = ["none", "tensor", "tensor:pow2", "row", "tile128", "tile128:pow2", "block128",
            "block128:pow2", "mx", "mx16"]
ROLES = [("a", "a"), ("a", "b"), ("b", "b"), ("b", "a")]


def spread(rng, shape):
    """Values whose magnitude differs by scale block and by row (2^-8 .. 2^8): every block's
    scale differs, so a scale or a code moved to the wrong place changes bits."""
    x = rng.normal(size=shape) * np.exp2(rng.integers(-8, 9, size=shape))
    x[: shape[0] // 3] *= 64.0
    return torch.from_numpy(x.astype(np.float32))


def fresh(x, fmt, scaling, role):
    q = fp8sim.quantize(x, fmt, scaling, role=role)
    return torch.from_numpy(q.codes), torch.from_numpy(np.ascontiguousarray(q.scales))


def same_bits(p, q):
    return (p[0].shape == q[0].shape and torch.equal(p[0], q[0]) and p[1].shape == q[1].shape
            and np.array_equal(p[1].numpy().view(np.uint8), q[1].numpy().view(np.uint8)))


@pytest.mark.parametrize("scaling", SCALINGS)
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_reuse_only_where_the_transpose_quantises_to_the_same_bits(rng, scaling, fmt):
    """Where reusable() says yes, the transposed codes and scales are exactly what quantising
    the transpose gives (unequal sides; both multiples of every block, as the transpose's K must
    be); where it says
    no, they are not (DeepSeek's 1 x 128 tiles become 128 x 1 columns, MX blocks likewise, row
    scales become column scales): reuse there would be a wrong answer, not a slower one."""
    for shape in ((384, 640), (256, 128)):
        x = spread(rng, shape)
        for role_from, role_to in ROLES:
            q = fresh(x, fmt, scaling, role_from)
            want = fresh(x.t().contiguous(), fmt, scaling, role_to)
            got = (q[0].t().contiguous(), q[1].t().contiguous())
            if reuse.reusable(fmt, scaling, role_from, fmt, scaling, role_to):
                assert same_bits(got, want), (scaling, role_from, role_to, shape)
            else:
                assert not same_bits(got, want), (scaling, role_from, role_to, shape)
    base = scaling.split(":")[0]
    expected = {"none": 4, "tensor": 4, "block128": 1}.get(base, 0)  # b -> b only for blocks
    assert sum(reuse.reusable(fmt, scaling, a, fmt, scaling, b) for a, b in ROLES) == expected
    assert not reuse.reusable(fmt, scaling, "a", "e5m2" if fmt == "e4m3" else "e4m3", scaling,
                              "a")  # another format: other codes


RECIPES = {name: ft.recipe(name) for name in ("deepseek-v3", "te-tensorwise", "mxfp8",
                                                "fast-accum")}
RECIPES["tensor"] = ft.Recipe("tensor", *(ft.GemmRecipe(promote_every=128),) * 3)
RECIPES["e5m2-grads"] = ft.Recipe("e5m2-grads", ft.GemmRecipe(promote_every=128),
                                  *(ft.GemmRecipe(a_format="e5m2", promote_every=128),) * 2)


@pytest.mark.parametrize("name, plan", [("deepseek-v3", (True, False, False)),
                                        ("te-tensorwise", (True, True, True)),
                                        ("mxfp8", (False, False, False)),
                                        ("fast-accum", (True, True, True)),
                                        ("tensor", (True, True, True)),
                                        ("e5m2-grads", (True, True, True))])
def test_each_recipe_reuses_what_it_may_and_is_checked(rng, monkeypatch, name, plan):
    """The recipes' plans (W for Dgrad, X and dY for Wgrad): DeepSeek-V3 reuses W only (its
    128 x 128 weight blocks transpose into themselves, its 1 x 128 activation and gradient tiles
    do not), MX nothing, per-tensor recipes all three. With every reuse checked against a
    fresh quantisation, a step runs through; the quantisations counted are 6 less what is
    reused."""
    r = RECIPES[name]
    assert _torch_linear._reuse(r) == plan
    monkeypatch.setattr(reuse, "VERIFY", True)
    lin = ft.Float8Linear(256, 384, recipe=r)
    with torch.no_grad():
        lin.weight.copy_(spread(rng, (384, 256)) * 1e-3)
    x = (spread(rng, (128, 256)) * 1e-2).requires_grad_()
    with ft.timed() as t:
        lin(x).square().sum().backward()
    assert (t.gemm_calls, t.quantize_calls) == (3, 6 - sum(plan))


def test_a_reused_operand_that_differs_is_an_error(rng, monkeypatch):
    """The run-time check can fail: a code of Fprop's W changed after its GEMM (as a wrong
    transposition or a stale copy would) is reported at Dgrad, not used."""
    lin = ft.Float8Linear(256, 128, recipe="fast-accum")
    monkeypatch.setattr(reuse, "VERIFY", True)
    real = _torch_linear._quantized

    def spoiled(x, fmt, scaling, role):
        codes, scales = real(x, fmt, scaling, role)
        if role == "b" and x.shape == (128, 256):  # the weight, as Fprop quantises it
            codes = codes.clone()
            codes[3, 5] ^= 1
        return codes, scales

    monkeypatch.setattr(_torch_linear, "_quantized", spoiled)
    y = lin(spread(rng, (64, 256)).requires_grad_())
    with pytest.raises(RuntimeError, match=r"reused transposed operand \(e4m3, tensor, role b\) "
                                           r"differs from a fresh quantisation \(codes\)"):
        y.sum().backward()


def test_gradients_equal_fresh_quantisation_of_every_operand(rng):
    """The gradients with reuse are, bit for bit, those of the three GEMMs each quantising
    its own operands (fp8sim.quantize + fp8sim.gemm through _recipe_mm without saved codes),
    for every recipe, on a non-square weight whose blocks' scales all differ."""
    for name, r in RECIPES.items():
        torch.manual_seed(3)
        lin = ft.Float8Linear(256, 384, recipe=r)
        with torch.no_grad():
            lin.weight.copy_(spread(rng, (384, 256)) * 1e-3)
        x = (spread(rng, (128, 256)) * 1e-2).requires_grad_()
        dy = spread(rng, (128, 384)) * 1e-4
        lin(x).backward(dy)
        w = lin.weight.detach()
        want_dx = _torch_linear._recipe_mm(r.dgrad, dy, w.t().contiguous())
        want_dw = _torch_linear._recipe_mm(r.wgrad, dy.t().contiguous(),
                                           x.detach().t().contiguous())
        assert torch.equal(x.grad, want_dx), name
        assert torch.equal(lin.weight.grad, want_dw), name
