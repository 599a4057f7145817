#!/usr/bin/env bash
# The one-pass quantizers' speed against the device's copy, on a GPU machine, one device call, no
# cargo there. Binaries built on the dev machine in $B (default .dev/bin): fp4probe and the
# gpu_quant test binary (`cargo test --release --test gpu_quant --no-run`). Results go to $OUT.
#   1. quant-bench at 8192x8192, f32 and bf16, every format in linear, 128x4 and 8x4 scales side
#      by side with the driver's copy of the same bytes, each output checked byte for byte
#      against the CPU reference; a second round unchecked;
#   2. the GPU tests (the independent vectors, the CPU reference on awkward tensors, the tiled
#      layouts);
#   3. quantize --check-cpu, f32 and bf16 inputs of 8192x8192 (gaussian rows scaled by
#      2^-8..2^8): MXFP4 128x4, one-level NVFP4 8x4, two-level NVFP4 with a given amax 128x4,
#      two-level NVFP4 linear;
#   4. Nsight Compute (unlocked clocks) on the kernels that stay below 90% of the copy and
#      three more: instructions by pipe, issue slots, warp states, DRAM and L2 throughput,
#      occupancy.
# The gpu_quant binary finds its fixtures where it was built: link that path to this checkout
# first (e.g. mkdir -p /work && ln -sfn "$PWD" /work/<worktree>).
set -uo pipefail
B=${B:-.dev/bin}
OUT=${OUT:-/tmp/fp4probe-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
S="--sizes 8192x8192 --dtypes f32,bf16 --scale-layouts linear,128x4,8x4 --search-size 256x256"
echo "== 1. quant-bench"
for round in 1 2; do
  check=""; [ $round = 2 ] && check="--no-check"
  $B/fp4probe quant-bench $S $check --csv "$OUT/quant-bench-$round.csv" >"$OUT/quant-bench-$round.md" \
    2>"$OUT/quant-bench-$round.log"; echo "round $round rc=$?"
  grep "^| " "$OUT/quant-bench-$round.md" | head -40
done
echo "== 2. GPU tests"
$B/gpu_quant --ignored --test-threads 1 --nocapture 2>&1 | grep -E "cases|vector files|test result|panicked"
echo "== 3. quantize --check-cpu"
python3 -c "
import numpy as np, torch
from safetensors.torch import save_file
r = np.random.default_rng(5)
x = r.standard_normal((8192, 8192), dtype=np.float32) * np.exp2(r.integers(-8, 9, (8192, 1))).astype(np.float32)
np.save('/tmp/x32.npy', x)
save_file({'x': torch.from_numpy(x).to(torch.bfloat16)}, '/tmp/x16.safetensors')"
for inp in /tmp/x32.npy /tmp/x16.safetensors; do
  for fmt in "mxfp4 --scale-layout 128x4" "nvfp4 --nvfp4-levels 1 --scale-layout 8x4" \
    "nvfp4 --tensor-amax 2000 --scale-layout 128x4" "nvfp4"; do
    $B/fp4probe quantize --format $fmt --backend cuda --check-cpu --input $inp --output /tmp/q.safetensors 2>&1 |
      grep -E "^check:|rror" | head -2
    echo "  $inp $fmt rc=${PIPESTATUS[0]}"
  done
done
echo "== 4. Nsight Compute"
M=smsp__inst_executed.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_read.sum,dram__bytes_read.sum,dram__bytes_write.sum
M=$M,sm__inst_executed_pipe_alu.sum,sm__inst_executed_pipe_fma.sum,sm__inst_executed_pipe_fmaheavy.sum
M=$M,sm__inst_executed_pipe_fmalite.sum,sm__inst_executed_pipe_lsu.sum,sm__inst_executed_pipe_xu.sum
M=$M,sm__inst_executed_pipe_uniform.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active
M=$M,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active
M=$M,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed
for c in "x16.safetensors nvfp4 --tensor-amax 2000" "x16.safetensors nvfp4 --tensor-amax 2000 --scale-layout 128x4" \
  "x32.npy nvfp4 --tensor-amax 2000" "x16.safetensors mxfp4 --scale-layout 128x4" \
  "x16.safetensors nvfp4 --nvfp4-levels 1 --scale-layout 128x4" "x32.npy nvfp4 --nvfp4-levels 1 --scale-layout 128x4" \
  "x32.npy mxfp4"; do
  set -- $c; inp=$1; shift
  echo "-- $inp $*"
  ncu --clock-control none -k regex:^quant_ -c 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section Occupancy --section WarpStateStats --section LaunchStats --metrics $M \
    $B/fp4probe quantize --format "$@" --backend cuda --input /tmp/$inp --output /tmp/q.safetensors 2>&1 |
    grep -vE "^==PROF==|^ *$|^ *-+ *$"
done >"$OUT/ncu.txt"; echo "ncu rc=$?"
grep -E "^-- |Duration|DRAM Throughput|Issue Slots Busy|smsp__inst_executed.sum|pipe_alu.avg|lts__throughput|Registers Per|Achieved Occupancy" \
  "$OUT/ncu.txt" | head -80
