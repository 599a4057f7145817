#!/usr/bin/env python3
"""PyTorch side of the fp4probe attention benchmark: SDPA flash / cuDNN in bf16, and
the project's Triton FP8 baseline (tests/gpu/triton_fp8_attention.py).

Three modes:

  bench   -- time torch.nn.functional.scaled_dot_product_attention on bf16 CUDA
             tensors q, k, v of shape [B, H, S, D] (torch.randn, seeded), once
             pinned to SDPBackend.FLASH_ATTENTION and once to
             SDPBackend.CUDNN_ATTENTION (torch.nn.attention.sdpa_kernel with a
             single backend: no silent fallback, an unusable backend raises),
             and the Triton FP8 kernel on the same inputs quantized to E4M3
             once per shape (its config: that module's TUNED table, or a search
             per shape with --triton-search, printed).
             Writes one CSV (rows flushed as they are measured).  Each output is
             also compared once per shape with SDPBackend.MATH in float32 on the
             same inputs (S <= --check-max-seq, default 4096) and the max abs
             error and cosine are printed (printed, never fatal; flagged SUSPECT
             above max(0.05, 0.02 * max|ref|) for SDPA, outside the FP8 module's
             stated thresholds for triton-fp8, or if the output is not finite).
  merge   -- concatenate CSVs of the same header (this script's and fp4probe's
             rows `fp4-prequant` / `fp4-onthefly`), sort by
             (seq, head_dim, causal, impl), optionally write markdown tables, one
             per (head_dim, causal).  Needs neither torch nor numpy.
  memory  -- torch.cuda.max_memory_allocated around one SDPA call (flash by
             default), printed only.

Commands for the lead, on the device (Hopper; torch 2.11, triton 3.6 for triton-fp8):

  python3 tests/gpu/attention_bench_sdpa.py bench --csv $OUT/sdpa.csv            # ~20-60 s, see below
  python3 tests/gpu/attention_bench_sdpa.py merge --csv $OUT/sdpa.csv --csv $OUT/fp4.csv \\
      --out reports/sm_90/attention-bench.csv --markdown $OUT/attention-bench.md
  python3 tests/gpu/attention_bench_sdpa.py memory --seq 16384 --head-dim 128    # optional, context

Smoke run: `bench --csv /tmp/s.csv --shapes 1x32x1024x64 --repeats 5`.
Other knobs: `--shapes BxHxSxD ...` (default 1x32x{1024,4096,16384}x{64,128} and
1x32:8x{4096,16384}x128), `BxH:HKVxSxD` for grouped-query attention (HKV K/V
heads, a divisor of H; SDPA's enable_gqa), `--causal both|true|false`,
`--impls flash,cudnn,triton-fp8` (the default), `--triton-search`, `--no-check`,
`--no-sleep`, `--sleep-us-per-call US`, `--verbose` (tracebacks of failures).

CSV (exactly; shared with fp4probe):
  impl,batch,heads,seq,head_dim,causal,ms,tflops
  sdpa-flash-bf16,1,32,4096,128,false,1.2345,445.3
impl is sdpa-flash-bf16, sdpa-cudnn-bf16 or triton-fp8-e4m3, with `-kvN` appended
for grouped-query shapes (N K/V heads; heads is the query heads, the FLOP
count's H); causal is true/false; ms has 4 decimals, tflops 1 decimal.  tflops
comes from the unrounded median, so at S = 1024 (0.01-0.05 ms per call) it is
the more precise column, and merge's "x flash" ratio is taken from it (a -kvN
row against sdpa-flash-bf16-kvN).

FLOP convention (FlashAttention's): flops = 4 * B * H * S * S * D (two GEMMs,
QK^T and PV, 2 flops per multiply-add), halved for causal.  TFLOP/s =
flops / ms / 1e9.  Forward pass only.

Timing policy: warm-up calls (--warmup, default 5; they also absorb cuDNN's
per-shape plan build), then --repeats calls (default 30; for S >= 16384
max(10, repeats // 3)), each bracketed by its own pair of CUDA events; the
MEDIAN is reported (min / max printed).  Before the timed calls a
torch.cuda._sleep kernel is queued so the CPU gets ahead of the GPU: the events
then measure GPU time of the SDPA kernels back to back, not Python dispatch
gaps (matters at S = 1024 where a call is tens of microseconds).  If the sleep
was too short, a note is printed.  L2 is not flushed (inputs of the S = 1024
shapes fit in the 50 MiB L2; attention is compute-bound anyway).

SDPBackend.FLASH_ATTENTION is PyTorch's built-in FlashAttention-2 (FA3 would
need the external flash_attn_interface module, not installed); the environment
lines printed at start say which one is active.  cuDNN attention uses cuDNN's
Hopper kernels, so expect it to be faster than flash on sm_90.

Runtime estimate (H100, defaults): GPU work is ~3 s (S=16384, D=128 non-causal
is 4.4 TFLOP per call, ~12 ms for flash, ~7 ms for cuDNN, 15 calls each; the
S <= 4096 shapes and the f32 math checks add well under 1 s).  Wall time is
dominated by import torch, CUDA context creation, lazy kernel-module loading and
cuDNN's per-shape plan build in the first call: expect ~20-60 s in total.
triton-fp8 adds a compile of about a second per config used; --triton-search
compiles every candidate up front in parallel processes (~10-15 s on 16 cores)
and times ~20 candidates per shape (the default shapes with it: about a minute on the
H200).

Exit status.  bench: 0 all requested (impl, shape) rows written; 1 CSV written
but some failed (listed at the end, and in stderr as they happen); 2 nothing
could be run (no CUDA / no torch).  merge: 0 ok; 1 outputs written but some
input rows were rejected or inconsistent (warnings on stderr); 2 unusable input.
memory: 0 ok, 1 the call failed, 2 no CUDA.

Testing off the device: `bench --device cpu` runs the same code path on CPU
(wall-clock timer instead of events; numbers meaningless; cuDNN fails there,
which exercises the failure path).
"""

