#!/usr/bin/env bash
# Session 10: where the consumers' time goes (per-instruction stall samples of the landed kernel,
# NVFP4 S=4096 d=128, picked variant), the shared-memory/L1 split, and ATTN_STAGES=2 (the 164 KB
# step: 92 KB of L1) against the default, interleaved.
R=$PWD; B=$R/.dev/bin; W=/tmp/w; rm -rf $W; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for st in 3 2; do
  FP4PROBE_ATTN_DEFINES=ATTN_STAGES=$st timeout 200 ncu --clock-control none -k regex:attn_nvfp4_d128 --launch-skip 2 --launch-count 1 \
    --metrics launch__shared_mem_config_size,launch__shared_mem_per_block_dynamic,l1tex__t_sector_hit_rate.pct,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,gpu__time_duration.sum \
    $B/fp4probe attention --bench --path wgmma --seqs 4096 --head-dims 128 --repeats 2 --warmup 1 > $W/l1-stages$st.txt 2>&1
  echo "== stages $st rc=$?"; grep -E "launch__|l1tex__|lts__|gpu__time" $W/l1-stages$st.txt
done
timeout 300 ncu --clock-control none -k regex:attn_nvfp4_d128 --launch-skip 2 --launch-count 1 \
  --section WarpStateStats --section SourceCounters --section SchedulerStats -o $W/prof \
  $B/fp4probe attention --bench --path wgmma --seqs 4096 --head-dims 128 --repeats 2 --warmup 1 > $W/prof.log 2>&1; echo "ncu rc=$?"
ncu -i $W/prof.ncu-rep --page source --csv --print-source sass > $W/source.csv 2>&1
ncu -i $W/prof.ncu-rep --page details > $W/details.txt 2>&1
head -2 $W/source.csv | cut -c1-3000
gzip -9 $W/source.csv; rm -f $W/prof.ncu-rep; ls -la $W
for run in 1 2; do for st in 3 2; do
  FP4PROBE_ATTN_DEFINES=ATTN_STAGES=$st timeout 200 $B/fp4probe attention --bench --path wgmma --seqs 4096,16384 --head-dims 128 --repeats 10 --csv $W/s$st-$run.csv > /dev/null 2>$W/s$st-$run.log; echo "stages $st run $run rc=$?"
done; done
sed -i "s/\['tf0', 'tf2'/['s3', 's2', 'tf0', 'tf2'/" .dev/cmp.py
python3 .dev/cmp.py $W | tee $W/cmp.txt
tar czf $OUT/prof.tgz -C $W .
