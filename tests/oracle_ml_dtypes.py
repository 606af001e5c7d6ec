#!/usr/bin/env python3
"""oracle_ml_dtypes: ml_dtypes as a third oracle for fp8sim's rne encodings and its decodings.

For every format ml_dtypes implements, a float32 sample (every value of the format, every
midpoint between neighbours, +-1 and +-2 float32 ulps around both, zeros, infinities, NaNs,
float32 extremes, and 2^20 seeded random bit patterns plus 2^18 seeded values spread over the
format's range, all with both signs) is encoded by fp8sim's scalar encode() (through
test_format_mldtypes_helper) and by `x.astype(ml_dtypes.<type>)`; the codes must match bit
for bit (NaN results: any NaN code). Every code is also decoded by both.

ml_dtypes' overflow conventions, and the fp8sim policy that matches each:
  float8_e4m3fn, float8_e4m3fnuz, float8_e5m2fnuz, float8_e8m0fnu: overflow and +-inf -> NaN
      = fp8sim `nonsat` (these formats have no Inf);
  float8_e5m2, float8_e3m4: overflow -> +-inf = fp8sim `nonsat`;
  float6_e2m3fn, float6_e3m2fn, float4_e2m1fn (no Inf, no NaN): overflow and +-inf clamp to
      +-max finite = fp8sim `saturate`.
Known differences, excluded and counted (fp8sim's contract differs on purpose):
  NaN into float6/float4: ml_dtypes writes a zero code; fp8sim refuses (domain_error).
  +-0 into float8_e8m0fnu: ml_dtypes gives NaN; fp8sim clamps to the smallest scale 2^-127
      (code 0x00), as rounding.hpp documents for e8m0, which has no zero.
  |x| in (2^-127, 1.5 * 2^-127) into float8_e8m0fnu: ml_dtypes 0.5.4 rounds up to 2^-126
      (0x01) although 2^-127 (0x00) is nearer; fp8sim gives 0x00, which the Boost reference
      (test_rounding_boost, bf16 subnormal inputs) confirms. An ml_dtypes error.
Ties in e8m0 (3 = halfway between 2 and 4) go up in both (the carry out of the implicit bit);
an open ml_dtypes pull request (#398) proposes ties to the even exponent instead.
Exit status: 0 pass, 1 mismatch, 77 (printed "waived: ...") when ml_dtypes is missing.
"""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import ml_dtypes
except ImportError as e:  # pragma: no cover
    print(f"waived: {e}")
    sys.exit(77)

# (ml_dtypes type, fp8sim format, matching overflow policy, bits)
FORMATS = [
    ("float8_e4m3fn", "e4m3", "nonsat", 8),
    ("float8_e5m2", "e5m2", "nonsat", 8),
    ("float8_e4m3fnuz", "e4m3fnuz", "nonsat", 8),
    ("float8_e5m2fnuz", "e5m2fnuz", "nonsat", 8),
    ("float8_e3m4", "e3m4", "nonsat", 8),
    ("float6_e2m3fn", "e2m3", "saturate", 6),
    ("float6_e3m2fn", "e3m2", "saturate", 6),
    ("float4_e2m1fn", "e2m1", "saturate", 4),
    ("float8_e8m0fnu", "ue8m0", "nonsat", 8),
]