from __future__ import annotations  # type hints name torch; merge runs without it

import argparse
import csv
import math
import os
import re
import statistics
import sys
import time
import traceback
import warnings

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

HEADER = ["impl", "batch", "heads", "seq", "head_dim", "causal", "ms", "tflops"]
IMPLS = {  # short name -> (CSV impl name, SDPBackend attribute; None: not SDPA)
    "flash": ("sdpa-flash-bf16", "FLASH_ATTENTION"),
    "cudnn": ("sdpa-cudnn-bf16", "CUDNN_ATTENTION"),
    "triton-fp8": ("triton-fp8-e4m3", None),  # tests/gpu/triton_fp8_attention.py
}
FLASH_IMPL = "sdpa-flash-bf16"
# (B, H_q, H_kv, S, D); the last two: grouped-query attention, 4 query heads per K/V head
DEFAULT_SHAPES = [(1, 32, 32, s, d) for s in (1024, 4096, 16384) for d in (64, 128)] + \
    [(1, 32, 8, s, 128) for s in (4096, 16384)]
SUSPECT_ABS_ERR = 0.05


def eprint(*a):
    print(*a, file=sys.stderr, flush=True)


def attention_flops(b, h, s, d, causal):
    """FlashAttention convention: 4*B*H*S*S*D, halved for causal."""
    f = 4.0 * b * h * s * s * d
    return f / 2.0 if causal else f


def tflops_of(b, h, s, d, causal, ms):
    return attention_flops(b, h, s, d, causal) / ms / 1e9


def fmt_row(impl, b, h, s, d, causal, ms):
    return [impl, str(b), str(h), str(s), str(d), "true" if causal else "false",
            f"{ms:.4f}", f"{tflops_of(b, h, s, d, causal, ms):.1f}"]


def row_impl(impl, h, hkv):
    """The CSV has no K/V-heads column: grouped-query rows carry it in the impl name."""
    return impl if hkv == h else f"{impl}-kv{hkv}"


