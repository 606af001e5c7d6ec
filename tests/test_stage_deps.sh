#!/usr/bin/env bash
# test_stage_deps: cuda/stage_deps.sh's prefix builds the project without the Debian packages.
# Stages into a temporary prefix, configures a build with the documented line
# (-DCMAKE_PREFIX_PATH=<prefix> -DOPENSSL_ROOT_DIR=<prefix>) with /usr taken out of CMake's
# search (CMAKE_IGNORE_PREFIX_PATH: the packages' CMake files here cannot be found), then
# compiles one library translation unit per sim/ folder (the one that includes the most
# package headers: Boost, fmt, CLI11, nlohmann-json, OpenSSL) and Catch2's implementation,
# -fsyntax-only (parsed, templates instantiated and checked, no code generated: the headers
# are what is tested, not the code; about half the CPU time of -O0). The compiler would still
# find a header missing from the prefix in /usr/include, so the check is on the compilations'
# own dependency lists (ninja -t deps): every file they read is in the prefix, in the source or
# build tree, or belongs to the toolchain's packages (those that the C++ and C library headers
# come from).
# Usage: tests/test_stage_deps.sh [<stage script>]   (default cuda/stage_deps.sh)
set -euo pipefail
export LC_ALL=C
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
stage="${1:-$root/cuda/stage_deps.sh}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
fail() { echo "test_stage_deps: FAIL: $*" >&2; exit 1; }
# Staging needs the packages here (tests/setup.sh installs them) and dpkg to know their files.
for p in libboost-dev libfmt-dev libcli11-dev nlohmann-json3-dev libssl-dev catch2; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    { echo "waived: Debian package $p not installed (nothing to stage)"; exit 77; }
done
# The Python ctest found (FP8SIM_PYTHON), for the staging's scan of python/'s sources.
[ -n "${FP8SIM_PYTHON:-}" ] && export PYTHON="${PYTHON:-$FP8SIM_PYTHON}"

bash "$stage" "$prefix" > "$tmp/stage.log" 2>&1 || { cat "$tmp/stage.log"; fail "staging failed"; }
tail -n 2 "$tmp/stage.log"

# The documented configure line, with nothing of /usr's CMake packages in reach.
cxx="$(command -v g++)"
ninja="$(command -v ninja)"
if ! cmake -S "$root" -B "$tmp/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
    -DOPENSSL_ROOT_DIR="$prefix" -DCMAKE_IGNORE_PREFIX_PATH=/usr -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_MAKE_PROGRAM="$ninja" -DCMAKE_CXX_FLAGS_RELEASE="-O0 -fsyntax-only" -DFP8SIM_BUILD_CUDA=OFF \
    -DFP8SIM_UNITY_BUILD=OFF \
    > "$tmp/configure.log" 2>&1; then
  tail -n 20 "$tmp/configure.log"
  fail "configure against the staged prefix failed"
fi
# Each package found in the prefix, not in /usr.
for v in fmt_DIR Boost_DIR CLI11_DIR nlohmann_json_DIR Catch2_DIR OPENSSL_INCLUDE_DIR \
    OPENSSL_CRYPTO_LIBRARY; do
  got="$(sed -n "s/^$v:[A-Z]*=//p" "$tmp/build/CMakeCache.txt")"
  [[ "$got" == "$prefix"/* ]] || fail "$v is '$got', not in the staged prefix"
done

# One translation unit per sim/ folder (the build's own list: compile_commands.json, file by
# file: FP8SIM_UNITY_BUILD=OFF above), the one with the most package includes, and Catch2's
# implementation (tests/catch_session.cpp).
python3 - "$tmp/build/compile_commands.json" "$root" > "$tmp/objects" <<'PY'
import json, os, re, shlex, sys
def output(e):  # the object: -o's argument
    args = shlex.split(e["command"])
    return args[args.index("-o") + 1]
entries = json.load(open(sys.argv[1]))
sim = os.path.join(sys.argv[2], "sim") + os.sep
pkg = re.compile(r'#include <(boost|fmt|CLI|nlohmann|openssl|catch2)/')
best = {}
for e in entries:
    f = e["file"]
    if f.startswith(sim):
        folder = f[len(sim):].split(os.sep)[0]
        n = len(pkg.findall(open(f).read()))
        if folder not in best or n > best[folder][0]:
            best[folder] = (n, output(e))
    elif f.endswith("tests/catch_session.cpp"):
        best["tests"] = (0, output(e))
for folder in sorted(best):
    print(best[folder][1])
PY
[ "$(wc -l < "$tmp/objects")" -ge 9 ] || fail "expected a unit in each of sim/'s folders: $(cat "$tmp/objects")"
mapfile -t objects < "$tmp/objects"
ninja -C "$tmp/build" "${objects[@]}" > "$tmp/build.log" 2>&1 ||
  { tail -n 30 "$tmp/build.log"; fail "compiling against the staged prefix failed"; }

# Every file those compilations read: the prefix, the trees, or the toolchain's packages.
ninja -C "$tmp/build" -t deps "${objects[@]}" | sed -n 's/^    //p' |
  while read -r f; do
    case "$f" in /*) ;; *) f="$tmp/build/$f" ;; esac
    realpath -m "$f"
  done | sort -u > "$tmp/read"
grep -v -e "^$prefix/" -e "^$root/" -e "^$tmp/build/" "$tmp/read" > "$tmp/outside" || true
# The toolchain: the packages that a file including the C++ and C library headers reads.
printf '#include <bits/stdc++.h>\n#include <pthread.h>\n#include <unistd.h>\n' |
  "$cxx" -std=c++20 -x c++ -M - | tr ' \\' '\n\n' | grep '^/' | xargs realpath -m |
  xargs dpkg -S 2>/dev/null | sed 's/: .*//' | tr ',' '\n' | sed 's/^ *//; s/:.*//' | sort -u > "$tmp/toolchain"
# Each outside file's packages (dpkg -S: "pkg:arch, pkg2:arch: path"); none of them the
# toolchain's, or no package at all, is a failure.
xargs -r dpkg -S < "$tmp/outside" 2>/dev/null | sed 's/:[a-z0-9]*\(,\|: \)/\1/g' > "$tmp/owners" || true
bad="$(awk -v toolchain="$tmp/toolchain" -v outside="$tmp/outside" '
  BEGIN { while ((getline t < toolchain) > 0) ok[t] = 1 }
  { i = index($0, ": "); path = substr($0, i + 2); n = split(substr($0, 1, i - 1), pk, ", ")
    for (j = 1; j <= n; j++) if (pk[j] in ok) good[path] = 1
    owner[path] = substr($0, 1, i - 1) }
  END { while ((getline f < outside) > 0) if (!(f in good) && bad++ < 20)
          printf "test_stage_deps: %s (package %s) was read from the system, not the prefix\n",
            f, (f in owner) ? owner[f] : "none" > "/dev/stderr"
        print bad + 0 }' "$tmp/owners")"
((bad == 0)) || fail "$bad files came from outside the staged prefix"
echo "test_stage_deps: ${#objects[@]} translation units compiled against $prefix only" \
  "($(wc -l < "$tmp/read") files read, $(wc -l < "$tmp/outside") of them the toolchain's:" \
  "$(paste -sd' ' "$tmp/toolchain"))"
