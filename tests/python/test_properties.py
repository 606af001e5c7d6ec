# test_properties: hypothesis properties of encode / decode / neighbours / quantize, with
# ml_dtypes as the independent oracle for rounding and NumPy re-deriving the scale rules.
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import fp8sim

# format -> (ml_dtypes type, our overflow policy that matches ml_dtypes' convention)
ORACLE = {
    "e4m3": (ml_dtypes.float8_e4m3fn, "nonsat"),
    "e5m2": (ml_dtypes.float8_e5m2, "nonsat"),
    "e4m3fnuz": (ml_dtypes.float8_e4m3fnuz, "nonsat"),
    "e5m2fnuz": (ml_dtypes.float8_e5m2fnuz, "nonsat"),
    "e3m4": (ml_dtypes.float8_e3m4, "nonsat"),
    "e2m3": (ml_dtypes.float6_e2m3fn, "saturate"),
    "e3m2": (ml_dtypes.float6_e3m2fn, "saturate"),
    "e2m1": (ml_dtypes.float4_e2m1fn, "saturate"),
}
floats32 = hnp.arrays(np.float32, st.integers(1, 64),
                      elements=st.floats(width=32, allow_nan=True, allow_infinity=True))


@settings(max_examples=300, deadline=None)
@given(x=floats32, fmt=st.sampled_from(sorted(ORACLE)))
def test_encode_is_ml_dtypes_rounding(x, fmt):
    mt, overflow = ORACLE[fmt]
    if not fp8sim.describe(fmt)["has_nan"]:
        x = x[np.isfinite(x)]  # no NaN code to go to: ValueError, checked below
    got = fp8sim.encode(x, fmt, overflow=overflow)
    want = x.astype(mt).view(np.uint8)
    for xi, g, w in zip(x, got, want):
        if np.isnan(xi):
            assert math.isnan(fp8sim.decode(np.uint8([g]), fmt)[0]), f"{fmt} x={xi} => {g:#x}"
        else:
            assert g == w, f"encode {fmt} x={float(xi).hex()} => got {g:#04x} want {w:#04x}"


def test_nan_into_a_format_without_nan_is_an_error():
    with pytest.raises(ValueError):
        fp8sim.encode(np.float32([np.nan]), "e2m1")


@settings(max_examples=300, deadline=None)
@given(x=st.floats(min_value=-400, max_value=400, allow_nan=False, width=64),
       fmt=st.sampled_from(["e4m3", "e5m2", "e5m6", "e3m4"]))
def test_decode_encode_is_nearest(x, fmt):
    # From float64: the decoded value is at least as near as both neighbours (ties: even).
    c = fp8sim.encode(np.float64([x]), fmt)
    v = fp8sim.decode(c, fmt)[0]
    up = fp8sim.decode(fp8sim.next_up(c, fmt), fmt)[0]
    down = fp8sim.decode(fp8sim.next_down(c, fmt), fmt)[0]
    for n in (up, down):
        if np.isfinite(n):
            assert abs(v - x) <= abs(n - x), f"{fmt} x={x.hex()} => {v} but {n} is nearer"
            if abs(v - x) == abs(n - x):
                assert int(c[0]) % 2 == 0, f"{fmt} x={x.hex()}: tie not to even"


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e3m4", "e2m1", "fp16"])
def test_neighbours_and_ulp(fmt):
    codes, vals = fp8sim.table(fmt)
    fin = np.isfinite(vals)
    c, v = codes[fin], vals[fin]
    up = fp8sim.decode(fp8sim.next_up(c, fmt), fmt)
    down = fp8sim.decode(fp8sim.next_down(c, fmt), fmt)
    # next_up is the smallest value above (among all finite values and +inf)
    order = np.unique(v)
    for vi, ui, di in zip(v, up, down):
        above, below = order[order > vi], order[order < vi]
        assert ui == (above[0] if above.size else (np.inf if fp8sim.describe(fmt)["has_inf"] else vi))
        assert di == (below[-1] if below.size else (-np.inf if fp8sim.describe(fmt)["has_inf"] else vi))
    pos = (v > 0) & (v < fp8sim.describe(fmt)["max"])
    np.testing.assert_array_equal(fp8sim.ulp(c[pos], fmt), up[pos] - v[pos])


