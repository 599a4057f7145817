// The wgmma body of attn_fp4.cu (ATTN_WGMMA), for sm_90a: the bf16 body's arithmetic
// (attn_bf16.cuh: FP4 decoded exactly to bf16, f32 accumulation, P requantized in V's block
// format) restructured for Hopper's asynchronous warpgroup MMA, as FlashAttention-3 does:
//   - one producer warpgroup loads the FP4 bytes of K and Vᵀ key tiles and decodes them to
//     bf16 in shared memory, STAGES tiles ahead, signalling full tiles through mbarriers
//     and waiting for empty ones at named barriers;
//   - two or three consumer warpgroups (ATTN_WG_CONSUMERS; 64 query rows each, BR = 128 or
//     192 per CTA; the host builds both and picks per launch) run wgmma.mma_async
//     m64n{BC}k16 for S = Q·Kᵀ (Q and K from shared memory) and m64n{D}k16 for O += P·V (P
//     from registers, the requantized S; Vᵀ from shared memory), with the online softmax and
//     P's requantization in between; with two, tile j's S and tile j-1's P·V are issued
//     together and P·V runs during tile j's softmax (ATTN_WG_OVERLAP); with three at D = 128
//     they are issued together too, and both waited for before the softmax. The warpgroups
//     issue their wgmma in turns (ATTN_WG_PINGPONG, below), so one warpgroup's products run
//     while the others compute P.
// The grid is persistent (attn_stream_k.cuh): one CTA per multiprocessor walks an even share
// of the launch's key tiles, row block after row block, the producer decoding each row
// block's Q into one of two Q buffers while the consumers finish the one before; a row block
// cut between two CTAs is finished by the later of them from both partial results.
// Head dimensions 64 and 128 (D = 256 does not fit the accumulators in registers; the host
// runs it on the bf16 body).
//
// Operand placement. The register fragments come from the generated m16n8k16 closed forms,
// as in attn_bf16.cuh: a wgmma m64nN accumulator is, per warp of the warpgroup (rows
// 16·warp..+15), N/8 m16n8 D tiles side by side, and a register A operand is per warp the
// m16n8k16 A fragment (PTX ISA, "Register Fragments" of wgmma); so S's accumulator registers
// are read with DLayout and turned into P's A registers with d_reg_for_a / d_tile_for_a,
// whose properties attn_bf16.cuh static_asserts. The shared-memory operands use wgmma's
// canonical K-major layout without swizzle: 8×16-byte core matrices (8 rows, 8 bf16 of k),
// adjacent along k at 128 bytes (the descriptor's leading byte offset), row groups at
// 16·(row length) bytes (its stride byte offset); smem_offset() is that layout.
//
// The decode (decode_word) turns one 32-bit word of 8 E2M1 codes into four bf16 pairs by
// shifts and masks alone, pairing code k with code k+4: within every group of 8 along k the
// stored order is 0 4 1 5 2 6 3 7. Q and K are both stored so (the d order of a dot product
// does not matter); Vᵀ's keys are, so K's rows are stored in the same order (key_of_slot):
// S column t is the score of key key_of_slot(t), P's k slot t multiplies V's key
// key_of_slot(t), and every P block (16 or 32 slots) is still a block of consecutive keys.

#pragma once

#include "attention/attn_wgmma_pipeline.cuh"
#include "attention/wgmma_bf16.cuh"

#define ATTN_BODY attn::attention_wgmma

