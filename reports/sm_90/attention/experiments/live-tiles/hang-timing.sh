#!/usr/bin/env bash
# Is the 1500x700 "hang" compile time or a slow kernel? Times repeated runs on a fresh machine
# and lists the files the runs write (the CUDA compute cache). Record: README.md beside this file.
set -uo pipefail
R=$PWD; B=$R/.dev/bin; W=/tmp/w; mkdir -p $W; touch $W/stamp
tm() { local lab=$1 to=$2; shift 2; local t0=$(date +%s.%N)
  out=$(timeout $to $B/fp4probe attention --path wgmma --format nvfp4 "$@" 2>&1); rc=$?
  echo "$lab rc=$rc $(python3 -c "import time;print(f'{time.time()-$t0:.2f}s')") [$FP4PROBE_ATTN_DEFINES] [$*] $(echo "$out" | grep 'same quantized' | sed 's/.*cosine/cos/')"; }
H="--heads 7 --seq-q 1500 --seq-k 700 --causal"
export FP4PROBE_ATTN_DEFINES=ATTN_WG_CONSUMERS=2
tm first-sq700 60 --heads 7 --seq-q 700 --seq-k 700 --causal
tm second-sq700 60 --heads 7 --seq-q 700 --seq-k 700 --causal
tm hang1 90 $H
tm hang2 90 $H
tm hang3 90 $H
export FP4PROBE_ATTN_DEFINES="ATTN_WG_CONSUMERS=2 ATTN_DUMMY=1"
tm newdef-sq700 60 --heads 7 --seq-q 700 --seq-k 700 --causal
echo "--- files written during the runs:"; find / -xdev -newer $W/stamp -type f 2>/dev/null | grep -v "^/proc\|^/sys\|^/tmp/w" | head -20
env | grep -i cache
