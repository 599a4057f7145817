#!/usr/bin/env python3
"""Summarize a wgmma body's timeline (ATTN_TIMELINE=1; kernels/attention/attn_wgmma_pipeline.cuh).

Input: the standard output of
  FP4PROBE_ATTN_DEFINES=ATTN_TIMELINE=1 fp4probe attention --bench --path wgmma-fp8 \
      --seqs S --head-dims 128 --repeats 1 --warmup 1
(or --path wgmma, the bf16 body), whose lines `TL fmt Sq causal cta role seg rb t0 t1 live m0..m5
w6 w7` hold, per CTA, warpgroup (role 0 the producer, 1.. the consumers) and segment, SM clock cycles from the CTA's start
(m0..m5, -1 where not reached) and two sums of waits (w6, w7). Consumers: m0 before the wait for
Q, m1 Q ready, m2 the first S issued, m3 the last P.V's turn taken, m4 the last P.V done, m5 O
stored; w6 cycles waiting for full stages, w7 for turns. Producer: m0 segment start, m1 its Work,
m2 Q widened (the bf16 body: decoded), m3 the first tile's copy issued (the bf16 body: its tile
decoded into the ring), m4 the last; w6 cycles waiting for empty stages.
Medians over all CTAs; the boundary is from a segment's last P.V turn to the next segment's first
S, per consumer warpgroup.
"""
import collections
import statistics as st
import sys


def main(path, mhz):
    rows = collections.defaultdict(list)
    for line in open(path):
        if line.startswith('TL '):
            v = list(map(int, line.split()[1:]))
            rows[tuple(v[:3])].append((v[3], v[4], v[5], v[6:10], v[10:]))
    names = {0: 'mxfp4', 1: 'nvfp4'}
    for key in sorted(rows):
        by = collections.defaultdict(dict)
        for cta, role, seg, work, m in rows[key]:
            by[(cta, role)][seg] = (work, m)
        ctas = sorted({c for c, _ in by})
        consumers = sorted({r for _, r in by if r > 0})
        ends, starts, per_tile, bnd, pv, store, qready, first = [], [], [], [], [], [], [], []
        full_w, turn_w, segs, p_work, p_q = [], [], [], [], []
        for c in ctas:
            end = 0
            for role in consumers:
                S = by[(c, role)]
                segs.append(len(S))
                starts.append(S[0][1][2] if 0 in S else 0)
                for s in sorted(S):
                    (rb, t0, t1, live), m = S[s]
                    end = max(end, m[5])
                    if live > 1 and m[2] > 0 and m[3] > 0:
                        per_tile.append((m[3] - m[2]) / (live - 1))
                    if m[3] > 0 and m[4] > 0:
                        pv.append(m[4] - m[3])
                    if m[4] > 0 and m[5] > 0:
                        store.append(m[5] - m[4])
                    if m[1] > 0 and m[2] > 0:
                        first.append(m[2] - m[1])
                    qready.append(m[1] - m[0])
                    full_w.append(m[6])
                    turn_w.append(m[7])
                    if s + 1 in S and S[s + 1][1][2] > 0 and m[3] > 0:
                        bnd.append(S[s + 1][1][2] - m[3])
            ends.append(end)
            for s, (work, m) in sorted(by.get((c, 0), {}).items()):
                p_work.append(m[1] - m[0])
                p_q.append(m[2] - m[1])
        med = lambda xs: f"{st.median(xs):.0f}" if xs else "-"
        fmt, sq, causal = key
        mean_end = st.mean(ends)
        print(f"{names.get(fmt, fmt)} S={sq} causal={bool(causal)}: {len(ctas)} CTAs, last end {max(ends)} cycles "
              f"({max(ends) / mhz:.1f} us at {mhz:.0f} MHz), mean {mean_end:.0f}, first {min(ends)}; "
              f"segments a warpgroup {st.median(segs):.0f} (max {max(segs)})")
        print(f"  consumer medians: a tile {med(per_tile)}, boundary {med(bnd)}, last P.V done {med(pv)}, "
              f"O store {med(store)}, wait for Q {med(qready)}, Q ready to first S {med(first)}, "
              f"full waits a segment {med(full_w)}, turn waits a segment {med(turn_w)}")
        print(f"  producer medians: its Work {med(p_work)}, Q widened {med(p_q)}")
        b = sum(bnd) / len(consumers) / len(ctas)
        print(f"  a CTA's boundaries {b:.0f} cycles = {100 * b / mean_end:.1f}% of its mean end; "
              f"first S at {st.mean(starts):.0f} = {100 * st.mean(starts) / mean_end:.1f}%")


if __name__ == '__main__':
    if len(sys.argv) < 2:
        sys.exit("usage: timeline.py TIMELINE.txt [SM MHz, default 1860]")
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 1860.0)
