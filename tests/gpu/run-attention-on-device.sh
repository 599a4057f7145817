#!/usr/bin/env bash
# Issue #6 on a lent GPU, one device call (no cargo there; fp4probe carried in .dev/bin).
# Validation suite (kernel vs the CPU references), compute-sanitizer, the kernel benchmark and
# PyTorch SDPA (flash, cuDNN) side by side, merged into attention-bench.csv. Results in $OUT,
# with everything (logs included) also packed into $OUT/attention-run.tgz: the device tool
# returns only a few files per call.
set -uo pipefail
B=.dev/bin
OUT=${OUT:-/tmp/fp4probe-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
echo "== validation suite"
$B/fp4probe attention --suite 2>&1 | tee "$OUT/attention-suite.md"; echo "suite rc=${PIPESTATUS[0]}"
echo "== the sm_120a block-scale kernel, its MMA replaced by the software model (block-scale-emulated)"
# (block-scale: m16n8k64 kind::mxf4nvf4; block-scale-k32: m16n8k32 kind::mxf8f6f4, MXFP4 only)
for p in block-scale block-scale-k32; do
  $B/fp4probe attention --suite --path $p-emulated 2>&1 | tee "$OUT/attention-suite-$p-emulated.md"; echo "$p-emulated suite rc=${PIPESTATUS[0]}"
  for tool in memcheck racecheck synccheck; do
    compute-sanitizer --tool $tool --error-exitcode 9 $B/fp4probe attention --path $p-emulated --format mxfp4 --heads 1 --seq-q 77 --seq-k 133 --causal \
      2>&1 | grep -E "SUMMARY|vs CPU" | head -2; echo "$p-emulated $tool rc=${PIPESTATUS[0]}"
  done
done
if [ -x $B/attention_kernel ]; then
  echo "== the kernels compiled by this machine's NVRTC (bf16 for sm_90 and sm_120a, both block-scale paths for sm_120a; SASS checked)"
  $B/attention_kernel --nocapture 2>&1 | grep -E "NVRTC|test |result"
fi
echo "== compute-sanitizer"
for tool in memcheck racecheck synccheck; do
  compute-sanitizer --tool $tool --error-exitcode 9 $B/fp4probe attention --heads 1 --seq-q 77 --seq-k 133 --causal \
    2>&1 | grep -E "SUMMARY|vs CPU" | head -2; echo "$tool rc=${PIPESTATUS[0]}"
done
echo "== benchmark"
$B/fp4probe attention --bench --csv "$OUT/fp4.csv" 2>"$OUT/attention-bench.log"; echo "bench rc=$?"
grep -E "registers" "$OUT/attention-bench.log"
python3 tests/gpu/attention_bench_sdpa.py bench --csv "$OUT/sdpa.csv" 2>"$OUT/sdpa.log" | tail -3; echo "sdpa rc=$?"
python3 tests/gpu/attention_bench_sdpa.py merge --csv "$OUT/sdpa.csv" --csv "$OUT/fp4.csv" \
  --out "$OUT/attention-bench.csv" --markdown "$OUT/attention-bench.md"
cat "$OUT/attention-bench.md"
echo "== head_dim 256 (separate files: attention-bench.csv keeps the issue's d = 64/128 shapes)"
$B/fp4probe attention --bench --head-dims 256 --seqs 1024 --seqs 4096 --seqs 16384 --csv "$OUT/fp4-d256.csv" 2>"$OUT/fp4-d256.log"; echo "fp4 d256 rc=$?"
python3 tests/gpu/attention_bench_sdpa.py bench --shapes 1x32x1024x256 1x32x4096x256 1x32x16384x256 \
  --csv "$OUT/sdpa-d256.csv" 2>"$OUT/sdpa-d256.log" | tail -2; echo "sdpa d256 rc=$?"
python3 tests/gpu/attention_bench_sdpa.py merge --csv "$OUT/sdpa-d256.csv" --csv "$OUT/fp4-d256.csv" \
  --out "$OUT/attention-bench-d256.csv" --markdown "$OUT/attention-bench-d256.md"
cat "$OUT/attention-bench-d256.md"
tar czf /tmp/attention-run.tgz -C "$OUT" . && mv /tmp/attention-run.tgz "$OUT/"
