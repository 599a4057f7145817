#!/usr/bin/env bash
# Session 9: what a segment boundary costs. Equal work (43.7k key tiles of 192 rows x 64 keys at
# d = 128), segments of 64, 128, 256 tiles; three consumer warpgroups forced.
B=$PWD/.dev/bin; W=/tmp/w; mkdir -p $W
export FP4PROBE_ATTN_DEFINES=ATTN_WG_CONSUMERS=3
for r in 1 2; do
for sh in "4096 32" "8192 8" "16384 2" "16384 32" "2048 128"; do set -- $sh
  timeout 120 $B/fp4probe attention --bench --path wgmma --seqs $1 --bench-heads $2 --head-dims 128 --repeats 10 --csv $W/seg-$1-$2-$r.csv > /dev/null 2>>$W/seg.log
  grep -h "prequant" $W/seg-$1-$2-$r.csv | sed "s/^/run$r,/"
done; done
tar czf $OUT/seg.tgz -C $W .
