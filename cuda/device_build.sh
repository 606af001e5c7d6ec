#!/usr/bin/env bash
# device_build: builds a self-contained fp8sim-hw for the GPU machine (which has CUDA 13 but
# none of this machine's fmt/Boost/CLI11/nlohmann-json packages) into .hwbin/.
#   fmt header-only, Boost/CLI11/nlohmann-json header-only, cudart and libstdc++ static,
#   cuBLASLt dynamic (found on the GPU machine through rpath /usr/local/cuda/lib64 or
#   LD_LIBRARY_PATH). Usage: cuda/device_build.sh [outdir]   (default: <repo>/.hwbin)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/.hwbin}"
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
mkdir -p "$out/obj"
cxxflags=(-std=c++20 -O2 -DFMT_HEADER_ONLY -I"$root/sim" -I"$root/cuda" -I/usr/local/cuda/include)
# Every source of the library (as sim/CMakeLists.txt globs them).
sim_srcs=()
for f in "$root"/sim/*.cpp; do sim_srcs+=("$(basename "$f" .cpp)"); done
objs=()
# Rebuilds an object only when its source or any header of sim/ or cuda/ is newer.
# (sim objects look at sim/ headers only; cuda/ objects at both).
stale() {
  local src="$1" obj="$2"; shift 2
  [[ ! -f "$obj" || "$src" -nt "$obj" ]] || [[ -n "$(find "$@" \( -name '*.hpp' -o -name '*.cuh' \) -newer "$obj" | head -1)" ]]
}
# The git revision, as the CMake build records it (sim/revision.cmake).
cmake -DSOURCE_DIR="$root" -DOUT="$out/obj/revision.cpp" -P "$root/sim/revision.cmake"
o="$out/obj/revision.o"; stale "$out/obj/revision.cpp" "$o" "$root/sim" && g++ "${cxxflags[@]}" -c "$out/obj/revision.cpp" -o "$o"; objs+=("$o")
for s in "${sim_srcs[@]}"; do
  o="$out/obj/sim_$s.o"; stale "$root/sim/$s.cpp" "$o" "$root/sim" && g++ "${cxxflags[@]}" -c "$root/sim/$s.cpp" -o "$o"; objs+=("$o")
done
for s in hw_harness hw_main cublaslt_fp8; do
  o="$out/obj/$s.o"; stale "$root/cuda/$s.cpp" "$o" "$root/sim" "$root/cuda" && g++ "${cxxflags[@]}" -c "$root/cuda/$s.cpp" -o "$o"; objs+=("$o")
done
for s in wgmma_m64nNk32_fp8 mma_m16n8k32_row_col_f32_fp8 cvt_f32_to_f8x2; do
  o="$out/obj/$s.o"
  stale "$root/cuda/$s.cu" "$o" "$root/cuda" && "$nvcc" -std=c++20 -O2 -gencode=arch=compute_90a,code=sm_90a -I"$root/cuda" -c "$root/cuda/$s.cu" -o "$o"
  objs+=("$o")
done
"$nvcc" -gencode=arch=compute_90a,code=sm_90a -cudart static "${objs[@]}" -o "$out/fp8sim-hw" \
  -L/usr/local/cuda/lib64 -lcublasLt -Xcompiler -static-libstdc++,-static-libgcc \
  -Xlinker -rpath,/usr/local/cuda/lib64 -Xlinker -rpath,'$ORIGIN' -lpthread
echo "built $out/fp8sim-hw ($(sed -n 's/.*return "\(.*\)";.*/\1/p' "$out/obj/revision.cpp"))"