namespace attn {
namespace wg {

// The key stored in slot t of a tile (0 4 1 5 2 6 3 7 within each 8: the order in which
// decode_word widens a word of 8 codes), and the slot of key κ.
FP4PROBE_HD constexpr int key_of_slot(int t) { return (t & ~7) | ((t & 7) >> 1) | ((t & 1) << 2); }
FP4PROBE_HD constexpr int slot_of_key(int k) { return (k & ~7) | ((k & 3) << 1) | ((k >> 2) & 1); }
FP4PROBE_HD constexpr bool slots_are_a_permutation() {
    for (int t = 0; t < 8; ++t)
        if (slot_of_key(key_of_slot(t)) != t || key_of_slot(t) / 8 != t / 8) return false;
    return true;
}
static_assert(slots_are_a_permutation(), "key slots");

// Keys per tile: the S accumulator (BC/2 registers) and O's (D/2) share the consumers'
// registers.
template <int D>
struct Geo {
    static_assert(D == 64 || D == 128, "the wgmma body runs head_dim 64 and 128");
    static constexpr int BC = D == 64 ? 128 : 64;
    static constexpr int Q_BYTES = BR * D * 2;
    static constexpr int K_BYTES = BC * D * 2, V_BYTES = D * BC * 2;
    static constexpr int STAGE_BYTES = K_BYTES + V_BYTES;
    // A row block's Q as stored (FP4 codes, then its scale bytes from the 4-byte word holding
    // the first: NVFP4's D/16 a row at most, and 4 bytes of alignment), prefetched with
    // cp.async a segment ahead into the Q buffer it will be decoded to: that buffer is free
    // while the segment before runs, so the staging costs no shared memory (a staging buffer
    // of its own measured slower, for a larger request alone; experiments/boundaries).
    static constexpr int QRAW_CODES = BR * (D / 2), QRAW_BYTES = QRAW_CODES + BR * (D / 16) + 16;
    static_assert(QRAW_BYTES <= Q_BYTES, "the staged Q fits the buffer it is decoded to");
    // The dynamic shared memory the host gives a CTA (src/attention/kernel.rs:
    // Variant::dynamic_smem); the kernel traps if given less.
    static constexpr int SMEM = 2 * Q_BYTES + STAGES * STAGE_BYTES;
};

// Byte offset of element (row, k) in a K-major, unswizzled tile of rows × COLS bf16.
template <int COLS>
__device__ __forceinline__ int smem_offset(int row, int k) {
    return (row / 8) * (COLS * 16) + (k / 8) * 128 + (row % 8) * 16 + (k % 8) * 2;
}
// The wgmma descriptor of a tile at shared address `addr` (k offset included) with rows of
// COLS bf16: leading byte offset 128 (next core matrix along k), stride byte offset COLS·16
// (next 8 rows), no swizzle.
template <int COLS>
__device__ __forceinline__ u64 smem_desc(u32 addr) {
    return (u64)((addr & 0x3ffffu) >> 4) | ((u64)(128 >> 4) << 16) | ((u64)((COLS * 16) >> 4) << 32);
}


// ---- FP4 → bf16 by shifts and masks ---------------------------------------------------
// E2M1 magnitude bits e1 e0 m placed at bf16 bits 8..6 (exponent field e, top mantissa bit
// m) read as (1 + m/2)·2^(e-127) for e ≥ 1 and m·2^-127 for e = 0: the code's value times
// 2^-126 in every case. Sign bit to bit 15. Pair k of word w holds codes k and k+4.
template <int K>
__device__ __forceinline__ u32 e2m1_pair_scaled_down(u32 w) {
    // Codes K and K+4 selected (those of pairs 2 and 3 first brought down to 0 and 1's
    // places), then one multiplication adds two copies shifted by 6 - 4k (magnitudes into
    // place) and 12 - 4k (signs into place): their bits do not overlap, so the sum is their OR,
    // and the mask keeps bits 6..8 and 15 of each half. Three instructions a pair, not four.
    constexpr int k = K & 1;
    const u32 x = K < 2 ? w : w >> 8;
    const u32 sel = x & (0x000f000fu << (4 * k));
    return (sel * ((1u << (6 - 4 * k)) + (1u << (12 - 4 * k)))) & 0x81c081c0u;
}

// The factors that undo 2^-126 and apply a block scale, both exact: NVFP4 (E4M3 in
// [2^-6, 448], normal) in one multiply by scale·2^126 / 2^7, which leaves every operand 2^-7
// too small (compensated in S's factor and O's scale: OPERAND_LOG2); MXFP4 (E8M0, any
// 2^-127..2^127 or NaN) in two, 2^126 and then the scale itself, as attn_bf16.cuh forms it.
template <int FMT>
struct WordScale {
    static constexpr int OPERAND_LOG2 = FMT == MX ? 0 : -7;
    u32 f;
    __device__ __forceinline__ explicit WordScale(u32 s) {
        if (FMT == MX) {
            f = scale_to_bf16x2<MX>(s);
        } else {
            const u32 h = ((s & 0x7fu) << 4) + ((120u + 119u) << 7);  // E4M3 rebias (120) and 2^119
            f = h | (h << 16);
        }
    }
    __device__ __forceinline__ u32 apply(u32 pair) const {
        if (FMT == MX) return bf16x2_mul(bf16x2_mul(pair, 0x7e807e80u), f);  // 2^126, then the scale
        return bf16x2_mul(pair, f);
    }
};

// 8 codes (one word) with their scale, stored as 4 pairs (16 bytes) at dst.
template <int FMT>
__device__ __forceinline__ void decode_word(u32 w, const WordScale<FMT>& sc, unsigned char* dst) {
    uint4 o;
    o.x = sc.apply(e2m1_pair_scaled_down<0>(w));
    o.y = sc.apply(e2m1_pair_scaled_down<1>(w));
    o.z = sc.apply(e2m1_pair_scaled_down<2>(w));
    o.w = sc.apply(e2m1_pair_scaled_down<3>(w));
    *reinterpret_cast<uint4*>(dst) = o;
}

// 32 codes (16 bytes along a row, from k0) and their scales (MXFP4 one byte, NVFP4 two) to
// row `row` of a K-major tile with COLS columns.
template <int FMT, int COLS>
__device__ __forceinline__ void decode_chunk(const Chunk& c, unsigned char* tile, int row, int k0) {
    const u32 w[4] = {c.bytes.x, c.bytes.y, c.bytes.z, c.bytes.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const WordScale<FMT> sc(FMT == MX ? c.scales : (c.scales >> (8 * (q / 2))) & 0xffu);
        decode_word<FMT>(w[q], sc, tile + smem_offset<COLS>(row, k0 + 8 * q));
    }
}

// ---- the producer ------------------------------------------------------------------------

// The FP4 chunks of one key tile a producer thread decodes: K chunk i is key i % BC, d from
// 32·(i / BC); Vᵀ chunk i is row d = i % D, keys from 32·(i / D). Consecutive threads take
// consecutive rows, so their 16-byte shared stores fill whole core matrices (no bank
// conflicts).
template <int D>
struct TileChunks {
    static constexpr int BC = Geo<D>::BC;
    static constexpr int KC = BC * (D / 32) / 128, VC = D * (BC / 32) / 128;
    static_assert(KC * 128 == BC * (D / 32) && VC * 128 == D * (BC / 32), "whole chunks per thread");
    Chunk k[KC], v[VC];
};

template <int D, int FMT>
__device__ __forceinline__ void fetch(TileChunks<D>& tc, const u8* k_data, const u8* k_scale, const u8* v_data,
                                      const u8* v_scale, int key0, int Sk, int Skp, int t) {
    constexpr int B = Blk<FMT>::n, BC = Geo<D>::BC;
    const Chunk zero = {{0u, 0u, 0u, 0u}, 0u};
#pragma unroll
    for (int c = 0; c < TileChunks<D>::KC; ++c) {
        const int i = t + 128 * c, key = key0 + i % BC, d0 = 32 * (i / BC);
        tc.k[c] = zero;
        if (key < Sk) {
            tc.k[c].bytes = ldg16(k_data + (u64)key * (D / 2) + d0 / 2);
            tc.k[c].scales = load_scales<FMT>(k_scale + (u64)key * (D / B) + d0 / B);
        }
    }
#pragma unroll
    for (int c = 0; c < TileChunks<D>::VC; ++c) {
        const int i = t + 128 * c, d = i % D, key = key0 + 32 * (i / D);
        tc.v[c] = zero;
        if (key < Skp) {
            tc.v[c].bytes = ldg16(v_data + (u64)d * (Skp / 2) + key / 2);
            tc.v[c].scales = load_scales<FMT>(v_scale + (u64)d * (Skp / B) + key / B);
        }
    }
}

template <int D, int FMT>
__device__ __forceinline__ void store(const TileChunks<D>& tc, unsigned char* stage, int t) {
    constexpr int BC = Geo<D>::BC;
    unsigned char* k_tile = stage;
    unsigned char* v_tile = stage + Geo<D>::K_BYTES;
#pragma unroll
    for (int c = 0; c < TileChunks<D>::KC; ++c) {
        const int i = t + 128 * c;
        decode_chunk<FMT, D>(tc.k[c], k_tile, slot_of_key(i % BC), 32 * (i / BC));
    }
#pragma unroll
    for (int c = 0; c < TileChunks<D>::VC; ++c) {
        const int i = t + 128 * c;
        decode_chunk<FMT, BC>(tc.v[c], v_tile, i % D, 32 * (i / D));
    }
}


// Row block wk's Q as stored, into the staging area at qraw (shared address), by cp.async:
// its rows' codes (rows past Sq zero-filled), then the scale bytes of its rows below Sq,
// which are contiguous, as 4-byte words from the one holding the first (nothing read past
// the scale tensor's end). Not waited for.
template <int D, int FMT>
__device__ __forceinline__ void prefetch_q(const Work& wk, const Operands& op, int Sq, u32 bh_count, u32 qraw, int t) {
    constexpr int B = Blk<FMT>::n, ROW = D / 2, SROW = D / B, PIECES = BR * ROW / 16;
    static_assert(PIECES % 128 == 0, "whole 16-byte pieces per thread");
    const int row0 = wk.rb * BR, rows = min(BR, Sq - row0);
    const u8* codes = op.q_data + (u64)wk.bh * Sq * ROW + (u64)row0 * ROW;
#pragma unroll
    for (int k = 0; k < PIECES / 128; ++k) {
        const int i = t + 128 * k, r = i / (ROW / 16);
        cp_async<16>(qraw + 16 * i, r < rows ? codes + 16 * (i % (ROW / 16)) + (u64)r * ROW : codes, r < rows ? 16 : 0);
    }
    // (Addresses, not offsets: the words are aligned whatever the tensor's own alignment.)
    const u64 base = (u64)op.q_scale, first = base + ((u64)wk.bh * Sq + row0) * SROW;
    const u64 word0 = first & ~(u64)3, end = first + (u64)rows * SROW, total = base + (u64)bh_count * Sq * SROW;
    for (int i = t; word0 + 4 * (u64)i < end; i += 128) {
        const u64 a = word0 + 4 * (u64)i;
        cp_async<4>(qraw + Geo<D>::QRAW_CODES + 4 * i, reinterpret_cast<const u8*>(a), (int)min((u64)4, total - a));
    }
    cp_async_commit();
}
// Where row block (bh, rb)'s first scale byte lies in its staged words.
template <int D, int FMT>
__device__ __forceinline__ int qraw_scale_offset(const Work& wk, const Operands& op, int Sq) {
    return (int)(((u64)op.q_scale + ((u64)wk.bh * Sq + wk.rb * BR) * (D / Blk<FMT>::n)) & 3);
}

// Whether the producer stages each row block's Q a segment ahead (prefetch_q): -1 (the
// default) where it measured faster on the H100, NVFP4 at d = 128 (+2 to +5%; MXFP4 and d = 64
// lost up to 3%, and S = 1024 up to 10%: experiments/full-barriers); 0 never, 1 always.
#ifndef ATTN_Q_AHEAD
#define ATTN_Q_AHEAD -1
#endif
template <int D, int FMT>
FP4PROBE_HD constexpr bool q_ahead() {
    return ATTN_Q_AHEAD < 0 ? FMT == NV && D == 128 : ATTN_Q_AHEAD != 0;
}

// The producer's walk over its CTA's segments (attn_stream_k.cuh): per segment, its Work and
// the item's Q rows decoded into one of two Q buffers (the consumers still read the other),
// then its key tiles through the ring, each fetched while the one before is stored.
// With q_ahead, the Work is formed a segment ahead and Q decoded from its buffer itself, where
// cp.async staged it during the segment before: the next segment's Work and Q are started
// after the segment's first STAGES tiles, once the consumers have released the other Q buffer.
// Q's global loads and the schedule's arithmetic were the producer's largest step at a segment
// start (about 5,600 cycles in a trace of one CTA on the H100), where it has no lead on the consumers.
template <int D, int FMT>
__device__ __forceinline__ void produce(int Sq, int Sk, int causal, u32 bh_count, unsigned char* q_tiles, Work* works,
                                        unsigned char* stages, FullBarriers* full, const Operands& op, int t) {
    constexpr int B = Blk<FMT>::n, BC = Geo<D>::BC, QW = 64 * (D / 32) / 128, QC = CONSUMERS * QW;
    constexpr bool AHEAD = q_ahead<D, FMT>();
    static_assert(QW * 128 == 64 * (D / 32), "whole Q chunks per thread");
    __shared__ Schedule sched;
    __shared__ Schedule::Cursor cursor;
    __shared__ Work ahead;  // with AHEAD, the next segment's Work, published in works[] when it starts
    const u32 q_tiles_addr = shared_addr(q_tiles);
    if (t == 0) {
        sched.init(Sq, Sk, causal, BC, bh_count, gridDim.x);
        sched.start(cursor, blockIdx.x);
        if (AHEAD) next_work(&sched, &cursor, &ahead);
    }
    if (AHEAD) {
        bar_sync(bar_producer(), 128);
        if (ahead.tiles > 0) prefetch_q<D, FMT>(ahead, op, Sq, bh_count, q_tiles_addr, t);  // to buffer 0
    }
    const int Skp = op.Skp;
    int ring = 0, seg = 0;
    TL(TlMarks tm;)
    for (;; ++seg) {
        TL(tl_reset(tm); tm.v[0] = tl_clk();)
        if (!AHEAD && seg >= 2) bar_sync(bar_q_empty(seg & 1), THREADS);  // (AHEAD: in the segment before)
        if (t == 0) {
            if (AHEAD)
                works[seg & 1] = ahead;
            else
                next_work(&sched, &cursor, &works[seg & 1]);
        }
        bar_sync(bar_producer(), 128);
        TL(tm.v[1] = tl_clk();)
        const Work sg = works[seg & 1];
        if (sg.tiles == 0) break;
        TL(tm.rb = sg.rb, tm.t0 = sg.t0, tm.t1 = sg.t1;)
        const HeadOffsets at = head_offsets<D, FMT>(sg.bh, Sq, Sk, Skp, op.kv_group);
        const u8 *k_data = op.k_data + at.k_data, *k_scale = op.k_scale + at.k_scale;
        const u8 *v_data = op.v_data + at.v_data, *v_scale = op.v_scale + at.v_scale;
        TileChunks<D> tc;
        fetch<D, FMT>(tc, k_data, k_scale, v_data, v_scale, sg.t0 * BC, Sk, Skp, t);
        // Q rows rb·BR.. (past Sq zero): loaded together with the first tile, or (AHEAD) read
        // from the staging area once every thread's copies are waited for and shared, all read
        // before any is overwritten (the second barrier). Chunk c of a thread is in consumer
        // w = c / QW's 64 rows: row i % 64, d from 32·(i / 64), i = t + 128·(c % QW): the same
        // few offsets for every w, so the compiler keeps them in registers (an index i % BR had
        // it spill six of each).
        // tq is t, opaque to the compiler: the Q offsets are recomputed per segment (a few
        // instructions) instead of being hoisted out of the segment loop and held across the
        // tile loop.
        unsigned char* q_tile = q_tiles + (seg & 1) * Geo<D>::Q_BYTES;
        if (AHEAD) {
            cp_async_wait_all();
            bar_sync(bar_producer(), 128);
        }
        int tq;
        asm volatile("mov.b32 %0, %1;" : "=r"(tq) : "r"(t));
        const int s_off = AHEAD ? qraw_scale_offset<D, FMT>(sg, op, Sq) : 0;
        Chunk qc[QC];
#pragma unroll
        for (int c = 0; c < QC; ++c) {
            const int i = tq + 128 * (c % QW), r = 64 * (c / QW) + i % 64, row = sg.rb * BR + r, d0 = 32 * (i / 64);
            qc[c] = {{0u, 0u, 0u, 0u}, 0u};
            if (row < Sq) {
                if (AHEAD) {
                    qc[c].bytes = *reinterpret_cast<const uint4*>(q_tile + r * (D / 2) + d0 / 2);
                    qc[c].scales = load_scales<FMT>(q_tile + Geo<D>::QRAW_CODES + s_off + r * (D / B) + d0 / B);
                } else {
                    qc[c].bytes = ldg16(op.q_data + at.q_data + (u64)row * (D / 2) + d0 / 2);
                    qc[c].scales = load_scales<FMT>(op.q_scale + at.q_scale + (u64)row * (D / B) + d0 / B);
                }
            }
        }
        if (AHEAD) bar_sync(bar_producer(), 128);
#pragma unroll
        for (int c = 0; c < QC; ++c) {
            const int i = tq + 128 * (c % QW);
            decode_chunk<FMT, D>(qc[c], q_tile + 64 * (c / QW) * D * 2, i % 64, 32 * (i / 64));
        }
        fence_async_smem();
        mbar_arrive(&full->q[seg & 1]);
        TL(tm.v[2] = tl_clk();)
        // Tile j from tc into the ring, once its stage is free.
        auto put_tile = [&]() {
            const int s = ring % STAGES;
            TL_SUM(6, if (ring >= STAGES) bar_sync(bar_empty(s), THREADS))
            store<D, FMT>(tc, stages + s * Geo<D>::STAGE_BYTES, t);
            fence_async_smem();
            mbar_arrive(&full->stage[s]);
            TL(if (tm.v[3] == 0) tm.v[3] = tl_clk();)
            ++ring;
        };
        if (!AHEAD) {
            for (int j = sg.t0; j < sg.t1; ++j) {
                put_tile();
                if (j + 1 < sg.t1) fetch<D, FMT>(tc, k_data, k_scale, v_data, v_scale, (j + 1) * BC, Sk, Skp, t);
            }
        } else {
            // After tile jp: the other Q buffer released (the segment before's consumers are
            // done with it), the next segment's Work, and its Q staged there. By then the
            // segment's first tiles are in the ring, so the producer would wait for a free
            // stage anyway (a CTA's first segment has no lead to spare). Between two tile
            // loops, not in one: next_work is a call, around which ptxas would spill the
            // loop's addresses.
            const int jp = min(sg.t0 + STAGES - 1, sg.t1 - 1);
            put_tile();
            for (int j = sg.t0 + 1; j <= jp; ++j) {
                fetch<D, FMT>(tc, k_data, k_scale, v_data, v_scale, j * BC, Sk, Skp, t);
                put_tile();
            }
            if (seg >= 1) bar_sync(bar_q_empty((seg + 1) & 1), THREADS);
            if (t == 0) next_work(&sched, &cursor, &ahead);
            bar_sync(bar_producer(), 128);
            if (ahead.tiles > 0)
                prefetch_q<D, FMT>(ahead, op, Sq, bh_count, q_tiles_addr + ((seg + 1) & 1) * Geo<D>::Q_BYTES, t);
            for (int j = jp + 1; j < sg.t1; ++j) {
                fetch<D, FMT>(tc, k_data, k_scale, v_data, v_scale, j * BC, Sk, Skp, t);
                put_tile();
            }
        }
        TL(tm.v[4] = tl_clk(); tl_keep(tm, 0, seg, t);)
    }
    // The end (the Work of no tiles, in slot seg & 1) told; take the consumers' last releases,
    // so no named barrier is left half-arrived.
    mbar_arrive(&full->q[seg & 1]);
    for (int r = max(ring - STAGES, 0); r < ring; ++r) bar_sync(bar_empty(r % STAGES), THREADS);
    if (seg >= 1) bar_sync(bar_q_empty((seg - 1) & 1), THREADS);
    TL(tl_end(seg, Sq, causal, FMT, t);)
}

// ---- the consumers -----------------------------------------------------------------------


// S of one key tile (the warpgroup's m64n{BC} accumulator; this warp's 16 rows) to P: scores
// in log2 units, masked where the tile reaches past Sk or the diagonal (EDGE), the running
// maxima and sums advanced, P requantized in blocks of B slots (B consecutive keys) per row
// as attn_bf16.cuh does (its exponent argument here one FMA, with P_SCALE folded in), and
// packed as the A registers of P·V's BC/16 k16 steps.
// alpha: the factor O must be rescaled by before this tile's P·V is added.
template <int D, int FMT, bool EDGE>
__device__ __forceinline__ void softmax_to_p_(const float (&sacc)[Wgmma<Geo<D>::BC>::regs], RowState& st, float c,
                                              int key0, int q0, int Sk, int causal, int lane,
                                              u32 (&a)[Geo<D>::BC / 16][L::kA_regs], float (&alpha)[2]) {
    constexpr int BC = Geo<D>::BC, NT = BC / L::kN;
    float p[NT][L::kD_regs];
    float tmax[2] = {NEG_INF, NEG_INF};
    // The raw scores: c > 0 and rounding is monotonic, so the row maximum of S·c is the row
    // maximum of S times c, and S·c - m + log2(P_SCALE) is one FMA per element (P_SCALE in the
    // exponent: a few ulps from exp2(S·c - m)·P_SCALE, as ex2 itself is from exp2).
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int r = 0; r < L::kD_regs; ++r) {
            float v = sacc[nt * L::kD_regs + r];
            if (EDGE) {
                const int row = q0 + L::d_row_formula(lane, r, 0);
                const int key = key0 + key_of_slot(nt * L::kN + L::d_col_formula(lane, r, 0));
                if (key >= Sk || (causal && key > row)) v = NEG_INF;
            }
            p[nt][r] = v;
        }
    // The tile's row maxima by a tree (a chain of fmaxf would serialize the tile).
    static_assert(d_half(0) == 0 && d_half(1) == 0 && d_half(2) == 1 && d_half(3) == 1, "D registers 0,1: row g");
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float m[NT];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) m[nt] = fmaxf(p[nt][2 * h], p[nt][2 * h + 1]);
#pragma unroll
        for (int w = 1; w < NT; w *= 2)
#pragma unroll
            for (int nt = 0; nt + w < NT; nt += 2 * w) m[nt] = fmaxf(m[nt], m[nt + w]);
        tmax[h] = __fmul_rn(m[0], c);
    }
    float m_use[2], neg_m[2];
    advance_row_max(tmax, st.m_run, alpha, m_use);
