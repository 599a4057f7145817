#!/usr/bin/env bash
# Session 10: HEAD (mbarrier "full") kernels as base2, the in-buffer Q prefetch on top (new), and
# HEAD with ATTN_STAGES=4 (s4); first the prefetch's correctness.
R=$PWD; B=$R/.dev/bin; W=/tmp/w; rm -rf $W; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
one() { local defs=$1; shift
  out=$(FP4PROBE_ATTN_DEFINES="$defs" timeout 120 $B/fp4probe attention --path wgmma "$@" 2>&1); echo "[$defs] [$*] rc=$? $(echo "$out" | grep 'same quantized' | sed 's/.*cosine/cos/')"; }
for c in 2 3; do d="ATTN_WG_CONSUMERS=$c"
  one "$d" --format mxfp4 --head-dim 64 --heads 3 --seq-q 777 --seq-k 500 --causal
  one "$d" --format nvfp4 --heads 7 --seq-q 1500 --seq-k 700 --causal
  one "$d" --format nvfp4 --heads 5 --seq-q 100 --seq-k 1000
  one "$d" --format nvfp4 --heads 3 --seq-q 193 --seq-k 257
  for tool in racecheck synccheck; do
    r=$(FP4PROBE_ATTN_DEFINES=$d timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $B/fp4probe attention --path wgmma --format nvfp4 --heads 3 --seq-q 250 --seq-k 333 --causal 2>&1 | grep -E "SUMMARY" | head -1); echo "  c$c $tool rc=${PIPESTATUS[0]} $r"
  done
  FP4PROBE_ATTN_DEFINES=$d timeout 200 $B/fp4probe attention --suite --path wgmma > $W/suite-c$c.md 2>&1
  echo "suite c$c rc=$? pass=$(grep -c '| pass |' $W/suite-c$c.md) fail=$(grep -c '| FAIL |' $W/suite-c$c.md) exact=$(grep -c '0.00e0, 0.00e0' $W/suite-c$c.md)"
done
for run in 1 2; do for v in base2 new s4; do
  d=$R; b=$B/fp4probe; defs=""; [ $v = new ] || { d=$R/.dev/base2; b=./fp4probe; }; [ $v = s4 ] && defs=ATTN_STAGES=4
  (cd $d && FP4PROBE_ATTN_DEFINES=$defs timeout 200 $b attention --bench --path wgmma --seqs ${SEQS:-1024,4096,16384} --head-dims ${DIMS:-64,128} --repeats 10 --csv $W/$v-$run.csv > /dev/null 2>$W/$v-$run.log); echo "$v $run rc=$? $(grep -o 'took [0-9.]* s' $W/$v-$run.log | tr '\n' ' ') $(grep -c 'local (spill)' $W/$v-$run.log)"
done; done
timeout 150 python3 tests/gpu/attention_bench_sdpa.py bench --csv $W/sdpa.csv > /dev/null 2>$W/sdpa.log; echo "sdpa rc=$?"
python3 .dev/cmp.py $W | tee $W/cmp.txt
tar czf $OUT/ab3.tgz -C $W .
