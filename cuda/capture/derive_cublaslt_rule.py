"""derive_cublaslt_rule: cuBLASLt's split-K rule for torch._scaled_mm, re-derived from a recorded
table and checked on it and on traced held-out calls; numpy only, no GPU.

    python3 cuda/capture/derive_cublaslt_rule.py --table sim/data/cublaslt_plans_h100.json \
        --traced tests/data/cublaslt_heldout_h100.json [--traced tests/data/cublaslt_gridcheck_h100.json] \
        [--fill-traced tests/data/cublaslt_random_h100.json \
         --fill-traced tests/data/cublaslt_random_odd_h100.json] [--write]

What it derives from the table (each with the recorded points that pin it; the rule itself is
sim/kernel/cublaslt_rule.cpp, which reads the constants this writes):
  1. fast accumulation never changes the split (per output type and scale mode);
  2. scale modes that never split (row scales: a kernel family without split-K);
  3. the slice floor: every recorded split S satisfies K / S > floor, so S <= ceil(K / floor) - 1;
     the floor is the largest multiple of the 128-element K block below min(K / S) over the
     split points (2560 = 20 blocks on the H100 and H200), and no K <= 2 * floor ever splits;
  4. the workspace: every split point needs 4*S*M*max(N, 32) + 16 (or 20) bytes, within torch's
     1 MiB, so S <= (1 MiB - 16) / (4*M*max(N, 32)): M*max(N, 32) > 131070 never splits, in
     every variant (the partial results are FP32 whatever the output, bias or accumulation);
  5. an unsplit neighbourhood: at a recorded N, between two recorded K (and/or two recorded M)
     whose plans all run unsplit, with the same kernel (algo, tile, stages, custom option,
     cluster) at both M, no call splits. Checked by leaving every recorded K, and every
     recorded M, out in turn: the rule must be exact at all of them. (Between two recorded N
     it does not hold: N's divisibility by the tiles changes the plan, e.g. N = 4096 splits
     where 3840 and 4608 do not; nor does "both split alike" carry over, in any direction.)
  6. a bias: the groups whose traced calls with a bias (any dtype; --traced files recorded with
     record_cublaslt_plans.py --bias-dtypes) never split otherwise than their twins without one
     (step 5 and the table then answer calls with a bias too; steps 1 to 4 always do), less
     the groups in the table's split_rule "bias_withdrawn" (a counterexample recorded elsewhere,
     e.g. tensor scales: tests/data/cublaslt_random_h100.json's 36x512x11200).
  7. the fill boxes (the rule's step 6): in the split zone (steps 1 to 3 leave
     S_max = min(S0(K), workspace slices) >= 2), where the output is covered by few of
     cuBLASLt's smallest split-K tiles (64x8 in its column-major view: T = ceil(N/64) *
     ceil(M/8)) even at the most slices, cuBLASLt takes the most slices: S = S_max. Boxes
     "S_max <= r and T * S_max <= c", each the largest with no counterexample among the
     table's points and the traced calls (of every variant given: tensor scales; block scales
     break it at T * S_max = 14), bounded by the largest C and S_max seen exact; "pinned_by"
     names the counterexample that bounds each. Only with --fill-traced: boxes read off the
     grid and the 320-shape traced sets alone overreach (on the H100, wrong at 82 random calls).
Then it runs the rule (rule_split below, the same steps as the C++) over every recorded point,
with the point's K, then its M, left out of step 5, and over each traced file, and prints per
variant: exact, wrong, undecided. --write stores the constants in the table's JSON ("split_rule"), which
is how the rule is re-derived for another GPU: record its table (record_cublaslt_plans.py), then
run this with --write. Exit status 1 if the rule is wrong anywhere.
"""
from __future__ import annotations

import argparse
import bisect
import json
import sys

import numpy as np

K_BLOCK = 128  # the K extent of one wgmma K block of the FP8 kernels (stages "128xAUTO")


