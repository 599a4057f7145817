#!/usr/bin/env bash
# Characterisation on a GPU machine without cargo (binaries from the dev machine in .dev/bin):
# container sweeps, numerics, the scale probe asked of the device, SASS with the device's own
# toolchain. Everything lands in $OUT/r (tarred to $OUT/results.tgz).
set -uo pipefail
B=.dev/bin
OUT=${OUT:-/tmp/fp4probe-out}
R=$OUT/r
mkdir -p "$R/sm_90" "$R/sass"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$R/device.txt"
TIMEFORMAT='wall %R s'

echo "== container sweep (every sm_90 input type, every code in every A slot)"
time $B/fp4probe container --all --backend cuda -o "$R/sm_90" > "$R/container-all.log" 2>&1; echo "rc=$?"
tail -40 "$R/container-all.log"

echo "== numerics (every sm_90 variant)"
time $B/fp4probe numerics --all --backend cuda -o "$R/sm_90" > "$R/numerics-all.log" 2>&1; echo "rc=$?"
grep -v '^| `m16n8k[0-9]*\.\(satfinite\.\)\?s32' "$R/numerics-all.log" | head -40

echo "== scale probe asked of the H100"
$B/fp4probe scale --variant m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0 --backend cuda -o "$R/x" 2>&1 | tail -3

echo "== SASS with the device's own toolchain (CUDA 13.0 ptxas + cuobjdump), every sm_90 variant"
time $B/fp4probe sass --all --min-target sm_75,sm_80,sm_89,sm_90 --toolchain system --target device -o "$R/sass" > "$R/sass.log" 2>&1; echo "rc=$?"
tail -5 "$R/sass.log"

for extra in "$@"; do echo "== $extra"; eval "$extra"; done
tar czf "$OUT/results.tgz" -C "$R" .
