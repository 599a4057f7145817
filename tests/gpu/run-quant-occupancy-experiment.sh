#!/usr/bin/env bash
# Quantizer experiment, one device call: 16-bit-input quantizers with more resident CTAs (a
# register cap through QUANT_MIN_BLOCKS) and one or two groups per thread (UNROLL16), each
# variant timed twice, interleaved; results in $OUT. Binaries from .dev/bin.
set -uo pipefail
B=.dev/bin
OUT=${OUT:-/tmp/fp4probe-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
variants=("default::" "mb5:QUANT_MIN_BLOCKS=5:" "mb6:QUANT_MIN_BLOCKS=6:" "u2::2" "u2mb6:QUANT_MIN_BLOCKS=6:2" "u2mb8:QUANT_MIN_BLOCKS=8:2")
for round in 1 2; do
  for v in "${variants[@]}"; do
    IFS=: read -r name defs unroll <<<"$v"
    env ${defs:+FP4PROBE_QUANT_DEFINES=$defs} ${unroll:+FP4PROBE_QUANT_UNROLL16=$unroll} \
      $B/fp4probe quant-bench --no-check --search-size 256x256 --dtypes ${DTYPES:-bf16} --sizes 4096x8192,8192x8192 \
      --csv "$OUT/$name-$round.csv" >/dev/null 2>&1 || echo "$name failed"
  done
done
if [ -n "${CHECK:-}" ]; then
  FP4PROBE_QUANT_DEFINES="$CHECK" $B/gpu_quant --ignored --test-threads 1 2>&1 | grep -E "test result|FAIL|panick"
fi
