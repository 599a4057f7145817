#!/usr/bin/env bash
# Fused FP4 attention on a GPU machine (no cargo there; fp4probe and the attention_kernel test
# binary carried in .dev/bin). Two halves, each fitting one device call:
#   validate  the suites of every path this GPU runs (wgmma, also with three consumer
#             warpgroups forced, and bf16 natively, the sm_120a
#             kernels through their software MMA), compute-sanitizer on each, and the kernels
#             compiled by this machine's NVRTC (SASS checked)
#   bench     the default kernel (wgmma on an H100), the bf16 and wgmma-fp8 paths, PyTorch SDPA (flash,
#             cuDNN) and the Triton FP8 baseline (with its accuracy check) side by side, merged
#             into attention-bench.csv (bench-core: only this);
#             then (extra: only this) head_dim 256 separately, and an ncu instruction-mix and
#             stall profile of the wgmma kernel and (fp8-profile: only this) the wgmma-fp8 one
#   baseline  no fp4probe binary: the Triton FP8 baseline's accuracy check, then SDPA flash,
#             cuDNN and the baseline side by side (sdpa.csv, attention-bench-baseline.md);
#             SDPA_ARGS adds bench arguments (--triton-search: search the configs again)
# The Python scripts are taken from this script's folder.
# Results in $OUT (the whole output in run-<mode>.log), everything also packed into
# $OUT/attention-<mode>.tgz (the device tool returns only a few files per call).
set -uo pipefail
MODE=${1:-all}
B=.dev/bin
G=$(dirname "$0")
OUT=${OUT:-/tmp/fp4probe-out}
case "$MODE" in
  validate|bench-core|validate-bench-core|bench|extra|baseline|fp8-profile|all) ;;
  *) echo "usage: $0 [validate|bench-core|validate-bench-core|extra|bench|baseline|fp8-profile|all]" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
validate() {
  for p in wgmma-fp8 wgmma bf16 block-scale-emulated block-scale-k32-emulated; do
    echo "== validation suite, --path $p"
    $B/fp4probe attention --suite --path $p > "$OUT/attention-suite-$p.md" 2>&1; rc=$?
    echo "$p suite rc=$rc: $(grep -c '| pass |' "$OUT/attention-suite-$p.md") pass, $(grep -c '| FAIL |' "$OUT/attention-suite-$p.md") fail, $(grep -c 'skipped' "$OUT/attention-suite-$p.md") skipped"
    grep -E "FAIL|rror" "$OUT/attention-suite-$p.md" | head -5
    for tool in memcheck racecheck synccheck; do
      compute-sanitizer --tool $tool --error-exitcode 9 $B/fp4probe attention --path $p --format mxfp4 --heads 1 --seq-q 77 --seq-k 133 --causal \
        2>&1 | grep -E "SUMMARY|vs CPU" | head -2; echo "$p $tool rc=${PIPESTATUS[0]}"
    done
  done
  echo "== the wgmma kernel with three consumer warpgroups forced (the default picks it only for large grids)"
  FP4PROBE_ATTN_DEFINES=ATTN_WG_CONSUMERS=3 $B/fp4probe attention --suite --path wgmma > "$OUT/attention-suite-wgmma-3-consumers.md" 2>&1; rc=$?
  echo "wgmma (3 consumers) suite rc=$rc: $(grep -c '| pass |' "$OUT/attention-suite-wgmma-3-consumers.md") pass, $(grep -c '| FAIL |' "$OUT/attention-suite-wgmma-3-consumers.md") fail"
  for tool in memcheck racecheck synccheck; do
    FP4PROBE_ATTN_DEFINES=ATTN_WG_CONSUMERS=3 compute-sanitizer --tool $tool --error-exitcode 9 $B/fp4probe attention --path wgmma --format nvfp4 --heads 1 --seq-q 250 --seq-k 333 --causal \
      2>&1 | grep -E "SUMMARY|vs CPU" | head -2; echo "wgmma (3 consumers) $tool rc=${PIPESTATUS[0]}"
  done
  if [ -x $B/attention_kernel ]; then
    echo "== the kernels compiled by this machine's NVRTC (SASS checked; wgmma not serialized by this ptxas)"
    $B/attention_kernel --nocapture 2>&1 | grep -E "NVRTC|test |result|serialized"
  fi
}

