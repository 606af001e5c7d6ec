#!/usr/bin/env python3
"""plot_f_hw_design: accumulation SNR vs fraction bits and products per step (experiment f)."""
import matplotlib.pyplot as plt

from plotting import title, band, capped, load, metric, save, snr_label

NAME = "f_hw_design"
d, trials, summary, manifest = load(NAME)
promotes = sorted(summary.promote_every.unique())
fig, axes = plt.subplots(1, len(promotes), figsize=(11, 4.4), constrained_layout=True,
                         sharey=True, squeeze=False)
for ax, p in zip(axes.flat, promotes):
    for g in sorted(summary.group.unique()):
        s = metric(summary, "snr_accum_db", promote_every=p, group=g).sort_values("frac_bits")
        band(ax, s.frac_bits, s, f"{g} products per step", quantiles=False)
    # The Hopper point (group 32, 13 fraction bits) and the quantisation-limited total SNR.
    h = metric(summary, "snr_accum_db", promote_every=p, group=32, frac_bits=13)
    ax.plot(h.frac_bits, capped(h["median"]), "k*", ms=12, label="Hopper (32, 13)")
    tot = metric(summary, "snr_db", promote_every=p)["median"].median()
    ax.axhline(tot, color="0.4", ls=":", label=f"total SNR incl. e4m3 quantisation ({tot:.1f} dB)")
    ax.set_xlabel("fraction bits kept below the step's largest exponent")
    ax.set_title(f"promotion {'never' if p == 0 else 'every %d' % p}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
axes.flat[0].set_ylabel(snr_label("accumulation"))
title(fig, manifest, "f: accumulator design space, K = 4096, e4m3 tensor-scaled Gaussian inputs "
             "(bars: 95% CI of the median)")
save(fig, d, NAME)
