#!/usr/bin/env python3
"""PyTorch side of the fp4probe quantization benchmark and cross-check.

Four modes:

  check  -- quantize seeded random [1024, 1024] inputs (fp32 and bf16) with the
            torch reference below (eager and torch.compile) and with
            `fp4probe quantize --backend cuda`, and compare the outputs byte for
            byte.  Exit status: 0 all equal; 1 fp4probe differs from torch
            eager; 2 only torch.compile differs from eager/fp4probe (reported,
            not hidden); 3 fp4probe could not be run / its output not read.
  bench  -- time the three torch functions (eager and torch.compile) and a
            device-to-device copy, write one CSV.
  merge  -- concatenate CSVs of the same columns (torch's and fp4probe's) and
            write markdown tables with "% of copy" (needs neither torch nor numpy).
  selftest -- the torch functions (eager and compile) against an independent
            per-element numpy reference and hand-computed values, small input;
            runs on CPU too (that is how this file was tested off the device).

Commands for the lead, on the device (H100, torch 2.11, numpy; no torchao):

  python3 tests/gpu/quant_bench_torch.py selftest                      # ~1 min, exit 0 = torch side ok on CUDA
  python3 tests/gpu/quant_bench_torch.py check --fp4probe .dev/bin/fp4probe --workdir /tmp/qcheck
  # if check exits 2 (only torch.compile differs), see whether inductor's approximate f32 division explains it:
  python3 tests/gpu/quant_bench_torch.py check --fp4probe .dev/bin/fp4probe --workdir /tmp/qcheck --compile-eager-numerics
  python3 tests/gpu/quant_bench_torch.py bench --csv $OUT/torch.csv
  python3 tests/gpu/quant_bench_torch.py merge --csv $OUT/torch.csv --csv $OUT/fp4probe.csv \
      --out reports/sm_90/quant-bench.csv --markdown $OUT/quant-bench.md

Quick variants: `bench --sizes 1024x1024 --repeats 10` (smoke), `check --no-compile`
(skip inductor), `bench --no-compile`.

Timing policy (also printed and written into the markdown): CUDA events around
each call, warm-up calls first (the compile warm-up included), then --repeats
calls each timed on its own; median, min and max in ms.  L2 is NOT flushed
between calls; the `l2_resident` column says `yes` where input + output bytes
are below the 50 MiB L2 of an H100, so such rows read partly from L2 and their
GB/s is not a DRAM figure.  bytes = input bytes + output bytes (data + scale
(+ 4 for the tensor scale)); for copy, 2 x buffer bytes.  GB/s =
bytes / ms_median / 1e6.  The two-level NVFP4 function includes the global amax
pass (it reads the input twice): the honest end-to-end figure.

Quantization semantics (float32 arithmetic throughout; the input is widened to
f32 first) are spelled out on each function below.
"""

from __future__ import annotations  # type hints name torch; merge runs without it

import argparse
import csv
import json
import os
import struct
import subprocess
import sys
import time

# merge needs neither numpy nor torch, so it also runs on a machine without them.
try:
    import numpy as np
except ImportError:  # pragma: no cover
    np = None
try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

# --------------------------------------------------------------------------
# FP4 (E2M1) element encoding, shared by all three formats
# --------------------------------------------------------------------------

# Midpoints between neighbouring E2M1 magnitudes {0,.5,1,1.5,2,3,4,6}.  A
# magnitude a gets code = number of midpoints it is past.  Ties go to the even
# code, so a midpoint whose lower neighbour has the even code counts as "past"
# only when strictly greater (`>`), and one whose upper neighbour is even counts
# when equal too (`>=`):
#   0.25 (0|1 -> 0: >)  0.75 (1|2 -> 2: >=)  1.25 (2|3 -> 2: >)  1.75 (3|4 -> 4: >=)
#   2.5  (4|5 -> 4: >)  3.5  (5|6 -> 6: >=)  5.0  (6|7 -> 6: >)
# Everything above 5 is code 7 (6.0), which is also the clamp to [-6, 6].
_MIDPOINTS_GT = (0.25, 1.25, 2.5, 5.0)
_MIDPOINTS_GE = (0.75, 1.75, 3.5)


def _e2m1_codes(v: torch.Tensor) -> torch.Tensor:
    """E2M1 4-bit codes (int32, 0..15) of f32 `v`, round to nearest, ties to even.

    Why comparisons: a sum of seven elementwise compares is exact (no float
    rounding of its own), branch-free, fuses into one inductor kernel and
    saturates at code 7 for |v| > 5 (including inf), which is the clamp to
    [-6, 6].  NaN compares false everywhere and gives magnitude 0; callers zero
    the codes of NaN/inf blocks anyway.  The sign bit is taken from the f32 bit
    pattern so that results that round to zero keep their sign (-0.1 -> 0x8,
    and -0.0 -> 0x8).
    """
    a = v.abs()
    mag = torch.zeros_like(v, dtype=torch.int32)
    for m in _MIDPOINTS_GT:
        mag = mag + (a > m).to(torch.int32)
    for m in _MIDPOINTS_GE:
        mag = mag + (a >= m).to(torch.int32)
    sign = (v.view(torch.int32) < 0).to(torch.int32)
    return mag | (sign << 3)