def parse_shapes(tokens):
    """BxHxSxD or BxH:HKVxSxD (grouped-query: HKV K/V heads) -> [(b, h, hkv, s, d)]."""
    shapes = []
    for tok in tokens:
        for part in tok.split(","):
            part = part.strip()
            if not part:
                continue
            dims = part.lower().split("x")
            heads = dims[1].split(":") if len(dims) == 4 else []
            try:
                b, s, d = int(dims[0]), int(dims[2]), int(dims[3])
                h, hkv = int(heads[0]), int(heads[-1])
                ok = len(heads) in (1, 2) and min(b, h, hkv, s, d) > 0 and h % hkv == 0
            except (ValueError, IndexError):
                ok = False
            if not ok:
                raise argparse.ArgumentTypeError(
                    f"bad shape {part!r}: want BxHxSxD, e.g. 1x32x4096x128, or BxH:HKVxSxD "
                    "(HKV K/V heads dividing H), e.g. 1x32:8x4096x128")
            shapes.append((b, h, hkv, s, d))
    return shapes


def shape_tag(b, h, hkv, s, d):
    return f"{b}x{h}{'' if hkv == h else f':{hkv}'}x{s}x{d}"


def parse_causal(text):
    return {"both": [False, True], "true": [True], "false": [False]}[text]


# --------------------------------------------------------------------------
# bench
# --------------------------------------------------------------------------

def print_env(dev):
    try:
        import triton
        tv = triton.__version__
    except ImportError:
        tv = "absent"
    print(f"torch {torch.__version__}  cuda {torch.version.cuda}  triton {tv}  python {sys.version.split()[0]}")
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(dev)
        print(f"device {p.name}  sm_{p.major}{p.minor}  {p.multi_processor_count} SMs  "
              f"{p.total_memory / 2**30:.1f} GiB")
        try:
            print(f"cudnn {torch.backends.cudnn.version()}  "
                  f"cudnn_sdp_enabled={torch.backends.cuda.cudnn_sdp_enabled()}  "
                  f"flash_sdp_enabled={torch.backends.cuda.flash_sdp_enabled()}")
        except Exception as e:  # noqa: BLE001
            print(f"(could not query cudnn / sdp flags: {e})")
    try:
        from torch.nn.attention import current_flash_attention_impl
        cur = current_flash_attention_impl()
        print(f"flash impl: {cur if cur else 'built-in FA2 (no FA3/FA4 activated)'}")
    except Exception:  # noqa: BLE001  (older torch: no registry -> built-in FA2)
        print("flash impl: built-in FA2")
    sys.stdout.flush()


def _sdpa_ctx(backend_name):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel([getattr(SDPBackend, backend_name)])


def _first_line(e):
    s = f"{type(e).__name__}: {e}".strip()
    return s.splitlines()[0] if s else type(e).__name__


class Timer:
    """Per-call CUDA events (or wall clock on CPU)."""

    def __init__(self, dev, use_sleep, sleep_us_per_call=200.0):
        self.dev = dev
        self.sleep_us_per_call = sleep_us_per_call
        self.use_sleep = use_sleep and dev.type == "cuda" and hasattr(torch.cuda, "_sleep")

    def sync(self):
        if self.dev.type == "cuda":
            torch.cuda.synchronize(self.dev)

    def run(self, call, warmup, repeats):
        for _ in range(warmup):
            call()
        self.sync()
        if self.dev.type != "cuda":
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                call()
                times.append((time.perf_counter() - t0) * 1e3)
            return times, None
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
        sleep_done = None
        if self.use_sleep:
            # --sleep-us-per-call of GPU sleep per queued call (~2000 cycles/us: H100
            # SXM clocks at <= 1.98 GHz, so this errs long), capped at ~50 ms.
            torch.cuda._sleep(int(min(repeats * self.sleep_us_per_call * 2000, 100_000_000)))
            sleep_done = torch.cuda.Event()
            sleep_done.record()
        for i in range(repeats):
            starts[i].record()
            call()
            ends[i].record()
        note = None
        if sleep_done is not None and sleep_done.query():
            note = ("GPU sleep finished before all calls were queued: some times may "
                    "include launch gaps (matters only for the small shapes; raise --sleep-us-per-call)")
        self.sync()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)], note


