#!/usr/bin/env bash
# The one-pass quantizers' speed against the device's copy, on a GPU machine, one device call, no
# cargo there. Binaries built on the dev machine in $B (default .dev/bin): fp4probe, and the
# gpu_quant and gpu_attention test binaries (`cargo test --release --test gpu_quant --test
# gpu_attention --no-run`). Results go to $OUT (reports/sm_90/quant/speed/README.md lists them).
#   1. quant-bench at 8192x8192, f32 and bf16, every format in linear, 128x4 and 8x4 scales side
#      by side with the driver's copy of the same bytes, each output checked byte for byte
#      against the CPU reference;
#   2. the GPU tests (the independent vectors, the CPU reference on awkward tensors, the tiled
#      layouts, bf16 two-level blocks at the E2M1 midpoints);
#   3. two-level NVFP4 of bf16 through the f32 path (NV2_BF16_PATH=0), then the default, unchecked;
#   4. Nsight Compute (unlocked clocks) on the bf16 kernels below 90% of the copy;
#   5. compute-sanitizer memcheck with --check-cpu, bf16 two-level NVFP4;
#   6. attention on Q, K, V quantized by `quantize --backend cuda` (V with --attention-v).
# The test binaries find their fixtures where they were built, and gpu_attention runs the
# fp4probe binary it was built with: link that path to this checkout and put fp4probe there
# first (e.g. mkdir -p /work && ln -sfn "$PWD" /work/<worktree>; cp $B/fp4probe target/release/).
set -uo pipefail
B=${B:-.dev/bin}
OUT=${OUT:-/tmp/fp4probe-out}
mkdir -p "$OUT"; L=$OUT/run.log
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee -a "$L"
echo "== 1. quant-bench (checked)" | tee -a "$L"
(cd "$OUT" && "$B/fp4probe" quant-bench --sizes 8192x8192 --search-size 256x256 --dtypes f32,bf16 \
  --scale-layouts linear,128x4,8x4 --csv quant-bench-1.csv >quant-bench-1.md 2>>"$L"); echo "rc=$?"
grep "^| " "$OUT/quant-bench-1.md"
echo "== 2. GPU tests" | tee -a "$L"
"$B/gpu_quant" --ignored --test-threads 1 --nocapture >"$OUT/gpu-tests.log" 2>&1
grep -E "cases|vector files|test result|panicked" "$OUT/gpu-tests.log"
echo "== 3. two-level bf16: the f32 path, then the default" | tee -a "$L"
for p in 0 1; do
  echo "-- NV2_BF16_PATH=$p" >>"$OUT/nv2-path.md"
  FP4PROBE_QUANT_DEFINES="NV2_BF16_PATH=$p" "$B/fp4probe" quant-bench --sizes 8192x8192 --search-size 256x256 \
    --dtypes bf16 --scale-layouts linear,128x4,8x4 --no-check >>"$OUT/nv2-path.md" 2>>"$L"
done
grep -E "^--|two-level-given|copy" "$OUT/nv2-path.md"
echo "== 4. Nsight Compute" | tee -a "$L"
python3 -c "
import numpy as np, torch
from safetensors.torch import save_file
r = np.random.default_rng(5)
x = r.standard_normal((8192, 8192), dtype=np.float32) * np.exp2(r.integers(-8, 9, (8192, 1))).astype(np.float32)
save_file({'x': torch.from_numpy(x).to(torch.bfloat16)}, '/tmp/x16.safetensors')
save_file({'x': torch.from_numpy(x[:333, :160].copy()).to(torch.bfloat16)}, '/tmp/s16.safetensors')"
M=smsp__inst_executed.sum,lts__t_sectors_op_write.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active
M=$M,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed
for c in "nvfp4 --tensor-amax 2000" "nvfp4 --nvfp4-levels 1 --scale-layout 128x4"; do
  echo "-- x16 $c"
  ncu --clock-control none -k regex:^quant_ -c 1 --section SpeedOfLight --section Occupancy \
    --section LaunchStats --section ComputeWorkloadAnalysis --metrics $M \
    "$B/fp4probe" quantize --format $c --backend cuda --input /tmp/x16.safetensors --output /tmp/q.safetensors 2>&1 |
    grep -vE "^==PROF==|^ *$|^ *-+ *$"
done >"$OUT/ncu.txt" 2>&1
grep -E "^-- |Duration|DRAM Throughput|Issue Slots Busy|smsp__inst_executed.sum|pipe_alu.avg|pipe_fma.avg|lts__throughput|lts__t_sectors_op_write|Registers Per|Achieved Occupancy" "$OUT/ncu.txt"
echo "== 5. memcheck, two-level bf16 333x160 (given amax, 128x4; measured amax)" | tee -a "$L"
for c in "--tensor-amax 2000 --scale-layout 128x4" ""; do
  compute-sanitizer --tool memcheck "$B/fp4probe" quantize --format nvfp4 $c --backend cuda --check-cpu \
    --input /tmp/s16.safetensors --output /tmp/s.safetensors 2>&1 | grep -E "ERROR SUMMARY|^check" | tee -a "$L"
done
echo "== 6. attention on quantize --attention-v files" | tee -a "$L"
"$B/gpu_attention" --ignored --exact attention_on_files_runs_the_kernel --nocapture >"$OUT/gpu-attention.log" 2>&1
grep -E "^files|test result|panicked" "$OUT/gpu-attention.log"
