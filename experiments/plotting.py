"""plotting: shared helpers for the plot_<name>.py scripts (matplotlib, Agg backend).

Each plot script reads <out>/<name>.csv (one row per configuration and trial) and
<out>/<name>_summary.csv (medians, quantiles and bootstrap CIs computed by the experiment
binary) and writes <out>/<name>.png and <out>/<name>.svg.

SNR of an exact result is +inf dB; plots draw it at INF_DB and say so in the axis label.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

INF_DB = 160.0  # where +inf dB (no error at all) is drawn; fp32 itself reaches ~150 dB


def out_dir(name):
    """The folder given on the command line, else out/<name> under the repository root."""
    if len(sys.argv) > 1:
        return sys.argv[1]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(root, "out", name)


def load(name):
    d = out_dir(name)
    trials = pd.read_csv(os.path.join(d, f"{name}.csv"))
    summary = pd.read_csv(os.path.join(d, f"{name}_summary.csv"))
    with open(os.path.join(d, f"{name}.json")) as f:
        manifest = json.load(f)
    return d, trials, summary, manifest


def capped(values):
    """Values with +inf replaced by INF_DB (for SNR in dB)."""
    v = np.asarray(values, dtype=float)
    return np.where(np.isposinf(v), INF_DB, v)


def metric(summary, name, **where):
    """Summary rows of one metric, filtered by column == value pairs."""
    s = summary[summary.metric == name]
    for k, v in where.items():
        s = s[s[k] == v]
    return s


def band(ax, x, s, label, color=None, marker="o", quantiles=True, ls="-"):
    """Median line with its bootstrap 95% CI as error bars and the interquartile range of the
    trials as a band."""
    med = capped(s["median"])
    lo, hi = capped(s["median_lo"]), capped(s["median_hi"])
    line = ax.errorbar(x, med, yerr=[med - lo, hi - med], marker=marker, ms=4, capsize=3,
                       label=label, color=color, ls=ls)
    if quantiles:
        ax.fill_between(x, capped(s["q25"]), capped(s["q75"]), alpha=0.15,
                        color=line[0].get_color())
    return line


def pretty(dist):
    """A distribution name for legends: sigma=0.0009765625 shown as 2^-10."""
    return dist.replace("sigma=0.0009765625", "sigma=2^-10")


def snr_label(what):
    return f"{what} SNR (dB, median; +inf drawn at {INF_DB:.0f})"


def title(fig, manifest, text):
    """Suptitle with a second line naming the revision, seed and trial count."""
    fig.suptitle(f"{text}\n(fp8sim {manifest['git_revision']}, seed {manifest['seed']}, "
                 f"{manifest['trials']} trials per configuration)", fontsize=10)


def save(fig, d, name):
    paths = []
    for ext in ("png", "svg"):
        p = os.path.join(d, f"{name}.{ext}")
        fig.savefig(p, dpi=130 if ext == "png" else None)
        paths.append(p)
    plt.close(fig)
    for p in paths:
        print(f"  wrote {p}")
