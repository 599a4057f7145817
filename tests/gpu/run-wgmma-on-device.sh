#!/usr/bin/env bash
# The wgmma probes on an sm_90a GPU, in one device call: one variant as a check, the N = 256
# variants one at a time (--jobs 1: the time of a single variant, its JIT included), the b1
# N = 256 variants each in a process of its own, the whole
# dense catalog timed on every core (maps to a scratch folder, logs to $OUT), the maps
# committed under reports/sm_90/wgmma (every type set at N = 16 from registers, bf16 and e4m3
# at N = 64 and 256), and the shared-memory studies.
#
# Usage (from the checkout root on the device): tests/gpu/run-wgmma-on-device.sh
# Needs .dev/bin/fp4probe (built elsewhere and carried) and $OUT.
set -uo pipefail
B=.dev/bin/fp4probe
OUT=${OUT:-/tmp/fp4probe-wgmma-out}
mkdir -p "$OUT"
nvidia-smi -L | tee "$OUT/device.txt"
"$B" wgmma probe --backend cuda --variant m64n64k16.f32.bf16.bf16.ss -o "$OUT/check" 2>&1 | tee "$OUT/check.log"
scratch=$(mktemp -d)
"$B" wgmma probe --backend cuda --filter m64n256k --jobs 1 -o "$scratch/one" >"$OUT/one.log" 2>&1
sort -k3 -n -r "$OUT/one.log" | head -4; tail -2 "$OUT/one.log"
# The slowest variants (b1, N = 256) in processes of their own: kernel build, probe and files.
for v in m64n256k256.s32.b1.b1.and.popc.ss m64n256k256.s32.b1.b1.and.popc.rs; do
    t0=$(date +%s.%N)
    "$B" wgmma probe --backend cuda --variant "$v" -o "$scratch/b1" | head -1
    echo "$v: $(echo "$(date +%s.%N) - $t0" | python3 -c "import sys; print(round(eval(sys.stdin.read()), 2))") s wall (process)"
done | tee "$OUT/b1.log"
t0=$(date +%s.%N)
# No driver JIT cache: the time a first run on a fresh machine takes.
CUDA_CACHE_DISABLE=1 "$B" wgmma probe --backend cuda --all -o "$scratch/all" >"$OUT/all.log" 2>&1
echo "whole dense catalog: $(echo "$(date +%s.%N) - $t0" | python3 -c "import sys; print(round(eval(sys.stdin.read()), 2))") s wall (process)" | tee "$OUT/all.time"
tail -3 "$OUT/all.log"
grep -c " passed " "$OUT/all.log"; grep " FAILED " "$OUT/all.log" | head -20
# The maps kept in the repository.
keep="$OUT/reports/wgmma"
mkdir -p "$keep"
for id in $(grep -oE '^m64n16k[0-9]+\S*\.rs ' "$OUT/all.log") \
    m64n64k16.f32.bf16.bf16.ss m64n256k16.f32.bf16.bf16.rs m64n64k32.f32.e4m3.e4m3.ss m64n256k32.f32.e4m3.e4m3.rs; do
    cp "$scratch/all/$id".json "$scratch/all/$id".csv "$keep/" 2>/dev/null
done
"$B" wgmma probe --backend cuda --filter m64n64k16 --major MN --swizzle 128B -o "$scratch/mn128" 2>&1 | tee "$OUT/mn128.log" | tail -4
t0=$(date +%s.%N)
CUDA_CACHE_DISABLE=1 "$B" wgmma smem --backend cuda -o "$keep" >"$OUT/smem.log" 2>&1
echo "shared-memory studies: $(echo "$(date +%s.%N) - $t0" | python3 -c "import sys; print(round(eval(sys.stdin.read()), 2))") s wall (process)" | tee "$OUT/smem.time"
tail -2 "$OUT/smem.log"
du -sh "$keep"
rm -rf "$scratch"
