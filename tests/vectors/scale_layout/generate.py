#!/usr/bin/env python3
"""Scale-layout test vectors, independent of fp4probe's Rust code (plain Python 3, no packages).

The two tiled layouts are built here the way their reference implementations build them, as a
sequence of tensor reshapes and axis permutations on a zero-padded row-major scale matrix, not
from an offset formula:

- 128x4: torchao's `to_blocked` (torchao/prototype/mx_formats/utils.py), which cites cuBLAS's
  "1D block scaling factors layout": pad to (128*ceil(rows/128), 4*ceil(cols/4)), view as
  (row_tiles, 128, col_tiles, 4), permute (0, 2, 1, 3), reshape (-1, 4, 32, 4), transpose axes
  1 and 2, flatten.
- 8x4: FlashInfer's SWIZZLED_8x4 (get_sf_out_offset_8x4: "SF layout [numMTiles, numKTiles,
  8 (mTile), 4 (kTile)]"): pad to (8*ceil(rows/8), 4*ceil(cols/4)), view as (row_tiles, 8,
  col_tiles, 4), permute (0, 2, 1, 3), flatten.

Each case stores, for every byte of the laid-out scales, the row-major index r*cols + c of the
scale it holds, or -1 for padding. The generator first checks itself against the two offsets
NVIDIA's nvmath-python documentation gives for the cuBLAS layout (get_block_scale_offset, an
NVFP4 operand of 128x128: block (5, 2) at 82, block (5, 5) at 593).

Regenerate: python3 tests/vectors/scale_layout/generate.py  (writes layouts.json beside it;
deterministic).
"""

import json
import os


def permute(flat, shape, perm):
    """The row-major elements of `flat` (a contiguous tensor of `shape`) after permuting its
    axes by `perm` and making the result contiguous."""
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    out_shape = [shape[p] for p in perm]
    out_strides = [strides[p] for p in perm]
    out = []
    index = [0] * len(out_shape)
    for _ in range(len(flat)):
        out.append(flat[sum(i * s for i, s in zip(index, out_strides))])
        for axis in range(len(index) - 1, -1, -1):
            index[axis] += 1
            if index[axis] < out_shape[axis]:
                break
            index[axis] = 0
    return out


def padded(rows, cols, tile_rows):
    """Row-major (rows padded to tile_rows, cols to 4) holding r*cols + c, padding -1."""
    pr = -(-rows // tile_rows) * tile_rows
    pc = -(-cols // 4) * 4
    flat = [r * cols + c if r < rows and c < cols else -1 for r in range(pr) for c in range(pc)]
    return flat, pr, pc


def to_blocked(rows, cols):
    flat, pr, pc = padded(rows, cols, 128)
    blocks = permute(flat, (pr // 128, 128, pc // 4, 4), (0, 2, 1, 3))
    return permute(blocks, (pr // 128 * pc // 4, 4, 32, 4), (0, 2, 1, 3))


def swizzled_8x4(rows, cols):
    flat, pr, pc = padded(rows, cols, 8)
    return permute(flat, (pr // 8, 8, pc // 4, 4), (0, 2, 1, 3))


def self_check():
    # nvmath-python get_block_scale_offset example: NVFP4 a of shape (128, 128), 8 blocks a row.
    layout = to_blocked(128, 8)
    assert layout.index(5 * 8 + 2) == 82, layout.index(5 * 8 + 2)
    assert layout.index(5 * 8 + 5) == 593, layout.index(5 * 8 + 5)


def main():
    self_check()
    cases = []
    for layout, build, shapes in [
        ("128x4", to_blocked, [(1, 1), (5, 3), (128, 4), (130, 6), (33, 9)]),
        ("8x4", swizzled_8x4, [(1, 1), (5, 3), (8, 4), (13, 6), (17, 9)]),
    ]:
        for rows, cols in shapes:
            cases.append({"layout": layout, "rows": rows, "cols": cols, "source": build(rows, cols)})
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "layouts.json")
    with open(path, "w") as f:
        f.write("[\n")
        f.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in cases))
        f.write("\n]\n")
    print(f"{path}: {len(cases)} cases")


if __name__ == "__main__":
    main()
