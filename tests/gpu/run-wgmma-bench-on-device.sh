#!/usr/bin/env bash
# wgmma peak throughput and latency per N on an H100/H200, against torch in the same run.
#
# One call does, in order:
#   1. the SASS guard of the headline kernels with the device's own ptxas (--sass-only);
#   2. `fp4probe bench --wgmma` for bf16 m64n256k16 and e4m3 m64n256k32, ss and rs (20 timed
#      launches of about 10 ms each after 5 warm-up ones; the best of 1..3 warpgroups per CTA);
#   3. alternatives of the ss kernels (unswizzled layout; groups of 8 wgmma with 2 in flight;
#      2 CTAs of 1 warpgroup per SM), so a shortfall of one configuration shows against others;
#   4. latency and throughput for every N of f32.bf16.bf16.ss and f32.e4m3.e4m3.ss;
#   5. torch: bf16 8192x8192x8192 matmul and torch._scaled_mm with e4m3 inputs of the same size
#      (per-tensor scales, out_dtype bf16, with and without use_fast_accum), random data, 1 s of
#      warm-up, median of 50 CUDA-event timings (and triton.testing.do_bench where it imports);
#   6. a side-by-side table of all of it ($OUT/summary.txt).
# nvidia-smi logs SM clock, power and temperature every 250 ms meanwhile ($OUT/smi.csv).
#
# The binary comes from the dev machine as .dev/bin/fp4probe (cargo build --release, copied
# there); results land in $OUT: summary.txt, smi.csv, torch.json, and wgmma-bench.tgz holding the logs, every
# JSON report and wgmma-bench.csv. Usage on the device machine, from the repository root:
#   OUT=/some/dir bash tests/gpu/run-wgmma-bench-on-device.sh
set -uo pipefail
B=.dev/bin/fp4probe
OUT=${OUT:-/tmp/fp4probe-out}
R=$OUT/wgmma
mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 \
    > "$OUT/smi.csv" 2>&1 &
SMI=$!
trap 'kill "$SMI" 2>/dev/null' EXIT
TIMEFORMAT='wall %R s'
HEAD=(--runs 20 --warmup 5 --target-ms 10)
PEAK=(m64n256k16.f32.bf16.bf16.ss m64n256k16.f32.bf16.bf16.rs
      m64n256k32.f32.e4m3.e4m3.ss m64n256k32.f32.e4m3.e4m3.rs)

echo "== 1. SASS guard with the device's ptxas"
for v in "${PEAK[@]}"; do
    $B bench --wgmma "$v" --sass-only sm_90a 2>&1 | grep -E "kernel|timed loop|assembling" | cut -c1-220
done

echo "== 2. peak: ${PEAK[*]}"
for v in "${PEAK[@]}"; do
    time $B bench --wgmma "$v" "${HEAD[@]}" -o "$R/peak" > "$R/peak-$v.log" 2>&1
    echo "rc=$?"; grep -vE "^\s+kernel|timed loop" "$R/peak-$v.log" | cut -c1-220
done

echo "== 3. alternatives of the ss kernels"
for v in m64n256k16.f32.bf16.bf16.ss m64n256k32.f32.e4m3.e4m3.ss; do
    $B bench --wgmma "$v" "${HEAD[@]}" -q --wgmma-layout interleave -o "$R/alt-interleave"; echo "rc=$?"
    $B bench --wgmma "$v" "${HEAD[@]}" -q --wgmma-group 8 --in-flight 2 -o "$R/alt-g8-f2"; echo "rc=$?"
    $B bench --wgmma "$v" "${HEAD[@]}" -q --warpgroups 1 --blocks-per-sm 2 -o "$R/alt-2cta"; echo "rc=$?"
done 2>&1 | grep -v "^assembled"

echo "== 4. latency and throughput per N"
for t in f32.bf16.bf16.ss f32.e4m3.e4m3.ss; do
    time $B bench --wgmma-sweep "$t" -q -o "$R/sweep" > "$R/sweep-$t.log" 2>&1
    echo "rc=$?"; sed -n '/latency and best throughput per N/,$p' "$R/sweep-$t.log"
done