def _pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """Pack int32 codes [..., K] into uint8 [..., K/2], even index in the low nibble.

    Why here and not in the callers: one packing convention for all formats,
    the one fp4probe writes.
    """
    pairs = codes.reshape(*codes.shape[:-1], codes.shape[-1] // 2, 2)
    packed = pairs[..., 0] | (pairs[..., 1] << 4)
    return packed.to(torch.uint8)


def _blocks(x: torch.Tensor, block: int) -> torch.Tensor:
    """Widen to f32 and view [..., K] as [..., K/block, block].

    Why: every format works per contiguous block along the last axis; the
    shape is static (K must be a multiple of the block), so torch.compile sees
    no data-dependent shape.
    """
    k = x.shape[-1]
    if k % block != 0:
        raise ValueError(f"last dimension {k} is not a multiple of the block size {block}")
    return x.to(torch.float32).reshape(*x.shape[:-1], k // block, block)


def _bad_blocks(xb: torch.Tensor) -> torch.Tensor:
    """Bool [..., nblocks]: the block holds a NaN or an inf.

    Why explicit: it does not rely on how a backend's max reduction treats NaN
    (torch propagates it, fmaxf would drop it), so eager, inductor and the spec
    agree by construction.
    """
    return ~torch.isfinite(xb).all(dim=-1)


# --------------------------------------------------------------------------
# MXFP4 with floor scale (block 32, E8M0 scale)
# --------------------------------------------------------------------------


def mxfp4_floor(x: torch.Tensor):
    """MXFP4, floor scale rule: returns (data uint8 [..., K/2], scale uint8 [..., K/32]).

    amax = max |x| per 32-block; E = biased exponent field of amax;
    s = clamp(E - 127 - 2, -127, 128) + 127 (E8M0 byte); s = 0xFF for blocks with
    NaN/inf.  rcp = 2^(r - 127) with r = (254 - s) mod 256, r == 0 -> 2^-127
    (f32 bits 0x00400000), r == 255 -> NaN.  v = x * rcp (one f32 multiply),
    then E2M1 encoding; codes of 0xFF blocks are 0.

    Why integer bit tricks: the scale and its reciprocal are exact powers of two
    built from bits, so there is no libm/exp2 rounding to disagree about, and
    nothing here branches on data or calls .item(), so torch.compile keeps the
    whole function in one graph.
    """
    xb = _blocks(x, 32)
    bad = _bad_blocks(xb)
    amax = xb.abs().amax(dim=-1)
    e = (amax.view(torch.int32) >> 23) & 0xFF
    s = torch.clamp(e - 127 - 2, -127, 128) + 127
    s = torch.where(bad, torch.full_like(s, 0xFF), s)
    r = (254 - s) & 0xFF  # mod 256 for r in -1..254
    rcp_bits = torch.where(
        r == 0,
        torch.full_like(r, 0x00400000),
        torch.where(r == 255, torch.full_like(r, 0x7FC00000), r << 23),
    )
    rcp = rcp_bits.view(torch.float32)
    v = xb * rcp.unsqueeze(-1)
    codes = _e2m1_codes(v)
    codes = torch.where(bad.unsqueeze(-1), torch.zeros_like(codes), codes)
    data = _pack_nibbles(codes.reshape(*x.shape[:-1], x.shape[-1]))
    return data, s.to(torch.uint8)


# --------------------------------------------------------------------------
# NVFP4 (block 16, E4M3 scale), one- and two-level
# --------------------------------------------------------------------------

def _div_const(a: torch.Tensor, c: float) -> torch.Tensor:
    """IEEE f32 division of `a` by the constant `c`.

    Why not `a / c`: for a Python-scalar divisor, PyTorch's CUDA kernel computes
    `a * (1/c)` ("may lose one bit of precision", BinaryDivTrueKernel.cu), which
    is not the spec's f32 division and can move the tensor scale by one ulp.
    A 0-d tensor on a's device is not a CPU scalar, so eager CUDA does a real
    division; under torch.compile it is a constant and inductor emits `a / c`.
    """
    return a / torch.full((), c, dtype=torch.float32, device=a.device)


_E4M3_MIN_NORMAL = 2.0 ** -6
_E4M3_MAX = 448.0


def _e4m3_scale(scaled: torch.Tensor):
    """Round f32 block scales to E4M3: returns (byte uint8, value as f32).

    clamp(scaled, 2^-6, 448) then .to(torch.float8_e4m3fn) (round to nearest
    even).  Why the byte is computed from the f32 bits of the rounded value
    instead of .view(torch.uint8) on the fp8 tensor: after the clamp every
    value is a normal E4M3 number (exponent 1..15), so the byte is
    ((E_f32 - 120) << 3) | top 3 mantissa bits exactly; integer ops on f32 are
    supported everywhere, while fp8 bitcasts are the least tested path in
    inductor.  NaN (from a NaN/inf `scaled`) keeps torch's clamp NaN semantics
    and becomes 0x7F, the E4M3 NaN.
    """
    clamped = torch.clamp(scaled, _E4M3_MIN_NORMAL, _E4M3_MAX)
    val = clamped.to(torch.float8_e4m3fn).to(torch.float32)
    bits = val.view(torch.int32)
    byte = (((bits >> 23) & 0xFF) - 120) << 3 | ((bits >> 20) & 0x7)
    byte = torch.where(torch.isnan(val), torch.full_like(byte, 0x7F), byte)
    return byte.to(torch.uint8), val


def nvfp4_two_level(x: torch.Tensor):
    """NVFP4, two-level scale: returns (data uint8 [..., K/2], scale uint8 [..., K/16], tensor_scale f32 [1]).

    tensor_amax = max |x| over the finite elements of the whole tensor;
    tensor_scale = tensor_amax / 2688 (= 6 * 448); per 16-block bs = amax / 6;
    byte = E4M3(clamp(bs / tensor_scale, 2^-6, 448)); total = tensor_scale *
    E4M3 value; v = x / total (f32 division); blocks with NaN/inf get scale byte
    0x7F and codes 0.

    Why the global amax is inside the function: that is what a caller pays end
    to end (the input is read twice).  The amax stays a 0-d tensor (no .item()),
    so the graph does not break under torch.compile.
    """
    xb = _blocks(x, 16)
    bad = _bad_blocks(xb)
    ax = xb.abs()
    finite_abs = torch.where(torch.isfinite(xb), ax, torch.zeros_like(ax))
    tensor_amax = finite_abs.amax()
    # A tensor without a nonzero finite element gets tensor scale 1.0 (fp4probe's rule:
    # every code is zero then, and 1.0 keeps 0/0 out of the block scales).
    tensor_scale = torch.where(tensor_amax == 0, torch.ones_like(tensor_amax), _div_const(tensor_amax, 2688.0))
    bs = _div_const(ax.amax(dim=-1), 6.0)
    byte, e4m3 = _e4m3_scale(bs / tensor_scale)
    total = tensor_scale * e4m3
    v = xb / total.unsqueeze(-1)
    codes = _e2m1_codes(v)
    codes = torch.where(bad.unsqueeze(-1), torch.zeros_like(codes), codes)
    byte = torch.where(bad, torch.full_like(byte, 0x7F), byte)
    data = _pack_nibbles(codes.reshape(*x.shape[:-1], x.shape[-1]))
    return data, byte, tensor_scale.reshape(1)


def nvfp4_one_level(x: torch.Tensor):
    """NVFP4, one-level scale: returns (data uint8 [..., K/2], scale uint8 [..., K/16]).

    byte = E4M3(clamp(amax / 6, 2^-6, 448)) per 16-block; v = x / E4M3 value;
    blocks with NaN/inf get scale byte 0x7F and codes 0.  Why it exists: the
    single-pass variant without the global amax, for comparison with two-level.
    """
    xb = _blocks(x, 16)
    bad = _bad_blocks(xb)
    bs = _div_const(xb.abs().amax(dim=-1), 6.0)
    byte, e4m3 = _e4m3_scale(bs)
    v = xb / e4m3.unsqueeze(-1)
    codes = _e2m1_codes(v)
    codes = torch.where(bad.unsqueeze(-1), torch.zeros_like(codes), codes)
    byte = torch.where(bad, torch.full_like(byte, 0x7F), byte)
    data = _pack_nibbles(codes.reshape(*x.shape[:-1], x.shape[-1]))
    return data, byte


# format name -> (function, block size, has tensor scale, fp4probe CLI flags)
FORMATS = {
    "mxfp4-floor": (mxfp4_floor, 32, False, ["--format", "mxfp4", "--scale-mode", "floor"]),
    "nvfp4-two-level": (nvfp4_two_level, 16, True, ["--format", "nvfp4", "--nvfp4-levels", "2"]),
    "nvfp4-one-level": (nvfp4_one_level, 16, False, ["--format", "nvfp4", "--nvfp4-levels", "1"]),
}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16} if torch is not None else {"fp32": None, "bf16": None}


def _relax_dynamo_limits():
    """Raise dynamo's per-function recompile limit.

    Why: each (shape, dtype) pair is a separate static-shape compile of the same
    Python function; the default limit (8) would silently fall back to eager
    after it, which would mislabel eager timings as compile timings.
    """
    cfg = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, max(64, getattr(cfg, name)))
    if hasattr(cfg, "accumulated_recompile_limit"):
        cfg.accumulated_recompile_limit = max(1024, cfg.accumulated_recompile_limit)


