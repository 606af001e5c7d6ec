#!/usr/bin/env bash
# run: the test command. Installs and builds (tests/setup.sh), then runs
#   1. ASan + UBSan (clang, build-asan, -fno-sanitize-recover=all): the unit, golden and
#      hwdata tests (not the exhaustive ones; nine sweeps on a strided subset, named in
#      tests/sanitized.hpp: stage 3 runs them whole), the fuzz corpora, and a short
#      coverage-guided run of each fuzz target (FP8SIM_FUZZ_SECONDS each, default 20);
#   2. ThreadSanitizer (gcc, build-tsan): test_threads, the threaded engine and sweeps, run
#      last (its build starts beside the last fuzz round when that round leaves a core idle and
#      goes on beside stages 3 and 4 at nice 19, on the cycles their tests leave idle; this
#      stage's time is what was left of the build, and the test);
#   (1 and 2 compile at -O1 -g1, all instrumented; at -O0 Catch2's runner, and in 1 the CLI's own
#   files, the experiments' driver and the test binaries that mostly run the CLI (DRIVER in
#   tests/CMakeLists.txt), which do little of the tests' work: the CMakeLists.txt)
#   3. every ctest test of the plain build (unit, exhaustive, differential, golden, hwdata;
#      gpu tests are skipped without a GPU) and the notebooks;
#   4. the documentation site (mkdocs build --strict) and the Python package's tests (pytest,
#      tests/python, as many workers as cores (pytest-xdist), which also runs every example of
#      README.md and docs/ that shows output);
#      pytest's 15 slowest tests and its summary are the last output (ctest prints each test's
#      time as it ends).
# Each stage prints how long it took. Extra arguments go to the plain ctest (e.g. -L unit).
# FP8SIM_SANITIZERS=0 skips 1 and 2. The exit code is non-zero when any stage failed.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
start=$SECONDS
"$root/tests/setup.sh" tests || exit 1
cd "$root"
jobs="$(nproc)"
failed=()
lap=$start
took() { echo "run: $1 took $((SECONDS - lap)) s"; lap=$SECONDS; }
took "setup (install and build)"

# One sanitizer build: configure (once), build only the targets its tests run (the test
# binaries that `ctest -N` lists for the stage's labels, the CLI and the experiment binary they
# call, the fuzz targets), run; records the stage on failure. pch: whether the test binaries
# share a precompiled header (FP8SIM_TEST_PCH; it pays for itself from a few test files on).
sanitizer_stage() {
  local name="$1" dir="$2" compiler="$3" sanitize="$4" fuzz="$5" labels="$6" pch="$7"
  echo "run: $name ($dir)"
  mkdir -p "$dir"
  # -O1 -g1 (line tables): what the sanitizers need for their reports, and much cheaper to
  # compile than RelWithDebInfo's default -O2 -g. Linked by lld where installed (tests/setup.sh
  # installs it): the ASan tree's 30 links took 5.9 CPU-s with it, 20.7 with GNU ld.
  local ldflags=""
  command -v ld.lld > /dev/null && ldflags="-fuse-ld=lld"
  if ! cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_EXE_LINKER_FLAGS="$ldflags" \
      -DCMAKE_CXX_COMPILER="$compiler" -DFP8SIM_SANITIZE="$sanitize" -DFP8SIM_FUZZ="$fuzz" \
      -DFP8SIM_TEST_PCH="$pch" \
      -DFP8SIM_BUILD_CUDA=OFF -DPython3_EXECUTABLE="$root/.venv/bin/python" \
      > "$dir/stage.log" 2>&1; then
    tail -n 40 "$dir/stage.log"
    failed+=("$name build")
    return 1
  fi
  local known wanted=() t
  # The CLI and exp_g_storage: the CLI tests call them (ctest labels unit).
  [[ "$labels" == *unit* ]] && wanted+=(fp8sim exp_g_storage)
  known="$(ninja -C "$dir" -t targets all 2>/dev/null | sed -n 's/^\([A-Za-z0-9_]*\): .*/\1/p' | sort -u)"
  for t in $( (cd "$dir" && ctest -N $labels) | sed -n 's/^ *Test *#[0-9]*: *//p') fuzz_npy \
      fuzz_manifest fuzz_names fuzz_values fuzz_plan_table; do
    grep -qx "$t" <<< "$known" && wanted+=("$t")
  done
  if ! cmake --build "$dir" -j"$jobs" --target "${wanted[@]}" >> "$dir/stage.log" 2>&1; then
    tail -n 40 "$dir/stage.log"
    failed+=("$name build")
    return 1
  fi
}

