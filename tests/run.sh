#!/usr/bin/env bash
# run: the test command. Installs and builds (tests/setup.sh), then runs
#   1. ASan + UBSan (clang, build-asan, -fno-sanitize-recover=all): the unit, golden and
#      hwdata tests (not the exhaustive ones), the fuzz corpora, and a short coverage-guided
#      run of each fuzz target (FP8SIM_FUZZ_SECONDS each, default 20);
#   2. ThreadSanitizer (gcc, build-tsan): test_threads, the threaded engine and sweeps;
#   3. every ctest test of the plain build (unit, exhaustive, differential, golden, hwdata;
#      gpu tests are skipped without a GPU) and the notebooks;
#   4. the Python package's tests (pytest, tests/python); its summary is the last output.
# Extra arguments go to the plain ctest (e.g. -L unit). FP8SIM_SANITIZERS=0 skips 1 and 2.
# The exit code is non-zero when any stage failed.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/tests/setup.sh" || exit 1
cd "$root"
jobs="$(nproc)"
failed=()

# One sanitizer build: configure (once), build, run; records the stage on failure.
sanitizer_stage() {
  local name="$1" dir="$2" compiler="$3" sanitize="$4" fuzz="$5" targets="$6"
  echo "run: $name ($dir)"
  mkdir -p "$dir"
  if ! cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_COMPILER="$compiler" -DFP8SIM_SANITIZE="$sanitize" -DFP8SIM_FUZZ="$fuzz" \
      -DFP8SIM_BUILD_CUDA=OFF -DPython3_EXECUTABLE="$root/.venv/bin/python" \
      > "$dir/stage.log" 2>&1 || ! cmake --build "$dir" -j"$jobs" $targets >> "$dir/stage.log" 2>&1; then
    tail -n 40 "$dir/stage.log"
    failed+=("$name build")
    return 1
  fi
}

if [ "${FP8SIM_SANITIZERS:-1}" != 0 ]; then
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1"
  if sanitizer_stage "ASan+UBSan" build-asan clang++-14 "address,undefined" ON ""; then
    (cd build-asan && ctest --output-on-failure -j"$jobs" -L 'unit|golden|hwdata|fuzz' \
        -LE 'exhaustive|gpu|notebooks') || failed+=("ASan+UBSan tests")
    seconds="${FP8SIM_FUZZ_SECONDS:-20}"
    for t in npy manifest names values; do
      mkdir -p "build-asan/fuzz-corpus/$t" "build-asan/fuzz-crashes"
      if build-asan/tests/fuzz/fuzz_$t -max_total_time="$seconds" -print_final_stats=1 \
          -artifact_prefix=build-asan/fuzz-crashes/ "build-asan/fuzz-corpus/$t" \
          "tests/fuzz/corpus/$t" > "build-asan/fuzz-$t.log" 2>&1; then
        echo "run: fuzz_$t: $(grep -E '^#[0-9]+[[:space:]]+DONE' "build-asan/fuzz-$t.log" | tail -n 1)"
      else
        tail -n 30 "build-asan/fuzz-$t.log"
        failed+=("fuzz_$t")
      fi
    done
  fi
  if sanitizer_stage "ThreadSanitizer" build-tsan g++ thread OFF "--target test_threads"; then
    (cd build-tsan && TSAN_OPTIONS="halt_on_error=1" ctest --output-on-failure -R '^test_threads$') \
      || failed+=("ThreadSanitizer tests")
  fi
fi

cd "$root/build"
ctest --output-on-failure -j"$jobs" "$@" || failed+=("ctest")
cd "$root"
rc=0
FP8SIM_CLI="$root/build/sim/fp8sim" FP8SIM_TEST_DATA="$root/tests/data" \
  .venv/bin/python -m pytest -q -p no:cacheprovider tests/python || rc=$?
# pytest's exit 5 ("no tests collected") is not a failure
if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then failed+=("pytest"); fi
if ((${#failed[@]})); then
  echo "run: FAILED stages: ${failed[*]}" >&2
  exit 1
fi
