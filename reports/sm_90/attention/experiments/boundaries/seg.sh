#!/usr/bin/env bash
# What a segment (row-block) boundary costs: equal work (43.7k key tiles of 192 rows x 64 keys at
# d = 128) cut into segments of 32, 64, 128 and 256 tiles, and a fifth launch of 16 times the work;
# three consumer warpgroups forced. Run from the repository root on the GPU machine, with fp4probe
# in .dev/bin; results in $OUT/seg.tgz. Record: README.md beside this file.
B=$PWD/.dev/bin; W=/tmp/w; mkdir -p $W
export FP4PROBE_ATTN_DEFINES=ATTN_WG_CONSUMERS=3
for r in 1 2; do
for sh in "4096 32" "8192 8" "16384 2" "16384 32" "2048 128"; do set -- $sh
  timeout 120 $B/fp4probe attention --bench --path wgmma --seqs $1 --bench-heads $2 --head-dims 128 --repeats 10 --csv $W/seg-$1-$2-$r.csv > /dev/null 2>>$W/seg.log
  grep -h "prequant" $W/seg-$1-$2-$r.csv | sed "s/^/run$r,/"
done; done
tar czf $OUT/seg.tgz -C $W .
