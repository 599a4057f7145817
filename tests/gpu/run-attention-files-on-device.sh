#!/usr/bin/env bash
# Attention on tensor files and grouped-query attention on a GPU machine, one device call, no
# cargo there. Binaries in $B (default .dev/bin): fp4probe and the gpu_attention test binary
# (`cargo test --release --test gpu_attention --no-run`). Results in $OUT.
#   1. the GPU tests: grouped-query attention on every path this GPU runs natively against the
#      CPU reference and against multi-head attention with K/V repeated; the command on files;
#   2. the command on files against PyTorch SDPA in f32 (attention_files_sdpa.py, from this
#      script's folder): cosine per case;
#   3. the validation suites of the default path and of wgmma-fp8 (their grouped-query cases
#      among the rest);
#   4. compute-sanitizer memcheck, racecheck and synccheck on a grouped-query validation run of
#      each native path.
# Steps 3 and 4 are skipped once $BUDGET seconds (default 250) have gone, so one device call of
# 300 s brings back everything that ran; the whole output is also in $OUT/run.log.
# reports/sm_90/attention/files-gqa-run.log is this script's run.log on the H200
# (B=. from a folder holding both binaries and attention_files_sdpa.py).
set -uo pipefail
B=${B:-.dev/bin}
G=$(dirname "$0")
OUT=${OUT:-/tmp/fp4probe-out}
BUDGET=${BUDGET:-250}
mkdir -p "$OUT"
exec > >(tee "$OUT/run.log") 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
now() { date +%s; }
t0=$(now)
# Seconds left of the budget, at least 0.
left() { local l=$(( BUDGET - ($(now) - t0) )); echo $(( l > 0 ? l : 0 )); }
echo "== 1. GPU tests"
timeout 130 "$B/gpu_attention" --ignored --test-threads 1 --nocapture >"$OUT/gpu-tests.log" 2>&1
echo "gpu tests rc=$? ($(( $(now) - t0 )) s)"
grep -E "vs the CPU|grouped cases|test result|panicked|^test " "$OUT/gpu-tests.log"
echo "== 2. attention on files against SDPA f32"
timeout 80 python3 "$G/attention_files_sdpa.py" --fp4probe "$B/fp4probe" --workdir /tmp/attn-files
echo "sdpa rc=$? ($(( $(now) - t0 )) s)"
for p in default wgmma-fp8; do
  echo "== 3. validation suite, $p path"
  [ "$(left)" -gt 20 ] || { echo "skipped: out of time"; continue; }
  path=(); [ $p = default ] || path=(--path $p)
  timeout "$(left)" "$B/fp4probe" attention --suite "${path[@]}" >"$OUT/attention-suite-$p.md" 2>&1
  echo "suite $p rc=$? ($(( $(now) - t0 )) s): $(grep -c '| pass |' "$OUT/attention-suite-$p.md") pass, $(grep -c 'FAIL' "$OUT/attention-suite-$p.md") fail"
  grep -E "Hkv|FAIL|rror|cases passed" "$OUT/attention-suite-$p.md"
done
echo "== 4. compute-sanitizer, grouped-query validation runs"
for p in wgmma wgmma-fp8 bf16; do
  for tool in memcheck racecheck synccheck; do
    [ "$(left)" -gt 10 ] || { echo "$p $tool skipped: out of time"; continue; }
    timeout "$(left)" compute-sanitizer --tool $tool --error-exitcode 9 "$B/fp4probe" attention --path $p \
      --format nvfp4 --heads 4 --kv-heads 2 --seq-q 77 --seq-k 133 --head-dim 64 --causal 2>&1 \
      | grep -E "SUMMARY|vs CPU" | head -2
    echo "$p $tool rc=${PIPESTATUS[0]} ($(( $(now) - t0 )) s)"
  done
done
