#!/usr/bin/env python3
"""plot_d_correlation: SNR vs correlation rho, crossed with promotion and block scaling (d)."""
import matplotlib.pyplot as plt
import numpy as np

from plotting import title, band, load, metric, save, snr_label

NAME = "d_correlation"
d, trials, summary, manifest = load(NAME)
rhos = sorted(summary.rho.unique())
fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
combos = summary[["scaling", "promote_every"]].drop_duplicates().values
for sc, p in combos:
    label = f"{sc}, promote {'never' if p == 0 else 'every %d' % p}"
    for ax, m in zip(axes, ("snr_db", "snr_accum_db")):
        s = metric(summary, m, scaling=sc, promote_every=p).sort_values("rho")
        band(ax, np.searchsorted(rhos, s.rho), s, label)
for ax in axes:
    ax.set_xticks(range(len(rhos)), [f"{r:g}" for r in rhos])
    ax.set_xlabel("correlation rho between a and b (population)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
axes[0].set_ylabel(snr_label("total"))
axes[0].set_title("total error")
axes[1].set_ylabel(snr_label("accumulation"))
axes[1].set_title("accumulation error only")
title(fig, manifest, "d: correlation x promotion x block scaling, e4m3 on hopper-wgmma, K = 4096")
save(fig, d, NAME)
