#!/usr/bin/env python3
"""Instruction mix and stall samples of one kernel from an ncu source-page export.

Input: `ncu -i REPORT --page source --csv --print-source sass > source.csv` of a kernel whose
launch covered `--elements` score elements (B·H·Sq·Sk). For the warp-specialized attention
kernel the SASS splits at the producer's `SETMAXREG.DEALLOC` (the producer's code follows it,
the consumers' precedes it); each part's executed warp instructions are reported per score
element in thread instructions (warp instructions × 32 / elements), by opcode, with the warp
stall samples per opcode.

  python3 ncu_source_mix.py source.csv --elements 536870912 [--top 20]
"""

import argparse
import collections
import csv
import sys


def opcode(sass):
    words = sass.split()
    if not words:
        return "?"
    op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    return op.split(".")[0]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source_csv")
    ap.add_argument("--elements", type=int, required=True, help="score elements the launch computed")
    ap.add_argument("--top", type=int, default=20)
    a = ap.parse_args(argv)
    with open(a.source_csv, newline="") as fh:
        rows = list(csv.reader(fh))
    # The export starts with a "Kernel Name" line, then the header.
    start = next((i for i, r in enumerate(rows) if "Source" in r and "Instructions Executed" in r), None)
    if start is None:
        print(f"error: {a.source_csv}: no source-page header (Source, Instructions Executed)", file=sys.stderr)
        return 2
    hdr = rows[start]
    i_src, i_exec = hdr.index("Source"), hdr.index("Instructions Executed")
    i_stall = hdr.index("Warp Stall Sampling (All Samples)")
    seq = [(r[i_src].strip(), int(r[i_exec] or 0), int(r[i_stall] or 0)) for r in rows[start + 1:] if len(r) > i_stall]
    split = next((i for i, (s, _, _) in enumerate(seq) if "SETMAXREG.DEALLOC" in s), len(seq))
    parts = {"consumer warps": seq[:split], "producer warps": seq[split:]}
    per = 32.0 / a.elements
    for name, part in parts.items():
        if not part:
            continue
        ops, stalls = collections.Counter(), collections.Counter()
        for s, n, st in part:
            ops[opcode(s)] += n
            stalls[opcode(s)] += st
        total, total_st = sum(ops.values()), sum(stalls.values())
        print(f"## {name}: {total * per:.2f} thread instructions per score element, {total_st} stall samples")
        print("| opcode | per element | stall samples |")
        print("|:---|---:|---:|")
        for op, n in ops.most_common(a.top):
            print(f"| {op} | {n * per:.2f} | {stalls[op]} |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