#pragma unroll
    for (int h = 0; h < 2; ++h) neg_m[h] = __fsub_rn(P_SCALE_LOG2, m_use[h]);

    float lsum[2];
    requantize_p<FMT, DLayout>(p, lsum, [&](float s, int h) { return ex2(__fmaf_rn(s, c, neg_m[h])); });
    advance_row_sum(lsum, st.l_run, alpha);

    // P's D tiles as A registers: k16 step kc = slots 16kc..+15 (Vᵀ's keys in the same slots).
#pragma unroll
    for (int kc = 0; kc < BC / 16; ++kc)
#pragma unroll
        for (int r = 0; r < L::kA_regs; ++r) {
            const int t0 = 2 * kc + d_tile_for_a(0, r, 0), t1 = 2 * kc + d_tile_for_a(0, r, 1);
            a[kc][r] = f32x2_to_bf16x2(p[t0][d_reg_for_a(0, r, 0)], p[t1][d_reg_for_a(0, r, 1)]);
        }
}

// The mask is compiled only into the edge tiles' copy: interior tiles (all but the last one or
// two of a row block) carry no per-element key test.
template <int D, int FMT>
__device__ __forceinline__ void softmax_to_p(const float (&sacc)[Wgmma<Geo<D>::BC>::regs], RowState& st, float c,
                                             bool edge, int key0, int q0, int Sk, int causal, int lane,
                                             u32 (&a)[Geo<D>::BC / 16][L::kA_regs], float (&alpha)[2]) {
    if (edge)
        softmax_to_p_<D, FMT, true>(sacc, st, c, key0, q0, Sk, causal, lane, a, alpha);
    else
        softmax_to_p_<D, FMT, false>(sacc, st, c, key0, q0, Sk, causal, lane, a, alpha);
}

