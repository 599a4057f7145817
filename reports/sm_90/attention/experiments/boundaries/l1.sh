#!/usr/bin/env bash
# Session 9 (prepared, not run: the device time was spent): the landed kernels under the landed binary (small) and under the Q-prefetch binary
# (big: 13.8 KB more dynamic shared memory asked for): shared-memory configuration, L1 hit
# rate and duration of the same launch (NVFP4 d = 128, S = 4096, the bench's third such launch).
R=$PWD; W=/tmp/w; rm -rf $W; mkdir -p $W
for v in small big; do
  b=$R/.dev/bin/fp4probe; [ $v = big ] && b=$R/.dev/base2/fp4probe-big
  timeout 200 ncu --clock-control none -k regex:attn_nvfp4_d128 --launch-skip 2 --launch-count 1 \
    --metrics launch__shared_mem_config_size,launch__shared_mem_per_block_dynamic,l1tex__t_sector_hit_rate.pct,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,lts__t_sectors_srcunit_tex_op_read.sum,gpu__time_duration.sum \
    $b attention --bench --path wgmma --seqs 4096 --head-dims 128 --repeats 2 --warmup 1 > $W/ncu-$v.txt 2>&1
  echo "== $v rc=$?"; grep -E "launch__|l1tex__|lts__|gpu__time" $W/ncu-$v.txt
done
tar czf $OUT/l1.tgz -C $W .
