#!/usr/bin/env bash
# Session 9: does a larger dynamic shared memory request alone slow the kernel? The landed
# kernels with the landed binary (small) and with the Q-prefetch binary (big: 13.8 KB more
# dynamic shared memory asked for at d = 128, 6.9 KB at d = 64, unused by these kernels).
R=$PWD; W=/tmp/w; rm -rf $W; mkdir -p $W/d64
for run in 1 2; do for v in small big; do
  b=$R/.dev/bin/fp4probe; [ $v = big ] && b=$R/.dev/base2/fp4probe-big
  timeout 150 $b attention --bench --path wgmma --seqs 1024,4096,16384 --head-dims 128 --repeats 10 --csv $W/$v-$run.csv > /dev/null 2>>$W/$v.log; echo "$v $run rc=$?"
  timeout 60 $b attention --bench --path wgmma --seqs 1024 --head-dims 64 --repeats 10 --csv $W/d64/$v-$run.csv > /dev/null 2>>$W/$v.log || { mkdir -p $W/d64; timeout 60 $b attention --bench --path wgmma --seqs 1024 --head-dims 64 --repeats 10 --csv $W/d64/$v-$run.csv > /dev/null 2>>$W/$v.log; }
done; done
sed -i "s/\['base2', 'tf0'/['small', 'big', 'base2', 'tf0'/" .dev/cmp.py
python3 .dev/cmp.py $W | tee $W/cmp.txt; python3 .dev/cmp.py $W/d64 | tee $W/cmp-d64.txt
tar czf $OUT/sm.tgz -C $W .
