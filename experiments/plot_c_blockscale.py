#!/usr/bin/env python3
"""plot_c_blockscale: block-wise (1x128 / 1x512) and MX scales vs tensor-wise (experiment c)."""
import matplotlib.pyplot as plt
import numpy as np

from plotting import title, capped, load, save, snr_label

NAME = "c_blockscale"
d, trials, summary, manifest = load(NAME)
order = [s for s in ("tensor", "block512", "block128", "mx") if s in set(trials.scaling)]
dists = list(trials.distribution.unique())
fig, axes = plt.subplots(1, 2, figsize=(12, 4.4), constrained_layout=True)
panels = [("snr_db", 32, "total SNR, promotion every 32 (all scalings)"),
          ("snr_accum_db", 128, "accumulation SNR, promotion every 128")]
colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
for ax, (m, p, heading) in zip(axes, panels):
    width = 0.8 / len(order)
    for j, sc in enumerate(order):
        data, pos = [], []
        for i, dist in enumerate(dists):
            t = trials[(trials.distribution == dist) & (trials.scaling == sc) & (trials.promote_every == p)]
            if len(t):
                data.append(capped(t[m]))
                pos.append(i + (j - (len(order) - 1) / 2) * width)
        if data:
            bp = ax.boxplot(data, positions=pos, widths=width * 0.9, patch_artist=True,
                            showfliers=False, whis=(5, 95),
                            medianprops={"color": "k"})
            for b in bp["boxes"]:
                b.set_facecolor(colors[j])
                b.set_alpha(0.6)
            ax.plot([], [], "s", color=colors[j], alpha=0.6, label=sc)
    ax.set_xticks(np.arange(len(dists)), [x.replace(",", ",\n", 1) for x in dists], fontsize=7)
    ax.set_xlabel("input distribution (K = 4096)")
    ax.set_ylabel(snr_label("total" if m == "snr_db" else "accumulation").replace("median; ", ""))
    ax.set_title(heading, fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo - 0.18 * (hi - lo), hi)  # room for the legend below the boxes
    ax.legend(title="scaling", fontsize=8, ncol=4, loc="lower center")
title(fig, manifest, "c: block-wise vs tensor-wise scaling, e4m3 on hopper-wgmma "
             "(boxes: quartiles with black median, whiskers: 5-95% of trials)")
save(fig, d, NAME)
