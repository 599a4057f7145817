#!/usr/bin/env bash
# The quantizers on a GPU machine, in two parts (each one device call; no cargo there).
# Binaries built on the dev machine are carried in .dev/bin: fp4probe and the gpu_quant test
# binary from
# `cargo test --release --no-run`. Results go to $OUT.
#   part 1: GPU tests (kernels = vectors = CPU reference), fp4probe quant-bench, torch selftest,
#           the torch-vs-fp4probe byte check, and torch reading fp4probe's files as its
#           FP4/FP8 dtypes (quant_torch_dtypes.py)
#   part all: both
#   part 2: the torch bench (eager, torch.compile), merge into reports/sm_90/quant-bench.csv,
#           compute-sanitizer
set -uo pipefail
B=.dev/bin
OUT=${OUT:-/tmp/fp4probe-out}
PART=${1:-1}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
if [ "$PART" = 1 ] || [ "$PART" = all ]; then
  echo "== GPU tests: kernels against the independent vectors and the CPU reference"
  $B/gpu_quant --ignored --test-threads 1 --nocapture 2>&1 | tail -8
  echo "== fp4probe quant-bench"
  $B/fp4probe quant-bench --csv "$OUT/fp4probe.csv" --search-csv "$OUT/quant-search.csv" 2>"$OUT/quant-bench.log"; echo "rc=$?"
  tail -5 "$OUT/quant-bench.log"
  # Throttle reasons once, after the bench (not polled during it: a run that polled
  # nvidia-smi every 100 ms had one outlier row).
  nvidia-smi -q -d PERFORMANCE | grep -E "Active|Idle|Power Cap|Thermal|Sync Boost" | head -8
  echo "== torch selftest and byte check against fp4probe"
  python3 tests/gpu/quant_bench_torch.py selftest 2>&1 | tail -6
  python3 tests/gpu/quant_bench_torch.py check --fp4probe $B/fp4probe --workdir /tmp/qcheck 2>&1 | tail -25; echo "check rc=$?"
  echo "== torch loads fp4probe's files as float4_e2m1fn_x2 / float8_*, dequantizes them as fp4probe does"
  python3 tests/gpu/quant_torch_dtypes.py --fp4probe $B/fp4probe --workdir /tmp/qdtypes 2>&1 | tail -40; echo "dtypes rc=${PIPESTATUS[0]}"
fi
if [ "$PART" = 2 ] || [ "$PART" = all ]; then
  echo "== torch bench"
  python3 tests/gpu/quant_bench_torch.py bench --csv "$OUT/torch.csv" 2>&1 | tail -5
  if [ -f "$OUT/fp4probe.csv" ]; then
    python3 tests/gpu/quant_bench_torch.py merge --csv "$OUT/torch.csv" --csv "$OUT/fp4probe.csv" \
      --out "$OUT/quant-bench.csv" --markdown "$OUT/quant-bench.md" && cat "$OUT/quant-bench.md"
  fi
  echo "== compute-sanitizer on the kernels (memcheck, racecheck, synccheck)"
  python3 -c "
import numpy as np
x = np.random.default_rng(3).standard_normal((333, 160)).astype(np.float32)
x[5, 7] = np.nan; x[40, 100] = np.inf; x[200] *= 1e-3   # NaN blocks and blocks at the scale clamp
np.save('/tmp/san.npy', x)"
  for fmt in "mxfp4 --search" "nvfp4 --search" "nvfp4 --nvfp4-levels 1" "nvfp4 --tensor-amax 2.5"; do
    for tool in memcheck racecheck synccheck; do
      compute-sanitizer --tool $tool --error-exitcode 9 $B/fp4probe quantize --format $fmt --backend cuda --check-cpu \
        --input /tmp/san.npy --output /tmp/san.safetensors 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|error|check:" | head -3
      echo "$tool $fmt rc=${PIPESTATUS[0]}"
    done
  done
fi
