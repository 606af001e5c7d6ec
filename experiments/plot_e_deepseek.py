#!/usr/bin/env python3
"""plot_e_deepseek: relative error of K=4096 dot products on hopper-wgmma (experiment e)."""
import matplotlib.pyplot as plt
import numpy as np

from plotting import title, load, save

NAME = "e_deepseek"
d, trials, summary, manifest = load(NAME)
cases = trials[["distribution", "rho"]].drop_duplicates().values
cols = 3
rows = int(np.ceil(len(cases) / cols))
# Each case: a histogram above and its statistics below it, outside the axes, so no text
# covers bars or tick labels; one legend for the figure, under the panels.
fig = plt.figure(figsize=(13, 4.0 * rows + 0.6), layout="constrained")
grid = fig.add_gridspec(2 * rows, cols, height_ratios=[4, 1] * rows)
series = [("hopper-wgmma", 0, "hopper-wgmma, never promoted"),
          ("hopper-wgmma", 128, "hopper-wgmma, promoted every 128"),
          ("fp32", 0, "fp32 (reference)")]
bins = np.logspace(-10, 1, 67)
handles = {}
for i, (dist, rho) in enumerate(cases):
    r, c = divmod(i, cols)
    ax = fig.add_subplot(grid[2 * r, c])
    stats = fig.add_subplot(grid[2 * r + 1, c])
    stats.axis("off")
    t = trials[(trials.distribution == dist) & (trials.rho == rho)]
    lines = []
    for model, p, label in series:
        e = t[(t.model == model) & (t.promote_every == p)].rel_err_accum.to_numpy()
        if not len(e):
            continue
        _, _, patches = ax.hist(np.clip(e, 1e-10, 10), bins=bins, histtype="step", lw=1.5,
                                label=label)
        handles[label] = patches[0]
        pct = lambda v: f"{v:.3%}" if v >= 1e-5 else f"{v:.1e}"  # noqa: E731
        lines.append(f"{label}: max {pct(e.max())}, median {pct(np.median(e))}")
    handles["2%: DeepSeek-V3's \"nearly 2%\""] = ax.axvline(0.02, color="k", ls="--", lw=1)
    ax.set_xscale("log")
    ax.set_xlim(5e-11, 20)
    ax.set_xlabel("relative accumulation error (exact 0 drawn at 1e-10)", fontsize=8)
    ax.set_ylabel("trials")
    ax.set_title(f"{dist}, rho = {rho:g}", fontsize=9)
    ax.grid(alpha=0.3)
    stats.text(0.0, 1.0, "\n".join(lines), transform=stats.transAxes, va="top", fontsize=7)
fig.legend(handles.values(), handles.keys(), loc="outside lower center", ncol=4, fontsize=8)
title(fig, manifest, "e: K = 4096 dot products, e4m3 with a tensor-wise scale: relative accumulation "
             "error per trial\n|got - ref| / |ref|, ref = exact dot product of the e4m3 inputs rounded to fp32")
save(fig, d, NAME)
