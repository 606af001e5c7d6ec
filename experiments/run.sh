#!/usr/bin/env bash
# run: the main job. Installs and builds what the experiments need (tests/setup.sh experiments:
# no torch, no Python package; build/ only), then runs every experiment (the list
# experiments/sweeps.cmake writes to build/experiments/experiments.txt) with its default
# (quick) sizes into out/<name>/ and draws its figures. Extra arguments go to every
# experiment binary (e.g. --paper for paper-size trial counts, --threads 4).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/tests/setup.sh" experiments
cd "$root"
python="$root/.venv/bin/python"
mapfile -t experiments < "$root/build/experiments/experiments.txt"
start=$SECONDS
for name in "${experiments[@]}"; do
  echo "\$ build/experiments/exp_$name --out out/$name $*"
  "$root/build/experiments/exp_$name" --out "out/$name" "$@"
  echo "\$ .venv/bin/python experiments/plot_$name.py out/$name"
  "$python" "$root/experiments/plot_$name.py" "out/$name"
done
echo "run: ${#experiments[@]} experiments in $((SECONDS - start)) s; files written:"
for name in "${experiments[@]}"; do
  ls -1 "out/$name"/* | sed 's/^/  /'
done
echo "run: experiment e (DeepSeek-V3's ~2% claim), hopper-wgmma, K = 4096, e4m3, tensor scale:"
"$python" - <<'PY'
import pandas as pd
t = pd.read_csv("out/e_deepseek/e_deepseek.csv")
t = t[t.model == "hopper-wgmma"]
g = t.groupby(["distribution", "rho", "promote_every"]).rel_err_accum
for (dist, rho, p), s in g:
    print(f"  {dist:18s} rho={rho:<4g} promote={'never' if p == 0 else p:>5}: "
          f"max rel err {s.max():.3%}  median {s.median():.3%}")
PY
echo "run: figures in out/<name>/; \`source .venv/bin/activate\` puts fp8sim and python on PATH"
