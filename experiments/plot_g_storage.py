#!/usr/bin/env python3
"""plot_g_storage: E4M3 vs E5M2 vs E5M6 storage of the same data (experiment g)."""
import matplotlib.pyplot as plt
import numpy as np

from plotting import title, capped, load, save

NAME = "g_storage"
d, trials, summary, manifest = load(NAME)
formats = list(trials.format.unique())
dists = list(trials.distribution.unique())
scalings = list(trials.scaling.unique())
colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
fig, axes = plt.subplots(1, len(scalings), figsize=(12, 4.4), constrained_layout=True,
                         sharey=True, squeeze=False)
for ax, sc in zip(axes.flat, scalings):
    width = 0.8 / len(formats)
    for j, f in enumerate(formats):
        data = [capped(trials[(trials.distribution == dd) & (trials.scaling == sc) &
                              (trials.format == f)].snr_db) for dd in dists]
        pos = np.arange(len(dists)) + (j - (len(formats) - 1) / 2) * width
        bp = ax.boxplot(data, positions=pos, widths=width * 0.9, patch_artist=True,
                        showfliers=False, whis=(5, 95),
                            medianprops={"color": "k"})
        for b in bp["boxes"]:
            b.set_facecolor(colors[j])
            b.set_alpha(0.6)
        ax.plot([], [], "s", color=colors[j], alpha=0.6, label=f)
    ax.set_xticks(np.arange(len(dists)), [x.replace("sigma=0.0009765625", "sigma=2^-10").replace(",", ",\n", 1)
                                          for x in dists], fontsize=7)
    ax.set_xlabel("input distribution (K = 4096)")
    ax.set_title(f"scaling: {sc}", fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(title="element format", fontsize=8, ncol=3, loc="lower center")
axes.flat[0].set_ylabel("total SNR (dB)")
lo, hi = axes.flat[0].get_ylim()  # shared: covers both panels
axes.flat[0].set_ylim(lo - 0.2 * (hi - lo), hi)  # room for the legend below the boxes
title(fig, manifest, "g: storage format of the same data, hopper-wgmma promoted every 128 "
             "(boxes: quartiles with black median, whiskers: 5-95% of trials)")
save(fig, d, NAME)