def reference_f32(q, k, v, causal):
    """SDPBackend.MATH in float32 on the same (bf16) inputs, TF32 off."""
    import torch.nn.functional as F
    old = None
    try:
        old = torch.backends.cuda.matmul.allow_tf32
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.backends.cuda.matmul.allow_tf32 = False
    except Exception:  # noqa: BLE001
        old = None
    try:
        with _sdpa_ctx("MATH"):
            return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal,
                                                  **_gqa(q, k))
    finally:
        if old is not None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    torch.backends.cuda.matmul.allow_tf32 = old
            except Exception:  # noqa: BLE001
                pass


def _gqa(q, k):
    """SDPA's grouped-query switch, passed only where the heads differ (older torch lacks it)."""
    return {"enable_gqa": True} if q.shape[1] != k.shape[1] else {}


def cosine(a, b):
    """Cosine similarity of two tensors, flattened, in f64."""
    a, b = a.double().flatten(), b.double().flatten()
    return float(a @ b / (a.norm() * b.norm()))


class BenchFailure(Exception):
    """One (impl, shape) could not be measured; message = first error line + SDPA's reasons."""


def _impl_call(name, F, q, k, v, causal, args):
    """(context to run in, zero-argument call, tolerance check, config text) for one impl.

    The Triton impl quantizes here, once per shape (pre-quantized inputs, like
    fp4probe's prequant rows), and takes its tuned config or searches one.
    """
    impl, backend = IMPLS[name]
    if backend is not None:

        def call():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, **_gqa(q, k))

        def ok(mx, refmax, cos):
            return mx <= max(SUSPECT_ABS_ERR, 0.02 * refmax)

        return _sdpa_ctx(backend), call, ok, ""
    import contextlib
    import triton_fp8_attention as t8
    prep = t8.prepare(q, k, v)
    b, h, hkv, s, d = prep.shape
    if args.triton_search:
        print(f"  triton-fp8 config search, {shape_tag(b, h, hkv, s, d)} causal={str(causal).lower()}:")
        cfg, _ = t8.best_of(t8.search(prep, causal, t8.candidate_configs(d), rep_ms=60,
                                      log=lambda m: print("  " + m, flush=True)))
        if cfg is None:
            raise RuntimeError("no candidate config ran")
    else:
        cfg = t8.tuned_config(d, causal, s, hkv != h)
    return contextlib.nullcontext(), t8.make_launch(prep, causal, cfg), t8.within_tolerance, \
        f"  [{cfg.tag()}]"


def measure_one(F, timer, q, k, v, ref, causal, name, shape, tag, args, want_check, reps):
    """Check once against the reference, then time; returns (CSV row, printed line)."""
    b, h, hkv, s, d = shape
    impl = row_impl(IMPLS[name][0], h, hkv)
    caught = []
    try:
        ctx, call, ok, cfg_txt = _impl_call(name, F, q, k, v, causal, args)
        with ctx:  # an SDPA measurement is pinned to its one backend throughout
            # first call alone, warnings recorded: an unusable backend warns why
            # ("... kernel not used because ...") and then raises "No available kernel".
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out = call()
                timer.sync()
            if ref is not None:
                diff = (out.float() - ref).abs()
                finite = bool(torch.isfinite(out).all())
                mx = float(diff.max())
                refmax = float(ref.abs().max())
                cos = cosine(out.float(), ref)
                err_txt = (f"  max|err| vs math-f32 {mx:.3e} (mean {float(diff.mean()):.2e}, "
                           f"|ref|max {refmax:.2f}, cosine {cos:.5f})")
                if not finite or not ok(mx, refmax, cos):
                    err_txt += "  SUSPECT" + ("" if finite else " (non-finite output)")
                del diff
            elif want_check:
                err_txt = "  (no check: reference failed)"
            else:
                err_txt = "" if args.no_check else f"  (no check: S > {args.check_max_seq})"
            err_txt += cfg_txt
            del out
            times, note = timer.run(call, max(0, args.warmup - 1), reps)
    except Exception as e:  # noqa: BLE001
        msg = _first_line(e)
        why = []
        for x in caught:
            first = str(x.message).strip().splitlines()[0] if str(x.message).strip() else ""
            if first and first not in why:
                why.append(first)
        if why:
            msg += " | " + " | ".join(why[:4])
        raise BenchFailure(msg) from e
    ms = statistics.median(times)
    if not (ms > 0 and math.isfinite(ms)):
        raise BenchFailure(f"median time {ms!r} ms is not positive finite (times {times[:5]}...)")
    row = fmt_row(impl, b, h, s, d, causal, ms)
    line = (f"{impl:20s} {tag:50s} median {ms:9.4f} ms  min {min(times):.4f} max {max(times):.4f}  "
            f"({reps} calls)  {row[7]:>7s} TFLOP/s{err_txt}")
    if note:
        line += f"\n  note: {note}"
    return row, line


