#!/usr/bin/env bash
# The tiled scale layouts (quantize --scale-layout) on a GPU machine, one device call, no cargo
# there. Binaries built on the dev machine in $B (default .dev/bin): fp4probe and the gpu_quant
# test binary (`cargo test --release --test gpu_quant --no-run`). Results go to $OUT.
#   1. quant-bench at 8192x8192, f32 and bf16, every format in linear, 128x4 and 8x4 scales
#      side by side with the device copy (two rounds);
#   2. the GPU tests (kernels = CPU reference in the tiled layouts, and the independent vectors);
#   3. torch lays the linear scales out as torchao / FlashInfer do: equal to the kernels' bytes;
#   4. compute-sanitizer memcheck on tiled quantizations of an odd shape;
#   5. Nsight Compute on the bf16 kernels, linear against 128x4 (8192x8192): instructions by
#      pipe, L2 write sectors, speed of light.
# The gpu_quant binary finds its fixtures where it was built: link that path to this checkout
# first (e.g. mkdir -p /work && ln -sfn "$PWD" /work/<worktree>).
set -uo pipefail
B=${B:-.dev/bin}
OUT=${OUT:-/tmp/fp4probe-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
echo "== 1. quant-bench, linear vs tiled scales"
for round in 1 2; do
  check=""; [ $round = 2 ] && check="--no-check"
  $B/fp4probe quant-bench --sizes 8192x8192 --dtypes f32,bf16 --scale-layouts linear,128x4,8x4 \
    --search-size 256x256 $check --csv "$OUT/layout-bench-$round.csv" >"$OUT/layout-bench-$round.md" \
    2>"$OUT/layout-bench-$round.log"; echo "round $round rc=$?"
  grep "^| " "$OUT/layout-bench-$round.md" | head -40
done
echo "== 2. GPU tests"
$B/gpu_quant --ignored --test-threads 1 --nocapture 2>&1 | grep -E "cases|vector files|test result|panicked" 
echo "== 3. torch layouts of the linear scales = the kernels' tiled scales"
python3 "$(dirname "$0")/scale_layout_torch.py" --fp4probe $B/fp4probe --workdir /tmp/qlayout; echo "torch check rc=$?"
echo "== 4. compute-sanitizer memcheck"
python3 -c "
import numpy as np
x = np.random.default_rng(3).standard_normal((333, 160)).astype(np.float32)
x[5, 7] = np.nan; x[200] *= 1e-3
np.save('/tmp/san.npy', x)"
for args in "mxfp4 --scale-layout 128x4" "nvfp4 --scale-layout 128x4" "nvfp4 --scale-layout 8x4 --search"; do
  compute-sanitizer --tool memcheck --error-exitcode 9 $B/fp4probe quantize --format $args --backend cuda \
    --check-cpu --input /tmp/san.npy --output /tmp/san.safetensors 2>&1 | grep -E "ERROR SUMMARY|error|check:" | head -3
  echo "memcheck $args rc=${PIPESTATUS[0]}"
done
echo "== 5. Nsight Compute, bf16 8192x8192, linear vs 128x4"
python3 -c "
import torch
from safetensors.torch import save_file
g = torch.Generator().manual_seed(5)
save_file({'x': torch.randn(8192, 8192, generator=g).to(torch.bfloat16)}, '/tmp/big.safetensors')"
for fmt in "mxfp4" "nvfp4 --nvfp4-levels 1"; do
  for layout in linear 128x4; do
    echo "-- $fmt $layout"
    ncu --clock-control none -k regex:^quant_ -c 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
      --metrics smsp__inst_executed.sum,sm__inst_executed_pipe_alu.sum,sm__inst_executed_pipe_fma.sum,lts__t_sectors_op_write.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum \
      $B/fp4probe quantize --format $fmt --scale-layout $layout --backend cuda --input /tmp/big.safetensors \
      --output /tmp/big.q.safetensors 2>&1 | grep -vE "^==PROF==|^ *$|^ *-+ *$"
  done
done >"$OUT/ncu.txt"; echo "ncu rc=$?"
grep -E "^-- |Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|inst_executed|sectors_op_write|requests_pipe|Issue Slots Busy|ALU" "$OUT/ncu.txt" | head -80
