#!/usr/bin/env bash
# test_notebooks: the notebooks cannot rot. Runs every experiment with small trial counts into a
# temporary folder, draws every figure with its plot script, and executes every notebook in
# notebooks/ on those outputs (nbconvert, kernel python3 of the given Python). Also checks that
# the committed notebooks carry no outputs.
# Usage: test_notebooks.sh <python> <build/experiments: the exp_* binaries and experiments.txt,
#        the list experiments/sweeps.cmake writes> <repository root>
set -euo pipefail
python="$1" bindir="$2" root="$3"
if ! "$python" -c "import nbconvert, ipykernel, matplotlib, pandas" 2>/dev/null; then
  echo "waived: $python lacks nbconvert/ipykernel/matplotlib/pandas (run tests/setup.sh)"
  exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mapfile -t experiments < "$bindir/experiments.txt"
for name in "${experiments[@]}"; do
  "$bindir/exp_$name" --out "$tmp/$name" --trials 24 --seed 7 > "$tmp/$name.log"
  MPLCONFIGDIR="$tmp/mpl" "$python" "$root/experiments/plot_$name.py" "$tmp/$name" >> "$tmp/$name.log"
  for f in "$name.csv" "${name}_summary.csv" "$name.json" "$name.png" "$name.svg"; do
    [ -s "$tmp/$name/$f" ] || { echo "test_notebooks: $name did not write $f"; cat "$tmp/$name.log"; exit 1; }
  done
  echo "ok: exp_$name + plot_$name.py"
done
"$python" - "$root"/notebooks/*.ipynb <<'PY'
import json, sys
for path in sys.argv[1:]:
    nb = json.load(open(path))
    dirty = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))]
    if dirty:
        sys.exit(f"test_notebooks: {path}: cells {dirty} carry outputs; clear them before committing")
PY
for nb in "$root"/notebooks/*.ipynb; do
  FP8SIM_OUT="$tmp" MPLCONFIGDIR="$tmp/mpl" "$python" -m nbconvert --to notebook --execute \
    --ExecutePreprocessor.kernel_name=python3 --ExecutePreprocessor.timeout=300 \
    --output-dir "$tmp/executed" "$nb" 2> "$tmp/nbconvert.log" ||
    { echo "test_notebooks: $nb failed:"; tail -n 30 "$tmp/nbconvert.log"; exit 1; }
  echo "ok: $(basename "$nb") executed"
done
