#!/usr/bin/env bash
# The command line on a GPU machine without cargo, in one call: the opt-in GPU tests, the headline
# probes into results/, lookup, the wgmma attention suite and codegen --verify through the kernel
# sources built into the binary, quantize on the GPU, and bad arguments refused before the device.
# Binaries (fp4probe and the gpu_*/attention_kernel test binaries from `cargo test --release
# --no-run`) are carried in .dev/bin; results land in $OUT.
set -uo pipefail
B=.dev/bin
mkdir -p /work && ln -sfn "$PWD" /work/main   # test binaries were built at /work/main
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== GPU tests (--ignored)"
for t in gpu_backend gpu_codegen gpu_quant; do $B/$t --ignored --test-threads 1 2>&1 | grep -E "^test |test result|panicked" ; done
echo "== attention_kernel (device NVRTC, SASS checks)"
$B/attention_kernel 2>&1 | grep -E "test result|FAILED|panicked"
echo "== fragment --shape m16n8k32 on the H200"
TIMEFORMAT='wall %R s'
time $B/fp4probe fragment --shape m16n8k32 --backend cuda -q -o $OUT/k32 > $OUT/shape.txt 2>&1; echo "rc=$?"; tail -5 $OUT/shape.txt | cut -c1-200
echo "== fragment --all on the H200 (default output results/sm_90)"
time $B/fp4probe fragment --all -q > $OUT/all.txt 2>&1; echo "rc=$?"; tail -4 $OUT/all.txt | cut -c1-200
grep -c "hardware  passed" $OUT/all.txt
echo "== an emulator run into the hardware maps is refused"
$B/fp4probe fragment --variant m16n8k16.f32.bf16.bf16.f32 --backend emulator -o results/sm_90; echo "rc=$?"
echo "== lookup against the fresh hardware map"
$B/fp4probe lookup results/sm_90/m16n8k16.f32.bf16.bf16.f32.json --operand A --lane 5 --reg 1 --elem 0
echo "== attention suite, wgmma, embedded kernels (first NVRTC compiles included)"
time $B/fp4probe attention --suite --path wgmma > $OUT/suite.md 2>&1; echo "rc=$?"; echo "pass $(grep -c '| pass |' $OUT/suite.md) fail $(grep -c '| FAIL |' $OUT/suite.md)"; tail -3 $OUT/suite.md
echo "== codegen --verify on the GPU"
$B/fp4probe codegen --verify 2>&1 | tail -3
echo "== quantize on the GPU"
python3 -c "import numpy as np; np.save('/tmp/w.npy', np.random.randn(256,512).astype(np.float32))"
$B/fp4probe quantize --format nvfp4 --input /tmp/w.npy --output /tmp/w.safetensors --check-cpu 2>&1 | tail -3; echo "rc=$?"
echo "== bad arguments on a GPU machine"
$B/fp4probe attention --suite --bench; echo "rc=$?"
$B/fp4probe attention --seq-q 10000000 --seq-k 10000000; echo "rc=$?"
$B/fp4probe bench --variant m16n8k16.f32.bf16.bf16.f32 --unroll 1000000; echo "rc=$?"
ls /tmp | grep -c fp4probe