// The descriptors of a tile's k16 steps: a tile of rows × COLS bf16 at `addr`, STEPS steps of
// two core matrices (256 bytes) along k. Formed and pinned before the chain's wgmma.fence:
// ptxas serializes a chain of wgmma when a register one of them reads is written between
// them.
// Only the start-address field (bits 0..13, the address / 16) differs between steps, and
// shared addresses stay below 256 KB, so step i's descriptor is step 0's plus 16·i: one add
// each instead of forming every descriptor from its address.
template <int COLS, int STEPS>
__device__ __forceinline__ void step_descs(u64 (&d)[STEPS], u32 addr) {
    const u64 d0 = smem_desc<COLS>(addr);
#pragma unroll
    for (int i = 0; i < STEPS; ++i) d[i] = d0 + (u64)(16 * i);
#pragma unroll
    for (int i = 0; i < STEPS; ++i) asm volatile("" : "+l"(d[i]));
}

// S = Q·Kᵀ for one tile, issued (not waited for): D/16 k16 steps.
template <int D>
__device__ __forceinline__ void issue_s(float (&sacc)[Wgmma<Geo<D>::BC>::regs], const u64 (&dq)[D / 16],
                                        const u64 (&dk)[D / 16]) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) Wgmma<Geo<D>::BC>::ss(sacc, dq[kk], dk[kk], kk);
    wgmma_commit();
}