bench_core() {
  echo "== benchmark: default kernel (B=1, H=32, S = 1k/4k/16k, d = 64/128, causal and not)"
  $B/fp4probe attention --bench --csv "$OUT/fp4.csv" 2>"$OUT/attention-bench.log"; echo "bench rc=$?"
  grep -E "kernel path|registers" "$OUT/attention-bench.log"
  echo "== benchmark: --path bf16 (mma.sync), same shapes"
  $B/fp4probe attention --bench --path bf16 --csv "$OUT/fp4-bf16.csv" 2>"$OUT/attention-bench-bf16.log"; echo "bench bf16 rc=$?"
  grep -E "registers" "$OUT/attention-bench-bf16.log"
  echo "== benchmark: --path wgmma-fp8 (FP4 widened to E4M3, FP8 wgmma), same shapes"
  $B/fp4probe attention --bench --path wgmma-fp8 --csv "$OUT/fp4-fp8.csv" 2>"$OUT/attention-bench-fp8.log"; echo "bench fp8 rc=$?"
  grep -E "registers|widened" "$OUT/attention-bench-fp8.log"
  echo "== benchmark: --path wgmma-fp8, grouped-query attention (32 query heads, 8 K/V heads), d = 128"
  $B/fp4probe attention --bench --path wgmma-fp8 --kv-heads 8 --seqs 4096,16384 --head-dims 128 --csv "$OUT/fp4-fp8-kv8.csv" \
    2>"$OUT/attention-bench-fp8-kv8.log"; echo "bench fp8 kv8 rc=$?"
  baseline_check
  python3 $G/attention_bench_sdpa.py bench --csv "$OUT/sdpa.csv" 2>"$OUT/sdpa.log" | tail -3; echo "sdpa rc=$?"
  python3 $G/attention_bench_sdpa.py merge --csv "$OUT/sdpa.csv" --csv "$OUT/fp4.csv" --csv "$OUT/fp4-bf16.csv" --csv "$OUT/fp4-fp8.csv" \
    --csv "$OUT/fp4-fp8-kv8.csv" --out "$OUT/attention-bench.csv" --markdown "$OUT/attention-bench.md"
  cat "$OUT/attention-bench.md"
}

baseline_check() {
  echo "== the Triton FP8 baseline against f32 SDPA (tuned configs)"
  python3 $G/triton_fp8_attention.py check > "$OUT/triton-fp8-check.log" 2>&1; echo "triton-fp8 check rc=$?"
  tail -1 "$OUT/triton-fp8-check.log"
}

baseline() {
  baseline_check
  echo "== SDPA flash, cuDNN (bf16) and the Triton FP8 baseline, default shapes"
  python3 $G/attention_bench_sdpa.py bench --csv "$OUT/sdpa.csv" ${SDPA_ARGS:-} > "$OUT/sdpa.log" 2>&1
  echo "sdpa rc=$?"
  grep -E "^(sdpa|triton)|FAIL|precompiled" "$OUT/sdpa.log"
  python3 $G/attention_bench_sdpa.py merge --csv "$OUT/sdpa.csv" --out "$OUT/attention-bench-baseline.csv" \
    --markdown "$OUT/attention-bench-baseline.md"
  cat "$OUT/attention-bench-baseline.md"
}

