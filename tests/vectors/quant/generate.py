#!/usr/bin/env python3
"""Independent generator of bit-exact MXFP4 / NVFP4 quantization test vectors.

Written from the fp4probe quantization spec (see README.md in this folder), NOT
from the Rust implementation. Every rounding step that ml_dtypes can do is done
by an ml_dtypes cast (float4_e2m1fn, float8_e4m3fn, float8_e8m0fnu, bfloat16);
all arithmetic is numpy float32 (checked by asserts: no float64 intermediates).

Run:  python3 tests/vectors/quant/generate.py
Deterministic: fixed seeds, output bytes depend only on the pinned versions.
"""
import json
import os

import ml_dtypes
import numpy as np
import safetensors
import safetensors.numpy

F32 = np.float32
U8 = np.uint8
U32 = np.uint32
FP4 = ml_dtypes.float4_e2m1fn
E4M3 = ml_dtypes.float8_e4m3fn
E8M0 = ml_dtypes.float8_e8m0fnu
BF16 = ml_dtypes.bfloat16

OUT_DIR = os.path.dirname(os.path.abspath(__file__))
VERSIONS = {
    "numpy": np.__version__,
    "ml_dtypes": ml_dtypes.__version__,
    "safetensors": safetensors.__version__,
}

E2M1_MAGS = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
MIDPOINTS = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
FLT_MAX = np.finfo(F32).max


# ----------------------------------------------------------------------------
# float32-only arithmetic helpers (assert no float64 sneaks in)
# ----------------------------------------------------------------------------
def _f32(a):
    a = np.asarray(a)
    assert a.dtype == F32, a.dtype
    return a


def f32mul(a, b):
    a, b = _f32(a), _f32(b)
    with np.errstate(all="ignore"):
        r = np.multiply(a, b, dtype=F32)
    assert r.dtype == F32
    return r


def f32div(a, b):
    a, b = _f32(a), _f32(b)
    with np.errstate(all="ignore"):
        r = np.divide(a, b, dtype=F32)
    assert r.dtype == F32
    return r


def f32(v):
    return np.float32(v)


def bits(a):
    return _f32(a).view(U32)


def from_bits(b):
    return np.asarray(b, dtype=U32).view(F32)


def nextup(v):
    return np.nextafter(F32(v), F32(np.inf), dtype=F32)


def nextdown(v):
    return np.nextafter(F32(v), F32(-np.inf), dtype=F32)


# ----------------------------------------------------------------------------
# element / scale primitives (ml_dtypes casts)
# ----------------------------------------------------------------------------
def e2m1_encode(v):
    """Scaled f32 -> 4-bit code: clamp to [-6, 6], RNE via ml_dtypes, sign kept."""
    v = _f32(v)
    c = np.clip(v, F32(-6.0), F32(6.0))
    assert c.dtype == F32
    return c.astype(FP4).view(U8) & U8(0x0F)


def e2m1_decode(codes):
    return (np.asarray(codes, dtype=U8) & U8(0x0F)).view(FP4).astype(F32)


def e8m0_to_f32(sbytes):
    return np.asarray(sbytes, dtype=U8).view(E8M0).astype(F32)


def to_e4m3(v):
    v = _f32(v)
    c = np.clip(v, F32(2.0 ** -6), F32(448.0))
    assert c.dtype == F32
    return c.astype(E4M3).view(U8)


def e4m3_to_f32(b):
    return np.asarray(b, dtype=U8).view(E4M3).astype(F32)


def pack(codes):
    codes = np.asarray(codes, dtype=U8)
    assert codes.shape[-1] % 2 == 0
    return (codes[..., 0::2] | (codes[..., 1::2] << U8(4))).astype(U8)


def count_ties(v):
    a = np.abs(v[np.isfinite(v)])
    return int(np.isin(a, np.array(MIDPOINTS, dtype=F32)).sum())


# ----------------------------------------------------------------------------
# Self-checks of ml_dtypes behaviour (catch a future ml_dtypes change)
# ----------------------------------------------------------------------------
def _ref_e2m1(v):
    """Tiny reference used ONLY to cross-check ml_dtypes on chosen inputs."""
    out = []
    grid = np.array(E2M1_MAGS, dtype=np.float64)
    for x in np.asarray(v, dtype=np.float64):
        s = 8 if np.signbit(x) else 0
        a = min(abs(x), 6.0)
        d = np.abs(grid - a)
        best = np.flatnonzero(d == d.min())
        idx = best[0] if len(best) == 1 else [i for i in best if i % 2 == 0][0]
        out.append(s | idx)
    return np.array(out, dtype=U8)


def self_check_ml_dtypes():
    # E2M1 ties to even at every midpoint, both signs
    mids = np.array(MIDPOINTS, dtype=F32)
    assert list(e2m1_encode(mids)) == [0, 2, 2, 4, 4, 6, 6], e2m1_encode(mids)
    assert list(e2m1_encode(-mids)) == [8, 10, 10, 12, 12, 14, 14]
    # just above / below midpoints
    up = np.nextafter(mids, F32(np.inf))
    dn = np.nextafter(mids, F32(-np.inf))
    assert list(e2m1_encode(up)) == [1, 2, 3, 4, 5, 6, 7]
    assert list(e2m1_encode(dn)) == [0, 1, 2, 3, 4, 5, 6]
    # exact codes
    mags = np.array(E2M1_MAGS, dtype=F32)
    assert list(e2m1_encode(mags)) == list(range(8))
    assert list(e2m1_encode(-mags)) == list(range(8, 16))
    # signed zero
    z = np.array([0.0, -0.0, -0.1, 0.1, -1e-45, 1e-45], dtype=F32)
    assert list(e2m1_encode(z)) == [0, 8, 8, 0, 8, 0]
    # random cross-check against tiny reference
    rng = np.random.default_rng(1234)
    r = (rng.standard_normal(20000) * 3).astype(F32)
    r = np.concatenate([r, up, dn, -up, -dn, mids, -mids])
    assert np.array_equal(e2m1_encode(r), _ref_e2m1(r))
    # Raw (unclipped) ml_dtypes float4 behaviour, recorded for the README:
    raw = np.array([6.5, 7.0, 8.0, 1e30, np.inf, -np.inf, -7.0], dtype=F32)
    assert list(raw.astype(FP4).view(U8)) == [7, 7, 7, 7, 7, 15, 15]  # saturates
    nans = np.array([0x7FC00000, 0xFFC00000], dtype=U32).view(F32)
    raw_nan = list(nans.astype(FP4).view(U8))
    assert raw_nan == [8, 0], raw_nan  # NaN -> -0 (0x8), -NaN -> +0: sign flipped!
    # E8M0 -> f32
    e = e8m0_to_f32(np.array([0, 1, 127, 254, 255], dtype=U8))
    assert list(bits(e)) == [0x00400000, 0x00800000, 0x3F800000, 0x7F000000, 0x7FC00000]
    # E4M3 behaviour
    e4 = np.array([448, 464, 464.0001, 480, np.inf, np.nan, 2.0 ** -6, 2.0 ** -7,
                   2.0 ** -9, 2.0 ** -10, 1.0625, 1.1875], dtype=F32)
    got = list(e4.astype(E4M3).view(U8))
    # 464 (tie 448/480) -> 448 (even); above -> NaN (no saturation in ml_dtypes)
    assert got[:6] == [0x7E, 0x7E, 0x7F, 0x7F, 0x7F, 0x7F], got
    assert got[6:] == [0x08, 0x04, 0x01, 0x00, 0x38, 0x3A], got
    assert list(to_e4m3(np.array([1e9, np.inf, 0.0, -5.0, 1e-30], F32))) == [0x7E, 0x7E, 0x08, 0x08, 0x08]
    # bf16 / f16 widen exactly
    assert F32(BF16(1.5)) == 1.5
    # float32(1/6)
    assert bits(F32(1.0) / F32(6.0)) == 0x3E2AAAAB
    return {"fp4_raw_nan": raw_nan}


