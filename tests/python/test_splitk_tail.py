"""cuBLASLt's split-K sums the whole K, tail included (issue 35, item 4): torch._scaled_mm on an
H100 at 40 calls that cuBLASLt splits (2 to 39 slices) with K mod 128 in {16, 32, 48}
(tests/data/hw/splitk_tail_h100, cuda/capture/capture_splitk_tail.py) against fp8sim's
cublaslt presets with that split, and against the reported alternative (only the first
K - K mod 128 terms summed), which must not match."""
import hashlib
import json
import os

import numpy as np
import pytest

import fp8sim

ml_dtypes = pytest.importorskip("ml_dtypes")
DATA = os.path.join(os.environ.get("FP8SIM_TEST_DATA", "tests/data"), "hw", "splitk_tail_h100")


def cases():
    with open(os.path.join(DATA, "tail.json")) as f:
        doc = json.load(f)
    rng = np.random.default_rng(doc["seed"])
    for c in doc["cases"]:
        draw = lambda rows: (rng.standard_normal((rows, c["k"])) * 2).astype(  # noqa: E731
            np.float32).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
        a, b = draw(c["m"]), draw(c["n"])
        # The same operands as on the GPU (torch's cast and ml_dtypes' agree: checked here).
        assert hashlib.sha256(a.tobytes()).hexdigest() == c["a_sha"], c["tag"]
        assert hashlib.sha256(b.tobytes()).hexdigest() == c["b_sha"], c["tag"]
        yield c, a, b, np.load(os.path.join(DATA, c["tag"] + "_d.npy"))


def test_split_k_sums_the_tail():
    one = np.ones(1, np.float32)
    calls = full = dropped = outputs = 0
    for c, a, b, want in cases():
        kernel = "cublaslt-fast-accum" if c["fast"] else "cublaslt"
        assert c["split_k"] >= 2 and c["k"] % 128 != 0, c["tag"]

        def d(kk):
            return fp8sim.gemm(np.ascontiguousarray(a[:, :kk]), np.ascontiguousarray(b[:, :kk]),
                               a_scales=one, b_scales=one, kernel=kernel, split_k=c["split_k"],
                               out_type=c["out"])
        same = lambda got: int((got.view(np.uint32) == want.view(np.uint32)).sum())  # noqa: E731
        calls += 1
        outputs += want.size
        full += same(d(c["k"]))
        dropped += same(d(c["k"] - c["k"] % 128))
    assert calls == 40
    assert full == outputs, f"{full} of {outputs} outputs with the whole K"
    assert dropped < outputs // 10, f"{dropped} of {outputs} outputs match without the K tail"
