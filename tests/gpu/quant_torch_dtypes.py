#!/usr/bin/env python3
"""PyTorch reads what `fp4probe quantize` writes, as its own FP4/FP8 dtypes, and gets the values
`fp4probe dequantize` gets, bit for bit.

For each input dtype (float32, bfloat16), format (MXFP4 floor, NVFP4 two- and one-level), shape
and backend (cuda, cpu): quantize a seeded input with fp4probe, load the file with
`safetensors.torch.load_file`, check that `data` is `torch.float4_e2m1fn_x2` [..., K/2] and `scale`
`torch.float8_e8m0fnu` / `torch.float8_e4m3fn` [..., K/block], dequantize with torch (the scales
through torch's own cast to float32; the codes through torch's cast when it has one for
float4_e2m1fn_x2, else through the E2M1 table of the OCP MX spec applied to the nibbles of the
float4_e2m1fn_x2 tensor's uint8 view — each cast is first tried in a child process, on the CPU
and the GPU, and the run prints what happened), and compare with `fp4probe
dequantize`: every element's float32 bits equal, NaN compared by position (its payload is not
specified). Also: the scales cast on the GPU equal the CPU cast, and the cuda and cpu backends
write the same tensor bytes.

Usage: python3 tests/gpu/quant_torch_dtypes.py --fp4probe BIN [--workdir DIR]
Exit status 0 when everything is equal, 1 on a mismatch, 2 when a command or a load fails.
"""

import argparse
import os
import subprocess
import sys

import safetensors
import safetensors.torch
import torch

FORMATS = {
    # name -> (fp4probe flags, block, scale dtype, two-level)
    "mxfp4": (["--format", "mxfp4", "--scale-mode", "floor"], 32, torch.float8_e8m0fnu, False),
    "nvfp4-two-level": (["--format", "nvfp4", "--nvfp4-levels", "2"], 16, torch.float8_e4m3fn, True),
    "nvfp4-one-level": (["--format", "nvfp4", "--nvfp4-levels", "1"], 16, torch.float8_e4m3fn, False),
}
IN_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
SHAPES = [(512, 2048), (3, 5, 64)]
# E2M1 values of codes 0..15 (OCP MX v1.0, section 5.3.3): bit 3 is the sign.
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def make_input(shape, seed):
    """Gaussian rows scaled by 2^k (k in -20..20), some all-zero and negative-zero blocks, a few
    NaN and infinities: many scale exponents, the zero-scale and NaN-scale rules."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float32)
    rows = x.reshape(-1, shape[-1])
    k = torch.randint(-20, 21, (rows.shape[0], 1), generator=g).to(torch.float32)
    rows *= torch.exp2(k)
    if rows.shape[0] > 8:
        rows[1, :64] = 0.0
        rows[2, 32:64] = -0.0
        rows[3, 5] = float("nan")
        rows[4, 17] = float("inf")
        rows[5, 40] = float("-inf")
    return x


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-1500:]}\n{p.stderr[-1500:]}")
    return p


# Run in a child process: on CUDA an unsupported cast can fail as a device-side assert, which
# leaves the process's CUDA context unusable.
CAST_PROBE = """
import sys, torch
dtype, dev = getattr(torch, sys.argv[1]), sys.argv[2]
x = torch.tensor([0x21, 0xf7, 0x00, 0x7f], dtype=torch.uint8).view(dtype).to(dev)
y = x.to(torch.float32)
if dev == "cuda":
    torch.cuda.synchronize()
print(y.cpu().tolist())
"""
CAST_DTYPES = ["float4_e2m1fn_x2", "float8_e8m0fnu", "float8_e4m3fn"]


def probe_casts():
    """{(dtype name, device): (works, what happened)} for torch's casts to float32."""
    out = {}
    for name in CAST_DTYPES:
        for dev in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):
            p = subprocess.run([sys.executable, "-c", CAST_PROBE, name, dev],
                               capture_output=True, text=True)
            lines = [l for l in (p.stdout + p.stderr).splitlines() if l.strip()]
            errors = [l for l in lines if "Error" in l or "error" in l]
            what = lines[-1] if p.returncode == 0 else (errors[-1] if errors else f"exit {p.returncode}")
            out[(name, dev)] = (p.returncode == 0, what[:160])
    return out


def decode_codes(data, k, torch_cast):
    """float4_e2m1fn_x2 [..., K/2] -> float32 [..., K]: torch's CPU cast when it has one, else
    the nibbles of the uint8 view (element 2i low, 2i+1 high) through the E2M1 table."""
    if torch_cast:
        return data.to(torch.float32), "torch's cast (cpu)"
    u8 = data.view(torch.uint8)
    codes = torch.stack([u8 & 0xF, u8 >> 4], dim=-1).reshape(*u8.shape[:-1], k)
    return torch.tensor(E2M1, dtype=torch.float32)[codes.long()], "E2M1 table on the uint8 view"


