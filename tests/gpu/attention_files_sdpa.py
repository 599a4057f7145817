#!/usr/bin/env python3
"""`fp4probe attention` on tensor files against PyTorch SDPA, on the device.

For each case, random Gaussian bf16 Q [B, Hq, Sq, D], K and V [B, Hkv, Sk, D] are saved with
torch as safetensors (one tensor a file), `fp4probe attention --q --k --v --output` runs the
kernel on them (--backend cuda, the kernel path it picks for this device, --out-dtype f32),
and O is compared with torch's scaled_dot_product_attention on the same bf16 values in f32
(TF32 off), grouped-query cases through repeat_interleave of K and V (what SDPA's enable_gqa
means), causal as SDPA's is_causal (top-left aligned, the rule fp4probe uses). One case is also
run without --out-dtype (O in bf16, the default for bf16 Q).

Cases: multi-head and grouped-query (Hq = 32, Hkv = 8) attention, causal and not, Sq != Sk
both ways, head_dim 64 and 128, in NVFP4 and MXFP4. The bar is the issue's: cosine >= 0.98
against f32 for NVFP4 on Gaussian inputs; MXFP4 (power-of-two scales over 32 elements) is
reported, not held to it.

  python3 tests/gpu/attention_files_sdpa.py --fp4probe .dev/bin/fp4probe --workdir /tmp/attn-files

Exit status 0: every NVFP4 case meets the bar; 1: one does not; 3: fp4probe failed.
"""

import argparse
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

# (B, Hq, Hkv, Sq, Sk, D, causal)
CASES = [
    (1, 32, 32, 1024, 1024, 128, False),
    (1, 32, 32, 1024, 1024, 128, True),
    (1, 32, 8, 1024, 1536, 128, False),
    (1, 32, 8, 1024, 1536, 128, True),
    (1, 32, 8, 1500, 700, 128, True),
    (1, 32, 32, 777, 1000, 64, True),
    (1, 32, 8, 777, 1000, 64, False),
    (1, 32, 8, 777, 1000, 64, True),
    (2, 8, 2, 300, 513, 64, True),
]
FORMATS = ["nvfp4", "mxfp4"]
NVFP4_FLOOR = 0.98


def sdpa_f32(q, k, v, causal):
    group = q.shape[1] // k.shape[1]
    k = k.float().repeat_interleave(group, dim=1)
    v = v.float().repeat_interleave(group, dim=1)
    return F.scaled_dot_product_attention(q.float(), k, v, is_causal=causal)


def cosine(a, b):
    a, b = a.double().flatten(), b.double().flatten()
    return float((a @ b) / (a.norm() * b.norm()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fp4probe", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| B | Hq | Hkv | Sq | Sk | D | causal | format | O dtype | cosine vs SDPA f32 | "
          "max abs err | fp4probe s | result |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    bad = 0
    for i, (b, hq, hkv, sq, sk, d, causal) in enumerate(CASES):
        g = torch.Generator().manual_seed(1000 + i)
        q = torch.randn(b, hq, sq, d, generator=g).to(torch.bfloat16)
        k = torch.randn(b, hkv, sk, d, generator=g).to(torch.bfloat16)
        v = torch.randn(b, hkv, sk, d, generator=g).to(torch.bfloat16)
        files = []
        for name, t in [("q", q), ("k", k), ("v", v)]:
            p = os.path.join(a.workdir, f"{name}{i}.safetensors")
            save_file({name: t.contiguous()}, p)
            files.append(p)
        want = sdpa_f32(q.cuda(), k.cuda(), v.cuda(), causal).cpu()
        runs = [(f, "f32") for f in FORMATS]
        if i == 0:
            runs.append(("nvfp4", None))  # the default for bf16 Q: O in bf16
        for fmt, out_dtype in runs:
            out = os.path.join(a.workdir, f"o{i}.{fmt}.{out_dtype or 'default'}.safetensors")
            cmd = [a.fp4probe, "attention", "--backend", "cuda", "--format", fmt,
                   "--q", files[0], "--k", files[1], "--v", files[2], "--output", out]
            if causal:
                cmd.append("--causal")
            if out_dtype:
                cmd += ["--out-dtype", out_dtype]
            t0 = time.time()
            r = subprocess.run(cmd, capture_output=True, text=True)
            secs = time.time() - t0
            if r.returncode != 0:
                print(f"case {i} {fmt}: {' '.join(cmd)} failed (rc {r.returncode}):\n"
                      f"{r.stdout}{r.stderr}")
                return 3
            o = load_file(out)["o"]
            assert o.shape == want.shape, (o.shape, want.shape)
            c = cosine(o, want)
            err = float((o.float() - want).abs().max())
            ok = fmt != "nvfp4" or c >= NVFP4_FLOOR
            bad += not ok
            verdict = ("pass" if ok else "FAIL") if fmt == "nvfp4" else "reported"
            print(f"| {b} | {hq} | {hkv} | {sq} | {sk} | {d} | {causal} | {fmt} | "
                  f"{str(o.dtype).replace('torch.', '')} | {c:.5f} | {err:.3e} | {secs:.1f} | "
                  f"{verdict} |")
    print(f"{bad} NVFP4 case(s) below cosine {NVFP4_FLOOR}" if bad else
          f"every NVFP4 case at cosine >= {NVFP4_FLOOR}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
