#!/usr/bin/env bash
# NICE default + cap 20 for bf16 nv2: GPU tests, memcheck, cap sweep over all f32/bf16 kernels.
set -uo pipefail
mkdir -p .dev && tar xJf .devx/bin.tar.xz -C .dev
B=$PWD/.dev/bin; R=$OUT/r; mkdir -p $R
mkdir -p /work && ln -sfn "$PWD" /work/main
export FP4PROBE_COMPILE_CACHE=/tmp/fp4cache
T0=$SECONDS
echo "== GPU tests"
$B/gpu_quant --ignored --test-threads 1 > $R/gpu.log 2>&1; echo rc=$?
grep -E "cases|vector files|test result|panicked" $R/gpu.log | head
FP4PROBE_QUANT_CTAS_PER_SM=1 $B/gpu_quant --ignored --test-threads 1 > $R/gpu-c1.log 2>&1; echo rc=$?
grep -E "test result|panicked" $R/gpu-c1.log | head
echo "== memcheck t=$((SECONDS-T0))"
python3 -c "
import numpy as np, torch
from safetensors.torch import save_file
r = np.random.default_rng(5)
x = r.standard_normal((4096, 6144), dtype=np.float32) * np.exp2(r.integers(-8, 9, (4096, 1))).astype(np.float32)
save_file({'x': torch.from_numpy(x).to(torch.bfloat16)}, '/tmp/m16.safetensors')
s = x[:333, :1120].copy()
save_file({'x': torch.from_numpy(s).to(torch.bfloat16)}, '/tmp/s16.safetensors')"
for f in m16 s16; do for lay in linear 128x4 8x4; do
  compute-sanitizer --tool memcheck $B/fp4probe quantize --format nvfp4 --tensor-amax 2000 --scale-layout $lay --backend cuda --check-cpu --input /tmp/$f.safetensors --output /tmp/o-$f-$lay.safetensors > $R/mc-$f-$lay.log 2>&1
  echo "$f $lay rc=$? $(grep -E 'ERROR SUMMARY' $R/mc-$f-$lay.log) $(grep -E "^check" $R/mc-$f-$lay.log | head -1)"
done; done
tar czf $OUT/results.tgz -C $R .
bench() { # name env...
  local name=$1; shift
  env "$@" $B/fp4probe quant-bench --sizes 8192x8192 --search-size 64x64 --dtypes f32,bf16 --scale-layouts linear,128x4,8x4 --no-check --csv $R/b$round-$name.csv > $R/b$round-$name.md 2>>$R/err.log
  echo "-- $name r$round rc=$? t=$((SECONDS-T0))"
}
for round in 1 2; do
  if [ $round = 1 ]; then order="def c0 c10 c16 c32 c40"; else order="c40 c32 c16 c10 c0 def"; fi
  for v in $order; do
    case $v in
      def) bench def ;;
      c*) bench $v FP4PROBE_QUANT_CTAS_PER_SM=${v#c} ;;
    esac
  done
done
python3 - $R <<'PY'
import csv,glob,sys,collections
R=sys.argv[1]
tab=collections.defaultdict(dict)
for f in sorted(glob.glob(R+'/b*-*.csv')):
    v=f.split('/')[-1][:-4]
    rows=list(csv.DictReader(open(f)))
    copy={r['input_dtype']:float(r['gb_per_s']) for r in rows if r['format']=='copy'}
    for r in rows:
        if r['impl']!='fp4probe-cuda' or 'search' in r['format'] or r['format'] in ('nvfp4-two-level','nvfp4-two-level-128x4','nvfp4-two-level-8x4'): continue
        tab[(r['input_dtype'],r['format'])][v]=100*float(r['gb_per_s'])/copy[r['input_dtype']]
vs=sorted({v for d in tab.values() for v in d})
print('kernel'.ljust(44)+' '.join(x.rjust(8) for x in vs))
for k in sorted(tab): print((k[0]+' '+k[1]).ljust(44)+' '.join(('%.1f'%tab[k].get(v,0)).rjust(8) for v in vs))
PY
tar czf $OUT/results.tgz -C $R .
echo "t=$((SECONDS-T0))"
