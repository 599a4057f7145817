"""Cut the H200's FP8 dot products (tests/gpu/fp8_dot_scaled_mm.py's fp8dot.bin) down to the
fixture fp8_dot_h200.safetensors: the first ROWS rows of D for K = 32 and K = 128 (use_fast_accum
on; off gave the same bits), with the A rows and all of B they need. Python's standard library
only; tensors in name order, so the bytes are the same on every run.

    python3 tests/vectors/wgmma/extract.py fp8dot.bin tests/vectors/wgmma/fp8_dot_h200.safetensors
"""
import json, struct, sys

ROWS = 32
METADATA = {
    "device": "NVIDIA H200, driver 580.159.04",
    "source": "torch 2.11.0+cu130 torch._scaled_mm (cuBLASLt kernel nvjet_sm90_qqsss_64x8_128x16_1x2_h_bz_TNT), out_dtype float32, scales 1",
    "command": "python3 tests/gpu/fp8_dot_scaled_mm.py; python3 tests/vectors/wgmma/extract.py fp8dot.bin tests/vectors/wgmma/fp8_dot_h200.safetensors",
    "layout": "a_kK: e4m3 bytes [rows, K]; b_kK: e4m3 bytes [N, K] (B's columns, K contiguous); d_kK: f32 [rows, N], d[i][j] = sum_k a[i][k]*b[j][k]",
}


def records(blob):
    at = 0
    while at < len(blob):
        m, n, k, fast = struct.unpack_from("<IIII", blob, at)
        at += 16
        a = blob[at : at + m * k]
        at += m * k
        b = blob[at : at + n * k]
        at += n * k
        d = blob[at : at + 4 * m * n]
        at += 4 * m * n
        yield m, n, k, fast, a, b, d


def main(src, dst):
    tensors = {}
    for m, n, k, fast, a, b, d in records(open(src, "rb").read()):
        if not fast:
            continue
        tensors[f"a_k{k}"] = ("U8", [ROWS, k], a[: ROWS * k])
        tensors[f"b_k{k}"] = ("U8", [n, k], b)
        tensors[f"d_k{k}"] = ("F32", [ROWS, n], d[: ROWS * n * 4])
    header, offset, body = {"__metadata__": METADATA}, 0, b""
    for name in sorted(tensors):
        dtype, shape, data = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        body += data
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + body)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
