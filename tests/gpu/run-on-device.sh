#!/usr/bin/env bash
# Lane maps on a GPU machine without cargo, in one call: the catalog, a block-scaled variant
# refused, seven timed single probes, the whole catalog with --backend cuda, and the GPU test of
# the CUDA backend. Binaries built on the dev machine are carried in .dev/bin (fp4probe, and the
# gpu_backend test binary from `cargo test --release --no-run`). Results go to $OUT (or
# /tmp/fp4probe-out).
set -uo pipefail
B=.dev/bin
OUT=${OUT:-/tmp/fp4probe-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
$B/fp4probe catalog > "$OUT/catalog.txt" 2>&1; head -2 "$OUT/catalog.txt"; grep -c " yes$" "$OUT/catalog.txt"

echo "== a block-scaled variant asked of the H100"
$B/fp4probe fragment --shape m16n8k32 --kind mxf8f6f4 --a e2m1 --b e2m1 --backend cuda -o "$OUT/x"; echo "rc=$?"

echo "== one full probe of m16n8k32 e4m3, fresh process each time (module load and JIT included)"
TIMEFORMAT='wall %R s'
for i in 1 2 3 4 5 6 7; do time $B/fp4probe fragment --variant m16n8k32.f32.e4m3.e4m3.f32 --backend cuda -q -o "$OUT/single"; done

echo "== the whole sm_90 catalog"
time $B/fp4probe fragment --all --backend cuda -q -o "$OUT/sm_90" > "$OUT/all.txt" 2>&1; echo "rc=$?"
tail -3 "$OUT/all.txt"; grep -v '^PASS' "$OUT/all.txt" | grep -v '^skip' | head
tar czf "$OUT/sm_90.tgz" -C "$OUT" sm_90 all.txt catalog.txt

echo "== GPU test: CUDA backend against the emulator"
# The GPU tests are #[ignore]d (no GPU where cargo test runs): --ignored runs exactly them.
$B/gpu_backend --ignored --test-threads 1 2>&1 | tail -15