// O += P·V for one tile, issued (not waited for): BC/16 k16 steps.
template <int D>
__device__ __forceinline__ void issue_pv(float (&o)[Wgmma<D>::regs], const u32 (&a)[Geo<D>::BC / 16][L::kA_regs],
                                         const u64 (&dv)[Geo<D>::BC / 16]) {
#pragma unroll
    for (int kc = 0; kc < Geo<D>::BC / 16; ++kc) Wgmma<D>::rs(o, a[kc], dv[kc], 1);
    wgmma_commit();
}

// A consumer warpgroup's work on one segment (key tiles t0..t1 of item (bh, rb), from ring
// position ring0), pipelined as FlashAttention-3's intra-warpgroup overlap: tile j's S = Q·Kᵀ
// and tile j-1's O += P·V are issued together; the softmax of tile j runs while the tensor
// cores finish P·V, then O is rescaled by tile j's alpha (O·α_j + P_j·V_j in the next round:
// the same sequence of operations as attn_bf16.cuh). Leaves the segment's unnormalized O and
// row state in o and st.
// A warpgroup computes only its live tiles: those holding a key one of its rows sees. They are
// the first `live` of the segment's (keys grow along it): all of them, none when its 64 rows
// all lie past Sq (the last row block of a head, 192 rows, often has 64 real ones), and with
// the causal mask not those wholly past its last row (two of a row block's last three tiles
// for warpgroup 0, one for warpgroup 1). Their P would be 0 and their maxima -inf: skipping
// them changes no value. The others it passes through (pass_through).
template <int D, int FMT>
__device__ __forceinline__ void consume(u32 q_addr, u32 st_addr, const FullBarriers* full, int ring0, const Work& sg, int Sq,
                                        int Sk, int causal, float c, int w, int t, float (&o)[Wgmma<D>::regs], RowState& st TL(, TlMarks& tm)) {
    constexpr int BC = Geo<D>::BC;
    using WS = Wgmma<BC>;
    using WO = Wgmma<D>;
    const int lane = t % 32, warp = t / 32;  // warp of the warpgroup: rows 16·warp..+15
    const int q_wg = sg.rb * BR + 64 * w, q0 = q_wg + 16 * warp;
    const int tiles = sg.t1 - sg.t0;
    // Tile i of the segment: key tile t0 + i, in ring stage (ring0 + i) % STAGES.
    auto stage = [&](int i) { return (ring0 + i) % STAGES; };
    auto k_addr = [&](int i) { return st_addr + stage(i) * Geo<D>::STAGE_BYTES; };
    auto key0 = [&](int i) { return (sg.t0 + i) * BC; };
    auto edge = [&](int i) { return key0(i) + BC > Sk || (causal && key0(i) + BC - 1 > q_wg); };
    const int q_last = min(q_wg + 63, Sq - 1);
    int live = q_wg < Sq ? tiles : 0;
    if (causal && live > 0) live = min(tiles, max(0, (q_last + 1 - key0(0) + BC - 1) / BC));
    TL(tm.live = live;)
    // P·V issued in a turn of its own, apart from the next tile's S (three warpgroups at D = 64).
    constexpr bool PV_APART = !ATTN_WG_OVERLAP && D == 64;

    st = RowState();
#pragma unroll
    for (int i = 0; i < WO::regs; ++i) o[i] = 0.0f;
    float sacc[WS::regs], alpha[2];

    u32 a[BC / 16][L::kA_regs];

    u64 dq[D / 16], dk[D / 16], dv[BC / 16];
    step_descs<D>(dq, q_addr);
    // Tile i's stage filled (the wait traced), and for a live tile its K descriptors formed.
    auto await_full = [&](int i) { TL_SUM(6, mbar_wait(&full->stage[stage(i)], (ring0 + i) / STAGES)) };
    auto take = [&]() { TL_SUM(7, turn_take(w)) };
    auto await_tile = [&](int i) {
        await_full(i);
        step_descs<D>(dk, k_addr(i));
    };
    // P·V of tile i (P in p_in) on its own, waited for; tile i's stage released.
    auto pv_alone = [&](int i, u32(&p_in)[BC / 16][L::kA_regs]) {
        step_descs<BC>(dv, k_addr(i) + Geo<D>::K_BYTES);
        take();
        wgmma_fence();
        issue_pv<D>(o, p_in, dv);
        turn_pass(w);
        wgmma_wait<0>();
        fence_regs(o);
        bar_arrive(bar_empty(stage(i)), THREADS);
    };
    // Tiles from.. (none of them live): their stages awaited and released, their turns taken and
    // passed where the full loop takes them (at D = 64 with three warpgroups, two a tile: P·V's
    // of the tile before, then S's), and the last tile's P·V turn. A turn must not be taken
    // before a stage's wait that the loop takes after it: the warpgroup before this one passes
    // that turn only after the wait, which needs every consumer there.
    auto pass_through = [&](int from) {
        for (int i = from; i < tiles; ++i) {
            if (PV_APART && i > from) {
                take();
                turn_pass(w);
            }
            await_full(i);
            take();
            turn_pass(w);
            bar_arrive(bar_empty(stage(i)), THREADS);
        }
        take();
        turn_pass(w);
    };
    if (live == 0) {
        pass_through(0);
        return;
    }
    await_tile(0);
    take();
    TL(tm.v[2] = tl_clk();)
    wgmma_fence();
    issue_s<D>(sacc, dq, dk);
    turn_pass(w);
    wgmma_wait<0>();
    fence_regs(sacc);
    softmax_to_p<D, FMT>(sacc, st, c, edge(0), key0(0), q0, Sk, causal, lane, a, alpha);  // alpha = 0: O is 0

    // O·alpha, only when some row of the warp has a new maximum (rescale_o's rule, for the
    // wgmma accumulator's flat register list).
    auto rescale = [&]() {
        if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
            for (int i = 0; i < WO::regs; ++i) o[i] = __fmul_rn(o[i], alpha[d_half(i % L::kD_regs)]);
        }
    };
    // One round: S of tile i and P·V of tile i-1 (P in p_in) issued together, tile i's P into
    // p_out. The loop runs rounds in pairs with the two P buffers swapped, so no P register is
    // copied: a copy into the buffer an in-flight wgmma reads would make ptxas serialize.
    auto round = [&](int i, u32(&p_in)[BC / 16][L::kA_regs], u32(&p_out)[BC / 16][L::kA_regs]) {
        step_descs<BC>(dv, k_addr(i - 1) + Geo<D>::K_BYTES);
        await_tile(i);
        take();
        wgmma_fence();
        issue_s<D>(sacc, dq, dk);
        issue_pv<D>(o, p_in, dv);
        turn_pass(w);
        wgmma_wait<1>();  // S of tile i; P·V of tile i-1 may still run
        fence_regs(sacc);
        softmax_to_p<D, FMT>(sacc, st, c, edge(i), key0(i), q0, Sk, causal, lane, p_out, alpha);
        wgmma_wait<0>();
        fence_regs(o);
        fence_regs(p_in);
        bar_arrive(bar_empty(stage(i - 1)), THREADS);
        rescale();
    };
    // The last live tile's P·V (P in p_in), and the tiles past it. Where the loop would issue it
    // together with the next tile's S, it is issued in that tile's turn, after that tile's wait.
    auto finish = [&](u32(&p_in)[BC / 16][L::kA_regs]) {
        const int n = live;
        const bool in_next_turn = n < tiles && !PV_APART;
        step_descs<BC>(dv, k_addr(n - 1) + Geo<D>::K_BYTES);
        if (in_next_turn) await_full(n);
        take();
        TL(tm.v[3] = tl_clk();)
        wgmma_fence();
        issue_pv<D>(o, p_in, dv);
        turn_pass(w);
        wgmma_wait<0>();
        TL(tm.v[4] = tl_clk();)
        fence_regs(o);
        bar_arrive(bar_empty(stage(n - 1)), THREADS);
        if (in_next_turn) bar_arrive(bar_empty(stage(n)), THREADS);
        if (n < tiles) pass_through(in_next_turn ? n + 1 : n);
    };