def run_bench(args):
    if torch is None:
        eprint("error: torch is not importable; bench needs torch with CUDA")
        return 2
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        eprint("error: torch.cuda.is_available() is False "
               f"(torch {torch.__version__}, built for cuda {torch.version.cuda}); nothing measured")
        return 2
    try:
        import torch.nn.attention as _att
        _att.sdpa_kernel, _att.SDPBackend.FLASH_ATTENTION, _att.SDPBackend.CUDNN_ATTENTION  # noqa: B018
    except Exception as e:  # noqa: BLE001
        eprint(f"error: torch.nn.attention.sdpa_kernel unavailable: {_first_line(e)}")
        return 2
    import torch.nn.functional as F

    shapes = args.shapes or DEFAULT_SHAPES
    causals = parse_causal(args.causal)
    impls = []
    for name in args.impls.split(","):
        name = name.strip()
        if name not in IMPLS:
            eprint(f"error: unknown impl {name!r} (choose from {', '.join(IMPLS)})")
            return 2
        impls.append(name)

    print_env(dev)
    print(f"shapes {[shape_tag(*s) for s in shapes]}  causal {causals}  impls {impls}  "
          f"warmup {args.warmup}  repeats {args.repeats} (S>=16384: {max(10, args.repeats // 3)})")
    timer = Timer(dev, not args.no_sleep, args.sleep_us_per_call)
    if "triton-fp8" in impls and args.triton_search and dev.type == "cuda":
        try:  # every candidate of every head_dim compiled up front, in parallel
            import triton_fp8_attention as t8
            t8.precompile([(d, c, cfg) for d in sorted({sh[4] for sh in shapes} & {64, 128})
                           for c in causals for cfg in t8.candidate_configs(d)])
        except Exception as e:  # noqa: BLE001  (the search then compiles each in turn)
            eprint(f"note: triton-fp8 precompile skipped: {_first_line(e)}")

    out_dir = os.path.dirname(os.path.abspath(args.csv))
    os.makedirs(out_dir, exist_ok=True)
    failures = []  # (impl, shape string, message)
    n_rows = 0
    t_start = time.time()
    with open(args.csv, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(HEADER)
        fh.flush()
        for (b, h, hkv, s, d) in shapes:
            for causal in causals:
                heads = f"H={h}" if hkv == h else f"H={h} H_kv={hkv}"
                tag = f"B={b} {heads} S={s} D={d} causal={'true' if causal else 'false'}"
                q = k = v = ref = None
                try:
                    g = torch.Generator(device=dev).manual_seed(1234 + s + d + int(causal))
                    q, k, v = (torch.randn(b, nh, s, d, device=dev, dtype=torch.bfloat16, generator=g)
                               for nh in (h, hkv, hkv))
                except Exception as e:  # noqa: BLE001
                    msg = f"allocating inputs: {_first_line(e)}"
                    eprint(f"FAIL {tag}: {msg}")
                    for name in impls:
                        failures.append((row_impl(IMPLS[name][0], h, hkv), tag, msg))
                    _free(dev)
                    continue
                want_check = (not args.no_check) and s <= args.check_max_seq
                if want_check:
                    try:
                        ref = reference_f32(q, k, v, causal)
                    except Exception as e:  # noqa: BLE001
                        eprint(f"note {tag}: math reference failed, no check: {_first_line(e)}")
                        ref = None
                    _free(dev)  # drop the math backend's S x S temporaries before timing
                reps = args.repeats if s < 16384 else max(10, args.repeats // 3)
                for name in impls:
                    impl = row_impl(IMPLS[name][0], h, hkv)
                    try:
                        row, line = measure_one(F, timer, q, k, v, ref, causal, name,
                                                (b, h, hkv, s, d), tag, args, want_check, reps)
                        w.writerow(row)
                        fh.flush()
                        n_rows += 1
                        print(line, flush=True)
                    except BenchFailure as e:
                        eprint(f"FAIL {impl} {tag}: {e}")
                        if args.verbose and e.__cause__ is not None:
                            traceback.print_exception(type(e.__cause__), e.__cause__, e.__cause__.__traceback__)
                        failures.append((impl, tag, str(e)))
                        try:
                            timer.sync()
                        except Exception as e2:  # noqa: BLE001
                            eprint(f"  (device sync after failure also failed: {_first_line(e2)}; "
                                   "the CUDA context may be unusable, later rows will likely fail too)")
                del q, k, v, ref
                _free(dev)
    print(f"\nwrote {n_rows} rows to {args.csv} in {time.time() - t_start:.1f} s")
    if failures:
        eprint(f"\n{len(failures)} failed (no row written):")
        for impl, tag, msg in failures:
            eprint(f"  {impl:16s} {tag}: {msg}")
        return 1
    return 0


def _free(dev):
    import gc
    gc.collect()
    if dev.type == "cuda":
        try:
            torch.cuda.synchronize(dev)
            torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001
            eprint(f"  (freeing memory failed: {_first_line(e)})")


# --------------------------------------------------------------------------
# memory
# --------------------------------------------------------------------------

def run_memory(args):
    if torch is None or not torch.cuda.is_available():
        eprint("error: memory needs torch with CUDA (torch.cuda.is_available() is False)")
        return 2
    import torch.nn.functional as F
    dev = torch.device("cuda")
    b, h, s, d = args.batch, args.heads, args.seq, args.head_dim
    impl, backend = IMPLS[args.impl]
    print_env(dev)
    try:
        torch.cuda.empty_cache()
        q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16) for _ in range(3))
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        with _sdpa_ctx(backend):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=args.causal)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        after = torch.cuda.memory_allocated()
    except Exception as e:  # noqa: BLE001
        eprint(f"FAIL {impl} B={b} H={h} S={s} D={d} causal={args.causal}: {_first_line(e)}")
        return 1
    mib = 2 ** 20
    one = b * h * s * d * 2
    print(f"{impl} B={b} H={h} S={s} D={d} causal={str(args.causal).lower()}")
    print(f"  q+k+v (bf16)                   {3 * one / mib:10.1f} MiB")
    print(f"  output (bf16)                  {out.numel() * out.element_size() / mib:10.1f} MiB")
    print(f"  allocated before call          {base / mib:10.1f} MiB")
    print(f"  max_memory_allocated in call   {peak / mib:10.1f} MiB  (+{(peak - base) / mib:.1f} over inputs)")
    print(f"  still allocated after call     {after / mib:10.1f} MiB  (output + anything kept)")
    print(f"  for context, an S x S score matrix per head: "
          f"bf16 {b * h * s * s * 2 / mib:.0f} MiB, f32 {b * h * s * s * 4 / mib:.0f} MiB (math backend)")
    return 0


