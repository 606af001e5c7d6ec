#!/usr/bin/env python3
"""plot_a_length: SNR vs vector length K, with and without a tensor-wise scale (experiment a)."""
import matplotlib.pyplot as plt

from plotting import band, load, metric, pretty, save, snr_label, title

NAME = "a_length"
d, trials, summary, manifest = load(NAME)
fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), constrained_layout=True)
markers = {"none": ("o", "-"), "tensor": ("s", "--")}
for dist in summary.distribution.unique():
    for scaling in summary.scaling.unique():
        label = f"{pretty(dist)}, scaling {scaling}"
        mk, ls = markers.get(scaling, ("^", "-."))
        s = metric(summary, "snr_db", distribution=dist, scaling=scaling).sort_values("k")
        band(axes[0], s.k, s, label, marker=mk, ls=ls)
        a = metric(summary, "snr_accum_db", distribution=dist, scaling=scaling).sort_values("k")
        if (a["median"] != float("inf")).all():
            band(axes[1], a.k, a, label, marker=mk, ls=ls)
        else:
            axes[1].plot([], [], " ", label=f"{label}: omitted, median +inf (exact)")
for ax in axes:
    ax.set_xscale("log", base=2)
    ax.set_xlabel("vector length K (elements)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
axes[0].set_ylim(-10, 58)  # room above the bands for the legend, clear of the note below
axes[0].legend(fontsize=7, loc="upper center", ncol=2)
axes[0].set_ylabel(snr_label("total"))
axes[0].set_title("vs exact dot product of the unquantised inputs", fontsize=9)
axes[1].set_ylabel(snr_label("accumulation"))
axes[1].set_title("vs exact dot product of the e4m3 inputs (rounded to fp32)", fontsize=9)
axes[0].text(0.02, 0.30, "unscaled sigma=2^-10: most elements round to 0 or to\n"
             "e4m3's smallest subnormal 2^-9, so almost no signal is left;\n"
             "with a tensor scale both sigmas give the same numbers\n(sigma is a power of two): the red line hides the orange",
             transform=axes[0].transAxes, fontsize=7, color="0.3")
title(fig, manifest, "a: e4m3 dot products on hopper-wgmma (no promotion); bands: interquartile "
      "range of the trials, bars: 95% CI of the median")
save(fig, d, NAME)