def load_table(path: str):
    """(doc, axes m, n, k, split per variant [v, m, n, k] with 0 where no algorithm, and the
    kernel of each point as a number, -1 where no algorithm, and the workspace it needs)."""
    with open(path) as f:
        doc = json.load(f)
    raw = np.fromfile(path[: -len(".json")] + ".bin", dtype="<u2").reshape(-1, 2)
    codes = np.repeat(raw[:, 0], raw[:, 1].astype(np.int64))
    m, n, k = (np.array(doc["axes"][a], dtype=np.int64) for a in "mnk")
    codes = codes.reshape(len(doc["variants"]), len(m), len(n), len(k))
    fi = doc["fields"].index("split_k")
    per_code = np.zeros(65536, dtype=np.int64)
    per_code[: len(doc["configs"])] = [max(1, c[fi]) for c in doc["configs"]]
    per_code[doc.get("none", 65535)] = 0
    # The kernel of each configuration, its split and workspace aside (step 5 compares them).
    kernel_fields = [doc["fields"].index(f) for f in ("algo_id", "tile", "stages", "custom", "cluster")]
    kernels: dict = {}
    per_kernel = np.full(65536, -1, dtype=np.int64)
    per_kernel[: len(doc["configs"])] = [kernels.setdefault(tuple(c[i] for i in kernel_fields), len(kernels))
                                         for c in doc["configs"]]
    per_ws = np.zeros(65536, dtype=np.int64)
    per_ws[: len(doc["configs"])] = [c[doc["fields"].index("workspace_size")] for c in doc["configs"]]
    return doc, m, n, k, per_code[codes], per_kernel[codes], per_ws[codes]


def group(variant: str) -> str:
    """'bf16 tensor fast1' -> 'bf16 tensor': the split does not depend on fast accumulation."""
    return variant.rsplit(" ", 1)[0]


def derive(doc, m, n, k, split, ws) -> dict:
    variants = doc["variants"]
    out: dict = {"k_block": K_BLOCK}
    # 1. fast accumulation: the split at every point the same with and without.
    fast_same = []
    for g in sorted({group(v) for v in variants}):
        idx = [i for i, v in enumerate(variants) if group(v) == g]
        if all((split[i] == split[idx[0]]).all() for i in idx):
            fast_same.append(g)
    out["fast_same_split"] = fast_same
    # 2. scale modes that never split.
    scales = sorted({v.split()[1] for v in variants})
    out["never_split_scales"] = [s for s in scales
                                 if all((split[i] <= 1).all() for i, v in enumerate(variants)
                                        if v.split()[1] == s)]
    # 3. the slice floor.
    kk = np.broadcast_to(k, split.shape)
    sp = split > 1
    bound = (kk[sp] / split[sp]).min()  # the floor must lie below every K / S
    floor = int(np.ceil(bound / K_BLOCK) - 1) * K_BLOCK
    out["slice_floor_k"] = floor
    out["slice_floor_pinned_by"] = f"min K/S over split points = {bound:.2f}"
    s0 = np.maximum(1, -(-kk // floor) - 1)
    viol = int((split > s0).sum())
    if viol:
        raise SystemExit(f"slice floor {floor}: {viol} recorded points split more than it allows")
    # 4. the workspace: a split keeps S partial results of M x max(N, n_min) floats and a header,
    #    all inside the workspace torch gives (1 MiB), so S <= (limit - header) / (4 M max(N, n_min)).
    limit = int(doc["provenance"].get("workspace_limit", 0))
    if not limit:
        raise SystemExit("the table's provenance has no workspace_limit")
    mm = np.broadcast_to(m[None, :, None, None], split.shape)[sp]
    nn = np.broadcast_to(n[None, None, :, None], split.shape)[sp]
    for n_min in (16, 32, 64, 128):
        header = ws[sp] - 4 * split[sp] * mm * np.maximum(nn, n_min)
        if (header >= 0).all() and (header <= 64).all():
            break
    else:
        raise SystemExit("the workspace of the split points follows no 4*S*M*max(N, n) + header")
    out["workspace_limit"] = limit
    out["partial_n_min"] = n_min
    out["workspace_header"] = int(header.min())
    out["workspace_pinned_by"] = (f"{int(sp.sum())} split points need 4*S*M*max(N,{n_min}) + "
                                  f"{sorted(set(int(h) for h in header))} bytes")
    cap = (limit - out["workspace_header"]) // (4 * np.broadcast_to(
        (m[:, None] * np.maximum(n, n_min)[None, :])[None, :, :, None], split.shape))
    viol = int((split > np.maximum(1, cap)).sum())
    if viol:
        raise SystemExit(f"workspace: {viol} recorded points split more than it allows")
    out["groups"] = sorted({group(v) for v in variants})
    return out