#if !ATTN_WG_OVERLAP
    // Without the overlap (three consumer warpgroups have registers for one P buffer only):
    // at D = 128, tile i-1's P·V and tile i's S issued together (one turn) and both waited for
    // before tile i's softmax; at D = 64 (S's accumulator twice as large) P and S do not fit in
    // the registers together (ptxas serializes the wgmma), so P·V is waited for first. The
    // other warpgroups keep the tensor cores busy meanwhile.
    for (int i = 1; i < live; ++i) {
        if (PV_APART) pv_alone(i - 1, a);
        step_descs<BC>(dv, k_addr(i - 1) + Geo<D>::K_BYTES);
        await_tile(i);
        take();
        wgmma_fence();
        if (!PV_APART) issue_pv<D>(o, a, dv);
        issue_s<D>(sacc, dq, dk);
        turn_pass(w);
        wgmma_wait<0>();
        fence_regs(o);
        fence_regs(sacc);
        if (!PV_APART) {
            fence_regs(a);
            bar_arrive(bar_empty(stage(i - 1)), THREADS);
        }
        softmax_to_p<D, FMT>(sacc, st, c, edge(i), key0(i), q0, Sk, causal, lane, a, alpha);
        rescale();
    }
    finish(a);
#else
    u32 a2[BC / 16][L::kA_regs];
    int i = 1;
    for (; i + 1 < live; i += 2) {
        round(i, a, a2);
        round(i + 1, a2, a);
    }
    if (i < live) {
        round(i, a, a2);
        finish(a2);
    } else {
        finish(a);
    }