def ref_scale(amax, fmt, enc):
    d = fp8sim.describe(fmt)
    if amax == 0:
        return 1.0
    if enc == "fp32":  # kept within fp32's normal range, as pow2 is
        f32 = np.finfo(np.float32)
        return float(min(max(np.float32(amax / d["max"]), f32.tiny), f32.max))
    if enc == "pow2":  # the smallest 2^e >= amax / max, exactly (the quotient may underflow)
        q = Fraction(float(amax)) / Fraction(d["max"])
        e = q.numerator.bit_length() - q.denominator.bit_length() - 1
        while Fraction(2) ** e < q:
            e += 1
        return 2.0 ** min(max(e, -126), 127)
    return 2.0 ** min(max(math.floor(math.log2(amax)) - d["max_exponent"], -127), 127)


def round_exact(v, mt):
    """float64 values v (finite, within the format's range) rounded to the nearest of mt's
    values, ties to the even code, in exact float64 comparisons against ml_dtypes' own table of
    mt's values: mt's codes. ml_dtypes' float64 cast goes through float32 and rounds twice
    (2^-17 (1 + 2^-23.9) to e5m2 gives 0, not the smallest subnormal 2^-16)."""
    codes = np.arange(128, dtype=np.uint8)  # the sign bit apart: 0x80
    vals = codes.view(mt).astype(np.float64)
    codes, vals = codes[np.isfinite(vals)], vals[np.isfinite(vals)]
    order = np.argsort(vals)
    codes, vals = codes[order], vals[order]
    a = np.abs(v)
    hi = np.clip(np.searchsorted(vals, a), 1, len(vals) - 1)
    lo = hi - 1
    mid = (vals[lo] + vals[hi]) / 2  # exact: a few significant bits each
    pick = np.where(a > mid, hi, np.where(a < mid, lo, np.where(codes[lo] % 2 == 0, lo, hi)))
    return codes[pick] | np.where(np.signbit(v), 0x80, 0).astype(np.uint8)


@settings(max_examples=150, deadline=None)
@given(x=hnp.arrays(np.float64, st.tuples(st.integers(1, 5), st.sampled_from([32, 64])),
                    elements=st.floats(-1e4, 1e4)),
       gran=st.sampled_from(["tensor", "row", "tile32", "mx"]),
       enc=st.sampled_from(["fp32", "pow2", "e8m0"]), fmt=st.sampled_from(["e4m3", "e5m2"]))
@example(x=np.full((1, 32), 5e-324), gran="tensor", enc="pow2", fmt="e4m3")  # amax / max underflows
@example(x=np.array([[449.0, 1.1920929e-07] + [0.0] * 30]), gran="tensor", enc="pow2",
         fmt="e5m2")  # x / s just above the midpoint of 0 and e5m2's smallest subnormal
def test_quantize_follows_the_scale_rules(x, gran, enc, fmt):
    if gran == "mx":
        enc = "e8m0"
    q = fp8sim.quantize(x, fmt, f"{gran}:{enc}")
    T, K = x.shape
    nc = {"tensor": K, "row": K, "tile32": 32, "mx": 32}[gran]
    rows = T if gran == "tensor" else 1
    fmax = fp8sim.describe(fmt)["max"]
    mt = ORACLE[fmt][0]
    s_full = np.zeros_like(x)
    for r0 in range(0, T, rows):
        for k0 in range(0, K, nc):
            blk = x[r0:r0 + rows, k0:k0 + nc]
            s_full[r0:r0 + rows, k0:k0 + nc] = np.float32(ref_scale(np.abs(blk).max(), fmt, enc))
    got_s = q.scales if gran != "tensor" else np.full((T, 1), q.scales[0, 0])
    np.testing.assert_array_equal(np.repeat(got_s, K // got_s.shape[1], axis=1), s_full)
    want = round_exact(np.clip(x / s_full, -fmax, fmax), mt)
    np.testing.assert_array_equal(q.codes, want)
    assert q.saturated == int((np.abs(x / s_full) > fmax).sum())
