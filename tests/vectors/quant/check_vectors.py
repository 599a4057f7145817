#!/usr/bin/env python3
"""Re-read every generated vector file and re-verify its internal consistency.

Parses the safetensors container by hand (u64 LE header length, JSON header,
raw little-endian data) and cross-checks against safetensors.numpy.load_file.
Checks: tensor names/dtypes/shapes, metadata, data_byte == code << 2,
data == packed codes (even index low nibble), dequant == e2m1(code) * scale
(bit-exact, NaN positions equal), sign of every code == sign of x in finite
blocks, NaN-scale blocks have all-zero codes, non-finite input blocks get the
NaN scale byte, NVFP4 scale bytes are never E4M3 zero/subnormal or negative.
Exit status 1 on any failure.

Run:  python3 tests/vectors/quant/check_vectors.py
"""
import glob
import json
import os
import struct
import sys

import ml_dtypes
import numpy as np
import safetensors.numpy

F32 = np.float32
DIR = os.path.dirname(os.path.abspath(__file__))
DT = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype(ml_dtypes.bfloat16),
      "U8": np.dtype("u1")}


def read_st(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8:8 + n])
    meta = hdr.pop("__metadata__", {})
    body = raw[8 + n:]
    out = {}
    end = 0
    for name, info in hdr.items():
        a, b = info["data_offsets"]
        end = max(end, b)
        dt = DT[info["dtype"]]
        arr = np.frombuffer(body[a:b], dtype=dt).reshape(info["shape"])
        out[name] = (info["dtype"], arr)
    assert end == len(body), "trailing bytes"
    return meta, out


def same_bits(a, b):
    a = np.asarray(a, F32)
    b = np.asarray(b, F32)
    na, nb = np.isnan(a), np.isnan(b)
    return np.array_equal(na, nb) and np.array_equal(a.view(np.uint32)[~na], b.view(np.uint32)[~nb])


def check(path):
    errs = []
    meta, t = read_st(path)
    lib = safetensors.numpy.load_file(path)
    for k, (_, arr) in t.items():
        if lib[k].dtype != arr.dtype or lib[k].tobytes() != arr.tobytes():
            errs.append(f"{k}: hand parser and safetensors disagree")
    fmt, mode = meta.get("format"), meta.get("scale_mode")
    block = int(meta.get("block", "0"))
    for key in ("format", "scale_mode", "block", "description", "numpy_version",
                "ml_dtypes_version", "safetensors_version"):
        if key not in meta:
            errs.append(f"metadata {key} missing")
    if fmt == "mxfp4":
        ok = mode in ("floor", "ceil", "even", "rceil") and block == 32
    else:
        ok = fmt == "nvfp4" and mode in ("two_level", "one_level") and block == 16
    if not ok:
        return [f"bad format/mode/block {fmt}/{mode}/{block}"]
    want = {"x", "data", "data_byte", "scale", "dequant"} | ({"tensor_scale"} if mode == "two_level" else set())
    if set(t) != want:
        return [f"tensors {sorted(t)} != {sorted(want)}"]
    xdt, x = t["x"]
    if xdt not in ("F32", "BF16", "F16"):
        errs.append(f"x dtype {xdt}")
    shp = x.shape
    K = shp[-1]
    if K % block:
        return [f"last dim {K} not divisible by {block}"]
    for name, dt, s in (("data", "U8", shp[:-1] + (K // 2,)), ("data_byte", "U8", shp),
                        ("scale", "U8", shp[:-1] + (K // block,)), ("dequant", "F32", shp)):
        if t[name][0] != dt or t[name][1].shape != s:
            errs.append(f"{name}: {t[name][0]} {t[name][1].shape}, want {dt} {s}")
    if errs:
        return errs
    xf = x.astype(F32)
    db = t["data_byte"][1]
    if np.any(db & 0xC3):
        errs.append("data_byte has bits outside 5..2")
    codes = db >> 2
    data = t["data"][1]
    unpacked = np.empty(shp, np.uint8)
    unpacked[..., 0::2] = data & 0x0F
    unpacked[..., 1::2] = data >> 4
    if not np.array_equal(unpacked, codes):
        errs.append("data (packed) != data_byte codes")
    sc = t["scale"][1].reshape(-1)
    cb = codes.reshape(-1, block)
    xb = xf.reshape(-1, block)
    vals = cb.view(ml_dtypes.float4_e2m1fn).astype(F32)
    # e2m1 table sanity
    assert list(np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(F32)) == \
        [0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6]
    if fmt == "mxfp4":
        assert np.uint8(0).view(ml_dtypes.float8_e8m0fnu).astype(F32).view(np.uint32) == 0x00400000
        sv = sc.view(ml_dtypes.float8_e8m0fnu).astype(F32)
        nanscale = sc == 0xFF
        with np.errstate(all="ignore"):
            deq = np.multiply(vals, sv[:, None], dtype=F32)
    else:
        e4 = sc.view(ml_dtypes.float8_e4m3fn).astype(F32)
        nanscale = (sc & 0x7F) == 0x7F
        if np.any(sc[~nanscale] & 0x80) or np.any(((sc[~nanscale] >> 3) & 0xF) == 0):
            errs.append("NVFP4 scale byte negative or E4M3 zero/subnormal")
        if np.any(sc[nanscale] != 0x7F):
            errs.append("NaN scale byte is not 0x7F")
        if mode == "two_level":
            tdt, ts = t["tensor_scale"]
            if tdt != "F32" or ts.shape != (1,):
                errs.append("tensor_scale shape/dtype")
            total = np.multiply(ts.astype(F32)[0], e4, dtype=F32)
        else:
            total = e4
        with np.errstate(all="ignore"):
            deq = np.multiply(vals, total[:, None], dtype=F32)
    if not same_bits(deq.reshape(shp), t["dequant"][1]):
        errs.append("dequant != e2m1(code) * scale")
    if np.any(cb[nanscale] != 0):
        errs.append("NaN-scale block has nonzero codes")
    badx = ~np.all(np.isfinite(xb), axis=1)
    if np.any(badx & ~nanscale):
        errs.append("non-finite input block without NaN scale")
    if fmt == "nvfp4" and np.any(nanscale & ~badx):
        errs.append("finite NVFP4 block with NaN scale")
    fin = ~nanscale
    if not np.array_equal(cb[fin] >> 3, np.signbit(xb[fin]).astype(np.uint8)):
        errs.append("code sign != sign of x")
    if np.any(np.isnan(t["dequant"][1].reshape(-1, block)[fin])):
        errs.append("NaN dequant in a finite-scale block")
    return errs


def main():
    files = sorted(glob.glob(os.path.join(DIR, "*.safetensors")))
    bad = 0
    total = 0
    for f in files:
        total += os.path.getsize(f)
        e = check(f)
        status = "ok" if not e else "FAIL: " + "; ".join(e)
        bad += bool(e)
        print(f"{os.path.basename(f):50s} {status}")
    print(f"{len(files)} files, {total} bytes, {bad} failing")
    if not files or bad or total >= 1_500_000:
        sys.exit(1)


if __name__ == "__main__":
    main()
