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
#   3. the kernels under other FP4PROBE_QUANT_DEFINES (VARIANTS: "name|defines|dtypes|env"
#      entries separated by ';', env: VAR=value words for the bench; by default "prior": tiled
#      scales in row order, the integer bf16 amax, one-level bf16 at 5 CTAs), then the
#      defaults again, unchecked;
#   4. Nsight Compute (unlocked clocks) on two-level NVFP4 of bf16 (linear) and one-level NVFP4
#      of bf16 (128x4);
#   5. compute-sanitizer memcheck with --check-cpu on 333x1120 (rows that do not fill a tile, a
#      row of 70 blocks: two 64-block bands): bf16 two-level NVFP4 (given amax in 128x4, its
#      own amax linear), one-level NVFP4 of bf16 in 128x4 and 8x4 and of f32 in 128x4,
#      two-level NVFP4 of f32 in 8x4;
#   6. attention on Q, K, V quantized by `quantize --backend cuda` (V with --attention-v).
# STEPS (default 123456) picks the steps to run.
# Every step tars its files into $OUT/results.tgz as it ends (a call cut short keeps what ran).
# The test binaries find their fixtures where they were built, and gpu_attention runs the
# fp4probe binary it was built with: link that path to this checkout and put fp4probe there
# first (e.g. mkdir -p /work && ln -sfn "$PWD" /work/<worktree>; cp $B/fp4probe target/release/).
set -uo pipefail
B=${B:-.dev/bin}
OUT=${OUT:-/tmp/fp4probe-out}
R=$OUT/r
mkdir -p "$R"; L=$R/run.log
VARIANTS=${VARIANTS:-"prior|NV_BANDS=0 BF16_AMAX_HMNMX=0 QUANT_MIN_BLOCKS_BF16_NV1=5|f32,bf16|"}
STEPS=${STEPS:-123456}
T0=$SECONDS
done_step() { echo "  [t=$((SECONDS - T0))s]" | tee -a "$L"; tar czf "$OUT/results.tgz" -C "$R" .; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee -a "$L"
if [[ $STEPS == *1* ]]; then
  echo "== 1. quant-bench (checked)" | tee -a "$L"
  (cd "$R" && "$B/fp4probe" quant-bench --sizes 8192x8192 --search-size 256x256 --dtypes f32,bf16 \
    --scale-layouts linear,128x4,8x4 --csv quant-bench-1.csv >quant-bench-1.md 2>>"$L"); echo "rc=$?" | tee -a "$L"
  grep "^| " "$R/quant-bench-1.md"; done_step
fi
if [[ $STEPS == *2* ]]; then
  echo "== 2. GPU tests" | tee -a "$L"
  "$B/gpu_quant" --ignored --test-threads 1 --nocapture >"$R/gpu-tests.log" 2>&1
  grep -E "cases|vector files|test result|panicked" "$R/gpu-tests.log"; done_step
fi
if [[ $STEPS == *3* ]]; then
  echo "== 3. variants, then the default, unchecked" | tee -a "$L"
  IFS=';' read -ra VS <<<"$VARIANTS"
  for v in "${VS[@]}" "default||f32,bf16"; do
    IFS='|' read -r name defs dtypes envs <<<"$v"
    echo "-- $name: $envs FP4PROBE_QUANT_DEFINES='$defs' --dtypes $dtypes" | tee -a "$L"
    env $envs FP4PROBE_QUANT_DEFINES="$defs" "$B/fp4probe" quant-bench --sizes 8192x8192 --search-size 256x256 \
      --dtypes "$dtypes" --scale-layouts linear,128x4,8x4 --no-check --csv "$R/variant-$name.csv" \
      >"$R/variant-$name.md" 2>>"$L"
    grep -E "^\\| " "$R/variant-$name.md" | grep -vE "search|amax pass" | cut -c1-120
    done_step
  done
fi
if [[ $STEPS == *4* || $STEPS == *5* ]]; then
  python3 -c "
import numpy as np, torch
from safetensors.torch import save_file
r = np.random.default_rng(5)
x = r.standard_normal((8192, 8192), dtype=np.float32) * np.exp2(r.integers(-8, 9, (8192, 1))).astype(np.float32)
save_file({'x': torch.from_numpy(x).to(torch.bfloat16)}, '/tmp/x16.safetensors')
s = x[:333, :1120].copy()
save_file({'x': torch.from_numpy(s).to(torch.bfloat16)}, '/tmp/s16.safetensors')
save_file({'x': torch.from_numpy(s)}, '/tmp/s32.safetensors')"
fi
if [[ $STEPS == *4* ]]; then
  echo "== 4. Nsight Compute" | tee -a "$L"
  M=smsp__inst_executed.sum,lts__t_sectors_op_write.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active
  M=$M,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed
  for c in "nvfp4 --tensor-amax 2000" "nvfp4 --nvfp4-levels 1 --scale-layout 128x4"; do
    echo "-- x16 $c"
    ncu --clock-control none -k regex:^quant_ -c 1 --section SpeedOfLight --section Occupancy \
      --section LaunchStats --section ComputeWorkloadAnalysis --metrics $M \
      "$B/fp4probe" quantize --format $c --backend cuda --input /tmp/x16.safetensors --output /tmp/q.safetensors 2>&1 |
      grep -vE "^==PROF==|^ *$|^ *-+ *$"
  done >"$R/ncu.txt" 2>&1
  grep -E "^-- |Duration|DRAM Throughput|Issue Slots Busy|smsp__inst_executed.sum|pipe_alu.avg|pipe_fma.avg|lts__throughput|lts__t_sectors_op_write|Registers Per|Achieved Occupancy" "$R/ncu.txt"
  done_step
fi
if [[ $STEPS == *5* ]]; then
  echo "== 5. memcheck with --check-cpu, 333x1120" | tee -a "$L"
  for c in "s16 --tensor-amax 2000 --scale-layout 128x4" "s16" "s16 --nvfp4-levels 1 --scale-layout 128x4" \
    "s16 --nvfp4-levels 1 --scale-layout 8x4" "s32 --nvfp4-levels 1 --scale-layout 128x4" "s32 --scale-layout 8x4"; do
    set -- $c; f=$1; shift
    echo "-- $f $*" | tee -a "$L"
    compute-sanitizer --tool memcheck "$B/fp4probe" quantize --format nvfp4 "$@" --backend cuda --check-cpu \
      --input /tmp/$f.safetensors --output /tmp/s.safetensors 2>&1 | grep -E "ERROR SUMMARY|^check|rror" | tee -a "$L"
  done
  done_step
fi
if [[ $STEPS == *6* ]]; then
  echo "== 6. attention on quantize --attention-v files" | tee -a "$L"
  "$B/gpu_attention" --ignored --exact attention_on_files_runs_the_kernel --nocapture >"$R/gpu-attention.log" 2>&1
  grep -E "^files|test result|panicked" "$R/gpu-attention.log"; done_step
fi
