#!/usr/bin/env bash
# test_analyze_plot: `fp8sim analyze` on tensors numpy wrote (float32, and the same values as
# an ml_dtypes.bfloat16 array, as np.save writes it: descr '<V2'), then plot_analyze.py on its
# outputs. The bf16 file must give the float32 file's analyze.csv byte for byte (the values
# are the same; only the dtype in the manifest differs).
# Usage: test_analyze_plot.sh <python> <fp8sim binary> <repository root>
set -euo pipefail
python="$1" cli="$2" root="$3"
if ! "$python" -c "import numpy, ml_dtypes, matplotlib, pandas" 2>/dev/null; then
  echo "waived: $python lacks numpy/ml_dtypes/matplotlib/pandas (run tests/setup.sh)"
  exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$python" - "$tmp" <<'PY'
import sys, numpy as np, ml_dtypes
d = sys.argv[1]
rng = np.random.default_rng(3)
a = rng.standard_normal((48, 256)).astype(ml_dtypes.bfloat16)
b = (0.5 * rng.standard_normal((40, 256))).astype(ml_dtypes.bfloat16)
np.save(f"{d}/A_bf16.npy", a); np.save(f"{d}/B_bf16.npy", b)
np.save(f"{d}/A_f32.npy", a.astype(np.float32)); np.save(f"{d}/B_f32.npy", b.astype(np.float32))
PY
args="--recipes all --pairs 500 --threads 2 --quiet"
"$cli" analyze --a "$tmp/A_bf16.npy" --b "$tmp/B_bf16.npy" $args --out "$tmp/bf16" > "$tmp/log"
"$cli" analyze --a "$tmp/A_f32.npy" --b "$tmp/B_f32.npy" $args --out "$tmp/f32" >> "$tmp/log"
grep -q '"dtype": "bf16"' "$tmp/bf16/analyze.json" || { echo "bf16 input not read as bf16"; exit 1; }
cmp "$tmp/bf16/analyze.csv" "$tmp/f32/analyze.csv" || { echo "bf16 and f32 inputs differ"; exit 1; }
MPLCONFIGDIR="$tmp/mpl" "$python" "$root/experiments/plot_analyze.py" "$tmp/bf16" >> "$tmp/log"
for f in analyze.csv analyze_rows.csv analyze_pairs.csv analyze.json analyze.png analyze.svg; do
  [ -s "$tmp/bf16/$f" ] || { echo "test_analyze_plot: no $f"; cat "$tmp/log"; exit 1; }
done
echo "ok: fp8sim analyze on bf16 and f32 .npy + plot_analyze.py"
