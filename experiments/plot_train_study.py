#!/usr/bin/env python3
"""plot_train_study: the figure of a train_study run, from its CSVs.

Reads <out>/train_curves.csv, train_gemm.csv, train_final.csv and train_study.json (the
folder given as the first argument, else out/train_study) and writes train_study.png / .svg,
one row per task, configurations coloured by axis (baselines grey, scaling blue,
accumulator red, darker with fewer bits) and labelled at their lines' ends:
  1. held-out loss over steps of bf16 and fp32 (mean over seeds, band min..max): the run;
  2. each configuration's held-out loss minus bf16's over steps (mean of the per-seed
     differences: seeds share initialisation and batches), labelled at the right;
  3. final held-out loss minus bf16's with the 95% t-interval of the per-seed differences,
     filled where the interval excludes 0;
  4. SQNR of each GEMM (Fprop, Dgrad, Wgrad) against float64 at the last logged step
     (median over layers and seeds), configurations in the order of panel 3.
The median Pearson correlation of the multiplied rows stays in train_gemm.csv.
"""
import json
import os

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from plotting import capped, out_dir, save

NAME = "train_study"
SCALING = ("deepseek-v3", "tensor", "mxfp8", "e5m2-grads")
d = out_dir(NAME)
curves = pd.read_csv(os.path.join(d, "train_curves.csv"))
gemm = pd.read_csv(os.path.join(d, "train_gemm.csv"))
final = pd.read_csv(os.path.join(d, "train_final.csv"))
with open(os.path.join(d, "train_study.json")) as f:
    manifest = json.load(f)


def colour(config: str):
    """Grey baselines, blue scaling recipes, red accumulator recipes (darker: fewer bits)."""
    if config in ("fp32", "bf16"):
        return "0.2" if config == "bf16" else "0.55"
    if config in SCALING:
        return plt.cm.Blues(0.45 + 0.15 * SCALING.index(config))
    bits = 13 if config == "fast-accum" else int(config[4:]) if config.startswith("frac") else 16
    return plt.cm.Reds(float(np.clip(1.05 - bits / 26, 0.35, 0.95)))


def label_ends(ax, ends):
    """Direct labels at the right end of lines, moved apart vertically so none overlap."""
    if not ends:
        return
    lo, hi = ax.get_ylim()
    gap = (hi - lo) * 0.045
    ends = sorted(ends, key=lambda e: e[1])
    ys = [e[1] for e in ends]
    for i in range(1, len(ys)):
        ys[i] = max(ys[i], ys[i - 1] + gap)
    shift = max(0.0, ys[-1] - hi + gap / 2) if len(ys) > 1 else 0.0
    for (x, _, text, c), y in zip(ends, ys):
        ax.annotate(text, (x, y - shift), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=7, color=c, annotation_clip=False)


tasks = list(dict.fromkeys(curves.task))
fig, axes = plt.subplots(len(tasks), 4, figsize=(17, 3.9 * len(tasks)), squeeze=False,
                         gridspec_kw=dict(width_ratios=[1, 1.25, 1, 1]))
for row, task in zip(axes, tasks):
    ev = curves[(curves.task == task) & curves.eval_loss.notna()]
    configs = list(dict.fromkeys(ev.config))
    for config in ("bf16", "fp32"):
        g = ev[ev.config == config].groupby("step").eval_loss
        if config in configs:
            row[0].plot(g.mean().index, g.mean().values, color=colour(config), lw=1.2, label=config)
            row[0].fill_between(g.min().index, g.min().values, g.max().values, alpha=0.2,
                                color=colour(config))
    row[0].set(title=f"{task}: held-out loss (band: min..max over seeds)", xlabel="step",
               ylabel="loss")
    row[0].legend(fontsize=7)

    base = ev[ev.config == "bf16"].set_index(["seed", "step"]).eval_loss
    ends = []
    for config in configs:
        if config == "bf16" or base.empty:
            continue
        diff = (ev[ev.config == config].set_index(["seed", "step"]).eval_loss - base).dropna()
        s = diff.groupby("step").mean()
        if s.empty:
            continue
        row[1].plot(s.index, s.values, color=colour(config), lw=1.3)
        ends.append((s.index[-1], s.values[-1], config, colour(config)))
    row[1].axhline(0, color="k", lw=0.6)
    row[1].set(title="held-out loss - bf16's (mean of per-seed differences)", xlabel="step",
               ylabel="loss delta")
    row[1].margins(x=0.02)
    label_ends(row[1], ends)

    f = final[(final.task == task) & final.delta_vs_bf16.notna() & (final.config != "bf16")]
    y = np.arange(len(f))[::-1]
    for yi, (_, r) in zip(y, f.iterrows()):
        lo, hi = r.delta_ci95_lo, r.delta_ci95_hi
        apart = np.isfinite(lo) and (lo > 0 or hi < 0)
        row[2].errorbar(r.delta_vs_bf16, yi, xerr=[[r.delta_vs_bf16 - lo], [hi - r.delta_vs_bf16]]
                        if np.isfinite(lo) else None, fmt="o", capsize=3, color=colour(r.config),
                        mfc=colour(r.config) if apart else "white")
    row[2].axvline(0, color="k", lw=0.6)
    row[2].set_yticks(y, f.config, fontsize=8)
    row[2].set(title="final held-out loss - bf16's\n(95% CI over seeds; filled: excludes 0)",
               xlabel="loss delta")

    gg = gemm[(gemm.task == task) & gemm.config.isin(f.config)]
    last = gg[gg.step == gg.step.max()]
    med = last.groupby(["config", "gemm"]).sqnr_db.median()
    for dy, (which, marker) in zip((0.2, 0, -0.2), (("fprop", "o"), ("dgrad", "s"), ("wgrad", "^"))):
        vals = [med.get((c, which), np.nan) for c in f.config]
        row[3].scatter(capped(vals), y + dy, marker=marker, s=18, label=which,
                       c=[colour(c) for c in f.config])
    row[3].set_yticks(y, f.config, fontsize=8)
    row[3].set(title=f"GEMM SQNR vs float64 at step {int(gg.step.max()) if len(gg) else 0}\n"
                     "(median over layers and seeds)", xlabel="dB")
    row[3].legend(fontsize=7)
fig.suptitle(f"train_study preset {manifest['preset']} on {manifest['gpu'] or 'CPU'} "
             f"({len(manifest['runs'])} runs, {manifest['runtime_s']:.0f} process-seconds)")
fig.tight_layout()
save(fig, d, NAME)
