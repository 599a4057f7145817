#!/usr/bin/env bash
# Session 7: stream-K wgmma kernel. validate: suites (default, 2 and 3 consumers forced) and
# sanitizers; ab: old (HEAD~, grid per row block) vs new, interleaved, plus SDPA.
set -uo pipefail
R=$PWD; B=$R/.dev/bin; OUT=${OUT:-/tmp/o}; mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
validate() {
  for cons in default 2 3; do
    if [ $cons = default ]; then unset FP4PROBE_ATTN_DEFINES; else export FP4PROBE_ATTN_DEFINES=ATTN_WG_CONSUMERS=$cons; fi
    timeout 150 $B/fp4probe attention --suite --path wgmma > $OUT/suite-$cons.md 2>&1; rc=$?
    echo "suite $cons rc=$rc pass=$(grep -c '| pass |' $OUT/suite-$cons.md) fail=$(grep -c '| FAIL |' $OUT/suite-$cons.md)"
    grep -E "FAIL|rror" $OUT/suite-$cons.md | head -5
  done
  unset FP4PROBE_ATTN_DEFINES
  for tool in memcheck racecheck synccheck; do
    timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $B/fp4probe attention --path wgmma --format mxfp4 --heads 3 --seq-q 777 --seq-k 1333 --causal 2>&1 | grep -E "SUMMARY|vs CPU" | head -3; echo "$tool rc=${PIPESTATUS[0]}"
  done
}
ab() {
  [ -d $R/.dev/old ] || tar xzf $R/.dev/variants.tgz -C $R/.dev
  for run in 1 2; do
    for v in ${VARIANTS:-old sk1 new}; do
      if [ $v = new ]; then d=$R; b=$B/fp4probe; else d=$R/.dev/$v; b=./fp4probe; fi
      (cd $d && timeout 150 $b attention --bench --path wgmma --seqs ${SEQS:-1024,4096,16384} --head-dims ${DIMS:-64,128} --repeats 10 --csv $OUT/$v-$run.csv > /dev/null 2>$OUT/$v-$run.log); echo "$v $run rc=$?"
    done
  done
  [ -n "${NOSDPA:-}" ] || timeout 120 python3 tests/gpu/attention_bench_sdpa.py bench --csv $OUT/sdpa.csv > /dev/null 2>$OUT/sdpa.log; echo "sdpa rc=$?"
  python3 .dev/cmp.py $OUT
}
quick() {
  timeout 150 $B/fp4probe attention --suite --path wgmma > $OUT/suite-default.md 2>&1; rc=$?
  echo "suite rc=$rc pass=$(grep -c '| pass |' $OUT/suite-default.md) fail=$(grep -c '| FAIL |' $OUT/suite-default.md) exact=$(grep -c '0.00e0, 0.00e0' $OUT/suite-default.md)"
  grep -E "FAIL|rror" $OUT/suite-default.md | head -5
  for sh in "--heads 3 --seq-q 777 --seq-k 1333 --causal" "--heads 40 --seq-q 1000 --seq-k 1000"; do
    for tool in memcheck racecheck; do timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $B/fp4probe attention --path wgmma --format nvfp4 $sh 2>&1 | grep -E "SUMMARY|vs CPU" | head -3; echo "$tool $sh rc=${PIPESTATUS[0]}"; done
  done
}
case "${1:-all}" in validate) validate;; ab) ab;; quick) quick;; qab) quick; ab;; all) validate; ab;; esac
tar czf $OUT/sk.tgz -C $OUT --exclude sk.tgz . 2>/dev/null
