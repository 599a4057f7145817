#!/usr/bin/env bash
# wgmma numerics on an sm_90a GPU, in one device call: every dense type set, A from shared
# memory and from registers, at N = 8 and 256, written to reports/sm_90/wgmma
# (<id>.numerics.json and numerics.md), plus the FP8 case's findings printed in full.
#
# Usage (from the checkout root on the device): tests/gpu/run-wgmma-numerics-on-device.sh
# Needs .dev/bin/fp4probe (built elsewhere and carried) and $OUT. The binary's folder goes on
# PATH so that the recorded command reads `fp4probe numerics ...`.
set -uo pipefail
export PATH=$PWD/.dev/bin:$PATH
OUT=${OUT:-/tmp/fp4probe-wgmma-numerics-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv | tee "$OUT/device.txt"
t0=$(date +%s)
fp4probe numerics --family wgmma --all --n 8,256 --backend cuda -o reports/sm_90/wgmma \
    >"$OUT/numerics.log" 2>&1
echo "numerics rc=$? in $(($(date +%s) - t0)) s" | tee "$OUT/numerics.time"
tar czf "$OUT/numerics.tgz" reports/sm_90/wgmma/*.numerics.json reports/sm_90/wgmma/numerics.md
fp4probe numerics --family wgmma --variant m64n8k32.f32.e4m3.e4m3.ss --backend cuda \
    -o "$(mktemp -d)" 2>&1 | tee "$OUT/e4m3.log"
