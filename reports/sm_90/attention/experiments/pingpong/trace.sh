#!/usr/bin/env bash
# Per-segment timeline of one CTA (the kernel's ATTN_TRACE macro: thread 0 of the producer and of
# each consumer warpgroup printf clock64 deltas). CTAS picks the CTAs, TSEQ the sequence length,
# DEFS extra defines. Run from the repository root with fp4probe in .dev/bin; results in
# $OUT/tr.tgz. Record: README.md beside this file.
set -uo pipefail
B=$PWD/.dev/bin; OUT=${OUT:-/tmp/o}; W=/tmp/w; mkdir -p $OUT $W
for cta in ${CTAS:-0 101}; do
  FP4PROBE_ATTN_DEFINES="ATTN_TRACE=$cta ${DEFS:-}" timeout 100 $B/fp4probe attention --bench --seqs ${TSEQ:-4096} --head-dims 128 --repeats 1 --warmup 1 > $W/trace-$cta.txt 2>&1; echo "trace $cta rc=$?"
done
tar czf $OUT/tr.tgz -C $W .
