#!/usr/bin/env bash
# The hang bisection that ran (session 8): each variant's binary and kernels/ (s7 = commit
# 3484063, base = 2761c81 + the FMNMX commit, new = base + per-warpgroup live tiles, not
# landed), two and three consumer warpgroups forced, 12 s per run.
R=$PWD; B=$R/.dev/bin
[ -d $R/.dev/s7 ] || tar xzf $R/.dev/variants.tgz -C $R/.dev
for v in s7 base new; do
  d=$R; b=$B/fp4probe; [ $v != new ] && { d=$R/.dev/$v; b=./fp4probe; }
  for cons in 2 3; do
    for sh in "--heads 7 --seq-q 1500 --seq-k 700 --causal" "--heads 2 --seq-q 1024 --seq-k 512 --causal" "--heads 1 --seq-q 130 --seq-k 64 --causal"; do
      out=$(cd $d && FP4PROBE_ATTN_DEFINES=ATTN_WG_CONSUMERS=$cons timeout 12 $b attention --path wgmma --format nvfp4 $sh 2>&1); rc=$?
      echo "$v c$cons [$sh] rc=$rc $(echo "$out" | grep 'same quantized' | sed 's/.*cosine/cos/')"
    done
  done
done
