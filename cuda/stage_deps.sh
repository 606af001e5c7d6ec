#!/usr/bin/env bash
# stage_deps: copies this machine's C++ dependencies (Debian packages: fmt, CLI11,
# nlohmann-json, Catch2 v2, OpenSSL's libcrypto, the Boost headers fp8sim includes) with their CMake
# package files into one folder laid out as a prefix, for a GPU machine that has CUDA, CMake
# and ninja but none of these packages. There the project's own CMake build runs as usual:
#   cmake -S . -B build -G Ninja -DCMAKE_PREFIX_PATH=<folder> -DOPENSSL_ROOT_DIR=<folder>
# Usage: cuda/stage_deps.sh <folder>   (x86-64 Debian/Ubuntu layout; about 15 MB)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: cuda/stage_deps.sh <folder>}"
arch=x86_64-linux-gnu
rm -rf "$out"
mkdir -p "$out/include" "$out/lib/$arch/cmake" "$out/lib/cmake" "$out/share/cmake"
# Header-only packages and their CMake files, at the same places relative to the prefix.
cp -r /usr/include/fmt /usr/include/CLI /usr/include/nlohmann /usr/include/catch2 "$out/include/"
cp -r /usr/lib/$arch/cmake/fmt "/usr/lib/$arch/cmake/Boost-"* "/usr/lib/$arch/cmake/boost_headers-"* "$out/lib/$arch/cmake/"
cp -P /usr/lib/$arch/libfmt.so* "$out/lib/$arch/"
cp -r /usr/lib/cmake/Catch2 "$out/lib/cmake/"
cp /usr/lib/libCatch2WithMain.a "$out/lib/"  # named by its CMake files (fp8sim has its own main)
cp -r /usr/share/cmake/CLI11 /usr/share/cmake/nlohmann_json "$out/share/cmake/"
# OpenSSL (the CLI's SHA-256 of analyze inputs): headers, the arch's configuration headers
# beside them, libcrypto (found through -DOPENSSL_ROOT_DIR=<folder>).
cp -r /usr/include/openssl "$out/include/"
cp /usr/include/$arch/openssl/* "$out/include/openssl/"
cp -P /usr/lib/$arch/libcrypto.so* "$out/lib/"
# Boost: only the headers fp8sim's sources include (their closure, as g++ sees it).
for src in "$root"/sim/*.cpp; do
  grep -q '<boost/' "$src" || continue
  g++ -std=c++20 -M -I"$root/sim" "$src"
done | tr ' \\' '\n\n' | grep '^/usr/include/boost/' | sort -u | while read -r h; do
  mkdir -p "$out/include/$(dirname "${h#/usr/include/}")"
  cp "$h" "$out/include/${h#/usr/include/}"
done
cp /usr/include/boost/version.hpp "$out/include/boost/"
echo "staged $(du -sh "$out" | cut -f1) in $out"
