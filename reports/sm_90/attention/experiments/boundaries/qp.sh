#!/usr/bin/env bash
# Session 9: Q prefetched a segment ahead by cp.async (new) against HEAD's kernels (base2, same
# binary), interleaved; first the new kernel's correctness on shapes where the staging's
# alignment and zero fill matter.
R=$PWD; B=$R/.dev/bin; W=/tmp/w; rm -rf $W; mkdir -p $W
one() { local defs=$1; shift
  out=$(FP4PROBE_ATTN_DEFINES="$defs" timeout 120 $B/fp4probe attention --path wgmma "$@" 2>&1); echo "[$defs] [$*] rc=$? $(echo "$out" | grep 'same quantized' | sed 's/.*cosine/cos/')"; }
for c in 2 3; do d="ATTN_WG_CONSUMERS=$c"
  one "$d" --format mxfp4 --head-dim 64 --heads 3 --seq-q 777 --seq-k 500 --causal
  one "$d" --format nvfp4 --heads 7 --seq-q 1500 --seq-k 700 --causal
  one "$d" --format nvfp4 --heads 5 --seq-q 100 --seq-k 1000
done
mkdir -p $W/ab
for run in 1 2; do for v in base2 new; do
  d=$R; b=$B/fp4probe; [ $v = new ] || { d=$R/.dev/$v; b=./fp4probe; }
  (cd $d && timeout 200 $b attention --bench --path wgmma --seqs 1024,4096,16384 --head-dims 64,128 --repeats 10 --csv $W/ab/$v-$run.csv > /dev/null 2>>$W/ab/$v.log); echo "$v $run rc=$?"
done; done
sed -i "s/\['tf0', 'tf2', 'nostore'/['base2', 'tf0', 'tf2', 'nostore'/" .dev/cmp.py
python3 .dev/cmp.py $W/ab | tee $W/ab/cmp.txt
tar czf $OUT/qp.tgz -C $W .
