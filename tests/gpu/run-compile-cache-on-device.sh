#!/usr/bin/env bash
# The compile cache on a GPU machine: `fp4probe attention` (defaults: B=1 H=2 S=256 D=128) twice
# with every cache empty (fp4probe's in $XDG_CACHE_HOME, NVRTC's and the driver's under $HOME and
# $CUDA_CACHE_PATH, all in a fresh temporary folder), once more with fp4probe's cache off, then
# the suite with it warm; and FP8 dot products through torch for tests/vectors/wgmma/.
# fp4probe from $BIN (default .dev/bin); results in $OUT (fp8dot.bin, attention-suite.md).
# reports/sm_90/attention/compile-cache-run.log is this script's output on the H200.
set -uo pipefail
BIN=${BIN:-.dev/bin}
OUT=${OUT:-/tmp/fp4probe-out}
mkdir -p "$OUT"
B=$BIN/fp4probe
T=$(mktemp -d)
export XDG_CACHE_HOME=$T/xdg HOME=$T/home CUDA_CACHE_PATH=$T/nv
mkdir -p "$HOME"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
now() { date +%s.%N; }
timed() { local s e rc; s=$(now); "$@"; rc=$?; e=$(now); echo "rc=$rc wall=$(awk "BEGIN{printf \"%.2f\", $e-$s}") s: $*"; }
echo "== run 1: fp4probe attention (defaults), every cache empty"
timed $B attention 2>&1
echo "== run 2: the same, right after"
timed $B attention 2>&1
echo "== compile cache folder"; ls -l "$XDG_CACHE_HOME/fp4probe/nvrtc"
echo "== FP8 accumulation through torch._scaled_mm"
PYTHONUNBUFFERED=1 python3 tests/gpu/fp8_dot_scaled_mm.py 2>&1
echo "== run 3: FP4PROBE_COMPILE_CACHE=off (NVRTC's and the driver's own caches as runs 1-2 left them)"
FP4PROBE_COMPILE_CACHE=off timed $B attention 2>&1
echo "== suite, compile cache warm"
timed $B attention --suite > "$OUT/attention-suite.md" 2>&1
tail -3 "$OUT/attention-suite.md"; grep -c "| pass |" "$OUT/attention-suite.md"; grep -c "FAIL" "$OUT/attention-suite.md"
ls -l "$XDG_CACHE_HOME/fp4probe/nvrtc"
rm -rf "$T"
