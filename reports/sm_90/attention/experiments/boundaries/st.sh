#!/usr/bin/env bash
# Session 9: do the CTAs' simultaneous O stores cost the segment boundary? tf0: tail last (as
# landed), tf2: odd CTAs run their tail first (their row-block ends then fall 21 tiles apart
# from the even CTAs'), nostore: tf0 without O's store of whole row blocks (wrong output;
# timing only).
R=$PWD; B=$R/.dev/bin; W=/tmp/w; mkdir -p $W/h30
for run in 1 2; do
  for v in tf0 tf2 nostore; do
    d=$R; b=$B/fp4probe
    case $v in tf0|nostore) export FP4PROBE_ATTN_DEFINES=ATTN_TAIL_FIRST=0;; tf2) export FP4PROBE_ATTN_DEFINES=ATTN_TAIL_FIRST=2;; esac
    [ $v = nostore ] && { d=$R/.dev/nostore; b=./fp4probe; }
    (cd $d && timeout 200 $b attention --bench --path wgmma --seqs 4096,16384 --head-dims 128 --repeats 10 --csv $W/$v-$run.csv > /dev/null 2>>$W/$v.log); echo "$v $run rc=$?"
    (cd $d && timeout 100 $b attention --bench --path wgmma --seqs 4096 --bench-heads 30 --head-dims 128 --repeats 10 --csv $W/h30/$v-$run.csv > /dev/null 2>>$W/$v.log)
    grep -h "prequant.*false" $W/h30/$v-$run.csv | sed "s/^/h30 $v-$run,/"
  done
done
python3 .dev/cmp.py $W | tee $W/cmp.txt
tar czf $OUT/st.tgz -C $W .