# --------------------------------------------------------------------------
# merge (no torch, no numpy)
# --------------------------------------------------------------------------

def _key(r):
    return (int(r["seq"]), int(r["head_dim"]), r["causal"] == "true", r["impl"],
            int(r["batch"]), int(r["heads"]))


def read_csvs(paths):
    """Rows (dicts of strings) from all files; bad rows are reported and skipped."""
    rows, problems = [], 0
    for path in paths:
        try:
            with open(path, newline="", encoding="utf-8-sig") as fh:
                lines = [ln for ln in fh.read().splitlines() if ln.strip()]
        except OSError as e:
            eprint(f"error: cannot read {path}: {e}")
            return None, problems
        if not lines:
            eprint(f"error: {path} is empty (no header)")
            return None, problems
        header = [c.strip() for c in next(csv.reader([lines[0]]))]
        if header != HEADER:
            eprint(f"error: {path}: header {','.join(header)!r}, want {','.join(HEADER)!r}")
            return None, problems
        for lineno, fields in enumerate(csv.reader(lines[1:]), start=2):
            fields = [f.strip() for f in fields]
            where = f"{path}:{lineno}"
            if len(fields) != len(HEADER):
                eprint(f"warning: {where}: {len(fields)} fields, want {len(HEADER)}; row skipped")
                problems += 1
                continue
            r = dict(zip(HEADER, fields))
            try:
                for c in ("batch", "heads", "seq", "head_dim"):
                    if int(r[c]) <= 0:
                        raise ValueError(f"{c} must be > 0")
                if r["causal"] not in ("true", "false"):
                    raise ValueError(f"causal {r['causal']!r} is not true/false")
                ms, tf = float(r["ms"]), float(r["tflops"])
                if not (ms > 0 and math.isfinite(ms) and math.isfinite(tf)):
                    raise ValueError(f"ms {r['ms']!r} / tflops {r['tflops']!r} not positive finite")
            except ValueError as e:
                eprint(f"warning: {where}: {e}; row skipped")
                problems += 1
                continue
            # the shared FLOP convention: a different one would make "x flash" wrong
            want = tflops_of(int(r["batch"]), int(r["heads"]), int(r["seq"]), int(r["head_dim"]),
                             r["causal"] == "true", ms)
            # tolerance: 1 % + the 4-decimal rounding of ms (0.7 % at 0.0072 ms) + tflops' 1 decimal
            if abs(tf - want) > (0.01 + 0.00005 / ms) * want + 0.06:
                eprint(f"warning: {where}: tflops {tf} but 4*B*H*S*S*D{'/2' if r['causal'] == 'true' else ''}"
                       f"/ms/1e9 = {want:.1f} (different FLOP convention?); kept as written")
                problems += 1
            r["_src"] = where
            rows.append(r)
    return rows, problems


