#!/usr/bin/env bash
# Bisection of the 7 x 1500x700 causal "hang" by shape and define (8 s per run), then cuda-gdb on
# a run interrupted after 25 s (every SM's warps), then synccheck. On a fresh machine the first
# run of each kernel variant is its first NVRTC compile (9-22 s); see README.md beside this file.
set -uo pipefail
R=$PWD; B=$R/.dev/bin; W=/tmp/w; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
run() { # label defines args...
  local lab=$1 defs=$2; shift 2
  local t0=$(date +%s.%N)
  out=$(FP4PROBE_ATTN_DEFINES="$defs" timeout ${TO:-8} $B/fp4probe attention --path wgmma --format nvfp4 "$@" 2>&1); rc=$?
  echo "$lab [$defs] [$*] rc=$rc $(python3 -c "import time;print(f'{time.time()-$t0:.1f}s')") $(echo "$out" | grep 'same quantized' | sed 's/.*cosine/cos/')"
}
H="--heads 7 --seq-q 1500 --seq-k 700 --causal"
for c in 2 3; do
  run base "ATTN_WG_CONSUMERS=$c" $H
  run pp0 "ATTN_WG_CONSUMERS=$c ATTN_WG_PINGPONG=0" $H
  run sk704 "ATTN_WG_CONSUMERS=$c" --heads 7 --seq-q 1500 --seq-k 704 --causal
  run sq700 "ATTN_WG_CONSUMERS=$c" --heads 7 --seq-q 700 --seq-k 700 --causal
  run h1 "ATTN_WG_CONSUMERS=$c" --heads 1 --seq-q 1500 --seq-k 700 --causal
  run sq1400 "ATTN_WG_CONSUMERS=$c" --heads 7 --seq-q 1400 --seq-k 700 --causal
  run h40 "ATTN_WG_CONSUMERS=$c" --heads 40 --seq-q 1500 --seq-k 700 --causal
  run sk640 "ATTN_WG_CONSUMERS=$c" --heads 7 --seq-q 1500 --seq-k 640 --causal
done > $W/bisect.txt 2>&1
cat $W/bisect.txt
# cuda-gdb: interrupt the hung run after 25 s, list every SM's warps and their PCs.
args=(-batch -ex "set pagination off" -ex "set cuda break_on_launch none" -ex run -ex "info cuda kernels" -ex "info cuda sms")
for sm in $(seq 0 131); do args+=(-ex "cuda sm $sm" -ex "info cuda warps"); done
args+=(-ex "cuda sm 0 warp 0 lane 0" -ex "x/3i \$pc" -ex "info cuda blocks")
(sleep 25; pkill -INT -f "^$B/fp4probe attention") &
FP4PROBE_ATTN_DEFINES=ATTN_WG_CONSUMERS=2 timeout 200 cuda-gdb "${args[@]}" --args $B/fp4probe attention --path wgmma --format nvfp4 $H > $W/gdb.txt 2>&1
echo "cuda-gdb rc=$?"; wc -l $W/gdb.txt; grep -v "^\s*$" $W/gdb.txt | head -60
FP4PROBE_ATTN_DEFINES=ATTN_WG_CONSUMERS=2 timeout 90 compute-sanitizer --tool synccheck $B/fp4probe attention --path wgmma --format nvfp4 $H > $W/synccheck.txt 2>&1; echo "synccheck rc=$?"; tail -5 $W/synccheck.txt
tar czf $OUT/hang.tgz -C $W .