def self_check_spec_points():
    """Scale bytes derived by hand from the spec text, checked against the code."""
    def mx(mode, v):
        x = np.zeros((1, 32), F32)
        x[0, 0] = v
        return int(quant_mxfp4(x, mode)["scale"][0, 0])

    def nv(mode, vals):
        x = np.array([vals], F32)
        return quant_nvfp4(x, mode)

    assert [mx("floor", v) for v in (1.0, nextdown(4.0), 4.0, 0.0, FLT_MAX)] == [125, 126, 127, 0, 252]
    assert [mx("ceil", v) for v in (1.0, nextup(1.0), 4.0, 2.0 ** -149, FLT_MAX)] == [125, 126, 127, 0, 253]
    assert [mx("even", v) for v in (1.75, nextdown(1.75), 1.0, FLT_MAX, np.nan)] == [126, 125, 125, 255, 255]
    assert [mx("rceil", v) for v in (6.0, 3.0, nextup(6.0), 0.0, np.inf)] == [127, 126, 128, 0, 255]
    # codes: x=1.0 with amax 1.0 (floor: scale 2^-2) -> v=4 -> code 6
    x = np.zeros((1, 32), F32)
    x[0, :4] = [1.0, -0.0, -0.1, -0.05]
    q = quant_mxfp4(x, "floor")
    assert list(q["codes"][0, :4]) == [6, 8, 9, 8] and q["dequant"][0, 0] == 1.0
    o = nv("one_level", [6.0] + [0.0] * 15)
    assert o["scale"][0, 0] == 0x38 and o["codes"][0, 0] == 7
    o = nv("two_level", [2688.0, -1.0] + [0.0] * 14)
    assert o["tensor_scale"][0] == 1.0 and o["scale"][0, 0] == 0x7E
    assert list(o["codes"][0, :2]) == [7, 8]  # -1/448 -> -0 (code 8)
    o = nv("one_level", [0.0] * 16)
    assert o["scale"][0, 0] == 0x08


# ----------------------------------------------------------------------------
# MXFP4
# ----------------------------------------------------------------------------
def mxfp4_scale_bytes(amax, mode):
    amax = _f32(amax)
    b = bits(amax).astype(np.int64)
    if mode in ("floor", "ceil", "even"):
        if mode == "even":
            bb = ((bits(amax).astype(np.uint64) + (1 << 21)) & 0xFF800000).astype(U32)
            ramax = bb.view(F32)
            E = (bb.astype(np.int64) >> 23) & 0xFF
            u = E - 127 - 2
            # NOTE: spec tests finiteness of the rounded amax; we ALSO treat a
            # NaN/Inf original amax as non-finite (a NaN with mantissa >=
            # 0x600000 would otherwise wrap to -0.0 -> "finite"). See README.
            nonfinite = ~np.isfinite(ramax) | ~np.isfinite(amax)
        else:
            E = (b >> 23) & 0xFF
            M = b & 0x7FFFFF
            u = E - 127 - 2
            if mode == "ceil":
                u = u + (M > 0)
            nonfinite = ~np.isfinite(amax)
        u = np.clip(u, -127, 128)
        s = (u + 127).astype(U8)
        s[nonfinite] = 0xFF
        return s
    assert mode == "rceil"
    descale = f32mul(amax, F32(1.0) / F32(6.0))
    db = bits(descale).astype(np.int64)
    E = (db >> 23) & 0xFF
    M = db & 0x7FFFFF
    round_up = np.where(E == 0, M > 0x400000, M != 0)
    s = ((E + round_up) & 0xFF).astype(U8)
    s[~np.isfinite(descale)] = 0xFF
    return s


