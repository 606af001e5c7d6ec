#!/usr/bin/env bash
# stage_deps: copies this machine's C++ dependencies from Debian's packages (fmt, CLI11,
# nlohmann-json, Catch2 v2, OpenSSL's libcrypto, the Boost headers) with their CMake package
# files into one folder laid out as a prefix, for a GPU machine that has CUDA, CMake, ninja and
# g++ but none of these packages. There the project's own CMake build runs as usual:
#   cmake -S . -B build -G Ninja -DCMAKE_PREFIX_PATH=<folder> -DOPENSSL_ROOT_DIR=<folder>
# (or tests/run_gpu.sh with FP8SIM_DEPS=<folder>).
# Which headers: the ones the build reads. A scratch configure of this checkout (tests,
# experiments, the CUDA parts where nvcc is, the Python module where nanobind is) writes
# compile_commands.json, the build's own list of translation units; cuda/build_inputs.py
# runs each as a dependency listing (-M); every file
# in that list that one of the packages below installed is staged at its place under the
# prefix. The CMake package folders are the ones that configure found (CMakeCache.txt).
# tests/test_stage_deps.sh (ctest stage_deps) compiles against a staged prefix only.
# Usage: cuda/stage_deps.sh <folder>   (Debian/Ubuntu; about 10 MB)
set -euo pipefail
export LC_ALL=C   # one sort order for sort, comm and build_inputs.py
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: cuda/stage_deps.sh <folder>}"
arch="$(gcc -print-multiarch)"
# The Debian packages to stage (tests/setup.sh installs them), and the -dev packages they
# stand for (libboost-dev: libboost1.74-dev).
packages=(libboost-dev libfmt-dev libcli11-dev nlohmann-json3-dev libssl-dev catch2)
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    { echo "stage_deps: error: Debian package $p is not installed here (tests/setup.sh installs it)" >&2; exit 2; }
  echo "$p"
  dpkg-query -W -f='${Depends}\n' "$p" | tr ',' '\n' | sed 's/^ *//; s/[ :(].*//' | grep -- '-dev$' || true
done | sort -u > "$tmp/packages"
xargs dpkg -L < "$tmp/packages" | sort -u > "$tmp/owned"

# 1. The build's translation units: a scratch configure (nothing is compiled).
python="${PYTHON:-$root/.venv/bin/python}"
[ -x "$python" ] || python="$(command -v python3)"
with_python=OFF
"$python" -m nanobind --cmake_dir > /dev/null 2>&1 && with_python=ON
if ! cmake -S "$root" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DFP8SIM_BUILD_TESTS=ON -DFP8SIM_BUILD_EXPERIMENTS=ON -DFP8SIM_BUILD_CUDA=ON \
    -DFP8SIM_BUILD_PYTHON="$with_python" -DFP8SIM_UNITY_BUILD=OFF \
    -DPython_EXECUTABLE="$python" -DPython3_EXECUTABLE="$python" > "$tmp/configure.log" 2>&1; then
  tail -n 20 "$tmp/configure.log" >&2
  echo "stage_deps: error: configuring the scratch build failed (the lines above)" >&2
  exit 2
fi
grep -q '^-- fp8sim: CUDA' "$tmp/configure.log" ||
  echo "stage_deps: note: no nvcc here: cuda/'s sources were not listed"
[ "$with_python" = ON ] ||
  echo "stage_deps: note: no nanobind for $python: python/'s sources were not listed"
units="$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$tmp/build/compile_commands.json")"

# 2. The files their compilations read; the packages' among them, staged.
python3 "$root/cuda/build_inputs.py" "$tmp/build" > "$tmp/inputs"
comm -12 "$tmp/inputs" "$tmp/owned" > "$tmp/staged"
rm -rf "$out"
mkdir -p "$out/include" "$out/lib/$arch"
while read -r h; do
  case "$h" in
    /usr/include/"$arch"/*) rel="${h#/usr/include/"$arch"/}" ;;   # opensslconf.h, configuration.h
    /usr/include/*) rel="${h#/usr/include/}" ;;
    *) echo "stage_deps: error: $h (from a staged package) is not under /usr/include" >&2; exit 2 ;;
  esac
  mkdir -p "$out/include/$(dirname "$rel")"
  cp "$h" "$out/include/$rel"
done < "$tmp/staged"
# What the packages' CMake files look for besides: Boost's check the version against
# boost/version.hpp, FindOpenSSL finds its include folder by openssl/ssl.h.
cp /usr/include/boost/version.hpp "$out/include/boost/"
cp /usr/include/openssl/ssl.h "$out/include/openssl/"

# 3. The CMake package folders configure used, at the same place relative to the prefix.
cache="$tmp/build/CMakeCache.txt"
for pkg in fmt Boost boost_headers CLI11 nlohmann_json Catch2; do
  dir="$(sed -n "s/^${pkg}_DIR:[A-Z]*=//p" "$cache")"
  case "$dir" in
    /usr/*) ;;
    *) echo "stage_deps: error: configure found no $pkg package folder under /usr ($dir)" >&2; exit 2 ;;
  esac
  rel="${dir#/usr/}"
  mkdir -p "$out/$(dirname "$rel")"
  cp -r "$dir" "$out/$rel"
done
# The libraries those files and FindOpenSSL name: libfmt (shared), Catch2's main (unused:
# fp8sim has its own), libcrypto (found through -DOPENSSL_ROOT_DIR=<folder>).
cp -P /usr/lib/"$arch"/libfmt.so* "$out/lib/$arch/"
cp /usr/lib/libCatch2WithMain.a "$out/lib/"
cp -P /usr/lib/"$arch"/libcrypto.so* "$out/lib/"

echo "stage_deps: $units translation units read $(wc -l < "$tmp/inputs") files;" \
  "staged the $(wc -l < "$tmp/staged") of them from $(paste -sd' ' "$tmp/packages")"
echo "stage_deps: staged $(du -sh "$out" | cut -f1) in $out"
