#!/usr/bin/env bash
# run_gpu: the whole GPU suite, in one call, on a machine with a GPU (CI has none: there these
# tests skip). Builds the C++ tree with CUDA and the Python module into build-gpu/ (the
# package in build-gpu/site), then runs
#   1. ctest -L 'gpu|golden' (the CUDA engine against the CPU engine, every hardware capture
#      and kernel capture replayed),
#   2. pytest on the GPU tests of tests/python (-m gpu; PYTEST_ARGS to choose others),
#   3. cuda/capture/check_scaled_mm.py: fp8sim.torch.scaled_mm against live torch._scaled_mm on random
#      shapes (N_SHAPES, default 300), bit for bit,
#   4. the batch-invariance capture of this GPU model (tests/data/hw/invariance/<gpu>), checked
#      with cuBLASLt's plans asked of this GPU (capture_invariance.py --plans cuda): every M
#      predicted, every captured row the predicted one, every plan the captured trace's,
# and writes each stage's log and a summary into OUT (default: gpu-out/). On a GPU machine
# without this machine's Debian packages, give their staged copy (cuda/stage_deps.sh DIR) as
# FP8SIM_DEPS=DIR. The exit code is non-zero when any stage failed.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${OUT:-$root/gpu-out}"
mkdir -p "$out"
deps="${FP8SIM_DEPS:-}"
python="${PYTHON:-python3}"
jobs="$(nproc)"
failed=()
prefix=()
[ -n "$deps" ] && prefix=(-DCMAKE_PREFIX_PATH="$deps" -DOPENSSL_ROOT_DIR="$deps")

echo "run_gpu: build ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null))"
if ! { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release "${prefix[@]}" \
         -DFP8SIM_BUILD_PYTHON=ON -DPython_EXECUTABLE="$(command -v "$python")" \
         -DPython3_EXECUTABLE="$(command -v "$python")" &&
       cmake --build build-gpu -j"$jobs"; } > "$out/build.log" 2>&1; then
  tail -n 30 "$out/build.log"; echo "run_gpu: FAILED stages: build"; exit 1
fi
# The Python package from the same build: python/fp8sim with the module beside it.
site="$root/build-gpu/site"
rm -rf "$site" && mkdir -p "$site" && cp -r python/fp8sim "$site/" &&
  cp build-gpu/python/_core*.so "$site/fp8sim/"
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" FP8SIM_TEST_DATA="$root/tests/data"

(cd build-gpu && ctest --output-on-failure -j4 -L 'gpu|golden') > "$out/ctest.log" 2>&1 ||
  failed+=("ctest")
tail -n 5 "$out/ctest.log"
FP8SIM_CLI="$root/build-gpu/sim/fp8sim" "$python" -m pytest -q -p no:cacheprovider \
  ${PYTEST_ARGS:--m gpu} tests/python \
  > "$out/pytest.log" 2>&1 || failed+=("pytest")
tail -n 3 "$out/pytest.log"
"$python" cuda/capture/check_scaled_mm.py --shapes "${N_SHAPES:-300}" --json "$out/scaled_mm.json" \
  > "$out/scaled_mm.log" 2>&1 || failed+=("scaled_mm")
tail -n 4 "$out/scaled_mm.log"
gpu_model="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 |
  tr 'A-Z' 'a-z' | grep -oE 'h100|h200' | head -n 1)"
if [ -n "$gpu_model" ] && [ -f "tests/data/hw/invariance/$gpu_model/manifest.json" ]; then
  "$python" cuda/capture/capture_invariance.py --check-only "tests/data/hw/invariance/$gpu_model" \
    --plans cuda > "$out/invariance.log" 2>&1 || failed+=("invariance")
  tail -n 3 "$out/invariance.log"
else
  echo "run_gpu: invariance: no capture for this GPU model (${gpu_model:-unknown}): skipped"
fi
if ((${#failed[@]})); then
  echo "run_gpu: FAILED stages: ${failed[*]}"
  exit 1
fi
echo "run_gpu: all stages passed"
