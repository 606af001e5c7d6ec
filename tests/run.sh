#!/usr/bin/env bash
# run: the test command. Installs and builds (tests/setup.sh), then runs every ctest test
# (unit, exhaustive, differential, golden, hwdata; gpu tests are skipped without a GPU) and
# executes the notebooks; then the Python package's tests (pytest, tests/python). Extra
# arguments go to ctest (e.g. -L unit).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/tests/setup.sh"
cd "$root/build"
ctest --output-on-failure -j"$(nproc)" "$@"
cd "$root"
rc=0
FP8SIM_CLI="$root/build/sim/fp8sim" FP8SIM_TEST_DATA="$root/tests/data" \
  .venv/bin/python -m pytest -q -p no:cacheprovider tests/python || rc=$?
if [ "$rc" -eq 5 ]; then rc=0; fi  # pytest's "no tests collected" is not a failure
exit "$rc"
