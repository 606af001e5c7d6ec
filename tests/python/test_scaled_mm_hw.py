# test_scaled_mm_hw: fp8sim.torch.scaled_mm against torch._scaled_mm as it ran on an H100 and
# an H200 (cuBLASLt, CUDA 13; captured by cuda/capture/capture_scaled_mm.py into tests/data/hw): every
# scale mode, output type, bias and fast accumulation, and the split-K count cuBLASLt chose.
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import fp8sim.torch as ft  # noqa: E402

DTYPE = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def cases(data_dir, gpu):
    d = os.path.join(data_dir, "hw", f"scaled_mm_{gpu}")
    m = json.load(open(os.path.join(d, "manifest.json")))
    return d, m["cases"]


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_scaled_mm_reproduces_cublaslt(data_dir, gpu):
    d, cs = cases(data_dir, gpu)
    load = lambda key, c: torch.from_numpy(np.load(os.path.join(d, c[key])))  # noqa: E731
    bad = []
    for c in cs:
        a = load("a", c).view(torch.float8_e4m3fn)
        b = load("b", c).view(torch.float8_e4m3fn)  # N x K: torch wants b.t()
        sa, sb = load("sa", c), load("sb", c)
        if c["scaling"] == "tensor":
            sa, sb = sa.reshape(()), sb.reshape(())
        elif c["scaling"] == "row":
            sb = sb.reshape(1, -1)
        else:  # block: B's 128 x 128 scales as torch takes them, (K/128, N/128)
            sb = sb.t()
        out = DTYPE[c["out_type"]]
        bias = None if c.get("bias") is None else load("bias", c).to(out)
        got = ft.scaled_mm(a, b.t(), sa, sb, bias=bias, out_dtype=out,
                           use_fast_accum=c["promote_every"] == 0, split_k=c.get("split_k", 1))
        want = torch.from_numpy(np.load(os.path.join(d, c["d"])))
        if not np.array_equal(got.float().numpy().view(np.uint32), want.numpy().view(np.uint32)):
            bad.append(c["name"])
    assert len(cs) >= 6 and bad == [], f"{len(bad)} of {len(cs)} differ: {bad[:5]}"


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_recorded_plans_give_the_captured_split(data_dir, gpu):
    # The split each captured call ran with (cuBLASLt's trace), against the plan fp8sim's
    # recorded tables give for the whole call's shape: the same, or refused, never another.
    _, cs = cases(data_dir, gpu)
    exact = refused = 0
    wrong = []
    for c in cs:
        M, N, K = (int(x) for x in c["name"].split("_")[0].split("x"))  # the call's shape
        try:
            plan = ft.explain(M, N, K, out_dtype=DTYPE[c["out_type"]],
                              use_fast_accum=c["promote_every"] == 0, scale=c["scaling"],
                              bias=c.get("bias") is not None, gpu=gpu)
        except ValueError:
            refused += 1
            continue
        if plan.split_k == c.get("split_k", 1):
            exact += 1
        else:
            wrong.append(f"{c['name']}: plan {plan.split_k}, cuBLASLt {c.get('split_k', 1)}")
    print(f"{gpu}: {exact} exact, {refused} refused of {len(cs)} captured calls")
    assert wrong == [] and exact >= len(cs) // 2
