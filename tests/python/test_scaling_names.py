# test_scaling_names: one scaling vocabulary. The names fp8sim.quantize, the recipes and the
# sweeps use (block128, mx16, ...) are gemm's too, and give the bits of the engine's own
# spelling (scaling="block", block=128).
import numpy as np
import pytest

import fp8sim


@pytest.mark.parametrize("name, engine, model", [
    ("block128", dict(scaling="block", block=128), "hopper-wgmma"),
    ("block128:pow2", dict(scaling="block", block=128), "hopper-wgmma"),
    ("mx16", dict(scaling="mx", mx_block=16), "exact"),
    ("mx", dict(scaling="mx"), "hopper-wgmma"),
])
def test_gemm_takes_the_quantisers_scaling_names(name, engine, model):
    """One vocabulary: quantize()'s scaling name, handed to gemm() with its scales, gives the
    bits of the engine's own spelling (the name carries the block), and refuses a block
    given twice."""
    r = np.random.default_rng(5)
    fmt = "e4m3"
    qa = fp8sim.quantize(r.normal(size=(4, 256)), fmt, name)
    qb = fp8sim.quantize(r.normal(size=(6, 256)), fmt, name, role="b")
    common = dict(a_scales=qa.scales, b_scales=qb.scales, model=model,
                  promote_every=16 if model == "exact" else 32)
    got = fp8sim.gemm(qa.codes, qb.codes, scaling=name, **common)
    want = fp8sim.gemm(qa.codes, qb.codes, **engine, **common)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    if name != "mx":
        with pytest.raises(ValueError, match="names its block and scale format"):
            fp8sim.gemm(qa.codes, qb.codes, scaling=name, block=64, **common)
