#!/usr/bin/env bash
# Session 8: ping-pong turns. quick: suite + sanitizers of the new kernel; ab: old (HEAD) vs
# new (turns) vs np (new without turns), interleaved, plus SDPA.
set -uo pipefail
R=$PWD; B=$R/.dev/bin; OUT=${OUT:-/tmp/o}; W=/tmp/w; mkdir -p $OUT $W
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
quick() {
  for cons in default 2 3; do
    if [ $cons = default ]; then unset FP4PROBE_ATTN_DEFINES; else export FP4PROBE_ATTN_DEFINES=ATTN_WG_CONSUMERS=$cons; fi
    timeout 150 $B/fp4probe attention --suite --path wgmma > $W/suite-$cons.md 2>&1; rc=$?
    echo "suite $cons rc=$rc pass=$(grep -c '| pass |' $W/suite-$cons.md) fail=$(grep -c '| FAIL |' $W/suite-$cons.md) exact=$(grep -c '0.00e0, 0.00e0' $W/suite-$cons.md)"
    grep -E "FAIL|rror" $W/suite-$cons.md | head -5
  done
  unset FP4PROBE_ATTN_DEFINES
  for sh in "--format mxfp4 --heads 3 --seq-q 777 --seq-k 1333 --causal" "--format nvfp4 --heads 40 --seq-q 1000 --seq-k 1000" "--format nvfp4 --head-dim 64 --heads 5 --seq-q 700 --seq-k 900 --causal" "--format nvfp4 --heads 7 --seq-q 1500 --seq-k 700 --causal" "--format mxfp4 --heads 9 --seq-q 300 --seq-k 2000 --causal"; do
    timeout 60 $B/fp4probe attention --path wgmma $sh 2>&1 | grep "same quantized"
    for tool in memcheck racecheck; do timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $B/fp4probe attention --path wgmma $sh 2>&1 | grep -E "SUMMARY|vs CPU" | head -2; echo "$tool $sh rc=${PIPESTATUS[0]}"; done
  done
}
ab() {
  [ -d $R/.dev/base ] || tar xzf $R/.dev/variants.tgz -C $R/.dev
  for run in 1 2; do
    for v in ${VARIANTS:-old new np}; do
      d=$R; b=$B/fp4probe; unset FP4PROBE_ATTN_DEFINES
      case $v in new) ;; np) export FP4PROBE_ATTN_DEFINES=ATTN_WG_PINGPONG=0;; c2) export FP4PROBE_ATTN_DEFINES=ATTN_WG_CONSUMERS=2;; c3) export FP4PROBE_ATTN_DEFINES=ATTN_WG_CONSUMERS=3;; *) d=$R/.dev/$v; b=./fp4probe;; esac
      (cd $d && timeout 150 $b attention --bench --path wgmma --seqs ${SEQS:-1024,4096,16384} --head-dims ${DIMS:-64,128} --repeats 10 --csv $W/$v-$run.csv > /dev/null 2>$W/$v-$run.log); echo "$v $run rc=$?"
    done
  done
  unset FP4PROBE_ATTN_DEFINES
  [ -n "${NOSDPA:-}" ] || timeout 120 python3 tests/gpu/attention_bench_sdpa.py bench --csv $W/sdpa.csv > /dev/null 2>$W/sdpa.log; echo "sdpa rc=$?"
  python3 .dev/cmp.py $W | tee $W/cmp.txt
}
case "${1:-all}" in quick) quick;; ab) ab;; all) quick; ab;; esac
tar czf $OUT/pp.tgz -C $W .