#endif
}

}  // namespace wg

// The kernel: a persistent CTA (blockIdx.x of gridDim.x) walks its stream-K segments.
template <int D, int FMT>
__device__ void attention_wgmma(const u8* __restrict__ q_data, const u8* __restrict__ q_scale,
                                const u8* __restrict__ k_data, const u8* __restrict__ k_scale,
                                const u8* __restrict__ v_data, const u8* __restrict__ v_scale, float* __restrict__ out,
                                int Sq, int Sk, int Skp, int causal, const float* ts, float c0, u32 bh_count,
                                u32* counters, float* partials, u32 kv_group) {
    using namespace wg;
    constexpr float OPERAND = WordScale<FMT>::OPERAND_LOG2 == 0 ? 1.0f : 128.0f;  // 2^-OPERAND_LOG2
    extern __shared__ __align__(128) unsigned char smem[];
    unsigned dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    if (dyn < (unsigned)Geo<D>::SMEM) __trap();  // the host's size must match Geo<D>::SMEM
    unsigned char* q_tiles = smem;  // two, one per segment in flight
    unsigned char* stages = smem + 2 * Geo<D>::Q_BYTES;
    __shared__ Work works[2];  // the segment of each Q buffer
    __shared__ FullBarriers full;
    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) mbar_init(&full.stage[s], 128);
        mbar_init(&full.q[0], 128);
        mbar_init(&full.q[1], 128);
    }
    __syncthreads();
    TL(tl_begin();)

    // The warpgroup index through a shuffle from lane 0, so the compiler knows it is
    // warp-uniform: the wgmma descriptors built from it then live in uniform registers, with
    // no per-wgmma moves from vector registers.
    const int tid = threadIdx.x, wgi = __shfl_sync(0xffffffffu, tid / 128, 0), t = tid % 128;

    // Registers move from the producer (decode needs few) to the consumers (S, P and O
    // accumulators): 128·PRODUCER_REGS + 128·CONSUMERS·CONSUMER_REGS <= 64K.
    if (wgi == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(PRODUCER_REGS));
        produce<D, FMT>(Sq, Sk, causal, bh_count, q_tiles, works, stages, &full,
                        Operands{q_data, q_scale, k_data, k_scale, v_data, v_scale, Skp, kv_group}, t);
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(CONSUMER_REGS));
    const int w = wgi - 1;
    // S carries 2^OPERAND_LOG2 from each operand, O one from V.
    const float c = __fmul_rn(__fmul_rn(__fmul_rn(ts[0], ts[1]), c0), OPERAND * OPERAND);
    const float v_ts = __fmul_rn(ts[2], OPERAND);
    const auto weight = [v_ts](int) { return make_float2(v_ts, v_ts); };
    const u32 q_addr = shared_addr(q_tiles) + 64 * w * D * 2;
    const u32 st_addr = shared_addr(stages);
    if (w == CONSUMERS - 1) turn_pass(w);  // warpgroup 0 issues first
    TL(TlMarks tm;)
    for (int seg = 0, ring = 0;; ++seg) {
        TL(tl_reset(tm); tm.v[0] = tl_clk();)
        mbar_wait(&full.q[seg & 1], seg / 2);
        TL(tm.v[1] = tl_clk();)
        const Work wk = works[seg & 1];
        if (wk.tiles == 0) {
            if (w == 0) turn_take(w);  // the last warpgroup's last pass
            return;
        }
        TL(tm.rb = wk.rb, tm.t0 = wk.t0, tm.t1 = wk.t1;)
        float o[Wgmma<D>::regs];
        RowState st;
        consume<D, FMT>(q_addr + (seg & 1) * Geo<D>::Q_BYTES, st_addr, &full, ring, wk, Sq, Sk, causal, c, w, t, o, st TL(, tm));
        bar_arrive(bar_q_empty(seg & 1), THREADS);
        ring += wk.t1 - wk.t0;
        if (wk.whole())
            store_rows<D>(o, st.l_run, weight, out, wk.bh, Sq, wk.rb * BR + 64 * w + 16 * (t / 32), t % 32);
        else
            finish_split<D>(wk, o, st, partials, counters, weight, out, Sq, w, t);
        TL(tm.v[5] = tl_clk(); tl_keep(tm, 1 + w, seg, t);)
    }
}

}  // namespace attn
