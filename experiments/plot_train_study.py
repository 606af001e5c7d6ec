#!/usr/bin/env python3
"""plot_train_study: the figure of a train_study run, from its CSVs.

Reads <out>/train_curves.csv, train_gemm.csv, train_final.csv and train_study.json (the
folder given as the first argument, else out/train_study) and writes train_study.png / .svg,
one row per task:
  1. held-out loss over steps per configuration: mean over seeds, band min..max;
  2. final held-out loss minus bf16's, per configuration, with the 95% t-interval of the
     per-seed differences (the accumulator-bits axis reads left to right);
  3. SQNR of the Fprop, Dgrad and Wgrad GEMMs (median over layers and seeds) over steps;
  4. median Pearson correlation of the multiplied row pairs (Fprop) over steps.
"""
import json
import os

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from plotting import capped, out_dir, save

NAME = "train_study"
d = out_dir(NAME)
curves = pd.read_csv(os.path.join(d, "train_curves.csv"))
gemm = pd.read_csv(os.path.join(d, "train_gemm.csv"))
final = pd.read_csv(os.path.join(d, "train_final.csv"))
with open(os.path.join(d, "train_study.json")) as f:
    manifest = json.load(f)

tasks = list(dict.fromkeys(curves.task))
fig, axes = plt.subplots(len(tasks), 4, figsize=(20, 4.2 * len(tasks)), squeeze=False)
for row, task in zip(axes, tasks):
    ev = curves[(curves.task == task) & curves.eval_loss.notna()]
    for config, g in ev.groupby("config", sort=False):
        s = g.groupby("step").eval_loss
        line, = row[0].plot(s.mean().index, s.mean().values, label=config, lw=1.2)
        row[0].fill_between(s.min().index, s.min().values, s.max().values, alpha=0.15,
                            color=line.get_color())
    row[0].set(title=f"{task}: held-out loss (mean, band min..max over seeds)", xlabel="step",
               ylabel="loss")
    row[0].legend(fontsize=7, ncol=2)

    f = final[(final.task == task) & final.delta_vs_bf16.notna()]
    x = np.arange(len(f))
    err = np.vstack([f.delta_vs_bf16 - f.delta_ci95_lo, f.delta_ci95_hi - f.delta_vs_bf16])
    row[1].errorbar(x, f.delta_vs_bf16, yerr=np.nan_to_num(err), fmt="o", capsize=3)
    row[1].axhline(0, color="k", lw=0.6)
    row[1].set_xticks(x, f.config, rotation=60, ha="right", fontsize=8)
    row[1].set(title="final held-out loss - bf16 (95% CI over seeds)", ylabel="loss delta")

    gg = gemm[gemm.task == task]
    for (config, which), g in gg.groupby(["config", "gemm"], sort=False):
        if which != "fprop" and config not in ("deepseek-v3", "fast-accum", "frac8"):
            continue
        s = g.groupby("step").sqnr_db.median()
        row[2].plot(s.index, capped(s.values), label=f"{config} {which}", lw=1,
                    ls="-" if which == "fprop" else "--")
    row[2].set(title="GEMM SQNR vs float64 (median over layers)", xlabel="step", ylabel="dB")
    row[2].legend(fontsize=6, ncol=2)

    fp = gg[gg.gemm == "fprop"]
    for config, g in fp.groupby("config", sort=False):
        s = g.groupby("step").pearson.median()
        row[3].plot(s.index, s.values, label=config, lw=1)
    row[3].set(title="Fprop: median Pearson correlation of multiplied rows", xlabel="step",
               ylabel="correlation")
fig.suptitle(f"train_study preset {manifest['preset']} on {manifest['gpu'] or 'CPU'} "
             f"({len(manifest['runs'])} runs, {manifest['runtime_s']:.0f} process-seconds)")
fig.tight_layout()
save(fig, d, NAME)
