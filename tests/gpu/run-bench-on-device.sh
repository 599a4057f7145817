#!/usr/bin/env bash
# Latency/throughput on the GPU machine (binary from the dev machine in .dev/bin).
set -uo pipefail
B=.dev/bin/fp4probe
OUT=${OUT:-/tmp/fp4probe-out}
mkdir -p "$OUT/sm_90"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
TIMEFORMAT='wall %R s'
$B bench --variant m16n8k16.f32.bf16.bf16.f32 -o "$OUT/sm_90" 2>&1 | tail -30
time $B bench --all -q -o "$OUT/sm_90" > "$OUT/bench-all.log" 2>&1; echo "rc=$?"
tail -70 "$OUT/bench-all.log"
tar czf "$OUT/bench.tgz" -C "$OUT" sm_90 bench-all.log
