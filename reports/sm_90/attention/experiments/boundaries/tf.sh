#!/usr/bin/env bash
# Session 9: the stream-K tail before the whole row blocks (ATTN_TAIL_FIRST=1, new) or after
# them (=0, old), interleaved; plus S = 4096 with 30 heads (no tail: 660 row blocks, 5 a CTA).
B=$PWD/.dev/bin; W=/tmp/w; mkdir -p $W/h30
for run in 1 2; do
  for v in old new; do
    [ $v = old ] && export FP4PROBE_ATTN_DEFINES=ATTN_TAIL_FIRST=0 || export FP4PROBE_ATTN_DEFINES=ATTN_TAIL_FIRST=1
    timeout 200 $B/fp4probe attention --bench --path wgmma --seqs 1024,4096,16384 --head-dims 64,128 --repeats 10 --csv $W/$v-$run.csv > /dev/null 2>>$W/$v.log; echo "$v $run rc=$?"
    timeout 100 $B/fp4probe attention --bench --path wgmma --seqs 4096 --bench-heads 30 --head-dims 128 --repeats 10 --csv $W/h30/$v-$run.csv > /dev/null 2>>$W/$v.log
    grep -h prequant $W/h30/$v-$run.csv | sed "s/^/$v-$run,/"
  done
done
python3 .dev/cmp.py $W | tee $W/cmp.txt
tar czf $OUT/tf.tgz -C $W .
