#!/usr/bin/env bash
# Session 10 device work. check: the in-buffer Q prefetch on shapes that exercise it (odd row counts, scale alignment), with sanitizers; ab: HEAD kernels (.dev/base2, same binary) vs new, interleaved.
set -uo pipefail
R=$PWD; B=$R/.dev/bin; W=/tmp/w; mkdir -p $W
MODE=$1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
one() { # defines args...
  local defs=$1; shift
  out=$(FP4PROBE_ATTN_DEFINES="$defs" timeout 120 $B/fp4probe attention --path wgmma "$@" 2>&1); rc=$?
  echo "[$defs] [$*] rc=$rc $(echo "$out" | grep -E 'same quantized' | sed 's/.*cosine/cos/') $(echo "$out" | grep -o 'took [0-9.]* s')"
}
check() {
  for c in 2 3; do
    d="ATTN_WG_CONSUMERS=$c"
    one "$d" --format nvfp4 --heads 2 --seq-q 1024 --seq-k 512 --causal
    one "$d" --format nvfp4 --heads 7 --seq-q 1500 --seq-k 700 --causal
    one "$d" --format mxfp4 --heads 3 --seq-q 777 --seq-k 1333 --causal
    one "$d" --format nvfp4 --heads 2 --seq-q 4096 --seq-k 4096 --causal
    one "$d" --format mxfp4 --heads 3 --seq-q 4096 --seq-k 4096
    one "$d" --format nvfp4 --heads 40 --seq-q 1000 --seq-k 1000
    one "$d" --format nvfp4 --head-dim 64 --heads 5 --seq-q 700 --seq-k 900 --causal
    one "$d" --format mxfp4 --head-dim 64 --heads 3 --seq-q 2000 --seq-k 2000 --causal
    one "$d" --format nvfp4 --heads 1 --seq-q 130 --seq-k 64 --causal
    one "$d" --format mxfp4 --head-dim 64 --heads 3 --seq-q 777 --seq-k 500 --causal
    one "$d" --format nvfp4 --heads 5 --seq-q 100 --seq-k 1000
    one "$d" --format nvfp4 --heads 3 --seq-q 193 --seq-k 257
    one "$d" --format nvfp4 --heads 9 --seq-q 300 --seq-k 2000 --causal
    for sh in "--format nvfp4 --heads 3 --seq-q 250 --seq-k 333 --causal" "--format mxfp4 --head-dim 64 --heads 2 --seq-q 450 --seq-k 390 --causal" "--format nvfp4 --heads 2 --seq-q 200 --seq-k 1000"; do
      for tool in memcheck racecheck synccheck; do
        r=$(FP4PROBE_ATTN_DEFINES=$d timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $B/fp4probe attention --path wgmma $sh 2>&1 | grep -E "SUMMARY" | head -1)
        echo "  c$c $tool [$sh] rc=${PIPESTATUS[0]} $r"
      done
    done
  done
  for c in 2 3; do
    FP4PROBE_ATTN_DEFINES=ATTN_WG_CONSUMERS=$c timeout 200 $B/fp4probe attention --suite --path wgmma > $W/suite-c$c.md 2>&1
    echo "suite c$c rc=$? pass=$(grep -c '| pass |' $W/suite-c$c.md) fail=$(grep -c '| FAIL |' $W/suite-c$c.md) exact=$(grep -c '0.00e0, 0.00e0' $W/suite-c$c.md)"
    grep -E "FAIL|rror" $W/suite-c$c.md | head -5
  done
  timeout 200 $B/fp4probe attention --suite --path wgmma > $W/suite-default.md 2>&1
  echo "suite default rc=$? pass=$(grep -c '| pass |' $W/suite-default.md) fail=$(grep -c '| FAIL |' $W/suite-default.md)"
}
ab() {
  for run in 1 2; do
    for v in ${VARIANTS:-base2 new}; do
      d=$R; b=$B/fp4probe; [ $v = new ] || { d=$R/.dev/$v; b=./fp4probe; }
      (cd $d && timeout 200 $b attention --bench --path wgmma --seqs ${SEQS:-1024,4096,16384} --head-dims ${DIMS:-64,128} --repeats 10 --csv $W/$v-$run.csv > /dev/null 2>$W/$v-$run.log); echo "$v $run rc=$? $(grep -o 'took [0-9.]* s' $W/$v-$run.log | tr '\n' ' ')"
    done
  done
  [ -n "${NOSDPA:-}" ] || { timeout 150 python3 tests/gpu/attention_bench_sdpa.py bench --csv $W/sdpa.csv > /dev/null 2>$W/sdpa.log; echo "sdpa rc=$?"; }
  python3 .dev/cmp.py $W 2>&1 | tee $W/cmp.txt
}
sync() {
  for v in ${SYNCV:-new}; do
    d=$R; b=$B/fp4probe; [ $v = new ] || { d=$R/.dev/$v; b=./fp4probe; }
    for c in 2 3; do for sh in "--format nvfp4 --heads 3 --seq-q 250 --seq-k 333 --causal" "--format nvfp4 --heads 1 --seq-q 250 --seq-k 333 --causal" "--format nvfp4 --heads 2 --seq-q 200 --seq-k 1000" "--format mxfp4 --head-dim 64 --heads 2 --seq-q 450 --seq-k 390 --causal"; do
      f=$W/sync-$v-c$c-$(echo $sh | tr -d ' -' | cut -c1-40).txt
      (cd $d && FP4PROBE_ATTN_DEFINES=ATTN_WG_CONSUMERS=$c timeout 150 compute-sanitizer --tool synccheck --print-limit 20 $b attention --path wgmma $sh > $f 2>&1); echo "$v c$c [$sh] rc=$? $(grep SUMMARY $f)"
    done; done
  done
  head -30 $(ls $W/sync-new-* | head -1)
}
for m in $MODE; do $m; done
tar czf $OUT/s10-${MODE// /-}.tgz -C $W .
