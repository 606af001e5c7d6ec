#!/usr/bin/env bash
# run: the main job. Installs and builds (tests/setup.sh), then shows the fp8sim tool at work.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/tests/setup.sh"
fp8sim="$root/build/sim/fp8sim"
echo "\$ fp8sim encode --format e4m3 -- 0.1 448 500 -inf nan"
"$fp8sim" encode --format e4m3 -- 0.1 448 500 -inf nan
echo "\$ fp8sim decode --format e5m2 -- 0x7b 0x01 0x7c"
"$fp8sim" decode --format e5m2 -- 0x7b 0x01 0x7c