echo "== 5. torch"
python3 - "$OUT/torch.json" <<'PY'
import json, statistics, sys, time
import torch

M = N = K = 8192
FLOPS = 2 * M * N * K


def events(fn, reps=50):
    # Warm-up by time, one call at a time, so clocks have ramped as fp4probe's pre-heat does.
    end = time.time() + 1.0
    while time.time() < end:
        fn()
        torch.cuda.synchronize()
    st = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    en = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        st[i].record()
        fn()
        en[i].record()
    torch.cuda.synchronize()
    ms = sorted(s.elapsed_time(e) for s, e in zip(st, en))
    med = statistics.median(ms)
    out = {"median_ms": med, "min_ms": ms[0], "max_ms": ms[-1], "n": reps,
           "tflops": FLOPS / (med * 1e9)}
    try:
        import triton.testing
        d = triton.testing.do_bench(fn, warmup=100, rep=500, return_mode="median")
        out["do_bench_median_ms"] = d
        out["do_bench_tflops"] = FLOPS / (d * 1e9)
    except Exception as e:  # noqa: BLE001 - reported, not fatal
        out["do_bench_error"] = repr(e)
    return out


def run(name, fn, check):
    try:
        r = events(fn)
        y = fn()
        r["finite"] = bool(torch.isfinite(y.float()).all())
        r["checked_against_bf16"] = check(y)
    except Exception as e:  # noqa: BLE001 - reported, not fatal
        r = {"error": repr(e)}
    print(f"{name}: {json.dumps(r)}", flush=True)
    return r


torch.manual_seed(0)
res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "m": M, "n": N, "k": K}
a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
ref = None


def vs_ref(y):
    if ref is None:
        return None
    return float((y.float() - ref).norm() / ref.norm())


res["bf16_matmul"] = run("torch.matmul bf16", lambda: torch.matmul(a, b), vs_ref)
ref = torch.matmul(a, b).float()
# e4m3 inputs with per-tensor scales: A row-major, B column-major (what _scaled_mm takes).
sa = (a.float().abs().max() / 448.0).to(torch.float32)
sb = (b.float().abs().max() / 448.0).to(torch.float32)
a8 = (a.float() / sa).to(torch.float8_e4m3fn)
b8 = (b.float() / sb).t().contiguous().to(torch.float8_e4m3fn).t()
for fast in (False, True):
    key = "e4m3_scaled_mm" + ("_fast_accum" if fast else "")
    res[key] = run(
        f"torch._scaled_mm e4m3 use_fast_accum={fast}",
        lambda fast=fast: torch._scaled_mm(a8, b8, scale_a=sa, scale_b=sb,
                                           out_dtype=torch.bfloat16, use_fast_accum=fast),
        vs_ref,
    )
json.dump(res, open(sys.argv[1], "w"), indent=1)
PY
echo "rc=$?"

echo "== 6. side by side"
python3 - "$R" "$OUT/torch.json" <<'PY' | tee "$OUT/summary.txt"
import csv, glob, json, os, sys

root, torch_json = sys.argv[1], sys.argv[2]


def best(rep):
    pts = [p for p in rep["points"] if p["status"] == "accepted" and p.get("tflops")]
    return max(pts, key=lambda p: p["tflops"]["median"]) if pts else None


def med(x, d=1):
    return "-" if not x else f"{x['median']:.{d}f}"


rows = []
for path in sorted(glob.glob(f"{root}/*/*.wgmma-bench.json")):
    r = json.load(open(path))
    p = best(r)
    lat = r["latency"]
    rows.append({
        "what": f"wgmma {r['variant']} [{os.path.basename(os.path.dirname(path))}]",
        "variant": r["variant"], "set": os.path.basename(os.path.dirname(path)),
        "tflops": p["tflops"]["median"] if p else None,
        "detail": (f"{p['shape']['warpgroups']} WG x {p['shape']['chains']} acc, "
                   f"{p['ctas_per_sm']} CTA/SM, {med(p['clock_mhz'], 0)} MHz, "
                   f"{med(p['flops_per_sm_per_clock'], 0)} flop/SM/clk, "
                   f"{p['time_ms']['n']} runs {p['time_ms']['min']:.2f}..{p['time_ms']['max']:.2f} ms"
                   if p else "no accepted point: " + "; ".join(
                       sorted({q.get('reason') or q['sass_check'] for q in r['points']}))[:300]),
        "latency": med(lat.get("cycles_per_wgmma")) if lat["status"] == "accepted" else "rejected",
    })
