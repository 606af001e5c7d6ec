#!/usr/bin/env python3
"""plot_analyze: the figure of an `fp8sim analyze` run, from its CSVs.

Reads <out>/analyze.csv, analyze_rows.csv, analyze_pairs.csv and analyze.json (the folder
given as the first argument, else out/analyze) and writes <out>/analyze.png and .svg:
  left:   SQNR per recipe over the whole output (dot) and its spread over output rows and
          columns (boxes: quartiles, whiskers: 5% and 95%)
  middle: share of the error energy each stage accounts for (that stage made exact)
  right:  relative error of the sampled outputs against the |Pearson correlation| of the
          row pair that was multiplied
"""
import json
import os

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from plotting import INF_DB, capped, out_dir, save

NAME = "analyze"
STAGES = ["quant_a", "quant_b", "scale_enc", "accum", "out_round"]

d = out_dir(NAME)
recipes = pd.read_csv(os.path.join(d, "analyze.csv"))
rows = pd.read_csv(os.path.join(d, "analyze_rows.csv"))
pairs = pd.read_csv(os.path.join(d, "analyze_pairs.csv"))
with open(os.path.join(d, "analyze.json")) as f:
    manifest = json.load(f)

names = list(recipes.recipe)
y = np.arange(len(names))
fig, axes = plt.subplots(1, 3, figsize=(15, 1.2 + 0.55 * len(names) + 2), constrained_layout=True)

# Left: SQNR and its row / column spread.
ax = axes[0]
for off, axis, color in ((-0.18, "row", "tab:blue"), (0.18, "col", "tab:orange")):
    data = [capped(rows[(rows.recipe == n) & (rows.axis == axis)].sqnr_db) for n in names]
    ax.boxplot(data, positions=y + off, widths=0.3, vert=False, whis=(5, 95), showfliers=False,
               patch_artist=True, boxprops={"facecolor": color, "alpha": 0.35},
               medianprops={"color": color})
    ax.plot([], [], color=color, lw=6, alpha=0.35, label=f"per output {axis}")
ax.plot(capped(recipes.sqnr_db), y, "kD", ms=5, label="whole output")
ax.set_yticks(y, names, fontsize=8)
ax.set_xlabel(f"SQNR (dB; +inf drawn at {INF_DB:.0f})")
ax.legend(fontsize=7, loc="best")
ax.grid(alpha=0.3)
ax.invert_yaxis()

# Middle: stage shares.
ax = axes[1]
have_stages = f"{STAGES[0]}_share" in recipes and recipes[f"{STAGES[0]}_share"].notna().any()
width = 0.8 / len(STAGES)
for i, st in enumerate(STAGES):
    share = recipes[f"{st}_share"].fillna(0).to_numpy() if have_stages else np.zeros(len(names))
    ax.barh(y - 0.4 + (i + 0.5) * width, 100 * share, height=width, label=st)
ax.set_yticks(y, [""] * len(names))
ax.axvline(0, color="k", lw=0.8)
ax.set_xlabel("share of the error energy removed by making the stage exact (%)")
ax.legend(fontsize=7, loc="best")
ax.grid(alpha=0.3, axis="x")
ax.invert_yaxis()
if not have_stages:
    ax.text(0.5, 0.5, "run without --no-stages for the attribution", transform=ax.transAxes,
            ha="center")

# Right: relative error against the pair's correlation.
ax = axes[2]
for n in names:
    p = pairs[(pairs.recipe == n) & (pairs.ref != 0)]
    rel = np.abs(p.got - p.ref) / np.abs(p.ref)
    ax.scatter(np.abs(p.pearson), np.clip(rel, 1e-9, None), s=3, alpha=0.4, label=n)
ax.set_yscale("log")
ax.set_xlabel("|Pearson correlation| of row m of A and row n of B")
ax.set_ylabel("|D - R| / |R| at the sampled outputs (0 drawn at 1e-9)")
ax.legend(fontsize=7, markerscale=3, loc="best")
ax.grid(alpha=0.3)

shape = manifest["shape"]
a, b = manifest["inputs"]["a"], manifest["inputs"]["b"]
fig.suptitle(f"fp8sim analyze: D = A B^T, A {shape['m']} x {shape['k']} ({a['dtype']}), "
             f"B {shape['n']} x {shape['k']} ({b['dtype']}); R = exact product of the inputs\n"
             f"(fp8sim {manifest['git_revision']}, {manifest['pairs']} sampled pairs, seed "
             f"{manifest['seed']})", fontsize=10)
save(fig, d, NAME)