def quant_mxfp4(x, mode, block=32):
    xf = np.asarray(x).astype(F32)
    K = xf.shape[-1]
    assert K % block == 0
    xb = xf.reshape(-1, K // block, block)
    amax = np.max(np.abs(xb), axis=-1)  # NaN-propagating, inf if any inf
    assert amax.dtype == F32
    s = mxfp4_scale_bytes(amax, mode)
    r_byte = ((254 - s.astype(np.int64)) % 256).astype(U8)
    rcp = e8m0_to_f32(r_byte)  # 0 -> 2^-127 (subnormal), 255 -> NaN
    v = f32mul(xb, rcp[..., None])
    codes = e2m1_encode(v)
    bad = s == 0xFF
    codes[bad] = 0
    deq = f32mul(e2m1_decode(codes), e8m0_to_f32(s)[..., None])
    shp = xf.shape
    codes = codes.reshape(shp)
    return {
        "codes": codes,
        "scale": s.reshape(shp[:-1] + (K // block,)),
        "dequant": deq.reshape(shp),
        "v": np.where(bad[..., None], F32(np.nan), v).reshape(shp),
    }


# ----------------------------------------------------------------------------
# NVFP4
# ----------------------------------------------------------------------------
def quant_nvfp4(x, mode, block=16):
    xf = np.asarray(x).astype(F32)
    K = xf.shape[-1]
    assert K % block == 0
    xb = xf.reshape(-1, K // block, block)
    bad = ~np.all(np.isfinite(xb), axis=-1)
    bamax = np.max(np.abs(xb), axis=-1)
    assert bamax.dtype == F32
    bs = f32div(bamax, F32(6.0))
    ts = None
    if mode == "two_level":
        fin = np.abs(xf[np.isfinite(xf)])
        tamax = fin.max() if fin.size else F32(0.0)
        tamax = F32(tamax)
        ts = f32div(np.array([tamax], F32), F32(2688.0))
        scaled = f32div(bs, ts[0])
        sbyte = to_e4m3(scaled)
        total = f32mul(ts[0], e4m3_to_f32(sbyte))
    else:
        assert mode == "one_level"
        sbyte = to_e4m3(bs)
        total = e4m3_to_f32(sbyte)
    assert not np.any(np.isnan(total[~bad])), "NaN scale in a finite block"
    sbyte[bad] = 0x7F
    total = np.where(bad, F32(np.nan), total).astype(F32)
    v = f32div(xb, total[..., None])
    codes = e2m1_encode(v)
    codes[bad] = 0
    deq = f32mul(e2m1_decode(codes), total[..., None])
    shp = xf.shape
    out = {
        "codes": codes.reshape(shp),
        "scale": sbyte.reshape(shp[:-1] + (K // block,)),
        "dequant": deq.reshape(shp),
        "v": v.reshape(shp),
    }
    if ts is not None:
        out["tensor_scale"] = ts
    return out


# ----------------------------------------------------------------------------
# writing
# ----------------------------------------------------------------------------
CASES = []  # (name, fmt, mode, shape, blocks, ties, description)


ST_DTYPE = {np.dtype(F32): "F32", np.dtype(np.float16): "F16", np.dtype(BF16): "BF16",
            np.dtype(U8): "U8"}
TENSOR_ORDER = ["x", "data", "data_byte", "scale", "tensor_scale", "dequant"]


def save_safetensors(tensors, path, meta):
    """Deterministic safetensors writer (safetensors.numpy.save_file orders the
    metadata map randomly, so its bytes differ run to run). Layout: u64 LE
    header length, JSON header (metadata first, tensors in TENSOR_ORDER, compact,
    padded with spaces to a multiple of 8), then little-endian raw data.
    The result is read back with safetensors.numpy.load_file and compared."""
    header = {"__metadata__": dict(sorted(meta.items()))}
    blobs = []
    off = 0
    for name in TENSOR_ORDER:
        if name not in tensors:
            continue
        a = np.ascontiguousarray(tensors[name])
        assert a.dtype.byteorder in ("=", "<", "|")
        b = a.tobytes()
        header[name] = {"dtype": ST_DTYPE[a.dtype], "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    assert set(tensors) <= set(TENSOR_ORDER)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)
    back = safetensors.numpy.load_file(path)
    assert set(back) == set(tensors)
    for k, v in tensors.items():
        assert back[k].dtype == v.dtype and back[k].shape == v.shape and back[k].tobytes() == v.tobytes(), k
    with safetensors.safe_open(path, "np") as f:
        assert f.metadata() == meta


def write_case(name, fmt, mode, x, description, out):
    block = 32 if fmt == "mxfp4" else 16
    codes = out["codes"]
    assert codes.dtype == U8 and codes.max(initial=0) <= 15
    tensors = {
        "x": np.ascontiguousarray(x),
        "data": np.ascontiguousarray(pack(codes)),
        "data_byte": np.ascontiguousarray((codes << U8(2)).astype(U8)),
        "scale": np.ascontiguousarray(out["scale"].astype(U8)),
        "dequant": np.ascontiguousarray(out["dequant"].astype(F32)),
    }
    if "tensor_scale" in out:
        tensors["tensor_scale"] = np.ascontiguousarray(out["tensor_scale"].astype(F32))
    assert tensors["x"].dtype in (np.dtype(F32), np.dtype(BF16), np.dtype(np.float16))
    meta = {
        "format": fmt,
        "scale_mode": mode,
        "block": str(block),
        "description": description,
        "generator": "tests/vectors/quant/generate.py",
        "numpy_version": VERSIONS["numpy"],
        "ml_dtypes_version": VERSIONS["ml_dtypes"],
        "safetensors_version": VERSIONS["safetensors"],
    }
    path = os.path.join(OUT_DIR, name + ".safetensors")
    save_safetensors(tensors, path, meta)
    nblocks = int(np.prod(x.shape) // block)
    ties = count_ties(out["v"])
    CASES.append((name, fmt, mode, tuple(x.shape), str(x.dtype), nblocks, ties, description,
                  os.path.getsize(path)))
    print(f"{name:42s} shape={str(tuple(x.shape)):16s} dtype={str(x.dtype):8s} "
          f"blocks={nblocks:5d} ties={ties:5d} bytes={os.path.getsize(path)}")


def quant(fmt, mode, x):
    return quant_mxfp4(x, mode) if fmt == "mxfp4" else quant_nvfp4(x, mode)


# ----------------------------------------------------------------------------
# case builders
# ----------------------------------------------------------------------------
def case_random(fmt, mode, seed):
    rng = np.random.default_rng(seed)
    rows, K = 48, 128
    if fmt == "mxfp4" or mode == "one_level":
        if fmt == "mxfp4":
            ks = np.round(np.linspace(-140, 120, rows)).astype(int)
            desc = "Gaussian rows scaled by 2^k, k=-140..120 (f32 subnormal to huge)"
        else:
            ks = np.concatenate([np.round(np.linspace(-140, 120, rows // 2)),
                                 np.round(np.linspace(-12, 14, rows // 2))]).astype(int)
            desc = ("Gaussian rows scaled by 2^k: half k=-140..120, half k=-12..14 "
                    "(the useful E4M3 scale range)")
    else:
        ks = np.round(np.linspace(-30, 10, rows)).astype(int)
        desc = ("Gaussian rows scaled by 2^k, k=-30..10 (narrower so the tensor scale "
                "does not zero out every row; exercises both E4M3 clamps)")
    # per-row scale is exact power of two; product computed in f32
    g = rng.standard_normal((rows, K)).astype(F32)
    p = np.array([np.ldexp(1.0, int(k)) for k in ks], dtype=F32)  # 2^-140 is subnormal
    assert np.all(p > 0)
    x = f32mul(g, p[:, None])
    return x, desc


def case_random_half(fmt, mode, seed, dtype, shape):
    rng = np.random.default_rng(seed)
    n_rows = int(np.prod(shape[:-1]))
    K = shape[-1]
    g = rng.standard_normal((n_rows, K)).astype(F32)
    if dtype == "bf16":
        if fmt == "mxfp4" or mode == "one_level":
            ks = np.round(np.linspace(-140, 120, n_rows)).astype(int)
        else:
            ks = np.round(np.linspace(-20, 10, n_rows)).astype(int)
        if n_rows == 1:
            ks = np.array([2])
        p = np.array([np.ldexp(1.0, int(k)) for k in ks], dtype=F32)
        x = f32mul(g, p[:, None]).astype(BF16)
        desc = f"bfloat16 input, Gaussian rows scaled by 2^k (k from {ks.min()} to {ks.max()}), incl. bf16 subnormals"
    else:
        ks = np.round(np.linspace(-26, 12, n_rows)).astype(int)
        p = np.array([np.ldexp(1.0, int(k)) for k in ks], dtype=F32)
        x = np.clip(f32mul(g, p[:, None]), F32(-65504), F32(65504)).astype(np.float16)
        # force a few exact f16 subnormals, incl. min subnormal and -0
        flat = x.reshape(-1)
        sub = np.array([0x0001, 0x8001, 0x03FF, 0x83FF, 0x0200, 0x8000, 0x7BFF, 0xFBFF],
                       dtype=np.uint16).view(np.float16)
        flat[: len(sub)] = sub
        desc = f"float16 input, Gaussian rows scaled by 2^k (k from {ks.min()} to {ks.max()}), incl. f16 subnormals, +-65504, -0"
    x = x.reshape(shape)
    return x, desc


def _tie_targets(maxv, include_sat):
    """Target scaled values t (f32), split in classes."""
    mids = [m for m in MIDPOINTS if m <= maxv]
    t = []
    for m in mids:
        t += [m, -m]
    codes = [c for c in E2M1_MAGS if c <= maxv]
    for c in codes:
        t += [c, -c]
    return t, mids


def case_ties_mx(mode):
    """Each block: one amax element fixing the scale to S, then targets t*S."""
    # amax multiple (scaled amax value) and the largest reachable |v| per mode
    if mode == "floor":
        top = float(nextdown(8.0))          # amax in [4S, 8S)
        sat = [float(nextup(6.0)), 6.25, 6.5, 7.0, 7.5, 7.75]
    elif mode == "ceil":
        top = 4.0                           # amax in (2S, 4S]
        sat = []
    elif mode == "even":
        top = float(nextdown(7.0))          # amax in [3.5S, 7S)
        sat = [float(nextup(6.0)), 6.25, 6.5, 6.75]
    else:
        top = 6.0                           # amax/6 in (S/2, S]
        sat = []
    maxv = top
    S_list = [-127, -126, -100, -3, 0, 10, 100, 125]
    xs = []
    intended = []
    for k in S_list:
        S = F32(np.ldexp(1.0, k))
        exact = []
        for m in MIDPOINTS:
            if m <= maxv:
                exact += [m, -m]
        for c in E2M1_MAGS:
            if c <= maxv:
                exact += [c, -c]
        exact += sat + [-v for v in sat]
        near = []
        for m in MIDPOINTS:
            if m < maxv:
                mS = f32mul(F32(m), S)
                for sgn in (1, -1):
                    near += [F32(sgn) * nextup(mS), F32(sgn) * nextdown(mS)]
        vals = [f32mul(F32(t), S) for t in exact] + near
        if mode == "rceil" and k == -127:
            # descale of an amax slightly above 6*2^-127 still rounds (subnormal
            # product) to exactly 2^-127 -> s=0 -> scaled values just above 6.
            base = f32mul(F32(6.0), S)
            a = base
            while True:
                a2 = nextup(a)
                if bits(f32mul(a2, F32(1.0) / F32(6.0))) != 0x00400000:
                    break
                a = a2
            assert a != base
            vals += [nextup(base), -a, a]
        vals = [F32(v) for v in vals]
        amax_el = f32mul(F32(top), S)
        assert np.isfinite(amax_el)
        per = 31
        for i in range(0, len(vals), per):
            chunk = vals[i:i + per]
            blk = [amax_el if (i // per) % 2 == 0 else -amax_el] + chunk
            while len(blk) < 32:
                blk.append(F32(0.0))
            # if a saturation element exceeds the amax element, it becomes amax;
            # scale is asserted below
            xs.append(blk)
            intended.append(k)
    x = np.array(xs, dtype=F32)
    # shuffle within blocks deterministically (move amax element around)
    rng = np.random.default_rng(7)
    for row in x:
        rng.shuffle(row)
    out = quant_mxfp4(x, mode)
    want = np.array([k + 127 for k in intended], dtype=U8)
    assert np.array_equal(out["scale"][:, 0], want), (out["scale"][:, 0], want)
    if sat:
        sat_txt = f"saturation values 6<v<{top:.4g}"
    elif mode == "rceil":
        sat_txt = ("no 6<v region (v<=6) except amax slightly above 6*2^-127 whose subnormal "
                   "descale rounds to 2^-127 (v just above 6 -> code 7)")
    else:
        sat_txt = "no saturation region (v<=4 for ceil), midpoint 5.0 unreachable"
    return x, out, (f"every reachable E2M1 tie (+-midpoints), nextafter above/below each, every "
                    f"reachable code, {sat_txt}; scales 2^k for k in {S_list}")


def _e4m3_ulp(T):
    e = np.floor(np.log2(T))
    return 2.0 ** (max(e, -6) - 3)


def case_ties_nv(mode):
    T_list = [2.0 ** -6, 1.5 * 2.0 ** -6, 0.1015625, 1.0, 1.125, 1.875, 3.25, 13.0, 240.0, 448.0]
    m = -5
    two = mode == "two_level"
    P = F32(2.0 ** m) if two else F32(1.0)
    xs = []
    want = []
    for T in T_list:
        T = F32(T)
        assert F32(T.astype(E4M3)) == T
        tot = f32mul(T, P)
        exact = []
        for mm in MIDPOINTS:
            exact += [mm, -mm]
        for c in E2M1_MAGS:
            exact += [c, -c]
        vals = [f32mul(F32(t), tot) for t in exact]
        for t in exact[:14]:  # midpoints: nearest f32 whose quotient is off the tie
            base = f32mul(F32(t), tot)
            for d in (1, -1):
                a = base
                for _ in range(64):
                    a = np.nextafter(a, F32(d * np.inf), dtype=F32)
                    if f32div(a, tot) != F32(t):
                        break
                vals.append(a)
        # saturation: amax slightly above 6*T whose bs still rounds to T in E4M3
        ulp = F32(_e4m3_ulp(float(T)))
        sat = []
        for frac in (0.1, 0.3, 0.45):
            a = f32mul(f32mul(F32(6.0), (T + F32(frac) * ulp)), P)
            sat += [a, -a]
        sat.append(nextup(f32mul(f32mul(F32(6.0), T), P)))
        amax_el = f32mul(f32mul(F32(6.0), T), P)
        vals = [F32(v) for v in vals]
        per = 15
        chunks = [vals[i:i + per] for i in range(0, len(vals), per)]
        for j, ch in enumerate(chunks):
            blk = [amax_el if j % 2 == 0 else -amax_el] + ch
            while len(blk) < 16:
                blk.append(F32(0.0) if len(blk) % 2 else F32(-0.0))
            xs.append(blk)
            want.append(T)
        # saturation blocks (their amax is the saturating element)
        if two and T == F32(448.0):
            sat = []  # would raise the tensor amax; 448 clamp is covered by the range case
        for sv in sat:
            blk = [sv] + [f32mul(F32(t), tot) for t in (0.25, -0.75, 1.25, 5.0, -5.0, 6.0, -6.0,
                                                        3.5, -2.5, 0.5, 1.75, -1.75, 4.0, 0.0, -3.0)]
            xs.append(blk)
            want.append(T)
    if two:
        # one block providing the tensor amax = 2688 * 2^m so tensor_scale = 2^m exactly
        tam = f32mul(F32(2688.0), P)
        xs.append([tam] + [f32mul(F32(t), f32mul(F32(448.0), P)) for t in
                           (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -0.75, -1.25, -1.75, -2.5, -3.5, -5.0, 6.0)])
        want.append(F32(448.0))
    x = np.array(xs, dtype=F32)
    rng = np.random.default_rng(8)
    for row in x:
        rng.shuffle(row)
    out = quant_nvfp4(x, mode)
    got = e4m3_to_f32(out["scale"][:, 0])
    assert np.array_equal(got, np.array(want, dtype=F32)), (got, want)
    if two:
        assert out["tensor_scale"][0] == P
    return x, out, (f"every E2M1 tie (+-midpoints), nearest f32 above/below each tie, every code, "
                    f"saturation 6<v<=6.4 (amax above 6*scale but E4M3 scale still rounds down); "
                    f"E4M3 block scales {T_list}" + (f"; tensor_scale=2^{m} exactly" if two else ""))


def case_zeros(fmt, mode):
    B = 32 if fmt == "mxfp4" else 16
    blocks = []
    blocks.append([0.0] * B)
    blocks.append([-0.0] * B)
    blocks.append([0.0 if i % 3 else -0.0 for i in range(B)])
    singles = [1.0, -1.0, 7.0, -3e-39, 1e-45, -1e-45, 2.0 ** -127, float(FLT_MAX), -float(FLT_MAX),
               0.3, 6.0, -448.0 * 6, 1e-20, 5.0]
    for j, s in enumerate(singles):
        b = [0.0 if (i + j) % 2 else -0.0 for i in range(B)]
        b[(j * 7) % B] = s
        blocks.append(b)
    if fmt == "nvfp4" and mode == "two_level":
        desc = ("all-zero blocks (+0, -0, mixed) inside a nonzero tensor, and blocks with a single "
                "nonzero (various magnitudes incl. subnormal and +-FLT_MAX)")
    else:
        desc = "all-zero blocks (+0, -0, mixed) and blocks with a single nonzero at various magnitudes"
    x = np.array(blocks, dtype=F32)
    return x, desc


def case_allzero_tensor():
    x = np.array([[0.0] * 16, [-0.0] * 16, [0.0, -0.0] * 8], dtype=F32)
    return x, "whole tensor zero (+0/-0): one_level only (two_level would divide by tensor_scale=0)"


def case_boundaries(fmt, mode, seed):
    B = 32 if fmt == "mxfp4" else 16
    rng = np.random.default_rng(seed)
    ks = list(range(-149, -144)) + [-140, -135] + list(range(-130, -123)) + [-100] + \
        list(range(-2, 3)) + [60] + list(range(122, 128))
    amaxes = []
    for k in ks:
        p2 = np.ldexp(1.0, k)
        with np.errstate(over="ignore"):
            cand = [p2, float(nextup(F32(p2))), float(nextdown(F32(p2))),
                    1.75 * p2, float(nextdown(F32(1.75 * p2))), float(nextup(F32(1.75 * p2))),
                    (2.0 - 2.0 ** -23) * p2, 6.0 * p2, float(nextup(F32(6.0 * p2))),
                    float(nextdown(F32(6.0 * p2))), 3.0 * p2]
        for c in cand:
            with np.errstate(over="ignore"):
                cf = F32(c)
            if np.isfinite(cf) and cf > 0:
                amaxes.append(cf)
    amaxes += [FLT_MAX, nextdown(FLT_MAX), F32(np.ldexp(1.75, 127)), nextdown(F32(np.ldexp(1.75, 127))),
               F32(np.ldexp(1.0, -126)), F32(1e-45)]
    amaxes = sorted(set(float(a) for a in amaxes))
    blocks = []
    for a in amaxes:
        a = F32(a)
        # other elements: random fractions of amax (computed in f32), may be subnormal
        fr = rng.uniform(-1.0, 1.0, B - 1).astype(F32)
        others = f32mul(fr, a)
        pos = int(rng.integers(0, B))
        sign = F32(-1.0) if rng.integers(0, 2) else F32(1.0)
        blk = np.insert(others, pos, sign * a)
        blocks.append(blk)
    # mixed blocks: normal amax + subnormal elements
    for k in (-126, -125, -120, -110):
        a = F32(np.ldexp(1.0, k)) * F32(1.3)
        subs = rng.integers(1, 0x800000, B - 1).astype(U32) | (rng.integers(0, 2, B - 1).astype(U32) << 31)
        blk = np.concatenate([[a], subs.view(F32)])
        blocks.append(blk)
    # blocks entirely of random subnormals
    for _ in range(3):
        subs = rng.integers(1, 0x800000, B).astype(U32) | (rng.integers(0, 2, B).astype(U32) << 31)
        blocks.append(subs.view(F32))
    x = np.array(blocks, dtype=F32)
    return x, (f"one block per amax value: 2^k, nextup/nextdown(2^k), 1.75*2^k (+-1ulp), "
               f"(2-2^-23)*2^k, 6*2^k (+-1ulp), 3*2^k for k in {ks}, FLT_MAX and neighbours; "
               f"other elements are random fractions of amax (often f32 subnormal); plus blocks of "
               f"a normal amax with subnormal elements and blocks entirely subnormal")


def case_subnormal_tensor_scale():
    rng = np.random.default_rng(99)
    B = 16
    blocks = []
    for k in [-121, -122, -125, -128, -131, -134, -136, -140, -145]:
        a = F32(np.ldexp(1.0, k)) * F32(1.37)
        fr = rng.uniform(-1.0, 1.0, B - 1).astype(F32)
        blocks.append(np.concatenate([[a], f32mul(fr, a)]))
    x = np.array(blocks, dtype=F32)
    return x, ("two_level with a tiny tensor (amax ~1.37*2^-121): tensor_scale = amax/2688 is an f32 "
               "SUBNORMAL, so tensor_scale*E4M3 products round; blocks 2^-121..2^-145")


def case_nonfinite(fmt, mode, seed):
    B = 32 if fmt == "mxfp4" else 16
    rng = np.random.default_rng(seed)
    NaN_bits = [0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 0x7FE00000,
                0x7FC00001]
    blocks = []
    descr = []

    def base(scale=1.0):
        return f32mul(rng.standard_normal(B).astype(F32), F32(scale))

    blocks.append(base()); descr.append("finite")
    for nb in NaN_bits:
        b = base()
        b[int(rng.integers(0, B))] = np.array([nb], U32).view(F32)[0]
        blocks.append(b); descr.append(f"NaN 0x{nb:08X}")
    for inf in (np.inf, -np.inf):
        b = base()
        b[int(rng.integers(0, B))] = inf
        blocks.append(b); descr.append(f"{inf}")
    b = base(); b[0] = np.inf; b[B - 1] = np.nan
    blocks.append(b); descr.append("inf+NaN")
    b = np.full(B, np.nan, F32); blocks.append(b); descr.append("all NaN")
    b = np.full(B, -np.inf, F32); blocks.append(b); descr.append("all -inf")
    b = base(); b[1] = np.inf; b[2] = -np.inf
    blocks.append(b); descr.append("+inf,-inf")
    # finite neighbour blocks to check isolation
    blocks.append(base(1e3)); descr.append("finite")
    blocks.append(base(1e-3)); descr.append("finite")
    if fmt == "nvfp4" and mode == "two_level":
        # finite element of a NaN block is the tensor max: tensor_amax counts ALL finite elements
        b = base(); b[3] = F32(5000.0); b[4] = np.nan
        blocks.append(b); descr.append("NaN block whose finite 5000 is the tensor amax")
    x = np.array(blocks, dtype=F32)
    return x, ("NaN (payloads " + ", ".join(f"0x{b:08X}" for b in NaN_bits) +
               ") and +-Inf inside blocks, all-NaN / all-inf blocks, next to finite blocks; "
               "non-finite blocks: scale NaN byte, codes 0, dequant NaN" +
               ("; one NaN block holds a finite 5000.0 which IS the tensor amax (finite elements of "
                "non-finite blocks count)" if fmt == "nvfp4" and mode == "two_level" else ""))


def case_range_two_level():
    """Big dynamic range: block scales hit both E4M3 clamps, never E4M3 subnormals."""
    rng = np.random.default_rng(77)
    B = 16
    tamax = F32(3.7e5)
    blocks = []
    ratios = [1.0, 0.9999999, 0.999, 0.75, 0.5, 0.1, 2.0 ** -8, 2.0 ** -12, 2.0 ** -14,
              2.0 ** -14.8, 2.0 ** -14.807354922057604, 2.0 ** -14.81, 2.0 ** -15, 2.0 ** -16,
              2.0 ** -20, 2.0 ** -30, 1e-12]
    for r in ratios:
        a = f32mul(tamax, F32(r))
        fr = rng.uniform(-1.0, 1.0, B - 1).astype(F32)
        blocks.append(np.concatenate([[a], f32mul(fr, a)]))
    # additional tensors-level amax variants inside the same tensor would change tamax;
    # instead add blocks whose scaled value lands near 448 with rounding above 448
    for r in (0.99999994, 0.9999998, 0.99):
        a = f32mul(tamax, F32(r))
        blocks.append(np.concatenate([[-a], f32mul(rng.uniform(-1, 1, B - 1).astype(F32), a)]))
    x = np.array(blocks, dtype=F32)
    return x, ("two_level, tensor amax 3.7e5; block amax = tensor amax * r for r from 1 down to 1e-12: "
               "E4M3 block scales clamp at 448 (top) and at 2^-6 (bottom, byte 0x08); the E4M3 "
               "subnormal range (bytes with exponent field 0) is never produced")


README_HEAD = """# MXFP4 / NVFP4 quantization test vectors

Generated by `generate.py` (an independent Python implementation of the spec
below, written without looking at the Rust code; every FP4 / E4M3 / E8M0 / bf16
rounding is an `ml_dtypes` cast, all arithmetic is numpy float32). Do not edit
the `.safetensors` files or this README by hand: regenerate them.

Regenerate (deterministic: fixed seeds, hand-written safetensors writer with a
fixed header order, so the bytes are identical run to run):

    python3 -m venv /tmp/venv-vec
    /tmp/venv-vec/bin/pip install -r tests/vectors/quant/requirements.txt
    /tmp/venv-vec/bin/python tests/vectors/quant/generate.py
    /tmp/venv-vec/bin/python tests/vectors/quant/check_vectors.py

`generate.py` first asserts the ml_dtypes behaviour it relies on (ties to even,
saturation, NaN, E8M0 byte 0 = 2^-127, E4M3 overflow) and a few scale bytes
derived by hand from the spec, so a changed ml_dtypes fails loudly.
`check_vectors.py` re-reads every file (own parser, cross-checked with
`safetensors.numpy`) and re-verifies internal consistency.

## File layout

One file per case. Tensors:

| name | dtype | shape | meaning |
|---|---|---|---|
| `x` | F32, BF16 or F16 | `[..., K]` | input |
| `data` | U8 | `[..., K/2]` | packed codes: even element in the LOW nibble, odd in the high nibble |
| `data_byte` | U8 | `[..., K]` | one byte per element, code in bits 5..2 (`code << 2`) |
| `scale` | U8 | `[..., K/block]` | E8M0 (mxfp4) or E4M3 (nvfp4) scale byte per block |
| `tensor_scale` | F32 | `[1]` | nvfp4 `two_level` only |
| `dequant` | F32 | shape of `x` | dequantized values |

`__metadata__` (all strings): `format` (`mxfp4`/`nvfp4`), `scale_mode`
(`floor`/`ceil`/`even`/`rceil` or `two_level`/`one_level`), `block` (`32`/`16`),
`description`, `generator`, `numpy_version`, `ml_dtypes_version`,
`safetensors_version`. `cases.json` lists the same per-case facts.

Compare `dequant` bitwise, except NaN: compare NaN positions only (payload
unspecified).

## Semantics (as implemented)

Common: x is widened exactly to f32. Blocks are consecutive runs of `block`
elements along the last axis. E2M1 magnitudes for codes 0..7:
0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign. Element encoding of a scaled f32
value v: `np.clip(v, -6, 6).astype(float4_e2m1fn)` (round to nearest, ties to
even; sign kept, so -0.0 and small negatives give code 0x8). f32 mul/div are
numpy float32 ops (RNE, subnormals NOT flushed).

MXFP4 (block 32): amax = max |x| over the block (NaN if any NaN, +inf if any
inf). bits = f32 bits of amax, E = bits>>23 & 0xFF, M = bits & 0x7FFFFF.
- floor: u = E-129; ceil: u = E-129 + (M>0);
- even: bits' = (bits + 2^21) & 0xFF800000, u = (bits'>>23 & 0xFF) - 129;
- floor/ceil/even: u clamped to [-127, 128], s = u+127; s = 0xFF if amax is
  NaN/inf (even: if the ROUNDED amax is NaN/inf, or the original amax is — see
  "resolved ambiguities").
- rceil: descale = f32 mul(amax, f32(1/6) = 0x3E2AAAAB); b = its bits;
  s = 0xFF if descale non-finite, else E + (M > 0x400000 if E == 0 else M != 0).
- rcp = E8M0 value of byte (254 - s) mod 256 (byte 0 -> 2^-127 subnormal,
  255 -> NaN); v = f32 mul(x, rcp); code = e2m1(v).
- scale byte 0xFF: all codes 0, dequant all NaN.
- dequant = f32 mul(e2m1(code), E8M0 value of s).

NVFP4 (block 16), E4M3 = OCP float8_e4m3fn, to_e4m3(v) =
`np.clip(v, 2**-6, 448).astype(float8_e4m3fn)`:
- two_level: tensor_amax = max |x| over the FINITE elements of the whole tensor
  (finite elements inside NaN/inf blocks count); tensor_scale = f32 div
  (tensor_amax, 2688); bs = f32 div(block_amax, 6); byte = to_e4m3(f32 div(bs,
  tensor_scale)); total = f32 mul(tensor_scale, e4m3(byte)); v = f32 div(x,
  total).
- one_level: byte = to_e4m3(f32 div(block_amax, 6)); total = e4m3(byte);
  v = f32 div(x, total).
- a block with any NaN/inf: byte 0x7F, codes 0, dequant NaN.
- dequant = f32 mul(e2m1(code), total).
- Because of the 2^-6 clamp the E4M3 subnormal range is never produced (checked).

## Things a consumer must expect

- mxfp4 `ceil` and `rceil`: amax near FLT_MAX gets s = 253 (scale 2^126) and
  scaled value ~3.99 rounds to 4, so `dequant` = 4 * 2^126 = **+inf** (f32
  overflow) for a finite input (see `*_boundaries`, `*_zeros`).
- mxfp4 `even`: finite amax with significand >= 1.75 at exponent 127 (e.g.
  FLT_MAX, 1.75*2^127) rounds to +inf, so a FINITE block gets scale byte 0xFF,
  codes 0 and NaN dequant.
- mxfp4 `rceil`: with s = 0 and a descale that is an f32 subnormal, amax can be
  slightly above 6 * 2^-127 (descale rounds to exactly 2^-127), so scaled values
  just above 6 occur and saturate to code 7 (in `mxfp4_rceil_f32_ties`).
- `nvfp4_two_level_f32_subnormal_tensor_scale`: tensor_scale is an f32
  subnormal; no flush-to-zero anywhere.

## ml_dtypes behaviour (asserted in generate.py)

- `astype(float4_e2m1fn)` WITHOUT clipping saturates: 6.5, 7, 8, 1e30, +inf ->
  6 (code 7); -inf -> -6 (code 15). So the clip to [-6, 6] is a no-op for
  finite values, but the spec's clip is kept anyway.
- `astype(float4_e2m1fn)` of NaN gives code 0x8 (-0) and of -NaN (0xFFC00000)
  gives code 0x0 (+0): the sign is inverted and NaN becomes a zero. np.clip
  keeps NaN, so a NaN reaching the element encoder would produce these; the
  spec's "codes 0 in NaN-scale blocks" rule overrides it and no NaN reaches the
  encoder in a finite block.
- `astype(float8_e4m3fn)` does NOT saturate: 464 (tie) -> 448, anything above
  464, and +-inf, -> NaN (0x7F). Hence the clip to 448 matters.
- E8M0 byte 0 -> f32 bits 0x00400000 (2^-127), byte 255 -> NaN.
- `np.max` over a block with a NaN returned the default quiet NaN 0x7FC00000,
  not the payload of the input NaN.

## Resolved ambiguities

1. mxfp4 `even` with a NaN amax: the spec tests finiteness on the rounded amax.
   A NaN whose bits are >= 0x7FE00000 (e.g. 0x7FFFFFFF) plus 2^21 carries into
   the sign bit and masks to 0x80000000 = -0.0, which is "finite" and would
   give s = 0 with NaN elements. Implemented: s = 0xFF if the ORIGINAL amax or
   the rounded amax is non-finite. (np.max canonicalised the NaN here anyway;
   a Rust implementation that keeps the payload must apply this rule.)
   `mxfp4_even_f32_nonfinite` contains NaN 0x7FFFFFFF and 0xFFFFFFFF.
2. `count of ties` in the summary = elements whose scaled value |v| is exactly a
   midpoint 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0 (finite blocks).
3. Saturation 6 < v < 8 is reachable only for `floor` (v < 8) and `even`
   (v < 7); `ceil` keeps v <= 4 and `rceil` v <= 6 (except the subnormal
   descale case above), so their tie files contain no saturation elements.
   For nvfp4 saturation comes from E4M3 rounding the block scale down
   (6 < v <= ~6.375), and in one_level also from the 448 clamp.
4. nvfp4 random cases: one_level uses half the rows at 2^-140..2^120 and half
   at 2^-12..2^14; two_level uses 2^-30..2^10, because with a tensor-wide scale
   a 2^120 row would quantize every smaller row to zero.
5. nvfp4 two_level ties: tensor amax = 2688 * 2^-5 so tensor_scale = 2^-5
   exactly; "just above/below a tie" is the nearest f32 x whose quotient
   x/total differs from the tie (for non-power-of-two totals the first
   nextafter may divide back onto the tie).
6. Whole-tensor zero only for one_level (`nvfp4_one_level_f32_allzero`); for
   two_level zero blocks sit inside a nonzero tensor (byte 0x08, codes 0/0x8).

## Cases
"""


def write_readme():
    lines = [README_HEAD]
    lines.append("| file | shape | x dtype | blocks | ties | description |")
    lines.append("|---|---|---|---|---|---|")
    for c in CASES:
        lines.append(f"| `{c[0]}.safetensors` | {list(c[3])} | {c[4]} | {c[5]} | {c[6]} | {c[7]} |")
    total = sum(c[-1] for c in CASES)
    lines.append("")
    lines.append(f"{len(CASES)} files, {total} bytes. Generated with numpy {VERSIONS['numpy']}, "
                 f"ml_dtypes {VERSIONS['ml_dtypes']}, safetensors {VERSIONS['safetensors']}.")
    with open(os.path.join(OUT_DIR, "README.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


# ----------------------------------------------------------------------------
def main():
    quirks = self_check_ml_dtypes()
    self_check_spec_points()
    # remove stale outputs
    for f in os.listdir(OUT_DIR):
        if f.endswith(".safetensors"):
            os.remove(os.path.join(OUT_DIR, f))

    seed = 1000
    for mode in ("floor", "ceil", "even", "rceil"):
        fmt = "mxfp4"
        seed += 10
        x, d = case_random(fmt, mode, seed)
        write_case(f"mxfp4_{mode}_f32_random", fmt, mode, x, d, quant(fmt, mode, x))
        x, out, d = case_ties_mx(mode)
        write_case(f"mxfp4_{mode}_f32_ties", fmt, mode, x, d, out)
        x, d = case_zeros(fmt, mode)
        write_case(f"mxfp4_{mode}_f32_zeros", fmt, mode, x, d, quant(fmt, mode, x))
        x, d = case_boundaries(fmt, mode, seed + 1)
        write_case(f"mxfp4_{mode}_f32_boundaries", fmt, mode, x, d, quant(fmt, mode, x))
        x, d = case_nonfinite(fmt, mode, seed + 2)
        write_case(f"mxfp4_{mode}_f32_nonfinite", fmt, mode, x, d, quant(fmt, mode, x))
        x, d = case_random_half(fmt, mode, seed + 3, "bf16", (3, 5, 64))
        write_case(f"mxfp4_{mode}_bf16_random_3x5x64", fmt, mode, x, d, quant(fmt, mode, x))
        x, d = case_random_half(fmt, mode, seed + 4, "f16", (7, 32))
        write_case(f"mxfp4_{mode}_f16_random_7x32", fmt, mode, x, d, quant(fmt, mode, x))

    for mode in ("two_level", "one_level"):
        fmt = "nvfp4"
        seed += 10
        x, d = case_random(fmt, mode, seed)
        write_case(f"nvfp4_{mode}_f32_random", fmt, mode, x, d, quant(fmt, mode, x))
        x, out, d = case_ties_nv(mode)
        write_case(f"nvfp4_{mode}_f32_ties", fmt, mode, x, d, out)
        x, d = case_zeros(fmt, mode)
        write_case(f"nvfp4_{mode}_f32_zeros", fmt, mode, x, d, quant(fmt, mode, x))
        if mode == "one_level":
            x, d = case_allzero_tensor()
            write_case(f"nvfp4_{mode}_f32_allzero", fmt, mode, x, d, quant(fmt, mode, x))
        x, d = case_boundaries(fmt, mode, seed + 1)
        write_case(f"nvfp4_{mode}_f32_boundaries", fmt, mode, x, d, quant(fmt, mode, x))
        if mode == "two_level":
            x, d = case_subnormal_tensor_scale()
            write_case(f"nvfp4_{mode}_f32_subnormal_tensor_scale", fmt, mode, x, d, quant(fmt, mode, x))
            x, d = case_range_two_level()
            out = quant(fmt, mode, x)
            sc = out["scale"].reshape(-1)
            assert (sc == 0x7E).any() and (sc == 0x08).any(), "range case must hit both clamps"
            write_case(f"nvfp4_{mode}_f32_range", fmt, mode, x, d, out)
        x, d = case_nonfinite(fmt, mode, seed + 2)
        write_case(f"nvfp4_{mode}_f32_nonfinite", fmt, mode, x, d, quant(fmt, mode, x))
        x, d = case_random_half(fmt, mode, seed + 3, "bf16", (3, 5, 64))
        write_case(f"nvfp4_{mode}_bf16_random_3x5x64", fmt, mode, x, d, quant(fmt, mode, x))
        x, d = case_random_half(fmt, mode, seed + 4, "f16", (7, 16))
        write_case(f"nvfp4_{mode}_f16_random_7x16", fmt, mode, x, d, quant(fmt, mode, x))
        x, d = case_random_half(fmt, mode, seed + 5, "bf16", (1, 16))
        write_case(f"nvfp4_{mode}_bf16_random_1x16", fmt, mode, x, d, quant(fmt, mode, x))

    # every NVFP4 file: no E4M3 subnormal scale bytes (exponent field 0) ever
    # (checked again by check_vectors.py)
    total = sum(c[-1] for c in CASES)
    print(f"{len(CASES)} files, {total} bytes total")
    assert total < 1_500_000
    with open(os.path.join(OUT_DIR, "cases.json"), "w") as f:
        json.dump([{"file": c[0] + ".safetensors", "format": c[1], "scale_mode": c[2],
                    "shape": list(c[3]), "x_dtype": c[4], "blocks": c[5], "ties": c[6],
                    "description": c[7]} for c in CASES], f, indent=1)
        f.write("\n")
    write_readme()
    return quirks


if __name__ == "__main__":
    main()
