#!/usr/bin/env bash
# Builds cuda/capture/capture_cutlass_blockwise.cu against a CUTLASS checkout (not part of fp8sim's
# build; CUTLASS is never committed here): OUT_DIR/capture_cutlass_blockwise_bf16 (example 67's
# groupwise configuration as written) and OUT_DIR/capture_cutlass_blockwise_f32 (D in f32 with
# EpilogueTileAuto, the mainloop unchanged; see the .cu).
# Flags: CUTLASS's own for its examples (CMakeLists.txt: --expt-relaxed-constexpr,
# -ftemplate-backtrace-limit=0, -DCUTLASS_ENABLE_TENSOR_CORE_MMA=1, Release -O3 -DNDEBUG),
# for sm_90a (CUTLASS_NVCC_ARCHS=90a). Both builds run in parallel.
#   bash cuda/capture/capture_cutlass_blockwise.sh CUTLASS_DIR OUT_DIR
set -euo pipefail
CUTLASS=${1:?usage: capture_cutlass_blockwise.sh CUTLASS_DIR OUT_DIR}
OUT=${2:?usage: capture_cutlass_blockwise.sh CUTLASS_DIR OUT_DIR}
NVCC=${NVCC:-nvcc}
SRC="$(cd "$(dirname "$0")" && pwd)/capture_cutlass_blockwise.cu"
mkdir -p "$OUT"
FLAGS=(-std=c++17 -O3 -DNDEBUG -gencode arch=compute_90a,code=sm_90a
       --expt-relaxed-constexpr -ftemplate-backtrace-limit=0 -DCUTLASS_ENABLE_TENSOR_CORE_MMA=1
       -diag-suppress 20012 -I"$CUTLASS/include" -I"$CUTLASS/tools/util/include")
"$NVCC" "${FLAGS[@]}" "$SRC" -o "$OUT/capture_cutlass_blockwise_bf16" &
p1=$!
"$NVCC" "${FLAGS[@]}" -DFP8SIM_OUT_F32 "$SRC" -o "$OUT/capture_cutlass_blockwise_f32" &
p2=$!
rc=0
wait $p1 || rc=1
wait $p2 || rc=1
exit $rc
