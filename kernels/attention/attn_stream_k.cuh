// Stream-K scheduling of the wgmma body (attn_wgmma.cuh): a persistent grid of `ctas` CTAs
// (one per multiprocessor) shares the launch's key tiles evenly, whatever their number.
//
// Work is counted in key tiles: item (bh, rb) is row block rb (BR query rows) of head bh, and
// it has row_block_tiles(rb) key tiles of BC keys (all of Sk, or with the causal mask the keys
// up to its last row). Items are numbered head-major (bh·rb_count + rb), their tiles laid end
// to end.
//   - Without the mask every item has the same tiles, and the first whole waves of items are
//     dealt out round robin (with a grid of one CTA per item, all of them) (CTA g runs items g, g + ctas, ...): the CTAs running at one time
//     hold consecutive items, so they read the K and V of few heads, which stay in L2 (at S =
//     16384 the K and V of all 32 heads do not fit).
//   - The rest (the tail items without the mask, all items with it) is cut evenly: CTA g
//     takes its tiles [g·n/ctas, (g+1)·n/ctas) of the tail's n. So no wave of CTAs is left
//     partly idle (a grid of one CTA per row block ran 704 CTAs of 192 rows at S = 4096,
//     H = 32: 5.3 waves on 132 SMs, the last one a third full), and causal row blocks of every
//     length are balanced too.
//   - With the mask a head's row blocks are laid out in pairs, shortest and longest
//     (rb_at: 0, R-1, 1, R-2, ...), so every CTA's range holds about as many segments as
//     tiles / mean row block. In the order 0, 1, ..., R-1 a range over short row blocks holds
//     up to three times the segments of one over long ones (S = 4096, 128-key tiles: 16
//     against 5), and each segment's start and end (its first S and last P·V alone, O's
//     store) idle the tensor cores: the pairs ran the FP8 path's causal S = 4096 12% faster on
//     the H200 (reports/sm_90/attention/experiments/causal-pairs; ATTN_CAUSAL_PAIRS=0 keeps
//     the row order, for that comparison).
//   - With the mask and `pair_waves` (the FP8 body's, where K and V exceed the L2:
//     attn_wgmma_fp8.cuh, PAIR_WAVES_MIN_KV_BYTES), where every pair has the same tiles (R
//     even, BR = BC, Sq = Sk), the first whole waves of pairs are dealt out round robin as the
//     unmasked row blocks are (CTA g runs pairs g, g + ctas, ..., each its two row blocks), and
//     only the rest is cut. The CTAs running at one time then hold the pairs of few heads, whose
//     K and V stay in L2 (cut evenly, the ranges of 132 CTAs cover all 32 heads at once: at
//     S = 16384 128 MiB of E4M3 K and V). Causal S = 16384 at d = 128 ran 2.3-11.9% faster on
//     the H200 (reports/sm_90/attention/experiments/fp8-head-waves).
//   - With the mask and `tickets` (the FP8 body's, where pairs are not dealt in waves and the
//     launch has at least DYNAMIC_MIN_ITEMS_PER_CTA row blocks a CTA), no item is cut: CTA g
//     runs item g, then each CTA draws the next item from a global counter as it starts a
//     segment, items in the order of the grid of one CTA per row block (the longest row blocks
//     of every head first). A CTA that starts late, or whose segments ran slow, takes fewer
//     items, the last items are the shortest, and no piece is added up in the workspace.
//
// A CTA's tail range cuts items into pieces. An item cut in pieces is finished by the last of
// its pieces to end (attn_wgmma.cuh: finish_split): every piece writes its unnormalized O and
// its row maxima and sums to the workspace, and the last one adds them up, scaled to the
// largest maximum, in piece order (the result does not depend on which piece ends last).
// src/attention/schedule.rs is the host's copy of this arithmetic (grid and workspace sizes,
// and its tests).
#pragma once

#ifndef ATTN_CAUSAL_PAIRS
#define ATTN_CAUSAL_PAIRS 1
#endif

namespace attn {

// One CTA's share of one item: key tiles [t0, t1) of the item's `tiles`, whose tile 0 is tile
// `item_first` of the launch.
struct Segment {
    u32 bh;
    int rb, pos, t0, t1, tiles;  // pos: the row block's place in its head's order (rb_at)
    u64 item_first;
    __device__ __forceinline__ bool whole() const { return t0 == 0 && t1 == tiles; }
};

// What the consumers are told of a segment (attn_wgmma.cuh: the producer writes it next to the
// segment's Q, so the consumers hold no schedule state): the segment, its item's index, and
// for a cut item the CTAs g0..g1 of its pieces and g0's workspace slot (the others' is 0: a
// later CTA's range starts after the item's first tile). tiles = 0: no more segments.
struct Work {
    u32 bh, item, g0, g1;
    int rb, t0, t1, tiles, slot0;
    __device__ __forceinline__ bool whole() const { return t0 == 0 && t1 == tiles; }
    __device__ __forceinline__ int slot(u32 g) const { return g == g0 ? slot0 : 0; }
};

// Fewest row blocks a CTA for the dynamic causal schedule: below it the whole items left for
// the last CTAs are long enough to leave the others idle, and cutting them pays.
constexpr u64 DYNAMIC_MIN_ITEMS_PER_CTA = 4;

struct Schedule {
    int Sq, Sk, causal, bc, rb_count, pair_waves;
    u32 bh_count, ctas;
    u64 head_tiles, total;
    // Items dealt out whole (a multiple of ctas, of 2·ctas with pair_waves; 0 with the causal
    // mask otherwise, unless every item is),
    // and the tail's first tile and length.
    u64 whole_items, tail0, tail_len;
    // The dynamic schedule's counters (global memory, left at 0 by every launch): [0] items
    // drawn after the first ctas, [1] CTAs retired.
    u32* tickets;
    int dynamic;

