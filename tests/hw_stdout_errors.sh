#!/bin/sh
# hw_stdout_errors: fp8sim-hw (the path in $1) with its stdout full or an error with stderr
# closed exits 2, never 0 or 77 (which ctest reads as skipped). No GPU needed.
hw="$1"
"$hw" --help > /dev/full 2> /dev/null
rc=$?
[ "$rc" -eq 2 ] || { echo "fp8sim-hw --help > /dev/full: exit $rc, want 2"; exit 1; }
"$hw" --nonsense 2>&-
rc=$?
[ "$rc" -eq 2 ] || { echo "fp8sim-hw --nonsense 2>&-: exit $rc, want 2"; exit 1; }
"$hw" check > /dev/full 2> /dev/null < /dev/null &
pid=$!
# Without a GPU it says so and exits at once (77 before, 2 now: the line was lost); with one
# the whole check runs, so it is stopped after a while (not this test's question).
i=0
while [ "$i" -lt 40 ] && kill -0 "$pid" 2> /dev/null; do sleep 0.5; i=$((i + 1)); done
if kill -0 "$pid" 2> /dev/null; then
  kill "$pid"
  wait "$pid" 2> /dev/null
  echo "fp8sim-hw check > /dev/full: a GPU is here (the check runs); only --help checked"
  exit 0
fi
wait "$pid"
rc=$?
[ "$rc" -eq 2 ] || { echo "fp8sim-hw check > /dev/full (no GPU): exit $rc, want 2"; exit 1; }
echo "fp8sim-hw: stdout errors exit 2"