def ws_slices(m: int, n: int, r: dict) -> int:
    """The most slices the workspace holds (step 4)."""
    return (r["workspace_limit"] - r["workspace_header"]) // (4 * m * max(n, r["partial_n_min"]))


def s0_of(k: int, floor: int) -> int:
    """The most slices the slice floor allows: the largest S with K / S > floor."""
    return max(1, -(-k // floor) - 1)


FILL_TILE = (64, 8)  # cuBLASLt's smallest split-K tile, its M (torch's N) x its N (torch's M)
FILL_STEPS = (2, 4, 8, 16, 32, None)  # the S_max bounds of the boxes (None: the largest seen)


def fill_measure(m, n, k, r: dict):
    """(S_max, C) of step 6: the most slices steps 2 and 3 allow, and the CTAs of 64x8 tiles
    that many slices launch. Works on numbers and numpy arrays alike."""
    s_max = np.minimum(np.maximum(1, -(-k // r["slice_floor_k"]) - 1),
                       (r["workspace_limit"] - r["workspace_header"]) // (
                           4 * m * np.maximum(n, r["partial_n_min"])))
    return s_max, -(-n // FILL_TILE[0]) * -(-m // FILL_TILE[1]) * s_max


def derive_fill(points: dict, r: dict) -> dict:
    """Step 6's boxes from points {'src': (m, n, k, split, group, bias)} of tensor-scaled calls
    in the split zone: per bound r in FILL_STEPS, the largest c with S = S_max at every point
    with S_max <= r and C <= c. Also the groups (and bias dtypes) the boxes were seen exact for."""
    m, n, k, split = (np.concatenate([p[i] for p in points.values()]) for i in range(4))
    grp = np.concatenate([p[4] for p in points.values()])
    bias = np.concatenate([p[5] for p in points.values()])
    s_max, c = fill_measure(m, n, k, r)
    zone = s_max >= 2
    ok = split == s_max
    boxes = []
    for step in FILL_STEPS:
        lim = s_max.max() + 1 if step is None else step
        bad = zone & ~ok & (s_max <= lim)
        first = c[bad].min() if bad.any() else np.iinfo(np.int64).max
        good = zone & ok & (s_max <= lim) & (c < first)
        if not good.any():
            continue
        box = [int(s_max[good].max()), int(c[good].max())]
        if any(b[0] >= box[0] and b[1] >= box[1] for b in boxes):
            continue
        if bad.any():
            j = np.flatnonzero(bad & (c == first))[0]
            why = (f"{m[j]}x{n[j]}x{k[j]} ({grp[j]}): S_max {s_max[j]}, C {c[j]}, "
                   f"cuBLASLt {split[j]}")
        else:
            why = "no counterexample recorded"
        boxes.append(box + [why])
    inside = np.zeros(len(m), dtype=bool)
    for b in boxes:
        inside |= zone & (s_max <= b[0]) & (c <= b[1])
    groups = sorted({str(g) for g in grp[inside]})
    bias_groups = sorted({str(g) for g, b in zip(grp[inside], bias[inside]) if b != "none"})
    return {"fill_tile": list(FILL_TILE), "fill_boxes": [b[:2] for b in boxes],
            "fill_pinned_by": [b[2] for b in boxes], "fill_groups": groups,
            "fill_bias": bias_groups, "fill_points": int(inside.sum())}


def fill_points_of(doc, m, n, k, split, traced: list) -> dict:
    """The tensor-scaled points of the table and the traced calls, for derive_fill."""
    out = {}
    mm, nn, kk = np.meshgrid(m, n, k, indexing="ij")
    parts = []
    for vi, v in enumerate(doc["variants"]):
        o, scale, _ = v.split()
        if scale != "tensor":
            continue
        have = split[vi] > 0
        parts.append((mm[have], nn[have], kk[have], split[vi][have],
                      np.full(int(have.sum()), f"{o} {scale}"), np.full(int(have.sum()), "none")))
    out["table"] = tuple(np.concatenate([p[i] for p in parts]) for i in range(6))
    for path in traced:
        with open(path) as f:
            h = json.load(f)
        fi = {name: i for i, name in enumerate(h["fields"])}
        rows = [row for row in h["cases"]
                if row[fi["error"]] is None and row[fi["scale"]] == "tensor"]
        if not rows:
            continue
        col = lambda name: [row[fi[name]] for row in rows]  # noqa: E731
        out[path] = (np.array(col("m"), dtype=np.int64), np.array(col("n"), dtype=np.int64),
                     np.array(col("k"), dtype=np.int64),
                     np.maximum(1, np.array([x or 1 for x in col("split_k")], dtype=np.int64)),
                     np.array([f"{o} tensor" for o in col("out")]),
                     np.array([b or "none" for b in col("bias")]))
    return out


def fill_split(c: dict, r: dict):
    """Step 6 for call c: S_max inside a box of a group it was seen for, else None."""
    if "fill_boxes" not in r or c["scale"] != "tensor":
        return None
    g = f"{c['out']} {c['scale']}"
    if g not in r["fill_groups"] or (c["bias"] and g not in r["fill_bias"]):
        return None
    s_max, cc = fill_measure(c["m"], c["n"], c["k"], r)
    if s_max >= 2 and any(s_max <= b[0] and cc <= b[1] for b in r["fill_boxes"]):
        return int(s_max)
    return None


def bracket(axis: list, x: int):
    """[x] if recorded, the recorded values on either side if inside, None outside."""
    j = bisect.bisect_left(axis, x)
    if j < len(axis) and axis[j] == x:
        return [x]
    return None if j == 0 or j == len(axis) else [axis[j - 1], axis[j]]


def rule_split(c: dict, r: dict, recorded=None):
    """The split cuBLASLt picks for call c (m, n, k, out, scale, fast, bias) by the rule r, or
    (None, why) where it is not decided here. recorded(m, n, k) gives (split, kernel) at a grid
    point of the call's variant (split 0: no algorithm, -1: not recorded) for step 5, on r's
    'm_axis' and 'k_axis'."""
    g = f"{c['out']} {c['scale']}"
    bias_ok = c["bias"] is None or g in r["bias_same_split"]
    if c["scale"] in r["never_split_scales"]:
        return 1, "scale never splits"
    if s0_of(c["k"], r["slice_floor_k"]) <= 1:
        return 1, "K <= 2 x slice floor"
    if ws_slices(c["m"], c["n"], r) <= 1:  # any variant: the partial results are FP32
        return 1, "two slices do not fit the workspace"
    fill = fill_split(c, r)
    if fill is not None:
        return fill, "fill box"
    if not bias_ok:
        return None, "bias"
    if g not in r["groups"] or (c["fast"] and g not in r["fast_same_split"]):
        return None, "variant"
    if recorded is not None:
        ms, ks = bracket(r["m_axis"], c["m"]), bracket(r["k_axis"], c["k"])
        if ms and ks and len(ms) + len(ks) > 2:
            plans = {(mm, kk): recorded(mm, c["n"], kk) for mm in ms for kk in ks}
            if all(p[0] == 1 for p in plans.values()) and all(
                    plans[(ms[0], kk)][1] == plans[(ms[-1], kk)][1] for kk in ks):
                return 1, "unsplit neighbourhood"
    return None, "split zone"


def check_table(doc, m, n, k, split, kernel, r) -> dict:
    """The rule at every recorded point, step 5 with the point's K left out (its K neighbours on
    the grid in its place) or its M left out: decided where either way decides, and wrong if
    either way is wrong."""
    res = {}
    for vi, v in enumerate(doc["variants"]):
        out, scale, fast = v.split()
        S, Kn = split[vi], kernel[vi]
        mm = m[:, None, None] * np.ones_like(S)
        nn = n[None, :, None] * np.ones_like(S)
        kk = k[None, None, :] * np.ones_like(S)
        g = f"{out} {scale}"
        dec = np.zeros(S.shape, dtype=np.int64)
        if scale in r["never_split_scales"]:
            dec[:] = 1
        else:
            s0 = np.maximum(1, -(-kk // r["slice_floor_k"]) - 1)
            dec[s0 <= 1] = 1
            cap = (r["workspace_limit"] - r["workspace_header"]) // (
                4 * mm * np.maximum(nn, r["partial_n_min"]))
            dec[cap <= 1] = 1
            # step 6: the fill boxes (tensor scales, the groups they were seen exact for).
            if scale == "tensor" and g in r.get("fill_groups", []):
                s_max, cc = fill_measure(mm, nn, kk, r)
                box = np.zeros(S.shape, dtype=bool)
                for b in r["fill_boxes"]:
                    box |= (s_max >= 2) & (s_max <= b[0]) & (cc <= b[1])
                dec[(dec == 0) & box] = s_max[(dec == 0) & box]
            if g in r["groups"] and (fast == "fast0" or g in r["fast_same_split"]):
                # step 5, K index l left out: K neighbours l-1 and l+1 unsplit.
                k_out = np.zeros(S.shape, dtype=bool)
                k_out[:, :, 1:-1] = (S[:, :, :-2] == 1) & (S[:, :, 2:] == 1)
                # step 5, M index i left out: M neighbours unsplit with the same kernel.
                m_out = np.zeros(S.shape, dtype=bool)
                m_out[1:-1] = (S[:-2] == 1) & (S[2:] == 1) & (Kn[:-2] == Kn[2:])
                dec[(dec == 0) & (k_out | m_out)] = 1
        have = S > 0
        res[v] = {"exact": int((have & (dec > 0) & (dec == S)).sum()),
                  "wrong": int((have & (dec > 0) & (dec != S)).sum()),
                  "undecided": int((have & (dec == 0)).sum())}
    return res


def bias_evidence(paths: list) -> dict:
    """Per group ('<out> <scale>'), how many traced calls with a bias (of any dtype) have a twin
    without one (same shape and variant) in the same file, and at how many the split differs."""
    out: dict = {}
    for path in paths:
        with open(path) as f:
            h = json.load(f)
        fi = {name: i for i, name in enumerate(h["fields"])}
        ok = [row for row in h["cases"] if row[fi["error"]] is None]
        key = lambda row: tuple(row[fi[x]] for x in ("m", "n", "k", "out", "scale", "fast"))  # noqa: E731
        plain = {key(row): max(1, row[fi["split_k"]] or 1) for row in ok if row[fi["bias"]] is None}
        for row in ok:
            if row[fi["bias"]] is None or key(row) not in plain:
                continue
            g = f"{row[fi['out']]} {row[fi['scale']]}"
            calls, changed = out.get(g, (0, 0))
            out[g] = (calls + 1, changed + (max(1, row[fi["split_k"]] or 1) != plain[key(row)]))
    return out


def report(title: str, res: dict, totals: dict = None) -> int:
    tot = {"exact": 0, "wrong": 0, "undecided": 0}
    print(title)
    for v, cnt in res.items():
        print(f"  {v:28s} exact {cnt['exact']:7d}  wrong {cnt['wrong']:3d}  undecided {cnt['undecided']:6d}")
        for key in tot:
            tot[key] += cnt[key]
    print(f"  {'all':28s} exact {tot['exact']:7d}  wrong {tot['wrong']:3d}  undecided {tot['undecided']:6d}")
    if totals is not None:
        for key in tot:
            totals[key] = totals.get(key, 0) + tot[key]
    return tot["wrong"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", required=True, help="a recorded table's .json (its .bin beside it)")
    ap.add_argument("--traced", action="append", default=[],
                    help="traced calls (record_cublaslt_plans.py --traced) to check the rule on")
    ap.add_argument("--fill-traced", action="append", default=[],
                    help="traced random calls to derive step 6's fill boxes from (with the table "
                         "and --traced; checked like --traced, but no bias evidence): thousands "
                         "in the split zone are needed, boxes read off the grid alone overreach")
    ap.add_argument("--write", action="store_true",
                    help="store the derived constants in the table's JSON as 'split_rule'")
    args = ap.parse_args(argv)
    try:
        doc, m, n, k, split, kernel, ws = load_table(args.table)
    except (OSError, KeyError, ValueError) as e:
        print(f"derive_cublaslt_rule: {args.table}: {e}", file=sys.stderr)
        return 2
    r = derive(doc, m, n, k, split, ws)
    evidence = bias_evidence(args.traced)
    table_says = {group(b["variant"]) for b in doc.get("bias_same_split", [])}
    # Groups withdrawn by hand, with the counterexample that withdrew them (kept on --write):
    # a bias changed their split at a shape the traced files here may not hold.
    withdrawn = doc.get("split_rule", {}).get("bias_withdrawn", {})
    r["bias_withdrawn"] = withdrawn
    r["bias_same_split"] = sorted(
        g for g in set(r["fast_same_split"]) if g not in withdrawn and (
            (g in evidence and evidence[g][1] == 0) or (g not in evidence and g in table_says)))
    r["bias_pinned_by"] = {g: f"{calls} traced calls with a bias, {changed} split otherwise"
                           for g, (calls, changed) in sorted(evidence.items())}
    if args.fill_traced:
        points = fill_points_of(doc, m, n, k, split, args.traced + args.fill_traced)
        r.update(derive_fill(points, r))
    print(f"table {args.table}: {doc['provenance'].get('gpu')}, cuBLASLt "
          f"{doc['provenance'].get('cublaslt_version')}")
    for key in ("fast_same_split", "never_split_scales", "slice_floor_k", "slice_floor_pinned_by",
                "workspace_limit", "partial_n_min", "workspace_header", "workspace_pinned_by",
                "bias_same_split", "bias_pinned_by", "bias_withdrawn", "fill_boxes",
                "fill_pinned_by", "fill_groups", "fill_bias", "fill_points"):
        if key not in r:
            continue
        print(f"  {key}: {r[key]}")
    r_full = dict(r, m_axis=[int(x) for x in m], k_axis=[int(x) for x in k])
    mi = {int(x): i for i, x in enumerate(m)}
    ni = {int(x): i for i, x in enumerate(n)}
    ki = {int(x): i for i, x in enumerate(k)}
    vidx = {v: i for i, v in enumerate(doc["variants"])}
    traced_tot: dict = {}
    bad = report("recorded points (step 5 leaving each K, each M out):", check_table(doc, m, n, k, split, kernel, r_full))
    for path in args.traced + args.fill_traced:
        def recorded_for(c_out, c_scale, c_fast):
            v = vidx.get(f"{c_out} {c_scale} fast{int(c_fast)}")

            def at(mm, nn, kk):
                if v is None or mm not in mi or nn not in ni or kk not in ki:
                    return -1, -1
                at = (v, mi[mm], ni[nn], ki[kk])
                return int(split[at]), int(kernel[at])
            return at

        # recorded() depends on the call's variant: wrap rule_split per call.
        def recorded_call(c):
            return recorded_for(c["out"], c["scale"], c["fast"])
        bad += report(f"traced {path}:", check_traced(path, r_full, recorded_call), traced_tot)
    if args.write and bad:
        print("derive_cublaslt_rule: the rule is wrong somewhere: not written", file=sys.stderr)
    elif args.write:
        # What explain quotes: the traced calls the rule decided, all exact.
        r["checked_traced_calls"] = traced_tot.get("exact", 0)
        doc["split_rule"] = r
        with open(args.table, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
        print(f"wrote split_rule into {args.table}")
    return 1 if bad else 0


def check_traced(path: str, r: dict, recorded_call) -> dict:
    """check_traced with the recorded splits of each call's own variant."""
    with open(path) as f:
        h = json.load(f)
    fi = {name: i for i, name in enumerate(h["fields"])}
    res: dict = {}
    wrong = []
    for row in h["cases"]:
        if row[fi["error"]] is not None:
            continue
        c = {name: row[fi[name]] for name in ("m", "n", "k", "out", "scale", "fast", "bias")}
        v = f"{c['out']} {c['scale']} fast{int(c['fast'])}" + (f" bias {c['bias']}" if c["bias"] else "")
        want = max(1, row[fi["split_k"]] or 1)
        got, why = rule_split(c, r, recorded_call(c))
        cnt = res.setdefault(v, {"exact": 0, "wrong": 0, "undecided": 0})
        if got is None:
            cnt["undecided"] += 1
        elif got == want:
            cnt["exact"] += 1
        else:
            cnt["wrong"] += 1
            wrong.append((c, got, want, why))
    for c, got, want, why in wrong[:10]:
        print(f"  WRONG {c}: rule {got} ({why}), cuBLASLt {want}")
    return res


if __name__ == "__main__":
    sys.exit(main())
