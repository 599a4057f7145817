#!/usr/bin/env python3
"""FP8 (E4M3) attention forward in Triton: the project's own FP8 baseline on Hopper.

FlashAttention-2 structure: one program per (query block, batch x head); Q tile in
shared memory for the whole key loop; online softmax in f32; both products on the
FP8 tensor cores (wgmma .e4m3 on sm_90a) with f32 accumulation.

Arithmetic (stated, so a reader can reproduce it):
  * Q, K, V are bf16 [B, H, S, D] (K, V may have fewer heads, H_kv dividing H_q:
    grouped-query attention, query head h reads K/V head h // (H_q / H_kv)).
  * Per-tensor scales: s_x = max|x| / 448 (E4M3's largest finite value), x8 =
    E4M3(x / s_x) rounded to nearest (torch's cast, saturating at 448 by
    construction).  V is stored transposed, [B, H_kv, D, S], so the second product's
    B operand (V, K = key index) is K-major in shared memory, which the FP8 wgmma
    requires for 8-bit types (Triton would otherwise transpose it in the loop).
  * S = Q8 . K8^T in f32 (tensor cores; Triton's default on sm_90 keeps the FP8
    accumulation in the tensor core without periodic f32 promotion).
  * Softmax in base 2: c = sm_scale * log2(e) * s_q * s_k folded into one scalar,
    m = running row max of c * S, P = exp2(c * S - (m - 8)): the shift by 8 puts
    the largest P of a row at 2^8 = 256 (< 448), so P's E4M3 cast keeps a normal
    exponent down to 2^-14 of the row max instead of 2^-6; the factor 2^8 cancels
    because the row sum l is taken over the same P (f32, before the cast).
  * O_acc += E4M3(P) . V8 in f32; rows rescaled by exp2(m_old - m_new) when the max
    moves; O = O_acc * s_v / l, stored as bf16.
  * Causal (S_q = S_k, query i sees keys j <= i): key blocks left of the query
    block's diagonal run without a mask; only the blocks that straddle the
    diagonal compute and apply it.  Query blocks are issued heaviest-first.

Modes:
  check   -- accuracy against f32 SDPA (SDPBackend.MATH, TF32 off) on the same bf16
             Gaussian inputs (torch.randn, seeded), for causal and not, d = 64 and
             128, GQA.  Reported: cosine similarity of the flattened outputs, max
             abs error, max|ref|, and (context) the cosine against f32 SDPA on the
             dequantized FP8 inputs (isolates the kernel from the input rounding).
             Pass: cosine >= 0.995 and max abs error <= 0.15 * max|ref|.
             Exit 0 all pass, 1 some fail, 2 no CUDA / Triton.
  tune    -- explicit search over (BLOCK_M, BLOCK_N, num_warps, num_stages) per
             shape and causal, every candidate's median time printed (failures
             printed too), the winner last.  --json writes the winners.
The bench rows (`triton-fp8-e4m3`) come from tests/gpu/attention_bench_sdpa.py
(`--impls flash,cudnn,triton-fp8`), which imports this module, so they are timed
in the same process and with the same timer as SDPA flash and cuDNN.  There the
config per shape is TUNED below, or a fresh search with --triton-search.

Commands (on the device; torch 2.11, triton 3.6):
  python3 tests/gpu/triton_fp8_attention.py check
  python3 tests/gpu/triton_fp8_attention.py tune --shapes 1x32x4096x128 --causal both
Shapes are BxHxSxD, or BxH:HKVxSxD for grouped-query attention (1x32:8x4096x128).

Timing: pre-quantized inputs (the quantization and V's transpose are one-off
preparation outside the timed call, like fp4probe's prequant rows).  tune and
--triton-search use triton.testing.do_bench (median; it clears L2 before every
call), the bench rows the bench's own timer (median of calls queued back to back,
L2 not cleared), so a search figure reads a few per cent below its bench row.
FLOP convention as the bench: 4*B*H_q*S*S*D, halved for causal.

Measured (NVIDIA H200, driver 580.159.04, torch 2.11.0+cu130, triton 3.6.0;
B = 1, H_q = 32, H_kv = 32 or 8; TFLOP/s, medians; one run, all rows side by side):
  SDPA_ARGS=--triton-search bash tests/gpu/run-attention-on-device.sh baseline
  (= attention_bench_sdpa.py bench --triton-search: the search per shape, printed,
  then the winner timed with the bench's timer; the winners are TUNED below)

      d   H_q/H_kv  S      causal  triton-fp8  SDPA flash  SDPA cuDNN  x cuDNN  x flash
    128  32     1024  no     537.9    306.6    514.5   1.05  1.75
    128  32     1024  yes    394.5    149.5    259.9   1.52  2.64
    128  32     4096  no     810.8    352.6    675.0   1.20  2.30
    128  32     4096  yes    714.0    272.2    534.1   1.34  2.62
    128  32    16384  no     741.4    349.9    613.2   1.21  2.12
    128  32    16384  yes    810.1    342.0    665.5   1.22  2.37
    128  32/8   4096  no     807.0    350.7    671.8   1.20  2.30
    128  32/8   4096  yes    717.5    274.6    535.5   1.34  2.61
    128  32/8  16384  no     772.4    354.4    625.4   1.24  2.18
    128  32/8  16384  yes    809.2    340.8    665.4   1.22  2.37
     64  32     1024  no     357.9    245.0    334.7   1.07  1.46
     64  32     1024  yes    212.2    121.3    177.5   1.20  1.75
     64  32     4096  no     539.8    297.1    474.2   1.14  1.82
     64  32     4096  yes    497.4    232.4    376.3   1.32  2.14
     64  32    16384  no     512.5    309.0    499.0   1.03  1.66
     64  32    16384  yes    533.3    295.7    467.8   1.14  1.80

  Accuracy (same run; `check`, and `check --all-configs --shapes 1x32x1024x64
  1x32x1024x128 1x32:8x1024x128 2x4x2048x128`: every candidate config passes):
  cosine against f32 SDPA on the bf16 inputs 0.99855-0.99864 without the mask,
  0.99883-0.99893 with it; max abs error 0.016-0.037 at max|ref| 0.21-0.56
  without the mask (at most 0.11 of max|ref|), 0.14-0.22 at max|ref| 3.4-4.1 with
  it (early rows average few keys).  Against f32 SDPA on the dequantized E4M3
  inputs the cosine is 0.99969-0.99982: most of the error is the per-tensor E4M3
  rounding of Q, K and V, the rest P's E4M3 rounding.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass

from attention_bench_sdpa import attention_flops, cosine, parse_shapes, reference_f32, shape_tag

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None
try:
    import triton
    import triton.language as tl
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover
    triton = None

E4M3_MAX = 448.0
LOG2E = 1.4426950408889634
P_SHIFT = 8.0  # P's row max is 2^P_SHIFT: see the docstring


@dataclass(frozen=True)
class Config:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int

    def tag(self):
        return f"BM={self.block_m} BN={self.block_n} w={self.num_warps} st={self.num_stages}"


# The configs of the H200 search per (head_dim, causal, seq, grouped-query), B = 1,
# H_q = 32 (H_kv = 8 where grouped): the winners of the bench's --triton-search run
# recorded under "Measured" above.  A shape not listed takes the nearest seq of its
# (head_dim, causal, grouped), else of its (head_dim, causal).  Most winners run one
# warpgroup per CTA and fit two CTAs per SM: Triton 3.6 waits for each QK^T wgmma
# before the softmax that reads it (seen in the TTGIR), so a warpgroup's exponentials
# do not overlap its own tensor-core work; the other CTA's warpgroup fills that gap.
TUNED: dict[tuple[int, bool, int, bool], Config] = {
    (128, False, 1024, False): Config(128, 64, 8, 4),
    (128, True, 1024, False): Config(64, 64, 4, 4),
    (128, False, 4096, False): Config(64, 128, 4, 3),
    (128, True, 4096, False): Config(64, 128, 4, 3),
    (128, False, 16384, False): Config(64, 128, 4, 3),
    (128, True, 16384, False): Config(128, 64, 4, 3),
    (64, False, 1024, False): Config(128, 128, 4, 3),
    (64, True, 1024, False): Config(64, 256, 4, 2),
    (64, False, 4096, False): Config(64, 128, 4, 3),
    (64, True, 4096, False): Config(64, 128, 4, 3),
    (64, False, 16384, False): Config(128, 128, 4, 3),
    (64, True, 16384, False): Config(128, 128, 4, 3),
    (128, False, 4096, True): Config(64, 128, 4, 3),
    (128, True, 4096, True): Config(64, 128, 4, 3),
    (128, False, 16384, True): Config(128, 64, 4, 3),
    (128, True, 16384, True): Config(128, 64, 4, 3),
}


def tuned_config(d, causal, s, grouped=False):
    keys = [k for k in TUNED if k[:2] == (d, causal) and k[3] == grouped] or \
        [k for k in TUNED if k[:2] == (d, causal)]
    if not keys:  # prepare() refuses such a head_dim before any launch
        raise ValueError(f"no tuned config for head_dim {d}")
    return TUNED[min(keys, key=lambda k: (abs(math.log2(k[2]) - math.log2(s)), -k[2], k[3] != grouped))]


def candidate_configs(d):
    """The search space: tiles that compile for sm_90a without spills (0 spilled on the H200).

    A warpgroup (4 warps) holds 64 query rows per m64 wgmma: BLOCK_M 128 on 8 warps
    is two warpgroups of 64 rows, on 4 warps one warpgroup of 128 rows (register-
    heavy); BLOCK_M 256 on 16 warps is four warpgroups sharing each K/V tile.  The
    S tile (BLOCK_M x BLOCK_N f32) and O (BLOCK_M x d f32) live in registers, so
    wide key blocks are searched where d is small.  Stages: TMA buffers of K and V.
    """
    grid = [((128, 64, 8), (2, 3, 4)), ((128, 128, 8), (2, 3, 4)), ((128, 64, 4), (2, 3)),
            ((64, 64, 4), (2, 3, 4)), ((64, 128, 4), (2, 3, 4)), ((256, 64, 16), (2, 3))]
    if d == 128:
        grid += [((128, 256, 8), (2,)), ((256, 64, 8), (2,))]
    else:
        grid += [((128, 256, 8), (2, 3)), ((128, 128, 4), (2, 3)), ((256, 128, 16), (2, 3)),
                 ((64, 256, 4), (2, 3))]
    return [Config(bm, bn, w, st) for (bm, bn, w), stages in grid for st in stages]


if triton is not None:
    _P_SHIFT = tl.constexpr(P_SHIFT)

    @triton.jit
    def _key_blocks(acc, l_i, m_i, q, desc_k, desc_vt, kv_row, vt_row, start_m, lo, hi, qk_scale,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASK: tl.constexpr):
        offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        for start_n in tl.range(lo, hi, BLOCK_N):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            k = desc_k.load([kv_row + start_n, 0])          # [BN, D], D contiguous: K-major B
            s = tl.dot(q, k.T)                             # f32 [BM, BN]
            if MASK:
                offs_n = start_n + tl.arange(0, BLOCK_N)
                s = tl.where(offs_m[:, None] >= offs_n[None, :], s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            # one FMA and one ex2 per score; the 2^P_SHIFT factor rides in the subtrahend
            p = tl.math.exp2(s * qk_scale - (m_new - _P_SHIFT)[:, None])
            alpha = tl.math.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None]
            vt = desc_vt.load([vt_row, start_n])            # [D, BN], keys contiguous: K-major B
            acc = tl.dot(p.to(tl.float8e4nv), vt.T, acc)
            m_i = m_new
        return acc, l_i, m_i

    # Sizes are not specialized on: one compiled kernel per (d, tile, causal) serves every
    # shape, so the parallel precompile below fills the cache for all of them.
    @triton.jit(do_not_specialize=["H", "GROUP", "SEQ", "N_M_BLOCKS"])
    def _fp8_attn_fwd(desc_q, desc_k, desc_vt, desc_o, qk_scale, o_scale, H, GROUP, SEQ, N_M_BLOCKS,
                      HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      CAUSAL: tl.constexpr):
        off_bh = tl.program_id(0)             # batch x query head, fastest: GQA heads sharing
        start_m = N_M_BLOCKS - 1 - tl.program_id(1)  # K/V run together; heaviest blocks first
        off_b = off_bh // H
        off_hkv = (off_bh % H) // GROUP
        h_kv = H // GROUP
        q_row = off_bh * SEQ + start_m * BLOCK_M
        kv_row = (off_b * h_kv + off_hkv) * SEQ
        vt_row = (off_b * h_kv + off_hkv) * HEAD_DIM

        m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
        q = desc_q.load([q_row, 0])

        if CAUSAL:
            diag_lo = (start_m * BLOCK_M) // BLOCK_N * BLOCK_N
            acc, l_i, m_i = _key_blocks(acc, l_i, m_i, q, desc_k, desc_vt, kv_row, vt_row, start_m,
                                        0, diag_lo, qk_scale, BLOCK_M, BLOCK_N, False)
            acc, l_i, m_i = _key_blocks(acc, l_i, m_i, q, desc_k, desc_vt, kv_row, vt_row, start_m,
                                        diag_lo, (start_m + 1) * BLOCK_M, qk_scale, BLOCK_M, BLOCK_N,
                                        True)
        else:
            acc, l_i, m_i = _key_blocks(acc, l_i, m_i, q, desc_k, desc_vt, kv_row, vt_row, start_m,
                                        0, SEQ, qk_scale, BLOCK_M, BLOCK_N, False)
        out = acc * (o_scale / l_i)[:, None]
        desc_o.store([q_row, 0], out.to(tl.bfloat16))


# --------------------------------------------------------------------------
# host side
# --------------------------------------------------------------------------

def quantize_e4m3(x):
    """(E4M3 tensor, per-tensor scale as a Python float): x ~ x8 * scale."""
    amax = x.detach().abs().amax().float().item()
    scale = max(amax, 1e-30) / E4M3_MAX
    return (x.float() / scale).to(torch.float8_e4m3fn), scale


@dataclass
class Prepared:
    """Pre-quantized inputs of one problem: what the timed call reads."""
    q8: object   # [B, H, S, D] e4m3
    k8: object   # [B, Hkv, S, D] e4m3
    vt8: object  # [B, Hkv, D, S] e4m3 (V transposed)
    sq: float
    sk: float
    sv: float
    sm_scale: float

    @property
    def shape(self):
        b, h, s, d = self.q8.shape
        return b, h, self.k8.shape[1], s, d


def prepare(q, k, v, sm_scale=None):
    b, h, s, d = q.shape
    if k.shape != v.shape or k.shape[0] != b or k.shape[2] != s or k.shape[3] != d:
        raise ValueError(f"K {tuple(k.shape)} / V {tuple(v.shape)} do not match Q {tuple(q.shape)} "
                         "(want [B, H_kv, S, D], S_q = S_k)")
    if h % k.shape[1]:
        raise ValueError(f"query heads {h} not a multiple of K/V heads {k.shape[1]}")
    if d not in (64, 128):
        raise ValueError(f"head_dim {d}: this kernel covers 64 and 128")
    if s % 128:
        raise ValueError(f"seq {s} not a multiple of 128 (the kernel has no ragged tail)")
    q8, sq = quantize_e4m3(q)
    k8, sk = quantize_e4m3(k)
    v8, sv = quantize_e4m3(v)
    vt8 = v8.transpose(2, 3).contiguous()
    return Prepared(q8.contiguous(), k8.contiguous(), vt8, sq, sk, sv,
                    sm_scale if sm_scale is not None else 1.0 / math.sqrt(d))


def make_launch(prep, causal, cfg, warmup_only=False):
    """A zero-argument callable running the kernel once (descriptors built once).

    warmup_only: the callable compiles (into Triton's on-disk cache) and launches nothing.
    """
    b, h, hkv, s, d = prep.shape
    if s % cfg.block_m or s % cfg.block_n:
        raise ValueError(f"seq {s} not a multiple of {cfg.tag()}")
    out = torch.empty(b, h, s, d, device=prep.q8.device, dtype=torch.bfloat16)
    desc_q = TensorDescriptor.from_tensor(prep.q8.view(b * h * s, d), [cfg.block_m, d])
    desc_k = TensorDescriptor.from_tensor(prep.k8.view(b * hkv * s, d), [cfg.block_n, d])
    desc_vt = TensorDescriptor.from_tensor(prep.vt8.view(b * hkv * d, s), [d, cfg.block_n])
    desc_o = TensorDescriptor.from_tensor(out.view(b * h * s, d), [cfg.block_m, d])
    qk_scale = prep.sm_scale * LOG2E * prep.sq * prep.sk
    n_m = s // cfg.block_m
    grid = (b * h, n_m)

    kernel = _fp8_attn_fwd.warmup if warmup_only else _fp8_attn_fwd[grid]
    extra = {"grid": grid} if warmup_only else {}

    def call():
        call.compiled = kernel(desc_q, desc_k, desc_vt, desc_o, qk_scale, prep.sv, h, h // hkv, s, n_m,
                               HEAD_DIM=d, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, CAUSAL=causal,
                               num_warps=cfg.num_warps, num_stages=cfg.num_stages, **extra)
        return out

    return call


def attention(q, k, v, causal=False, cfg=None):
    """bf16 in, bf16 out: quantize, run once."""
    prep = prepare(q, k, v)
    b, h, hkv, s, d = prep.shape
    return make_launch(prep, causal, cfg or tuned_config(d, causal, s, hkv != h))()


def _compile_one(job):
    """Worker of precompile: compile one (d, causal, config) on a tiny problem."""
    d, causal, cfg = job
    try:
        s = max(256, cfg.block_m, cfg.block_n)
        x = torch.zeros(1, 1, s, d, device="cuda", dtype=torch.bfloat16)
        make_launch(prepare(x, x, x), causal, cfg, warmup_only=True)()
        return None
    except Exception as e:  # noqa: BLE001  (reported by search when it meets the config)
        return f"{type(e).__name__}: {e}".strip().splitlines()[0][:160]


def precompile(jobs, workers=None, log=print):
    """Compile [(d, causal, Config)] in parallel processes into Triton's on-disk cache.

    A search then loads each kernel instead of compiling it in turn (one compile
    is ~1 s of one core; the device has 16).
    """
    import multiprocessing as mp
    import os
    import time
    from concurrent.futures import ProcessPoolExecutor
    workers = workers or min(len(jobs), os.cpu_count() or 1, 16)
    t0 = time.time()
    try:
        with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as ex:
            errors = [(j, e) for j, e in zip(jobs, ex.map(_compile_one, jobs)) if e]
    except Exception as e:  # noqa: BLE001  (then each config compiles when first launched)
        log(f"precompile failed ({type(e).__name__}: {str(e).splitlines()[0][:160]}); compiling in turn")
        return
    log(f"precompiled {len(jobs)} kernels in {time.time() - t0:.1f} s on {workers} processes"
        + (f"; {len(errors)} failed (reported at their search)" if errors else ""))


def search(prep, causal, configs, log=print, warmup_ms=25, rep_ms=100):
    """Median ms of every candidate (None where it failed), printed as it goes."""
    b, h, hkv, s, d = prep.shape
    results = []
    for cfg in configs:
        try:
            call = make_launch(prep, causal, cfg)
            call()
            torch.cuda.synchronize()
            ms = triton.testing.do_bench(call, warmup=warmup_ms, rep=rep_ms, return_mode="median")
            results.append((cfg, ms))
            k = call.compiled
            log(f"  {cfg.tag():28s} {ms:9.4f} ms  {attention_flops(b, h, s, d, causal) / ms / 1e9:7.1f} TFLOP/s"
                f"  ({getattr(k, 'n_regs', '?')} registers, {getattr(k, 'n_spills', '?')} spilled, "
                f"{k.metadata.shared} B shared)")
        except Exception as e:  # noqa: BLE001  (a config that does not compile or fit: say so, go on)
            msg = f"{type(e).__name__}: {e}".strip().splitlines()[0][:160]
            results.append((cfg, None))
            log(f"  {cfg.tag():28s} failed: {msg}")
    return results


def best_of(results):
    ok = [(c, ms) for c, ms in results if ms is not None]
    return min(ok, key=lambda t: t[1]) if ok else (None, None)


# --------------------------------------------------------------------------
# check
# --------------------------------------------------------------------------

COS_MIN = 0.995
MAX_ERR_FRAC = 0.15
CHECK_SHAPES = ["1x32x1024x64", "1x32x1024x128", "1x32x4096x64", "1x32x4096x128",
                "1x32:8x1024x128", "1x32:8x4096x128", "2x4x2048x128"]


def within_tolerance(max_err, ref_max, cos):
    """The pass rule of check (and of the bench's SUSPECT flag for this impl)."""
    return cos >= COS_MIN and max_err <= MAX_ERR_FRAC * ref_max


def references(q, k, v, causal, prep):
    """f32 SDPA on the bf16 inputs, and on the dequantized FP8 inputs (isolates the kernel)."""
    deq = (prep.q8.float() * prep.sq, prep.k8.float() * prep.sk, prep.vt8.transpose(2, 3).float() * prep.sv)
    return reference_f32(q, k, v, causal), reference_f32(*deq, causal)


def accuracy(out, ref, ref_deq):
    """(cosine vs f32 on the bf16 inputs, max abs err, max|ref|, cosine vs f32 on the dequantized)."""
    out = out.float()
    finite = bool(torch.isfinite(out).all())
    return (cosine(out, ref) if finite else float("nan"), (out - ref).abs().max().item(),
            ref.abs().max().item(), cosine(out, ref_deq))


def gaussian(b, h, hkv, s, d, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16, generator=g)
    return q, k, v


def run_check(args):
    print(f"thresholds: cosine >= {COS_MIN}, max abs err <= {MAX_ERR_FRAC} * max|ref|  "
          "(reference: f32 SDPA math backend on the bf16 inputs; cos(deq): on the dequantized inputs)")
    if args.all_configs:
        precompile([(d, c, cfg) for d in sorted({sh[4] for sh in args.shapes}) for c in (False, True)
                    for cfg in candidate_configs(d)], workers=args.jobs)
    print(f"{'shape':18s} {'causal':6s} {'config':28s} {'cosine':>8s} {'max err':>9s} {'max|ref|':>9s} "
          f"{'cos(deq)':>9s}  verdict")
    fails = 0
    for b, h, hkv, s, d in args.shapes:
        for causal in (False, True):
            q, k, v = gaussian(b, h, hkv, s, d, 1234 + s + d + int(causal))
            prep = prepare(q, k, v)
            ref, ref_deq = references(q, k, v, causal, prep)
            del q, k, v
            for cfg in candidate_configs(d) if args.all_configs else [tuned_config(d, causal, s, hkv != h)]:
                try:
                    cos, err, amax, cos_deq = accuracy(make_launch(prep, causal, cfg)(), ref, ref_deq)
                    ok = within_tolerance(err, amax, cos)
                    line = f"{cos:8.5f} {err:9.5f} {amax:9.5f} {cos_deq:9.6f}  {'pass' if ok else 'FAIL'}"
                except Exception as e:  # noqa: BLE001
                    ok, line = False, f"FAIL {type(e).__name__}: {str(e).splitlines()[0][:120]}"
                fails += not ok
                print(f"{shape_tag(b, h, hkv, s, d):18s} {str(causal).lower():6s} {cfg.tag():28s} {line}",
                      flush=True)
            del prep, ref, ref_deq
            torch.cuda.empty_cache()
    print(f"{fails} failed" if fails else "all pass")
    return 1 if fails else 0


def run_tune(args):
    winners = []
    causals = {"both": (False, True), "true": (True,), "false": (False,)}[args.causal]
    precompile([(d, c, cfg) for d in sorted({sh[4] for sh in args.shapes}) for c in causals
                for cfg in candidate_configs(d)], workers=args.jobs)
    for b, h, hkv, s, d in args.shapes:
        for causal in causals:
            q, k, v = gaussian(b, h, hkv, s, d, 99)
            prep = prepare(q, k, v)
            del q, k, v
            print(f"== {shape_tag(b, h, hkv, s, d)} causal={str(causal).lower()}", flush=True)
            cfgs = candidate_configs(d)
            best, ms = best_of(search(prep, causal, cfgs, log=lambda m: print(m, flush=True),
                                      rep_ms=args.rep_ms))
            if best is not None:
                tf = attention_flops(b, h, s, d, causal) / ms / 1e9
                print(f"best {shape_tag(b, h, hkv, s, d)} causal={str(causal).lower()}: {best.tag()}  "
                      f"{ms:.4f} ms  {tf:.1f} TFLOP/s", flush=True)
                winners.append({"shape": shape_tag(b, h, hkv, s, d), "causal": causal, "ms": ms,
                                "tflops": tf, **asdict(best)})
            del prep
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(winners, fh, indent=1)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    pc = sub.add_parser("check", help="accuracy against f32 SDPA")
    pc.add_argument("--shapes", nargs="+", default=CHECK_SHAPES)
    pc.add_argument("--all-configs", action="store_true", help="every candidate config, not the tuned one")
    pc.add_argument("--jobs", type=int, default=None, help="compile processes (default: cores, <= 16)")
    pt = sub.add_parser("tune", help="explicit config search, printed")
    pt.add_argument("--shapes", nargs="+", required=True)
    pt.add_argument("--causal", choices=["both", "true", "false"], default="both")
    pt.add_argument("--rep-ms", type=float, default=100.0, help="do_bench rep per candidate")
    pt.add_argument("--json", default=None, help="write the winners here")
    pt.add_argument("--jobs", type=int, default=None, help="compile processes (default: cores, <= 16)")
    args = ap.parse_args(argv)
    try:
        args.shapes = parse_shapes(args.shapes)
    except argparse.ArgumentTypeError as e:
        ap.error(str(e))
    if torch is None or triton is None or not torch.cuda.is_available():
        print("error: needs torch with CUDA and triton", file=sys.stderr)
        return 2
    return run_check(args) if args.mode == "check" else run_tune(args)


if __name__ == "__main__":
    sys.exit(main())