bench_extra() {
  echo "== head_dim 256 (bf16 path: the wgmma body runs d <= 128; separate files)"
  $B/fp4probe attention --bench --path bf16 --head-dims 256 --seqs 1024,4096,16384 --csv "$OUT/fp4-d256.csv" 2>"$OUT/fp4-d256.log"; echo "fp4 d256 rc=$?"
  python3 $G/attention_bench_sdpa.py bench --impls flash,cudnn --shapes 1x32x1024x256 1x32x4096x256 1x32x16384x256 \
    --csv "$OUT/sdpa-d256.csv" 2>"$OUT/sdpa-d256.log" | tail -2; echo "sdpa d256 rc=$?"
  python3 $G/attention_bench_sdpa.py merge --csv "$OUT/sdpa-d256.csv" --csv "$OUT/fp4-d256.csv" \
    --out "$OUT/attention-bench-d256.csv" --markdown "$OUT/attention-bench-d256.md"
  cat "$OUT/attention-bench-d256.md"
  echo "== ncu: the wgmma kernel, NVFP4, S = 4096, d = 128 (third launch: after warm-up)"
  ncu --clock-control none -k regex:attn_nvfp4_d128 --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
    -o "$OUT/wgmma-d128-s4096" $B/fp4probe attention --bench --seqs 4096 --head-dims 128 --repeats 2 --warmup 1 \
    > "$OUT/ncu.log" 2>&1; echo "ncu rc=$?"
  ncu -i "$OUT/wgmma-d128-s4096.ncu-rep" --page details > "$OUT/ncu-wgmma-d128-s4096.txt" 2>&1
  ncu -i "$OUT/wgmma-d128-s4096.ncu-rep" --page source --csv --print-source sass > "$OUT/source.csv" 2>&1
  python3 $G/ncu_source_mix.py "$OUT/source.csv" --elements $((32 * 4096 * 4096)) > "$OUT/wgmma-instruction-mix.md"
  grep -E "Duration|Issue Slots Busy|Executed Ipc Active|Eligible Warps|Warp Cycles Per Issued" "$OUT/ncu-wgmma-d128-s4096.txt"
  cat "$OUT/wgmma-instruction-mix.md"
  rm -f "$OUT/source.csv" "$OUT/wgmma-d128-s4096.ncu-rep"
  fp8_profile
}

fp8_profile() {
  echo "== ncu: the wgmma-fp8 kernel, NVFP4, S = 4096, d = 128 (third launch: after warm-up)"
  ncu --clock-control none -k regex:attn_nvfp4_d128 --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
    -o "$OUT/fp8-d128-s4096" $B/fp4probe attention --bench --path wgmma-fp8 --seqs 4096 --head-dims 128 --repeats 2 --warmup 1 \
    > "$OUT/ncu-fp8.log" 2>&1; echo "ncu fp8 rc=$?"
  ncu -i "$OUT/fp8-d128-s4096.ncu-rep" --page details > "$OUT/ncu-fp8-d128-s4096.txt" 2>&1
  ncu -i "$OUT/fp8-d128-s4096.ncu-rep" --page source --csv --print-source sass > "$OUT/source.csv" 2>&1
  python3 $G/ncu_source_mix.py "$OUT/source.csv" --elements $((32 * 4096 * 4096)) > "$OUT/fp8-instruction-mix.md"
  cat "$OUT/fp8-instruction-mix.md"
  rm -f "$OUT/source.csv" "$OUT/fp8-d128-s4096.ncu-rep"
}

run_mode() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  case "$MODE" in
    validate) validate ;;
    bench-core) bench_core ;;
    validate-bench-core) validate; bench_core ;;
    bench) bench_core; bench_extra ;;
    extra) bench_extra ;;
    baseline) baseline ;;
    fp8-profile) fp8_profile ;;
    all) validate; bench_core; bench_extra ;;
  esac
}
# The whole output also in run-<mode>.log (the device tool returns only its tail).
run_mode 2>&1 | tee "$OUT/run-$MODE.log"
tar czf "/tmp/attention-$MODE.tgz" -C "$OUT" . && mv "/tmp/attention-$MODE.tgz" "$OUT/"