def markdown_tables(rows):
    out = ["# Attention forward: fp4probe vs PyTorch SDPA (bf16)", "",
           "TFLOP/s = 4·B·H·S²·D / time (halved for causal; FlashAttention convention), forward only; "
           "ms = median of CUDA-event-timed calls. "
           "× flash = TFLOP/s ÷ TFLOP/s of `sdpa-flash-bf16` on the same shape (> 1 is faster); "
           "an impl ending in `-kvN` ran grouped-query attention with N K/V heads (heads = query heads).", ""]
    def key(r):  # grouped-query rows compare with flash on the same K/V heads
        kv = r["impl"][r["impl"].rfind("-kv"):] if re.search(r"-kv\d+$", r["impl"]) else ""
        return kv, r["batch"], r["heads"], r["seq"], r["head_dim"], r["causal"]

    flash = {}
    for r in rows:
        if r["impl"] == FLASH_IMPL + key(r)[0]:
            flash.setdefault(key(r), float(r["tflops"]))
    groups = {}
    for r in rows:
        groups.setdefault((int(r["head_dim"]), r["causal"] == "true"), []).append(r)
    for (d, causal) in sorted(groups):
        g = groups[(d, causal)]
        bh = sorted({(int(r["batch"]), int(r["heads"])) for r in g})
        title = f"## head_dim {d}, {'causal' if causal else 'non-causal'}"
        if len(bh) == 1:
            title += f" (B={bh[0][0]}, H={bh[0][1]})"
        out += [title, ""]
        cols = ["seq"] + (["B", "H"] if len(bh) > 1 else []) + ["impl", "ms", "TFLOP/s", "× flash"]
        out.append("| " + " | ".join(cols) + " |")
        out.append("|" + "|".join("---:" if c not in ("impl",) else ":---" for c in cols) + "|")
        for r in g:
            base = flash.get(key(r))
            tf = float(r["tflops"])
            ratio = f"{tf / base:.2f}×" if base else "—"
            cells = [r["seq"]] + ([r["batch"], r["heads"]] if len(bh) > 1 else []) + \
                    [f"`{r['impl']}`", r["ms"], r["tflops"], ratio]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def run_merge(args):
    rows, problems = read_csvs(args.csv)
    if rows is None:
        return 2
    if not rows:
        eprint("error: no data rows in the inputs")
        return 2
    seen = {}
    for r in rows:
        k = _key(r)
        if k in seen:
            eprint(f"warning: duplicate row for {r['impl']} B={r['batch']} H={r['heads']} S={r['seq']} "
                   f"D={r['head_dim']} causal={r['causal']}: {seen[k]} and {r['_src']} (both kept)")
            problems += 1
        else:
            seen[k] = r["_src"]
    rows.sort(key=_key)
    if os.path.dirname(os.path.abspath(args.out)):
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(HEADER)
        for r in rows:
            w.writerow([r[c] for c in HEADER])
    print(f"wrote {len(rows)} rows from {len(args.csv)} file(s) to {args.out}")
    impls = sorted({r["impl"] for r in rows})
    print(f"impls: {', '.join(impls)}")
    if FLASH_IMPL not in impls:
        eprint(f"warning: no {FLASH_IMPL} rows: the × flash column will be empty")
    if args.markdown:
        if os.path.dirname(os.path.abspath(args.markdown)):
            os.makedirs(os.path.dirname(os.path.abspath(args.markdown)), exist_ok=True)
        with open(args.markdown, "w") as fh:
            fh.write(markdown_tables(rows) + "\n")
        print(f"wrote {args.markdown}")
    if problems:
        eprint(f"{problems} problem(s) in the inputs, see warnings above")
        return 1
    return 0