def set_inductor_eager_numerics():
    """Ask inductor for eager-identical f32 numerics; returns the config names that were set.

    Why: Triton lowers f32 `/` to the approximate div.full.f32 unless told
    otherwise, and a 1-ulp quotient flips E2M1 ties, so torch.compile of the
    NVFP4 functions can differ from eager by design of inductor.  With this
    (flag --compile-eager-numerics) a remaining difference is a real one.  Names
    differ across torch versions (2.11+: eager_numerics.*; older:
    emulate_divison_rounding, sic), so each is set only where it exists; the
    environment variable TORCHINDUCTOR_EMULATE_DIVISION_ROUNDING=1 is the
    version-independent alternative.  Must run before the first compile:
    dynamo reuses compiled code regardless of later config changes.
    """
    import torch._inductor.config as ic
    done = []
    en = getattr(ic, "eager_numerics", None)
    for k in ("division_rounding", "disable_ftz"):
        if en is not None and hasattr(en, k):
            setattr(en, k, True)
            done.append(f"eager_numerics.{k}")
    for k in ("emulate_divison_rounding", "emulate_division_rounding", "emulate_precision_casts"):
        if hasattr(ic, k):
            setattr(ic, k, True)
            done.append(k)
    return done


def compiled(fn):
    """torch.compile(fn) in default mode, static shapes, no graph breaks allowed.

    Why fullgraph=True: a graph break would make the "compile" figure a mix of
    eager and compiled code without saying so; with fullgraph it fails loudly
    instead.  dynamic=False: every benchmarked shape gets its own specialised
    kernels, which is what a user with a fixed shape gets.
    """
    return torch.compile(fn, fullgraph=True, dynamic=False)


# --------------------------------------------------------------------------
# safetensors, written and read by hand (no safetensors package needed)
# --------------------------------------------------------------------------

# safetensors dtype -> numpy dtype string (little endian; BF16 kept as raw uint16 bits; the
# 4- and 8-bit floats as their raw bytes: F4 packs two elements a byte).
_ST_DTYPES = {"U8": "u1", "F32": "<f4", "BF16": "<u2", "F16": "<f2",
              "I32": "<i4", "U16": "<u2", "I8": "i1", "F8_E4M3": "u1", "F8_E8M0": "u1",
              "F4": "u1"}


def tensor_to_st_bytes(x: torch.Tensor):
    """(safetensors dtype name, raw little-endian bytes) of a CPU/GPU tensor.

    Why bf16 goes through int16: numpy has no bfloat16, but the bit pattern is
    all the file needs.
    """
    x = x.detach().contiguous().cpu()
    if x.dtype == torch.bfloat16:
        return "BF16", x.view(torch.int16).numpy().astype("<i2").tobytes()
    if x.dtype == torch.float32:
        return "F32", x.numpy().astype("<f4").tobytes()
    if x.dtype == torch.uint8:
        return "U8", x.numpy().tobytes()
    raise TypeError(f"no safetensors mapping for {x.dtype}")


