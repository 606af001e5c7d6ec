#!/usr/bin/env python3
"""plot_h_microscaling: MXFP8, MXFP4 and NVFP4 on Blackwell's block-scaled MMAs vs DeepSeek-V3's
1x128 E4M3 on Hopper, SNR vs K on the same data (experiment h)."""
import matplotlib.pyplot as plt

from plotting import band, load, metric, pretty, save, snr_label, title

NAME = "h_microscaling"
d, trials, summary, manifest = load(NAME)
RECIPES = {  # (format, scaling, model) -> label
    ("e4m3", "block128", "hopper-wgmma"): "deepseek-v3: e4m3 1x128, Hopper wgmma, promote 128",
    ("e4m3", "mx", "mxf8f6f4"): "MXFP8: e4m3, E8M0 per 32, in the MMA",
    ("e2m1", "mx", "mxf4"): "MXFP4: e2m1, E8M0 per 32, in the MMA",
    ("e2m1", "nvfp4", "nvfp4"): "NVFP4: e2m1, UE4M3 per 16 + fp32 tensor scale",
}
colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
styles = ["-", "--", ":"]
markers = ["o", "s", "^", "D"]  # one a recipe; points set apart along K so coinciding ones show
dists = list(summary.distribution.unique())
fig, axes = plt.subplots(1, 2, figsize=(12, 5.6), constrained_layout=True)
for i, ((fmt, sc, model), label) in enumerate(RECIPES.items()):
    for j, dist in enumerate(dists):
        where = dict(distribution=dist, format=fmt, scaling=sc, model=model)
        s = metric(summary, "snr_db", **where).sort_values("k")
        a = metric(summary, "snr_accum_db", **where).sort_values("k")
        if s.empty:
            continue
        name = label if j == 0 else None
        dodge = 2 ** (0.09 * (i - (len(RECIPES) - 1) / 2))
        for ax, v in ((axes[0], s), (axes[1], a)):
            band(ax, v.k * dodge, v, name, color=colors[i], ls=styles[j % 3], quantiles=False,
                 marker=markers[i])
for j, dist in enumerate(dists):
    axes[0].plot([], [], color="0.4", ls=styles[j % 3], label=pretty(dist))
for ax in axes:
    ax.set_xscale("log", base=2)
    ax.set_xlabel("vector length K (elements)")
    ax.grid(alpha=0.3)
fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=4, fontsize=8)
axes[0].set_ylabel(snr_label("total"))
axes[0].set_title("vs the exact dot product of the unquantised inputs", fontsize=9)
axes[1].set_ylabel(snr_label("accumulation"))
axes[1].set_title("vs the exact dot product of the quantised inputs, rounded to fp32\n"
                  "(MXFP4 and NVFP4: median +inf at every K, exact group sums with 35 fraction "
                  "bits)", fontsize=9)
title(fig, manifest, "h: block-scaled MMAs (MXFP8, MXFP4, NVFP4) vs 1x128 E4M3 at equal K, same "
      "data; bars: 95% CI of the median")
save(fig, d, NAME)
