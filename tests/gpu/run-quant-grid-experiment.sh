#!/usr/bin/env bash
# Quantizer experiment, one device call: how the quantizers' GB/s depends on the timing method
# (a wait after every run vs runs queued back to back) and on the grid (one CTA per tile vs a
# capped grid looping over tiles, FP4PROBE_QUANT_CTAS_PER_SM). Binaries from .dev/bin (built on
# the dev machine); results in $OUT.
set -uo pipefail
B=.dev/bin
OUT=${OUT:-/tmp/fp4probe-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
echo "== GPU tests, one CTA per tile and a grid of 2 CTAs per SM looping over tiles"
$B/gpu_quant --ignored --test-threads 1 2>&1 | grep -E "test result|FAIL|panick"
FP4PROBE_QUANT_CTAS_PER_SM=2 $B/gpu_quant --ignored --test-threads 1 2>&1 | grep -E "test result|FAIL|panick"
bench() {  # name, then quant-bench options; env set by the caller
  echo "== $1"
  local name=$1; shift
  $B/fp4probe quant-bench --no-check --search-size 256x256 --csv "$OUT/$name.csv" "$@" 2>/dev/null | grep -v "^format,\|^mxfp4\|^nvfp4"
}
bench synced --timing synced
bench queued-1 --timing queued
for k in 2 4 8; do
  FP4PROBE_QUANT_CTAS_PER_SM=$k bench "queued-ctas$k" --timing queued
done
bench queued-2 --timing queued
bench queued-sizes --timing queued --sizes 2048x8192,4096x8192,8192x8192,16384x8192