def compare(ours, theirs):
    """(elements, bit-equal, NaN at the same place, mismatches)."""
    a, b = ours.reshape(-1), theirs.reshape(-1)
    same_bits = a.view(torch.int32) == b.view(torch.int32)
    both_nan = torch.isnan(a) & torch.isnan(b)
    equal = same_bits | both_nan
    return a.numel(), int(same_bits.sum()), int((both_nan & ~same_bits).sum()), int((~equal).sum())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fp4probe", required=True)
    ap.add_argument("--workdir", default="/tmp/quant-torch-dtypes")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    print(f"torch {torch.__version__}, safetensors {safetensors.__version__}, "
          f"cuda {torch.cuda.is_available() and torch.cuda.get_device_name(0)}")
    casts = probe_casts()
    for (name, dev), (works, what) in casts.items():
        print(f"torch {name} -> float32 on {dev}: {'works: ' if works else 'FAILS: '}{what}")
    failed = broken = False
    code_paths = set()
    totals = {"elements": 0, "bit_equal": 0, "nan_same_place": 0, "mismatch": 0}
    hdr = (f"{'input':4} {'format':16} {'shape':12} {'backend':7} | {'data dtype, shape':34} "
           f"{'scale dtype':22} | elements bit-equal nan-pos mismatch | gpu-cast cuda=cpu")
    print(hdr)
    print("-" * len(hdr))
    for dname, dt in IN_DTYPES.items():
        for si, shape in enumerate(SHAPES):
            x = make_input(shape, 7 + si).to(dt)
            src = os.path.join(args.workdir, f"in-{dname}-{si}.safetensors")
            safetensors.torch.save_file({"x": x}, src)
            for fname, (flags, block, scale_dt, two_level) in FORMATS.items():
                loaded = {}
                for backend in ["cuda", "cpu"]:
                    tag = f"{dname}-{si}-{fname}-{backend}"
                    q = os.path.join(args.workdir, f"q-{tag}.safetensors")
                    deq = os.path.join(args.workdir, f"deq-{tag}.safetensors")
                    for f in (q, deq):
                        if os.path.exists(f):
                            os.remove(f)
                    shape_s = "x".join(map(str, shape))
                    try:
                        run([args.fp4probe, "quantize", *flags, "--backend", backend,
                             "--input", src, "--output", q])
                        run([args.fp4probe, "dequantize", "--input", q, "--output", deq])
                        t = safetensors.torch.load_file(q)
                        ref = safetensors.torch.load_file(deq)["x"]
                    except Exception as e:
                        print(f"{dname:4} {fname:16} {shape_s:12} {backend:7} | FAILED: {e}")
                        broken = True
                        continue
                    loaded[backend] = t
                    data, scale = t["data"], t["scale"]
                    k = shape[-1]
                    want_data = (torch.float4_e2m1fn_x2, tuple(shape[:-1]) + (k // 2,))
                    want_scale = (scale_dt, tuple(shape[:-1]) + (k // block,))
                    dtype_ok = ((data.dtype, tuple(data.shape)) == want_data
                                and (scale.dtype, tuple(scale.shape)) == want_scale
                                and (("tensor_scale" in t) == two_level))
                    codes, path = decode_codes(data, k, casts[("float4_e2m1fn_x2", "cpu")][0])
                    code_paths.add(path)
                    sf = scale.to(torch.float32)
                    if two_level:
                        ts = t["tensor_scale"]
                        if ts.dtype != torch.float32 or ts.numel() != 1:
                            dtype_ok = False
                        sf = ts.reshape(()) * sf  # the two scales' product, rounded to f32 first
                    mine = codes * sf.repeat_interleave(block, dim=-1)
                    n, eq, nan_pos, bad = compare(mine, ref)
                    gpu_ok = None  # the scales cast on the GPU, against the CPU cast
                    if casts.get((str(scale.dtype).replace("torch.", ""), "cuda"), (False,))[0]:
                        gpu_cast = scale.cuda().to(torch.float32).cpu()
                        gpu_ok = torch.equal(gpu_cast.view(torch.int32), scale.to(torch.float32).view(torch.int32))
                    for key, v in zip(totals, (n, eq, nan_pos, bad)):
                        totals[key] += v
                    same = "-"
                    if backend == "cpu" and "cuda" in loaded:
                        equal = all(
                            torch.equal(loaded["cuda"][name].view(torch.uint8), t[name].view(torch.uint8))
                            for name in ("data", "scale")
                        ) and all(
                            torch.equal(loaded["cuda"][n2], t[n2]) for n2 in t if n2 not in ("data", "scale")
                        )
                        same = "equal" if equal else "DIFFERS"
                        failed |= not equal
                    failed |= bad != 0 or not dtype_ok or gpu_ok is False
                    d_s = f"{str(data.dtype).replace('torch.', '')} {list(data.shape)}"
                    print(f"{dname:4} {fname:16} {shape_s:12} {backend:7} | {d_s:34} "
                          f"{str(scale.dtype).replace('torch.', ''):22} | {n:8} {eq:9} {nan_pos:7} {bad:8} | "
                          f"{ {True: 'equal', False: 'DIFFERS', None: 'not run'}[gpu_ok]:8} {same}"
                          + ("" if dtype_ok else "  DTYPE/SHAPE WRONG"))
    print(f"codes decoded by: {'; '.join(sorted(code_paths))}")
    print(f"total: {totals['elements']} elements, {totals['bit_equal']} bit-equal, "
          f"{totals['nan_same_place']} NaN at the same place (other payload), {totals['mismatch']} mismatches")
    if broken:
        print("RESULT: a command or a load failed")
        return 2
    print("RESULT: " + ("MISMATCH" if failed else "torch reads fp4probe's files and dequantizes them bit for bit as fp4probe does"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