    // (A trivial type with init(), so it can live in shared memory.)
    __device__ void init(int Sq_, int Sk_, int causal_, int bc_, u32 bh_count_, u32 ctas_, int pair_waves_ = 0,
                         u32* tickets_ = nullptr) {
        Sq = Sq_, Sk = Sk_, causal = causal_, bc = bc_, rb_count = (Sq_ + BR - 1) / BR;
        bh_count = bh_count_, ctas = ctas_;
        head_tiles = 0;
        if (causal)
            for (int rb = 0; rb < rb_count; ++rb) head_tiles += row_block_tiles(rb);
        else
            head_tiles = (u64)rb_count * row_block_tiles(0);
        total = head_tiles * bh_count;
        // A grid of one CTA per item (the host's choice for launches of few waves, where cutting
        // costs more than the last wave's idle share) runs every item whole.
        const u64 items = this->items();
        pair_waves = pair_waves_ && causal && ATTN_CAUSAL_PAIRS && ctas != items && uniform_pairs();
        dynamic = tickets_ != nullptr && causal && ctas != items && !pair_waves &&
                  items >= DYNAMIC_MIN_ITEMS_PER_CTA * ctas;
        tickets = tickets_;
        const u64 pairs = items / 2;
        whole_items = ctas == items || dynamic ? items
                      : pair_waves            ? pairs / ctas * ctas * 2
                      : causal                ? 0
                                              : items / ctas * ctas;
        tail0 = whole_items == items ? total
                : pair_waves        ? whole_items / 2 * pair_tiles()
                                    : whole_items * row_block_tiles(0);
        tail_len = total - tail0;
    }
    // Tiles of a pair (row blocks p and R-1-p), and whether every pair of a head has as many
    // (an even number of row blocks, each pair's lengths adding up to the same).
    __device__ __forceinline__ u64 pair_tiles() const { return row_block_tiles(0) + row_block_tiles(rb_count - 1); }
    __device__ bool uniform_pairs() const {
        if (rb_count % 2 != 0) return false;
        for (int p = 1; p < rb_count / 2; ++p)
            if (row_block_tiles(p) + row_block_tiles(rb_count - 1 - p) != pair_tiles()) return false;
        return true;
    }
    __device__ __forceinline__ int row_block_tiles(int rb) const {
        return (row_block_key_end(rb, Sq, Sk, causal) + bc - 1) / bc;
    }
    // The row block at place p of a head's order in the tail: with the mask, pairs of the
    // shortest and the longest left (0, R-1, 1, R-2, ...); without it, rb = p.
    __device__ __forceinline__ int rb_at(int p) const {
        if (!causal || !ATTN_CAUSAL_PAIRS) return p;
        return p % 2 == 0 ? p / 2 : rb_count - 1 - p / 2;
    }
    // The first tile of CTA g's tail range (g = ctas: the tail's end).
    __device__ __forceinline__ u64 cta_start(u32 g) const { return tail0 + (u64)g * tail_len / ctas; }
    // The CTA whose tail range holds tile s: the largest g with cta_start(g) <= s.
    __device__ __forceinline__ u32 owner(u64 s) const { return (u32)(((s - tail0 + 1) * ctas - 1) / tail_len); }
    // The k-th item dealt out whole (item_first is only needed for cut items, and left 0).
    // Without the mask, item k (head-major). With it in a grid of one CTA per item (and in the
    // dynamic schedule), the longest row blocks of every head first: the hardware starts CTAs
    // in blockIdx order as multiprocessors free up, so the CTAs it starts last (or the items
    // drawn last) are the short ones (in head-major order they would hold the last heads'
    // longest row blocks, and the launch would wait for them:
    // reports/sm_90/attention/experiments/causal-grid-order). With pair_waves, item k is
    // head k / R's row block at place k % R of its order (items 2u and 2u + 1 are pair u).
    __device__ __forceinline__ Segment whole_item(u64 k) const {
        Segment sg;
        if (pair_waves) {
            sg.bh = (u32)(k / rb_count);
            sg.pos = (int)(k - (u64)sg.bh * rb_count);
            sg.rb = rb_at(sg.pos);
        } else if (causal) {
            sg.bh = (u32)(k % bh_count);
            sg.rb = sg.pos = rb_count - 1 - (int)(k / bh_count);
        } else {
            sg.bh = (u32)(k / rb_count);
            sg.rb = sg.pos = (int)(k - (u64)sg.bh * rb_count);
        }
        sg.tiles = row_block_tiles(sg.rb);
        sg.t0 = 0;
        sg.t1 = sg.tiles;
        sg.item_first = 0;
        return sg;
    }
    // The item holding tile s, as the segment that starts at s (t1 not yet clipped to a range).
    __device__ Segment locate(u64 s) const {
        Segment sg;
        sg.bh = (u32)(s / head_tiles);
        u64 r = s - (u64)sg.bh * head_tiles;
        if (causal) {
            sg.pos = 0;
            while (r >= (u64)row_block_tiles(rb_at(sg.pos))) r -= row_block_tiles(rb_at(sg.pos++));
        } else {
            sg.pos = (int)(r / row_block_tiles(0));
            r -= (u64)sg.pos * row_block_tiles(0);
        }
        sg.rb = rb_at(sg.pos);
        sg.tiles = row_block_tiles(sg.rb);
        sg.t0 = (int)r;
        sg.t1 = sg.tiles;
        sg.item_first = s - r;
        return sg;
    }
    // The segment after sg, which ends at its item's end: the next item's first tile.
    __device__ __forceinline__ Segment next(const Segment& sg) const {
        Segment n = sg;
        n.item_first = sg.item_first + sg.tiles;
        if (++n.pos == rb_count) n.pos = 0, ++n.bh;
        n.rb = rb_at(n.pos);
        n.tiles = row_block_tiles(n.rb);
        n.t0 = 0;
        n.t1 = n.tiles;
        return n;
    }
    // CTA g's segments in order, its whole items (with pair_waves, its pairs' row blocks), then
    // its tail range: start(), then next() until it returns false. In the dynamic schedule,
    // item g, then the items drawn: the caller draws a ticket as each segment starts and sets
    // it with set_drawn before the next call, and retires the CTA once next() returns false
    // (the atomics stay in the caller: in next_work, a call, they made ptxas compile the
    // producer's named barriers as divergent code, and the unmasked shapes ran 2-3% slower on
    // the H200).
    struct Cursor {
        u64 k, s, end;
        Segment sg;
        bool in_tail;
    };
    __device__ __forceinline__ void start(Cursor& c, u32 g) const {
        c.k = pair_waves ? 2 * (u64)g : g;
        c.s = cta_start(g);
        c.end = cta_start(g + 1);
        c.in_tail = false;
    }
    __device__ __forceinline__ bool next(Cursor& c, Segment& sg) const {
        if (dynamic) {
            if (c.k >= items()) return false;
            sg = whole_item(c.k);
            c.k = items();  // the end, unless a ticket is set
            return true;
        }
        if (c.k < whole_items) {
            sg = whole_item(c.k);
            // A pair's second row block next, then the next pair dealt to this CTA.
            c.k = !pair_waves ? c.k + ctas : c.k % 2 == 0 ? c.k + 1 : c.k - 1 + 2 * (u64)ctas;
            return true;
        }
        if (c.s >= c.end) return false;
        sg = c.in_tail ? next(c.sg) : locate(c.s);
        c.in_tail = true;
        sg.t1 = (int)min((u64)sg.tiles, sg.t0 + (c.end - c.s));
        c.s += sg.t1 - sg.t0;
        c.sg = sg;
        return true;
    }
    __device__ __forceinline__ u64 items() const { return (u64)rb_count * bh_count; }
    // A ticket for the item after the segment that starts (dynamic): the caller reads it at
    // the next segment, so the atomic's round trip overlaps this one.
    __device__ __forceinline__ u32 draw() const { return atomicAdd(tickets, 1u); }
    __device__ __forceinline__ void set_drawn(Cursor& c, u32 drawn) const { c.k = ctas + (u64)drawn; }
    // A CTA done drawing: the last to retire leaves both counters at 0 for the next launch
    // (every CTA's last draw has returned before it retires, so none comes after the reset).
    __device__ void retire() const {
        __threadfence();
        if (atomicAdd(tickets + 1, 1u) == ctas - 1) {
            atomicExch(tickets, 0u);
            atomicExch(tickets + 1, 0u);
        }
    }
    // Where piece g of a cut item keeps its partial result: 0 if the piece is the first segment
    // of g's tail range, 1 if its last (a cut item starts inside a range only at its last
    // segment).
    __device__ __forceinline__ int slot(u32 g, u64 item_first) const { return cta_start(g) < item_first ? 1 : 0; }
    // The consumers' description of segment sg.
    __device__ __forceinline__ Work work(const Segment& sg) const {
        Work wk;
        wk.bh = sg.bh;
        wk.item = sg.bh * (u32)rb_count + (u32)sg.rb;
        wk.rb = sg.rb, wk.t0 = sg.t0, wk.t1 = sg.t1, wk.tiles = sg.tiles;
        wk.g0 = wk.g1 = blockIdx.x;
        wk.slot0 = 0;
        if (!sg.whole()) {
            wk.g0 = owner(sg.item_first);
            wk.g1 = owner(sg.item_first + sg.tiles - 1);
            wk.slot0 = slot(wk.g0, sg.item_first);
        }
        return wk;
    }
};

}  // namespace attn