def write_safetensors(path, tensors):
    """Write {name: tensor} as a safetensors file.

    Format: u64 little-endian header length, JSON header (padded with spaces to
    a multiple of 8) mapping names to dtype/shape/data_offsets, then the raw
    bytes.  Why by hand: the device has no safetensors package guaranteed, and
    the format is tiny.
    """
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        dt, raw = tensor_to_st_bytes(t)
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hjson = json.dumps(header, separators=(",", ":")).encode()
    hjson += b" " * ((-len(hjson)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for raw in blobs:
            f.write(raw)


def read_safetensors(path):
    """Read a safetensors file into {name: (dtype name, shape, numpy array)}.

    Why the dtype name is kept: comparisons are byte for byte, and for BF16 the
    array holds the raw uint16 bits.  Offsets are checked against the file size
    so a truncated file is an error, not a silent short compare.
    """
    with open(path, "rb") as f:
        buf = f.read()
    (hlen,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + hlen].decode())
    base = 8 + hlen
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        dt = meta["dtype"]
        if dt not in _ST_DTYPES:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt}")
        a, b = meta["data_offsets"]
        if base + b > len(buf):
            raise ValueError(f"{path}: tensor {name} runs past the end of the file")
        arr = np.frombuffer(buf[base + a:base + b], dtype=np.dtype(_ST_DTYPES[dt]))
        shape = tuple(meta["shape"])
        if dt == "F4":  # the header counts 4-bit elements; the bytes hold them in pairs
            if not shape or shape[-1] % 2:
                raise ValueError(f"{path}: tensor {name}: F4 shape {shape} has no even last axis")
            shape = shape[:-1] + (shape[-1] // 2,)
        if int(np.prod(shape, dtype=np.int64)) != arr.size:
            raise ValueError(f"{path}: tensor {name}: shape {shape} does not match {arr.size} elements")
        out[name] = (dt, shape, arr.reshape(shape))
    return out


# --------------------------------------------------------------------------
# check mode
# --------------------------------------------------------------------------


def make_check_input(rows, cols, seed, dtype):
    """Seeded adversarial input [rows, cols], f32 generated then cast to `dtype`.

    Why each ingredient:
    - gaussian x per-row 2^k, k in -20..20: many scale exponents in one tensor;
    - a few NaN / +inf / -inf in some rows: the 0xFF / 0x7F block rules;
    - a few all-zero 32-blocks (so also zero 16-blocks), some of them -0.0: the
      amax == 0 path and the sign of zero;
    - rows of exact rounding ties (for MXFP4 the scale is exact, so m * 2^k with
      m a midpoint lands exactly on the tie): ties to even;
    - a row of f32 subnormals: E == 0 -> s == 0 -> rcp = 2^127 and FTZ
      differences between implementations.
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=g, dtype=torch.float32)
    k = torch.randint(-20, 21, (rows, 1), generator=g).to(torch.float32)
    x = x * torch.exp2(k)
    # Tie rows: each 32-block holds a pinned 6 * 2^e (so the MXFP4 scale is
    # 2^e exactly) followed by the midpoints and other E2M1 values, signed.
    ties = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                         0.1, 0.3, 5.5, 7.0], dtype=torch.float32)
    for i, r in enumerate(range(3, rows, max(1, rows // 8))):
        e = float(i * 3 - 9)
        pat = torch.cat([torch.tensor([6.0]), ties, -ties[:13]])  # 32 values
        row = pat.repeat(cols // 32) * (2.0 ** e)
        x[r, : row.numel()] = row
    # Subnormal row (bf16 has f32's exponent range, so it keeps subnormals too).
    if rows > 5:
        x[5] = torch.randn(cols, generator=g) * 2.0 ** -128
    # All-zero blocks, some negative zero.
    for r, c, neg in ((7, 0, False), (7, 64, True), (100, 32 * 5, False), (rows - 1, cols - 32, True)):
        if r < rows and c + 32 <= cols:
            x[r, c:c + 32] = -0.0 if neg else 0.0
    # NaN / inf in a few rows (blocks elsewhere in those rows stay finite).
    for r, c, val in ((11, 3, float("nan")), (12, 40, float("inf")), (13, 77, float("-inf")),
                      (rows // 2, cols // 2 + 5, float("nan")), (rows // 2 + 1, 17, float("inf"))):
        if r < rows and c < cols:
            x[r, c] = val
    return x.to(dtype)


def _np_bytes(t):
    """Flat uint8 numpy view of a torch tensor's bytes; why: byte-for-byte compares."""
    t = t.detach().contiguous().cpu()
    if t.dtype != torch.uint8:
        t = t.view(torch.uint8)
    return t.numpy().reshape(-1)


def _describe_mismatches(name, a, b, x_cpu, fmt_block, cols, limit=5):
    """Lines for the first `limit` differing bytes of tensor `name`: (row, byte, torch, fp4probe, inputs).

    Why with inputs: a mismatch is only debuggable next to the values that
    produced it (the pair of elements of a data byte, the block of a scale byte).
    """
    idx = np.nonzero(a != b)[0][:limit]
    lines = []
    for i in idx:
        if name == "data":
            per_row = cols // 2
            r, c = divmod(int(i), per_row)
            vals = x_cpu[r, 2 * c:2 * c + 2].tolist()
            inputs = f"x[{r},{2 * c}:{2 * c + 2}]={vals}"
        elif name == "scale":
            per_row = cols // fmt_block
            r, c = divmod(int(i), per_row)
            blk = x_cpu[r, c * fmt_block:(c + 1) * fmt_block]
            inputs = f"block x[{r},{c * fmt_block}:{(c + 1) * fmt_block}] amax={blk.abs().max().item()!r} first={blk[:4].tolist()}"
        else:
            r, c = 0, int(i)
            inputs = "tensor_scale byte"
        lines.append(f"    {name}: row {r} byte {c}: torch 0x{int(a[i]):02x} fp4probe 0x{int(b[i]):02x}  {inputs}")
    return lines


def _compare(label, ref, other, x_cpu, block, cols):
    """Compare two {tensor name: flat uint8} dicts; returns (counts dict, detail lines)."""
    counts, lines = {}, []
    for name in ref:
        a = ref[name]
        b = other.get(name)
        if b is None:
            counts[name] = -1
            lines.append(f"  {label}: tensor '{name}' missing")
            continue
        if a.size != b.size:
            counts[name] = -1
            lines.append(f"  {label}: tensor '{name}' has {b.size} bytes, expected {a.size}")
            continue
        n = int(np.count_nonzero(a != b))
        counts[name] = n
        if n:
            lines.append(f"  {label}: {name}: {n} of {a.size} bytes differ; first ones:")
            lines += [l.replace("fp4probe", label.split(" vs ")[-1]) for l in
                      _describe_mismatches(name, a, b, x_cpu, block, cols)]
    return counts, lines


def run_check(args):
    """Cross-check torch eager / torch.compile / fp4probe on seeded inputs; returns the exit code.

    Why all three pairs: eager is the reference of the spec; fp4probe must match
    it exactly; compile is compared too because inductor may reassociate or use
    approximate division, and that is worth knowing rather than hiding.
    """
    dev = torch.device(args.device)
    os.makedirs(args.workdir, exist_ok=True)
    _relax_dynamo_limits()
    rows, cols = args.rows, args.cols
    table, details = [], []
    fp4probe_fail = compile_fail = run_fail = False
    for dname in args.dtypes:
        x = make_check_input(rows, cols, args.seed, DTYPES[dname])
        x_cpu = x.to(torch.float32)
        in_path = os.path.join(args.workdir, f"in-{dname}.safetensors")
        write_safetensors(in_path, {"x": x})
        xd = x.to(dev)
        for fmt in args.formats:
            fn, block, has_ts, flags = FORMATS[fmt]
            names = ["data", "scale"] + (["tensor_scale"] if has_ts else [])
            eager = dict(zip(names, (_np_bytes(t) for t in fn(xd))))
            comp = None
            if not args.no_compile:
                try:
                    comp = dict(zip(names, (_np_bytes(t) for t in compiled(fn)(xd))))
                except Exception as e:  # report and go on: the fp4probe check still counts
                    details.append(f"[{dname} {fmt}] torch.compile failed: {type(e).__name__}: {e}")
                    compile_fail = True
            probe = None
            out_path = os.path.join(args.workdir, f"out-{dname}-{fmt}.safetensors")
            if args.fp4probe:
                cmd = [args.fp4probe, "quantize", *flags, "--backend", args.backend,
                       "--input", in_path, "--output", out_path]
                if os.path.exists(out_path):
                    os.remove(out_path)
                p = subprocess.run(cmd, capture_output=True, text=True)
                if p.returncode != 0:
                    run_fail = True
                    details.append(f"[{dname} {fmt}] fp4probe failed (rc {p.returncode}): {' '.join(cmd)}\n"
                                   f"  stdout: {p.stdout.strip()[-2000:]}\n  stderr: {p.stderr.strip()[-2000:]}")
                else:
                    try:
                        st = read_safetensors(out_path)
                        probe = {n: arr.reshape(-1).view(np.uint8) for n, (dt, shp, arr) in st.items()}
                        want = {"data": "F4", "tensor_scale": "F32",
                                "scale": "F8_E8M0" if fmt.startswith("mxfp4") else "F8_E4M3"}
                        for n in names:
                            if n in st and st[n][0] != want[n]:
                                details.append(f"[{dname} {fmt}] fp4probe tensor {n} has dtype {st[n][0]}")
                    except Exception as e:
                        run_fail = True
                        details.append(f"[{dname} {fmt}] cannot read {out_path}: {type(e).__name__}: {e}")
            row = {"dtype": dname, "format": fmt}
            if probe is not None:
                c, l = _compare("eager vs fp4probe", eager, probe, x_cpu, block, cols)
                row["eager~probe"] = c
                details += [f"[{dname} {fmt}]"] + l if l else []
                fp4probe_fail |= any(v != 0 for v in c.values())
            if comp is not None:
                c, l = _compare("eager vs compile", eager, comp, x_cpu, block, cols)
                row["eager~compile"] = c
                details += [f"[{dname} {fmt}]"] + l if l else []
                compile_fail |= any(v != 0 for v in c.values())
                if probe is not None:
                    c, l = _compare("compile vs fp4probe", comp, probe, x_cpu, block, cols)
                    row["compile~probe"] = c
                    compile_fail |= any(v != 0 for v in c.values())
            table.append(row)

    def fmt_counts(c):
        if c is None:
            return "-"
        return " ".join(f"{k}={'MISSING' if v < 0 else v}" for k, v in c.items())

    print(f"check: {rows}x{cols} seed {args.seed} on {dev}; mismatching bytes per tensor")
    hdr = f"{'dtype':5} {'format':16} | {'eager vs fp4probe':34} | {'eager vs compile':34} | {'compile vs fp4probe':34}"
    print(hdr)
    print("-" * len(hdr))
    for r in table:
        print(f"{r['dtype']:5} {r['format']:16} | {fmt_counts(r.get('eager~probe')):34} | "
              f"{fmt_counts(r.get('eager~compile')):34} | {fmt_counts(r.get('compile~probe')):34}")
    for d in details:
        print(d)
    if not args.fp4probe:
        print("note: no --fp4probe given, only eager vs compile was checked")
    if run_fail:
        print("RESULT: fp4probe could not be run or read (exit 3)")
        return 3
    if fp4probe_fail:
        print("RESULT: fp4probe differs from torch eager (exit 1)")
        return 1
    if compile_fail:
        print("RESULT: fp4probe == torch eager, but torch.compile differs or failed (exit 2)")
        if not args.compile_eager_numerics:
            print("hint: rerun with --compile-eager-numerics to see whether inductor's approximate "
                  "f32 division explains the difference")
        return 2
    print("RESULT: all equal")
    return 0


# --------------------------------------------------------------------------
# bench mode
# --------------------------------------------------------------------------

CSV_COLUMNS = ["impl", "format", "input_dtype", "rows", "cols", "ms_median", "ms_min", "ms_max",
               "bytes", "gb_per_s", "l2_resident"]
L2_BYTES = 50 * 2 ** 20  # H100 L2


def time_cuda(call, warmup, repeats):
    """Median/min/max ms of `call()` on the current CUDA stream, each call timed by its own event pair.

    Why per-call events and not one event around a loop: the median and the
    spread say whether a figure is stable; events measure GPU time, so host
    overhead shows only where the GPU waits for launches (small eager calls),
    which is a real cost of that implementation.
    """
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    for s, e in zip(starts, ends):
        s.record()
        call()
        e.record()
    torch.cuda.synchronize()
    ms = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    n = len(ms)
    med = ms[n // 2] if n % 2 else 0.5 * (ms[n // 2 - 1] + ms[n // 2])
    return med, ms[0], ms[-1]


def time_cpu(call, warmup, repeats):
    """Same as time_cuda with perf_counter, for a CPU smoke run of bench (no GPU here)."""
    for _ in range(warmup):
        call()
    ms = []
    for _ in range(repeats):
        t = time.perf_counter()
        call()
        ms.append((time.perf_counter() - t) * 1e3)
    ms.sort()
    n = len(ms)
    med = ms[n // 2] if n % 2 else 0.5 * (ms[n // 2 - 1] + ms[n // 2])
    return med, ms[0], ms[-1]


def parse_sizes(text):
    """'1024x1024,4096x8192' -> [(1024, 1024), (4096, 8192)]; why: --sizes override."""
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        if not part:
            continue
        r, c = part.split("x")
        out.append((int(r), int(c)))
    return out


def _csv_row(impl, fmt, dname, rows, cols, t, nbytes):
    """One CSV row dict; why: one place for the GB/s and l2_resident rules."""
    med, mn, mx = t
    return {"impl": impl, "format": fmt, "input_dtype": dname, "rows": rows, "cols": cols,
            "ms_median": f"{med:.6f}", "ms_min": f"{mn:.6f}", "ms_max": f"{mx:.6f}",
            "bytes": nbytes, "gb_per_s": f"{nbytes / med / 1e6:.3f}" if med > 0 else "nan",
            "l2_resident": "yes" if nbytes < L2_BYTES else "no"}


def run_bench(args):
    """Time eager/compile of every format, dtype and size, plus copies; write the CSV.

    Why the order: sizes outermost so that a long run that is cut short still
    has complete small-size rows in the (incrementally flushed) CSV.
    """
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    timer = time_cuda if cuda else time_cpu
    _relax_dynamo_limits()
    sizes = parse_sizes(args.sizes)
    compile_label = "torch-compile-eager-numerics" if args.compile_eager_numerics else "torch-compile"
    impls = ["torch-eager"] + ([] if args.no_compile else [compile_label])
    t0 = time.time()
    if cuda:
        print(f"device: {torch.cuda.get_device_name(dev)}; torch {torch.__version__}")
    print("policy: no L2 flush between calls; l2_resident=yes where input+output < 50 MiB; "
          f"warm-up {args.warmup} calls (compile included), {args.repeats} timed calls, median reported")
    os.makedirs(os.path.dirname(os.path.abspath(args.csv)), exist_ok=True)
    with open(args.csv, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        w.writeheader()

        def emit(row):
            w.writerow(row)
            fh.flush()
            print(f"[{time.time() - t0:6.1f}s] {row['impl']:14} {row['format']:16} {row['input_dtype']:4} "
                  f"{row['rows']}x{row['cols']}: {float(row['ms_median']):9.4f} ms "
                  f"{row['gb_per_s']:>9} GB/s  (min {float(row['ms_min']):.4f} max {float(row['ms_max']):.4f})",
                  flush=True)

        copies = [(r, c, d) for (r, c) in sizes for d in args.dtypes]
        if ("8192", "8192", "fp32") not in {(str(r), str(c), d) for r, c, d in copies}:
            copies.append((8192, 8192, "fp32"))
        for rows, cols in sizes:
            for dname in args.dtypes:
                g = torch.Generator(device=dev).manual_seed(1234)
                x = (torch.randn(rows, cols, generator=g, device=dev) * 3.0).to(DTYPES[dname])
                in_bytes = x.numel() * x.element_size()
                for fmt in args.formats:
                    fn, block, has_ts, _ = FORMATS[fmt]
                    out_bytes = rows * cols // 2 + rows * cols // block + (4 if has_ts else 0)
                    for impl in impls:
                        f = fn if impl == "torch-eager" else compiled(fn)
                        try:
                            t = timer(lambda f=f, x=x: f(x), max(3, args.warmup), args.repeats)
                        except Exception as e:  # keep going: one failing compile must not lose the run
                            print(f"FAILED {impl} {fmt} {dname} {rows}x{cols}: {type(e).__name__}: {e}",
                                  flush=True)
                            continue
                        emit(_csv_row(impl, fmt, dname, rows, cols, t, in_bytes + out_bytes))
            for crow, ccol, cd in [c for c in copies if (c[0], c[1]) == (rows, cols)]:
                _bench_copy(dev, crow, ccol, cd, timer, args, emit)
            if cuda:
                torch.cuda.empty_cache()
        for crow, ccol, cd in [c for c in copies if (c[0], c[1]) not in sizes]:
            _bench_copy(dev, crow, ccol, cd, timer, args, emit)
    print(f"wrote {args.csv} in {time.time() - t0:.1f} s")
    return 0


def _bench_copy(dev, rows, cols, dname, timer, args, emit):
    """Time dst.copy_(src) for one buffer; why: the achievable-bandwidth yardstick (2 x bytes moved)."""
    src = torch.empty(rows, cols, dtype=DTYPES[dname], device=dev).fill_(1.0)
    dst = torch.empty_like(src)
    t = timer(lambda: dst.copy_(src), max(3, args.warmup), args.repeats)
    emit(_csv_row("copy", "copy", dname, rows, cols, t, 2 * src.numel() * src.element_size()))


# --------------------------------------------------------------------------
# merge mode
# --------------------------------------------------------------------------


def read_bench_csv(path):
    """Rows of one bench CSV as dicts; why checked: a CSV with other columns must not merge silently."""
    with open(path, newline="") as fh:
        r = csv.DictReader(fh)
        missing = [c for c in CSV_COLUMNS if c not in (r.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: missing columns {missing}; have {r.fieldnames}")
        return [{c: row[c] for c in CSV_COLUMNS} for row in r if row.get("impl")]


def _fnum(s):
    """float of a CSV cell, NaN for junk; why: one unparsable cell must not kill the table."""
    try:
        return float(s)
    except (TypeError, ValueError):
        return float("nan")


def markdown_tables(rows):
    """Markdown: one table per (format, input_dtype), size | impl | ms | GB/s | % of copy.

    % of copy = GB/s / GB/s of the copy row of the same size (same dtype
    preferred, else any dtype of that size, else the largest copy buffer); where
    several copy rows match, the fastest is the yardstick.  Why: a quantizer
    reads and writes memory like a copy, so % of copy is its bandwidth
    efficiency.
    """
    copies = [r for r in rows if r["impl"] == "copy" or r["format"] == "copy"]

    def best(cands):
        return max(cands, key=lambda r: _fnum(r["gb_per_s"])) if cands else None

    largest = best([r for r in copies if int(r["bytes"]) == max((int(c["bytes"]) for c in copies), default=-1)])

    def yardstick(r):
        """(copy row, exact size match?) for row r."""
        same = [c for c in copies if (c["rows"], c["cols"]) == (r["rows"], r["cols"])]
        y = best([c for c in same if c["input_dtype"] == r["input_dtype"]]) or best(same)
        return (y, True) if y is not None else (largest, False)

    out = ["# Quantization throughput", "",
           "Timing: CUDA events around each call, the calls queued back to back; median of the "
           "timed calls after warm-up; no L2 flush (rows marked L2 have input+output < 50 MiB and "
           "can be served from the H100's L2). "
           "bytes = input + output (data + scale (+4 tensor scale)); GB/s = bytes / ms / 1e6. "
           "% of copy = GB/s relative to the faster copy of the same size and dtype (2 x buffer "
           "bytes): torch's `dst.copy_(src)` (impl `copy`) or the driver's cuMemcpyDtoD "
           "(`copy-driver`, timed by fp4probe); `*` = no copy row of that size, the largest copy "
           "buffer is the yardstick.", ""]
    groups = sorted({(r["format"], r["input_dtype"]) for r in rows if r["format"] != "copy"})
    for fmt, dt in groups:
        sel = [r for r in rows if r["format"] == fmt and r["input_dtype"] == dt]
        sel.sort(key=lambda r: (int(r["rows"]) * int(r["cols"]), int(r["rows"]), r["impl"]))
        out += [f"## {fmt}, input {dt}", "", "| size | impl | ms | GB/s | % of copy |",
                "| --- | --- | ---: | ---: | ---: |"]
        for r in sel:
            y, exact = yardstick(r)
            pct = "-"
            if y is not None and _fnum(y["gb_per_s"]) > 0:
                pct = f"{100.0 * _fnum(r['gb_per_s']) / _fnum(y['gb_per_s']):.1f}%" + ("" if exact else " *")
            l2 = " (L2)" if r["l2_resident"] == "yes" else ""
            out.append(f"| {r['rows']}x{r['cols']}{l2} | {r['impl']} | {_fnum(r['ms_median']):.4f} | "
                       f"{_fnum(r['gb_per_s']):.1f} | {pct} |")
        out.append("")
    if copies:
        out += ["## copy (yardstick)", "", "| size | dtype | impl | ms | GB/s |",
                "| --- | --- | --- | ---: | ---: |"]
        for r in sorted(copies, key=lambda r: (int(r["rows"]) * int(r["cols"]), r["input_dtype"], r["impl"])):
            l2 = " (L2)" if r["l2_resident"] == "yes" else ""
            out.append(f"| {r['rows']}x{r['cols']}{l2} | {r['input_dtype']} | {r['impl']} | "
                       f"{_fnum(r['ms_median']):.4f} | {_fnum(r['gb_per_s']):.1f} |")
        out.append("")
    return "\n".join(out)


def run_merge(args):
    """Concatenate the CSVs (same columns, in the order given) and optionally write the markdown."""
    rows = []
    for p in args.csv:
        rows += read_bench_csv(p)
    # fp4probe names input types after its kernels (f32, f16); torch rows say fp32, fp16.
    aliases = {"f32": "fp32", "f16": "fp16"}
    for r in rows:
        r["input_dtype"] = aliases.get(r["input_dtype"], r["input_dtype"])
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
            w.writeheader()
            w.writerows(rows)
        print(f"wrote {args.out}: {len(rows)} rows")
    if args.markdown:
        os.makedirs(os.path.dirname(os.path.abspath(args.markdown)), exist_ok=True)
        with open(args.markdown, "w") as fh:
            fh.write(markdown_tables(rows))
        print(f"wrote {args.markdown}")
    return 0


# --------------------------------------------------------------------------
# selftest mode: numpy per-element reference (independent of the torch code)
# --------------------------------------------------------------------------

_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _ref_e2m1(v):
    """Reference code of one f32 value: nearest E2M1 magnitude by distance, ties to the even code.

    Why a different method from _e2m1_codes (distances, not midpoint compares):
    two independent derivations of the same spec catch mistakes in either.
    """
    v = np.float32(v)
    sign = 8 if np.signbit(v) else 0
    if np.isnan(v):
        return sign
    a = min(abs(float(v)), 6.0)
    d = [abs(a - m) for m in _E2M1]
    best = min(d)
    cands = [i for i, di in enumerate(d) if di == best]
    code = cands[0] if len(cands) == 1 else [c for c in cands if c % 2 == 0][0]
    return sign | code


def _ref_e4m3(c):
    """Reference (byte, value) of f32 `c` clamped to [2^-6, 448] and rounded to E4M3 (RNE); NaN -> 0x7F.

    Why by frexp/rint in float64 (exact for these inputs): independent of
    torch's float8 cast.
    """
    c = np.float32(c)
    if np.isnan(c):
        return 0x7F, float("nan")
    c = float(min(max(c, np.float32(2.0 ** -6)), np.float32(448.0)))
    m, e = np.frexp(c)  # c = m * 2^e, m in [0.5, 1)
    e -= 1  # c = (2m) * 2^e, 2m in [1, 2)
    q = np.rint(c / 2.0 ** (e - 3))  # 8..16, half to even
    if q == 16:
        q, e = 8, e + 1
    return ((e + 7) << 3) | (int(q) - 8), float(q * 2.0 ** (e - 3))


def _ref_pack(codes):
    """Pack a list of codes per row, even index low nibble; why: reference of _pack_nibbles."""
    return [codes[i] | (codes[i + 1] << 4) for i in range(0, len(codes), 2)]


def ref_quantize(x, fmt):
    """Per-element numpy reference of one format on f32 array x [M, K] (bf16 inputs already widened)."""
    x = np.asarray(x, dtype=np.float32)
    m, k = x.shape
    block = 32 if fmt == "mxfp4-floor" else 16
    data = np.zeros((m, k // 2), np.uint8)
    scale = np.zeros((m, k // block), np.uint8)
    ts = None
    if fmt == "nvfp4-two-level":
        fin = np.abs(x[np.isfinite(x)])
        amax = np.float32(fin.max() if fin.size else 0.0)
        ts = np.float32(1.0) if amax == 0 else np.float32(amax / np.float32(2688.0))
    for i in range(m):
        codes = []
        for b in range(k // block):
            blk = x[i, b * block:(b + 1) * block]
            bad = not np.all(np.isfinite(blk))
            amax = np.float32(max(abs(float(t)) for t in blk)) if not bad else np.float32("nan")
            if fmt == "mxfp4-floor":
                e = (int(np.array(amax, np.float32).view(np.uint32)) >> 23) & 0xFF
                s = 0xFF if bad else min(max(e - 129, -127), 128) + 127
                r = (254 - s) % 256
                rcp = np.float32("nan") if r == 255 else np.float32(2.0 ** (r - 127))
                scale[i, b] = s
                vs = [np.float32(t) * rcp for t in blk]
            else:
                bs = np.float32(amax / np.float32(6.0))
                scaled = np.float32(bs / ts) if ts is not None else bs
                byte, val = _ref_e4m3(scaled)
                total = np.float32(ts * np.float32(val)) if ts is not None else np.float32(val)
                scale[i, b] = 0x7F if bad else byte
                with np.errstate(all="ignore"):
                    vs = [np.float32(t) / total for t in blk]
            codes += [0] * block if bad else [_ref_e2m1(v) for v in vs]
        data[i] = _ref_pack(codes)
    return data, scale, (None if ts is None else np.array([ts], np.float32))


def run_selftest(args):
    """Hand-computed values + numpy reference vs the torch functions (eager, and compile unless --no-compile).

    Why: runs anywhere torch runs (CPU included), so the torch code can be
    checked before the device run; on the device it also checks the CUDA path.
    """
    dev = torch.device(args.device)
    _relax_dynamo_limits()
    fails = 0
    # Hand-computed: one 32-block whose amax 6.0 makes the MXFP4 scale 2^0
    # (s = 127) and the one-level NVFP4 scale 1.0 (byte 0x38) for both halves.
    vals = [6.0, 5.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, -0.1, -6.0, 5.5, 0.3, -0.0, 0.0, 4.0, 2.9]
    want = [0x7, 0x6, 0x0, 0x2, 0x2, 0x4, 0x4, 0x6, 0x8, 0xF, 0x7, 0x1, 0x8, 0x0, 0x6, 0x5]
    row = torch.tensor(vals + vals, dtype=torch.float32).reshape(1, 32).to(dev)
    for fmt, want_scale in (("mxfp4-floor", [127]), ("nvfp4-one-level", [0x38, 0x38])):
        d, s = FORMATS[fmt][0](row)[:2]
        got = []
        for byte in d.cpu().reshape(-1).tolist():
            got += [byte & 0xF, byte >> 4]
        ok = got == want + want and s.cpu().reshape(-1).tolist() == want_scale
        print(f"hand values {fmt}: {'ok' if ok else 'FAIL'}")
        if not ok:
            print(f"  codes {got[:16]} want {want}; scale {s.cpu().tolist()} want {want_scale}")
            fails += 1
    for dname in args.dtypes:
        x = make_check_input(args.rows, args.cols, args.seed, DTYPES[dname])
        xf = x.to(torch.float32).numpy()
        for fmt in args.formats:
            fn = FORMATS[fmt][0]
            ref = [r for r in ref_quantize(xf, fmt) if r is not None]
            runs = [("eager", fn)] + ([] if args.no_compile else [("compile", compiled(fn))])
            for name, f in runs:
                out = [t.cpu().numpy() for t in f(x.to(dev))]
                bad = [int(np.count_nonzero(o.reshape(-1).view(np.uint8) != r.reshape(-1).view(np.uint8)))
                       if o.size == r.size else -1 for o, r in zip(out, ref)]
                ok = all(b == 0 for b in bad)
                fails += not ok
                print(f"{dname:4} {fmt:16} {name:7} vs numpy reference: "
                      f"{'ok' if ok else 'FAIL mismatching bytes per output ' + str(bad)}")
    print("selftest:", "all ok" if not fails else f"{fails} FAILED")
    return 1 if fails else 0


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------


def main(argv=None):
    """argparse front end; why subcommands: the three modes share the functions above."""
    default_dev = "cuda" if torch is not None and torch.cuda.is_available() else "cpu"
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)

    def common(p):
        p.add_argument("--device", default=default_dev, help=f"torch device (default {default_dev})")
        p.add_argument("--dtypes", default="fp32,bf16", type=lambda s: [d for d in s.split(",") if d],
                       help="input dtypes, comma separated (fp32,bf16)")
        p.add_argument("--formats", default=",".join(FORMATS), type=lambda s: [f for f in s.split(",") if f],
                       help="formats, comma separated (" + ",".join(FORMATS) + ")")
        p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
        p.add_argument("--compile-eager-numerics", action="store_true",
                       help="compile with inductor's eager numerics (IEEE f32 division, no FTZ); "
                            "bench rows are then labelled torch-compile-eager-numerics")

    pc = sub.add_parser("check", help="cross-check torch vs fp4probe byte for byte")
    common(pc)
    pc.add_argument("--fp4probe", help="path to the fp4probe binary (omit: eager vs compile only)")
    pc.add_argument("--workdir", required=True, help="folder for the .safetensors inputs and outputs")
    pc.add_argument("--backend", default="cuda", help="fp4probe --backend (default cuda)")
    pc.add_argument("--rows", type=int, default=1024)
    pc.add_argument("--cols", type=int, default=1024)
    pc.add_argument("--seed", type=int, default=20240601)

    pb = sub.add_parser("bench", help="time eager / compile / copy, write CSV")
    common(pb)
    pb.add_argument("--csv", required=True, help="output CSV path")
    pb.add_argument("--sizes", default="1024x1024,4096x8192,8192x8192", help="RxC list, comma separated")
    pb.add_argument("--repeats", type=int, default=50)
    pb.add_argument("--warmup", type=int, default=3, help="warm-up calls (at least 3; includes compile)")

    ps = sub.add_parser("selftest", help="torch functions vs a numpy per-element reference (small input)")
    common(ps)
    ps.add_argument("--rows", type=int, default=48)
    ps.add_argument("--cols", type=int, default=256)
    ps.add_argument("--seed", type=int, default=7)

    pm = sub.add_parser("merge", help="concatenate CSVs, write markdown tables")
    pm.add_argument("--csv", action="append", required=True, help="input CSV (repeat)")
    pm.add_argument("--out", help="merged CSV path")
    pm.add_argument("--markdown", help="markdown tables path")

    args = ap.parse_args(argv)
    if getattr(args, "compile_eager_numerics", False):
        print("inductor eager numerics:", ", ".join(set_inductor_eager_numerics()) or "no known config names")
    for attr, allowed in (("dtypes", DTYPES), ("formats", FORMATS)):
        for v in getattr(args, attr, []) or []:
            if v not in allowed:
                ap.error(f"unknown {attr[:-1]} {v!r}; choose from {', '.join(allowed)}")
    if args.mode != "merge" and (torch is None or np is None):
        ap.error(f"mode {args.mode} needs torch and numpy")
    if args.mode == "check":
        return run_check(args)
    if args.mode == "bench":
        return run_bench(args)
    if args.mode == "selftest":
        return run_selftest(args)
    return run_merge(args)


if __name__ == "__main__":
    sys.exit(main())