t = json.load(open(torch_json)) if os.path.exists(torch_json) else {}
for key, what in (("bf16_matmul", "torch.matmul bf16 8192^3"),
                  ("e4m3_scaled_mm", "torch._scaled_mm e4m3 8192^3"),
                  ("e4m3_scaled_mm_fast_accum", "torch._scaled_mm e4m3 8192^3 fast_accum")):
    x = t.get(key, {})
    rows.append({"what": what, "variant": key, "set": "torch", "tflops": x.get("tflops"),
                 "detail": x.get("error") or
                 (f"median {x['median_ms']:.3f} ms of {x['n']}, do_bench "
                  f"{x.get('do_bench_tflops', float('nan')):.1f} TFLOP/s, "
                  f"rel. err vs bf16 {x.get('checked_against_bf16')}" if x else "not run"),
        "latency": ""})
print(f"device: {t.get('device', '?')}, torch {t.get('torch', '?')}")
print(f"{'':60} {'TFLOP/s':>9} {'lat cyc':>8}  detail")
for r in rows:
    tf = "-" if r["tflops"] is None else f"{r['tflops']:.1f}"
    print(f"{r['what']:60} {tf:>9} {r['latency']:>8}  {r['detail']}")


def top(pred):
    xs = [r["tflops"] for r in rows if r["tflops"] is not None and pred(r)]
    return max(xs) if xs else None


for name, wg, ref in (("bf16", "bf16.bf16", ("bf16_matmul",)),
                      ("e4m3", "e4m3.e4m3", ("e4m3_scaled_mm", "e4m3_scaled_mm_fast_accum"))):
    w = top(lambda r: r["set"] == "peak" and wg in r["variant"])
    tt = top(lambda r: r["set"] == "torch" and r["variant"] in ref)
    verdict = "n/a" if w is None or tt is None else ("AT OR ABOVE" if w >= tt else "BELOW")
    print(f"{name}: best wgmma (peak set) {w} vs best torch {tt}: wgmma {verdict} torch")

print("\nlatency (cycles per dependent wgmma) and best throughput per N:")
by = {}
csvp = f"{root}/sweep/wgmma-bench.csv"
if os.path.exists(csvp):
    for row in csv.DictReader(open(csvp)):
        key = row["variant"].split(".", 1)[1]
        e = by.setdefault(key, {}).setdefault(int(row["n"]), {"lat": "-", "tf": None})
        if row["point"] == "latency":
            e["lat"] = row["cycles_per_wgmma"] or "rej"
        elif row["tflops"]:
            e["tf"] = max(e["tf"] or 0.0, float(row["tflops"]))
for key, per_n in by.items():
    print(f"  {key}")
    print(f"  {'N':>5} {'latency':>8} {'TFLOP/s':>9}")
    for n in sorted(per_n):
        e = per_n[n]
        tf = "-" if e["tf"] is None else f"{e['tf']:.1f}"
        print(f"  {n:>5} {e['lat']:>8} {tf:>9}")
PY
kill "$SMI" 2>/dev/null
echo "SM clock / power during the run (min, median, max):"
python3 - "$OUT/smi.csv" <<'PY'
import statistics, sys
c, p = [], []
for line in open(sys.argv[1]).read().splitlines()[1:]:
    f = [x.strip() for x in line.split(",")]
    try:
        c.append(float(f[1].split()[0])); p.append(float(f[2].split()[0]))
    except (IndexError, ValueError):
        pass
for name, xs in (("clock MHz", c), ("power W", p)):
    if xs:
        print(f"  {name}: {min(xs):.0f} {statistics.median(xs):.0f} {max(xs):.0f}")
PY
tar czf "$OUT/wgmma-bench.tgz" -C "$OUT" wgmma && rm -rf "$R"
ls -la "$OUT"
