#!/usr/bin/env python3
"""plot_b_promotion: accumulation SNR vs K for promotion every 32/64/128/512 vs never (b)."""
import matplotlib.pyplot as plt

from plotting import title, band, load, metric, save, snr_label

NAME = "b_promotion"
d, trials, summary, manifest = load(NAME)
fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
for p in sorted(summary.promote_every.unique()):
    label = "never" if p == 0 else f"every {p}"
    for ax, m in zip(axes, ("snr_accum_db", "snr_db")):
        s = metric(summary, m, promote_every=p).sort_values("k")
        band(ax, s.k, s, label, quantiles=(m == "snr_accum_db" or p == 0))
for ax in axes:
    ax.set_xscale("log", base=2)
    ax.set_xlabel("vector length K (elements)")
    ax.grid(alpha=0.3)
    ax.legend(title="promotion to FP32", fontsize=8)
axes[0].set_ylabel(snr_label("accumulation"))
axes[0].set_title("accumulation error only")
axes[1].set_ylabel(snr_label("total"))
axes[1].set_title("total error (quantisation dominates; band: never)")
title(fig, manifest, "b: chunked promotion on hopper-wgmma, e4m3 with a tensor-wise scale, Gaussian inputs")
save(fig, d, NAME)
