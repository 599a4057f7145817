# Random e4m3 dot products through torch._scaled_mm (cuBLASLt FP8 GEMM), raw A, B, D saved,
# to compare with the CPU models of wgmma's FP8 accumulation.
import os, struct, sys, torch
out = os.environ["OUT"]
print("torch", torch.__version__, torch.cuda.get_device_name(0))
g = torch.Generator().manual_seed(1)
def rand_e4m3(rows, k):
    b = torch.randint(0, 256, (rows, k), generator=g, dtype=torch.int32)
    sign, exp, mant = b & 0x80, 3 + ((b >> 3) & 0xF) % 10, b & 7
    return (sign | (exp << 3) | mant).to(torch.uint8)
M = N = 256
s = torch.tensor(1.0, device="cuda")
blob = bytearray()
for K in (32, 128):
    A, B = rand_e4m3(M, K), rand_e4m3(N, K)
    # designed: D[0,0] = 1.5*1.5 + 2^-6*2^-7 (2.25 + 2^-13), the rest of row 0 / col 0 zero
    A[0] = 0; B[0] = 0
    A[0, 0] = 0x3C; B[0, 0] = 0x3C  # 1.5
    A[0, 1] = 0x08; B[0, 1] = 0x04  # 2^-6, 2^-7 (subnormal 4*2^-9)
    a = A.view(torch.float8_e4m3fn).cuda()
    b = B.view(torch.float8_e4m3fn).cuda().t()
    for fast in (True, False):
        try:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                d = torch._scaled_mm(a, b, scale_a=s, scale_b=s, out_dtype=torch.float32, use_fast_accum=fast)
                torch.cuda.synchronize()
            try:
                names = sorted({e.key for e in prof.key_averages() if not e.key.startswith("aten::")})
            except Exception as e:
                names = [f"(profiler: {e})"]
            print(f"K={K} fast={fast}: D[0,0]={d[0,0].item()!r} (2.25+2^-13={2.25+2**-13!r}); kernels: {names}")
            blob += struct.pack("<IIII", M, N, K, int(fast)) + A.numpy().tobytes() + B.numpy().tobytes() + d.cpu().numpy().tobytes()
        except Exception as e:
            print(f"K={K} fast={fast}: failed: {e}")
open(os.path.join(out, "fp8dot.bin"), "wb").write(bytes(blob))
print("wrote", len(blob), "bytes")