# The ThreadSanitizer build: one test file (test_threads), so no precompiled header.
tsan_build() { sanitizer_stage "ThreadSanitizer" build-tsan g++ thread OFF "-R ^test_threads\$" OFF; }
tsan_pid=""
tsan_note="all of its build in this stage"

if [ "${FP8SIM_SANITIZERS:-1}" != 0 ]; then
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1"
  asan_labels="-L unit|golden|hwdata|fuzz -LE exhaustive|gpu|notebooks"
  if sanitizer_stage "ASan+UBSan" build-asan clang++-14 "address,undefined" ON "$asan_labels" ON; then
    took "ASan+UBSan build"
    (cd build-asan && ctest --output-on-failure -j"$jobs" $asan_labels) || failed+=("ASan+UBSan tests")
    took "ASan+UBSan tests"
    # The fuzz targets, as many at once as there are cores, each for FP8SIM_FUZZ_SECONDS.
    seconds="${FP8SIM_FUZZ_SECONDS:-20}"
    fuzz_one() {
      local t="$1"
      mkdir -p "build-asan/fuzz-corpus/$t" "build-asan/fuzz-crashes"
      build-asan/tests/fuzz/fuzz_$t -max_total_time="$seconds" -print_final_stats=1 \
        -artifact_prefix=build-asan/fuzz-crashes/ "build-asan/fuzz-corpus/$t" \
        "tests/fuzz/corpus/$t" > "build-asan/fuzz-$t.log" 2>&1
    }
    targets=(npy manifest names values plan_table)
    for ((i = 0; i < ${#targets[@]}; i += jobs)); do
      round=("${targets[@]:i:jobs}")
      # A round that leaves a core idle: the ThreadSanitizer build starts beside it, at nice 19,
      # and goes on beside ctest, mkdocs and pytest: its compilers take the cycles the tests
      # leave idle and yield to the rest (the fuzzers run for a fixed time: a slowed one would
      # test less). Its output is shown, and its test run, after pytest.
      if ((${#round[@]} < jobs)) && [ -z "$tsan_pid" ]; then
        mkdir -p build-tsan
        tsan_start=$SECONDS
        ( renice -n 19 -p "$BASHPID" > /dev/null || true; tsan_build ) > build-tsan/run.out 2>&1 &
        tsan_pid=$!
      fi
      pids=()
      for t in "${round[@]}"; do fuzz_one "$t" & pids+=("$!:$t"); done
      for p in "${pids[@]}"; do
        t="${p#*:}"
        if wait "${p%%:*}"; then
          echo "run: fuzz_$t: $(grep -E '^#[0-9]+[[:space:]]+DONE' "build-asan/fuzz-$t.log" | tail -n 1)"
        else
          tail -n 30 "build-asan/fuzz-$t.log"
          failed+=("fuzz_$t")
        fi
      done
    done
    took "fuzzing (${#targets[@]} targets x $seconds s, $jobs at once${tsan_pid:+, and the ThreadSanitizer build beside the last round})"
  fi
fi

cd "$root/build"
ctest --output-on-failure -j"$jobs" "$@" || failed+=("ctest")
cd "$root"
took "ctest"
# The documentation site: every page in mkdocs.yml's nav, links checked (strict).
.venv/bin/python -m mkdocs build --strict --quiet --site-dir build/site || failed+=("mkdocs")
took "mkdocs build --strict"
rc=0
FP8SIM_CLI="$root/build/sim/fp8sim" FP8SIM_TEST_DATA="$root/tests/data" \
  .venv/bin/python -m pytest -q -p no:cacheprovider -n "$jobs" --dist worksteal --durations=15 tests/python || rc=$?
# pytest's exit 5 ("no tests collected") is not a failure
if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then failed+=("pytest"); fi
took "pytest"

# 2. ThreadSanitizer: the rest of its build (begun beside the last fuzz round), then its test.
if [ "${FP8SIM_SANITIZERS:-1}" != 0 ]; then
  tsan_ok=0
  if [ -n "$tsan_pid" ]; then
    tsan_note="its build began $((SECONDS - tsan_start)) s before this stage, beside the tests"
    wait "$tsan_pid" || tsan_ok=$?
    cat build-tsan/run.out
    ((tsan_ok == 0)) || failed+=("ThreadSanitizer build")
  else
    tsan_build || tsan_ok=$?
  fi
  if ((tsan_ok == 0)); then
    (cd build-tsan && TSAN_OPTIONS="halt_on_error=1" ctest --output-on-failure -R '^test_threads$') \
      || failed+=("ThreadSanitizer tests")
    took "ThreadSanitizer build and tests ($tsan_note)"
  fi
fi
echo "run: all stages took $((SECONDS - start)) s"
if ((${#failed[@]})); then
  echo "run: FAILED stages: ${failed[*]}" >&2
  exit 1
fi
