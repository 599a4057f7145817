#!/usr/bin/env bash
# Session 10, after the mbarrier change: turns off (ATTN_WG_PINGPONG=0) and two consumer
# warpgroups forced, against the default, interleaved; then the stall profile of the default.
R=$PWD; B=$R/.dev/bin; W=/tmp/w; rm -rf $W; mkdir -p $W
declare -A DEF=([dflt]="" [nopp]="ATTN_WG_PINGPONG=0" [c2]="ATTN_WG_CONSUMERS=2" [c3]="ATTN_WG_CONSUMERS=3")
for run in 1 2; do for v in ${VARIANTS:-dflt nopp c2}; do
  FP4PROBE_ATTN_DEFINES="${DEF[$v]}" timeout 200 $B/fp4probe attention --bench --path wgmma --seqs ${SEQS:-4096,16384} --head-dims ${DIMS:-128} --repeats 10 --csv $W/$v-$run.csv > /dev/null 2>$W/$v-$run.log; echo "$v $run rc=$? $(grep -o 'took [0-9.]* s' $W/$v-$run.log | tr '\n' ' ')"
done; done
sed -i "s/\['tf0', 'tf2'/['dflt', 'nopp', 'c2', 'tf0', 'tf2'/" .dev/cmp.py
python3 .dev/cmp.py $W | tee $W/cmp.txt
if [ -z "${NOPROF:-}" ]; then
for fmt in nvfp4 mxfp4; do
timeout 300 ncu --clock-control none -k regex:attn_${fmt}_d128 --launch-skip 2 --launch-count 1 \
  --section WarpStateStats --section SourceCounters --section SchedulerStats --section SpeedOfLight -o $W/prof-$fmt \
  $B/fp4probe attention --bench --path wgmma --seqs 4096 --head-dims 128 --repeats 2 --warmup 1 > $W/prof-$fmt.log 2>&1; echo "ncu $fmt rc=$?"
ncu -i $W/prof-$fmt.ncu-rep --page source --csv --print-source sass > $W/source-$fmt.csv 2>&1
ncu -i $W/prof-$fmt.ncu-rep --page details > $W/details-$fmt.txt 2>&1
grep -E "Duration|Issue Slots Busy|Eligible Warps|No Eligible" $W/details-$fmt.txt
gzip -9 $W/source-$fmt.csv; rm -f $W/prof-$fmt.ncu-rep
done
fi
tar czf $OUT/v2.tgz -C $W .
