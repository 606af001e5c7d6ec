#!/usr/bin/env bash
# run: the test command. Installs and builds (tests/setup.sh), then runs every ctest test
# (unit, exhaustive, differential, golden, hwdata; gpu tests are skipped without a GPU) and
# executes the notebooks. Extra arguments go to ctest (e.g. -L unit).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/tests/setup.sh"
cd "$root/build"
ctest --output-on-failure -j"$(nproc)" "$@"