def run_helper(helper, *args):
    r = subprocess.run([helper, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"oracle_ml_dtypes: helper failed: {r.stderr.strip()}")


def sample(dt, bits, seed):
    """float32 sample for one format: values, midpoints, neighbours, specials, random."""
    codes = np.arange(1 << bits, dtype=np.uint8)
    vals = codes.view(dt).astype(np.float64)
    fin = np.unique(np.abs(vals[np.isfinite(vals)]))
    # Past the top: the midpoint to the first value of an unbounded exponent range.
    top_gap = fin[-1] - fin[-2]
    if dt == ml_dtypes.float8_e8m0fnu:
        top_gap = fin[-1]  # powers of two: the next one is 2 * max
    ext = np.append(fin, fin[-1] + top_gap)
    mids = (ext[:-1] + ext[1:]) / 2
    base = np.concatenate([fin, mids, [fin[-1] + top_gap]])
    base32 = base.astype(np.float32)
    exact = base32.astype(np.float64) == base
    # Every value and midpoint of these formats is a float32, except e8m0's 2^128.
    assert (exact | (base > np.finfo(np.float32).max)).all(), f"{dt}: inexact midpoints"
    base32 = base32[exact]
    parts = [base32]
    bits32 = base32.view(np.uint32)
    for d in (1, 2):
        parts.append((bits32 + d).view(np.float32))
        parts.append((bits32[bits32 >= d] - d).view(np.float32))
    f32 = np.finfo(np.float32)
    parts.append(np.array([0.0, np.inf, np.nan, f32.max, f32.tiny, f32.smallest_subnormal,
                           1e30, 1e-30], dtype=np.float32))
    rng = np.random.default_rng(seed)
    parts.append(rng.integers(0, 1 << 32, size=1 << 20, dtype=np.uint64).astype(np.uint32)
                 .view(np.float32))
    lo, hi = np.log2(fin[fin > 0][0]) - 2, np.log2(fin[-1]) + 2
    parts.append(np.exp2(rng.uniform(lo, hi, size=1 << 18)).astype(np.float32))
    x = np.concatenate(parts).astype(np.float32)
    return np.concatenate([x, -x])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--helper", required=True, help="test_format_mldtypes_helper binary")
    ap.add_argument("--seed", type=int, default=20261123)
    args = ap.parse_args()
    print(f"ml_dtypes {ml_dtypes.__version__}, numpy {np.__version__}, seed {args.seed}")
    failures = 0
    with tempfile.TemporaryDirectory() as tmp, np.errstate(over="ignore"):
        for dt_name, name, policy, bits in FORMATS:
            if not hasattr(ml_dtypes, dt_name):
                print(f"{dt_name}: not in this ml_dtypes, skipped")
                continue
            dt = getattr(ml_dtypes, dt_name)
            # Decodings of every code.
            dec_path = os.path.join(tmp, "dec.npy")
            run_helper(args.helper, "decode", name, dec_path)
            ours = np.load(dec_path)
            theirs = np.arange(1 << bits, dtype=np.uint8).view(dt).astype(np.float64)
            both_nan = np.isnan(ours) & np.isnan(theirs)
            same = both_nan | ((ours.view(np.uint64) == theirs.view(np.uint64)))
            bad_dec = np.flatnonzero(~same)
            for c in bad_dec[:5]:
                print(f"oracle_ml_dtypes decode {name} code=0x{c:02x} => got {ours[c]!r} "
                      f"want {theirs[c]!r}")
            # Encodings of the sample.
            x = sample(dt, bits, args.seed)
            in_path, out_path = os.path.join(tmp, "x.npy"), os.path.join(tmp, "codes.npy")
            np.save(in_path, x)
            run_helper(args.helper, "encode", name, "rne", policy, in_path, out_path)
            got = np.load(out_path).astype(np.int64)
            want = x.astype(dt).view(np.uint8).astype(np.int64)
            nan_code = np.isnan(theirs)
            excluded = np.zeros(x.shape, dtype=bool)
            if not nan_code.any():
                excluded |= np.isnan(x)
            if dt_name == "float8_e8m0fnu":
                excluded |= x == 0
                ax = np.abs(x.astype(np.float64))
                excluded |= (ax > 2.0**-127) & (ax < 1.5 * 2.0**-127)
            ok = (got == want) | ((got >= 0) & nan_code[np.clip(got, 0, (1 << bits) - 1)]
                                  & nan_code[want])
            ok |= excluded
            bad = np.flatnonzero(~ok)
            for i in bad[:5]:
                g = "exception" if got[i] < 0 else f"0x{got[i]:02x}"
                print(f"oracle_ml_dtypes {name} rne {policy} x=0x{x[i:i+1].view(np.uint32)[0]:08x}"
                      f" ({x[i]!r}) => got {g} want 0x{want[i]:02x}")
            print(f"{dt_name:16s} vs fp8sim {name:8s} ({policy}): {x.size} encodings, "
                  f"{bad.size} mismatches, {int(excluded.sum())} excluded; "
                  f"{1 << bits} decodings, {bad_dec.size} mismatches")
            failures += bad.size + bad_dec.size
    if failures:
        print(f"FAILED: {failures} mismatches")
        return 1
    print("all agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
