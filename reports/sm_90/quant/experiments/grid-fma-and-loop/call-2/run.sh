#!/usr/bin/env bash
# NICE=1 (new grid) under grid caps and register caps; ncu on linear and 128x4.
set -uo pipefail
mkdir -p .dev && tar xJf .devx/bin.tar.xz -C .dev
B=$PWD/.dev/bin; R=$OUT/r; mkdir -p $R
export FP4PROBE_COMPILE_CACHE=/tmp/fp4cache
T0=$SECONDS
bench() { # name defs env...
  local name=$1 defs=$2; shift 2
  env "$@" FP4PROBE_QUANT_DEFINES="$defs" $B/fp4probe-new quant-bench --sizes 8192x8192 --search-size 64x64 --dtypes bf16 --scale-layouts linear,128x4,8x4 --no-check --csv $R/b$round-$name.csv > $R/b$round-$name.md 2>>$R/err.log
  echo "-- $name r$round rc=$? t=$((SECONDS-T0)) $(grep -E 'given-amax' $R/b$round-$name.md | awk -F'|' '{printf "%s ", $7}') copy $(grep -E '\| copy' $R/b$round-$name.md | awk -F'|' '{print $6}')"
}
for round in 1 2; do
  bench nice NV2_BF16_NICE=1
  bench def ""
  bench nice-c5 NV2_BF16_NICE=1 FP4PROBE_QUANT_CTAS_PER_SM=5
  bench nice-c10 NV2_BF16_NICE=1 FP4PROBE_QUANT_CTAS_PER_SM=10
  bench nice-c20 NV2_BF16_NICE=1 FP4PROBE_QUANT_CTAS_PER_SM=20
  bench nice-m4 "NV2_BF16_NICE=1 QUANT_MIN_BLOCKS_BF16_NV=4"
  bench nice-m6 "NV2_BF16_NICE=1 QUANT_MIN_BLOCKS_BF16_NV=6"
done
tar czf $OUT/results.tgz -C $R .
python3 -c "
import numpy as np, torch
from safetensors.torch import save_file
r = np.random.default_rng(5)
x = r.standard_normal((8192, 8192), dtype=np.float32) * np.exp2(r.integers(-8, 9, (8192, 1))).astype(np.float32)
save_file({'x': torch.from_numpy(x).to(torch.bfloat16)}, '/tmp/x16.safetensors')"
M=smsp__inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active
for lay in linear 128x4; do for defs in NV2_BF16_NICE=1 ""; do
  echo "-- ncu $lay defs=$defs"
  FP4PROBE_QUANT_DEFINES="$defs" ncu --clock-control none -k regex:^quant_ -c 1 --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --metrics $M \
    $B/fp4probe-new quantize --format nvfp4 --tensor-amax 2000 --scale-layout $lay --backend cuda --input /tmp/x16.safetensors --output /tmp/q-$lay.safetensors > $R/ncu-$lay-$defs.txt 2>&1
  grep -E "Duration|DRAM Throughput|Issue Slots Busy|Issued Warp|inst_executed.sum|pipe_alu|pipe_fma|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Stall (Not Sel|Math|Long|Wait|Dispatch)" $R/ncu-$lay-$defs.txt
done; done
tar czf $OUT/results.tgz -C $R .
echo "t=$((SECONDS-T0))"
