#!/usr/bin/env python3
"""fp4probe's tiled scale layouts against torch, on the device.

For each case, `fp4probe quantize` writes the tensor twice: with linear scales on the CPU
reference and with --scale-layout 128x4 or 8x4 on the CUDA kernels (--check-cpu: the GPU's
bytes, padding included, equal the CPU reference's). The linear scales are then laid out in
torch, the way the layouts' reference implementations do it, and must equal the kernels'
bytes:
  128x4: torchao's to_blocked (torchao/prototype/mx_formats/utils.py; torchao is not installed
         on the device, so its tensor operations are written out below): pad to
         (128*ceil(rows/128), 4*ceil(cols/4)) with zeros, view (rows/128, 128, cols/4, 4),
         permute (0, 2, 1, 3), reshape (-1, 4, 32, 4), transpose(1, 2), flatten.
  8x4:   FlashInfer's [numMTiles, numKTiles, 8, 4] (get_sf_out_offset_8x4): pad to
         (8*ceil(rows/8), 4*ceil(cols/4)), view (rows/8, 8, cols/4, 4), permute (0, 2, 1, 3),
         flatten.

  python3 tests/gpu/scale_layout_torch.py --fp4probe .dev/bin/fp4probe --workdir /tmp/qlayout

Exit status 0: every case equal; 1: a difference (printed); 3: fp4probe failed.
"""

import argparse
import os
import subprocess
import sys

import numpy as np
import torch
from safetensors.torch import load_file as load_torch

CASES = [
    # (shape, dtype, format flags, layout)
    ((333, 160), "float32", ["--format", "mxfp4"], "128x4"),
    ((333, 160), "bfloat16", ["--format", "nvfp4"], "128x4"),
    ((3, 45, 416), "float32", ["--format", "nvfp4", "--nvfp4-levels", "1"], "128x4"),
    ((333, 160), "bfloat16", ["--format", "nvfp4"], "8x4"),
    ((1000, 208), "float32", ["--format", "nvfp4", "--search"], "8x4"),
    ((1, 32), "float32", ["--format", "mxfp4"], "128x4"),
]


def tile(linear: torch.Tensor, layout: str) -> torch.Tensor:
    rows, cols = linear.shape
    tr = 128 if layout == "128x4" else 8
    pr, pc = -(-rows // tr) * tr, -(-cols // 4) * 4
    padded = torch.zeros((pr, pc), dtype=linear.dtype)
    padded[:rows, :cols] = linear
    blocks = padded.view(pr // tr, tr, pc // 4, 4).permute(0, 2, 1, 3)
    if layout == "8x4":
        return blocks.flatten()
    return blocks.reshape(-1, 4, 32, 4).transpose(1, 2).reshape(-1, 32, 16).flatten()


def save_input(path, shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    x *= np.exp2(rng.integers(-6, 7, size=shape[:-1] + (1,))).astype(np.float32)
    if dtype == "float32":
        np.save(path + ".npy", x)
        return path + ".npy"
    from safetensors.torch import save_file

    save_file({"x": torch.from_numpy(x).to(torch.bfloat16)}, path + ".safetensors")
    return path + ".safetensors"


def load_file(path):
    """Every tensor of a quantize output as numpy: F4 and F8 (no numpy dtype) as their raw bytes."""
    return {k: v.view(torch.uint8).numpy() if v.element_size() == 1 else v.numpy()
            for k, v in load_torch(path).items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fp4probe", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    bad = 0
    for i, (shape, dtype, flags, layout) in enumerate(CASES):
        name = f"{' '.join(flags)} {layout} {dtype} {list(shape)}"
        x = save_input(os.path.join(a.workdir, f"x{i}"), shape, dtype, 100 + i)
        outs = {}
        for lay, backend in [("linear", "cpu"), (layout, "cuda")]:
            out = os.path.join(a.workdir, f"q{i}.{lay}.safetensors")
            cmd = [a.fp4probe, "quantize", *flags, "--scale-layout", lay, "--backend", backend,
                   "--input", x, "--output", out]
            if backend == "cuda":
                cmd.append("--check-cpu")
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{name}: {' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")
                return 3
            outs[lay] = load_file(out)
        rows = int(np.prod(shape[:-1]))
        linear = torch.from_numpy(outs["linear"]["scale"].reshape(rows, -1).copy())
        want = tile(linear, layout).numpy()
        got = outs[layout]["scale"]
        same_data = np.array_equal(outs[layout]["data"], outs["linear"]["data"])
        if got.shape != want.shape or not np.array_equal(got, want) or not same_data:
            diff = np.flatnonzero(got != want)[:5] if got.shape == want.shape else "shape"
            print(f"{name}: DIFFERS from torch ({got.shape} vs {want.shape}; first bytes {diff}; "
                  f"data equal {same_data})")
            bad += 1
        else:
            print(f"{name}: GPU {layout} scales ({got.size} bytes) = torch layout of the linear "
                  f"scales ({rows} rows x {linear.shape[1]} blocks)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
