#!/usr/bin/env bash
# grid-FFMA A/B: base vs new default vs new NICE; GPU tests on new (default and NICE).
set -uo pipefail
mkdir -p .dev && tar xJf .devx/bin.tar.xz -C .dev
B=$PWD/.dev/bin; R=$OUT/r; mkdir -p $R
mkdir -p /work && ln -sfn "$PWD" /work/main
export FP4PROBE_COMPILE_CACHE=/tmp/fp4cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
T0=$SECONDS
bench() { # name bin env...
  local name=$1 bin=$2; shift 2
  env "$@" $B/$bin quant-bench --sizes 8192x8192 --search-size 64x64 --dtypes bf16 --scale-layouts linear,128x4,8x4 --no-check --csv $R/b$round-$name.csv > $R/b$round-$name.md 2>>$R/err.log
  echo "-- $name r$round rc=$? t=$((SECONDS-T0))"
  grep -E "given-amax|one-level|copy" $R/b$round-$name.md | cut -c1-110
}
for round in 1 2 3; do
  if [ $round = 2 ]; then order="nice new base"; else order="base new nice"; fi
  for v in $order; do
    case $v in
      base) bench base fp4probe-base ;;
      new) bench new fp4probe-new ;;
      nice) bench nice fp4probe-new FP4PROBE_QUANT_DEFINES=NV2_BF16_NICE=1 ;;
    esac
  done
done
tar czf $OUT/results.tgz -C $R .
echo "== GPU tests new default"
cp $B/fp4probe-new $B/fp4probe
$B/gpu_quant --ignored --test-threads 1 > $R/gpu-new.log 2>&1; echo rc=$?
grep -E "cases|vector files|test result|panicked" $R/gpu-new.log | head -20
echo "== GPU tests new NICE t=$((SECONDS-T0))"
FP4PROBE_QUANT_DEFINES=NV2_BF16_NICE=1 $B/gpu_quant --ignored --test-threads 1 > $R/gpu-nice.log 2>&1; echo rc=$?
grep -E "cases|vector files|test result|panicked" $R/gpu-nice.log | head -20
tar czf $OUT/results.tgz -C $R .
echo "t=$((SECONDS-T0))"
