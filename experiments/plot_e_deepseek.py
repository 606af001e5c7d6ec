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
fig, axes = plt.subplots(rows, cols, figsize=(13, 3.3 * rows), constrained_layout=True,
                         squeeze=False)
series = [("hopper-wgmma", 0, "hopper-wgmma, never promoted"),
          ("hopper-wgmma", 128, "hopper-wgmma, promoted every 128"),
          ("fp32", 0, "fp32 (reference)")]
bins = np.logspace(-10, 1, 67)
for ax, (dist, rho) in zip(axes.flat, cases):
    t = trials[(trials.distribution == dist) & (trials.rho == rho)]
    lines = []
    for model, p, label in series:
        e = t[(t.model == model) & (t.promote_every == p)].rel_err_accum.to_numpy()
        if not len(e):
            continue
        ax.hist(np.clip(e, 1e-10, 10), bins=bins, histtype="step", lw=1.5, label=label)
        pct = lambda v: f"{v:.3%}" if v >= 1e-5 else f"{v:.1e}"  # noqa: E731
        lines.append(f"{label}: max {pct(e.max())}, median {pct(np.median(e))}")
    ax.axvline(0.02, color="k", ls="--", lw=1)
    ax.text(0.026, 0.5, "2% (DeepSeek-V3)", fontsize=7, rotation=90, va="center",
            transform=ax.get_xaxis_transform())
    ax.set_xscale("log")
    ax.set_xlabel("relative accumulation error (exact 0 drawn at 1e-10)", fontsize=8)
    ax.set_ylabel("trials")
    ax.set_title(f"{dist}, rho = {rho:g}", fontsize=9)
    ax.text(0.01, 0.98, "\n".join(lines), transform=ax.transAxes, va="top", fontsize=6.5,
            bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "none"})
    ax.set_ylim(0, ax.get_ylim()[1] * 1.35)  # room for the text
    ax.grid(alpha=0.3)
for ax in list(axes.flat)[len(cases):]:
    ax.set_visible(False)
axes.flat[0].legend(fontsize=7, loc="center left")
for ax in axes.flat:
    ax.set_xlim(5e-11, 20)
title(fig, manifest, "e: K = 4096 dot products, e4m3 with a tensor-wise scale: relative accumulation "
             "error per trial\n|got - ref| / |ref|, ref = exact dot product of the e4m3 inputs rounded to fp32")
save(fig, d, NAME)