# --------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)

    pb = sub.add_parser("bench", help="time SDPA flash / cuDNN (bf16), write CSV")
    pb.add_argument("--csv", required=True, help="output CSV")
    pb.add_argument("--shapes", nargs="+", type=str, default=None, metavar="BxHxSxD",
                    help="shapes, space- or comma-separated (default 1x32x{1024,4096,16384}x{64,128} "
                         "and 1x32:8x{4096,16384}x128)")
    pb.add_argument("--causal", choices=["both", "true", "false"], default="both")
    pb.add_argument("--impls", default="flash,cudnn,triton-fp8",
                    help="comma list of: flash, cudnn, triton-fp8")
    pb.add_argument("--triton-search", action="store_true",
                    help="triton-fp8: search its config per shape (printed) instead of the tuned table")
    pb.add_argument("--repeats", type=int, default=30, help="timed calls (S>=16384: max(10, repeats//3))")
    pb.add_argument("--warmup", type=int, default=5)
    pb.add_argument("--check-max-seq", type=int, default=4096,
                    help="compare with math-f32 only for S <= this (math needs B*H*S*S*4 bytes x ~2)")
    pb.add_argument("--no-check", action="store_true", help="skip the math-f32 comparison")
    pb.add_argument("--no-sleep", action="store_true", help="no GPU sleep kernel before the timed calls")
    pb.add_argument("--sleep-us-per-call", type=float, default=200.0,
                    help="GPU sleep queued before the timed calls, per call (default 200)")
    pb.add_argument("--device", default="cuda", help="cuda (default); cpu only to test this script")
    pb.add_argument("--verbose", action="store_true", help="tracebacks for failures")

    pm = sub.add_parser("merge", help="concatenate CSVs, sort, optional markdown")
    pm.add_argument("--csv", action="append", required=True, help="input CSV (repeat)")
    pm.add_argument("--out", required=True, help="merged CSV")
    pm.add_argument("--markdown", default=None, help="markdown tables per (head_dim, causal)")

    pmem = sub.add_parser("memory", help="peak memory of one SDPA call (printed)")
    pmem.add_argument("--seq", type=int, required=True)
    pmem.add_argument("--head-dim", type=int, required=True)
    pmem.add_argument("--batch", type=int, default=1)
    pmem.add_argument("--heads", type=int, default=32)
    pmem.add_argument("--causal", action="store_true")
    pmem.add_argument("--impl", choices=list(IMPLS), default="flash")

    args = ap.parse_args(argv)
    if args.mode == "bench":
        try:
            args.shapes = parse_shapes(args.shapes) if args.shapes else None
        except argparse.ArgumentTypeError as e:
            ap.error(str(e))
        if args.repeats < 1 or args.warmup < 1:
            ap.error("--repeats and --warmup must be >= 1")
        return run_bench(args)
    if args.mode == "merge":
        return run_merge(args)
    return run_memory(args)


if __name__ == "__main__":
    sys.exit(main())
