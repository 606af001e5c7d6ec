#!/usr/bin/env python3
"""plot_invariance: plan regions against the batch size M, one line per layer, from the CSV of
`fp8sim invariance --model MODEL --m 1-4096 --csv regions.csv` (or of one N x K; the
`layer` column then empty): a picture for a bug report.

    python experiments/plot_invariance.py regions.csv --out invariance.png [--title TEXT]

Each layer's line is cut into its plan regions (M on a log axis; a region [m_lo, m_hi]
drawn from m_lo to m_hi + 1), coloured by the plan (one colour per plan key, e.g. split-K 1 /
split-K 2), refused M hatched grey (the plan's source could not decide them: never guessed).
A layer whose answered M all run one plan is marked "invariant" at the right, one with
several plans "varies", one with refusals "unknown".
Writes the .png and, beside it, an .svg.
"""
import argparse
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

REFUSED = "refused"


def verdict(regions: pd.DataFrame) -> str:
    """invariant / varies / unknown, from a layer's regions (the arithmetic, `variant`)."""
    answered = regions[regions.refused == 0]
    if answered.variant.nunique() > 1:
        return "varies"
    return "unknown" if (regions.refused == 1).any() else "invariant"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="regions CSV of fp8sim invariance --csv")
    ap.add_argument("--out", default="invariance.png")
    ap.add_argument("--title", default="")
    args = ap.parse_args()
    df = pd.read_csv(args.csv, keep_default_na=False)
    for col in ("layer", "n", "k", "m_lo", "m_hi", "plan", "refused", "variant"):
        if col not in df.columns:
            raise SystemExit(f"plot_invariance: {args.csv}: no column {col!r} (expected the CSV "
                             "of fp8sim invariance --csv)")
    df["label"] = [f"{layer or 'N x K'} ({n}x{k})" for layer, n, k in zip(df.layer, df.n, df.k)]
    labels = list(dict.fromkeys(df.label))
    plans = sorted(set(df.plan) - {REFUSED}, key=lambda p: (len(p), p))
    cmap = plt.get_cmap("tab10")
    colour = {p: cmap(i % 10) for i, p in enumerate(plans)}
    m_lo, m_hi = df.m_lo.min(), df.m_hi.max() + 1
    fig, ax = plt.subplots(figsize=(10, 0.9 + 0.42 * len(labels)), constrained_layout=True)
    for y, label in enumerate(labels):
        regions = df[df.label == label]
        for r in regions.itertuples():
            refused = r.plan == REFUSED
            ax.broken_barh([(r.m_lo, r.m_hi + 1 - r.m_lo)], (y - 0.35, 0.7),
                           facecolors="0.85" if refused else colour[r.plan],
                           hatch="////" if refused else None, edgecolor="0.6" if refused else "none",
                           linewidth=0.3)
        ax.text(m_hi * 1.08, y, verdict(regions), va="center", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xlim(m_lo, m_hi)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("M (batch size, tokens; log scale)")
    ax.grid(axis="x", alpha=0.3, which="both")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[p]) for p in plans]
    handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="0.85", hatch="////", edgecolor="0.6"))
    ax.legend(handles, plans + ["refused (the recordings cannot decide the plan)"], fontsize=7,
              loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.3 / max(1, len(labels))),
              ncol=min(4, len(plans) + 1), frameon=False)
    if args.title:
        ax.set_title(args.title, fontsize=9)
    fig.savefig(args.out, dpi=130)
    fig.savefig(os.path.splitext(args.out)[0] + ".svg")
    print(f"plot_invariance: wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
