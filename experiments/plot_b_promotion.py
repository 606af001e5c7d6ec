#!/usr/bin/env python3
"""plot_b_promotion: accumulation SNR vs K for promotion every 32/64/128/512 vs never (b)."""
import matplotlib.pyplot as plt

from plotting import title, band, load, metric, save, snr_label

NAME = "b_promotion"
d, trials, summary, manifest = load(NAME)
fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), constrained_layout=True)
promotions = sorted(summary.promote_every.unique())
markers = ["o", "s", "^", "D", "v", "P"]
for i, p in enumerate(promotions):
    label = "never" if p == 0 else f"every {p}"
    # The total SNR of every promotion is the same (quantisation dominates): the points are
    # set apart along K, a few percent each, so that each one shows.
    dodge = 2 ** (0.07 * (i - (len(promotions) - 1) / 2))
    for ax, m in zip(axes, ("snr_accum_db", "snr_db")):
        s = metric(summary, m, promote_every=p).sort_values("k")
        accum = m == "snr_accum_db"
        band(ax, s.k if accum else s.k * dodge, s, label, marker=markers[i % len(markers)],
             quantiles=accum)
for ax in axes:
    ax.set_xscale("log", base=2)
    ax.set_xlabel("vector length K (elements)")
    ax.grid(alpha=0.3)
fig.legend(*axes[0].get_legend_handles_labels(), title="promotion to FP32", fontsize=8,
           title_fontsize=8, loc="outside lower center", ncol=len(promotions))
axes[0].set_ylabel(snr_label("accumulation"))
axes[0].set_title("accumulation error only (bands: interquartile range)", fontsize=10)
axes[1].set_ylabel(snr_label("total"))
axes[1].set_title("total error: quantisation dominates (points set apart along K)", fontsize=10)
title(fig, manifest, "b: chunked promotion on hopper-wgmma, e4m3 with a tensor-wise scale, Gaussian inputs")
save(fig, d, NAME)
