// The wgmma body of attn_fp4.cu (ATTN_WGMMA), for sm_90a: the bf16 body's arithmetic
// (attn_bf16.cuh: FP4 decoded exactly to bf16, f32 accumulation, P requantized in V's block
// format) restructured for Hopper's asynchronous warpgroup MMA, as FlashAttention-3 does:
//   - one producer warpgroup loads the FP4 bytes of K and Vᵀ key tiles and decodes them to
//     bf16 in shared memory, STAGES tiles ahead, signalling through named barriers;
//   - two or three consumer warpgroups (ATTN_WG_CONSUMERS; 64 query rows each, BR = 128 or
//     192 per CTA; the host builds both and picks per launch) run wgmma.mma_async
//     m64n{BC}k16 for S = Q·Kᵀ (Q and K from shared memory) and m64n{D}k16 for O += P·V (P
//     from registers, the requantized S; Vᵀ from shared memory), with the online softmax and
//     P's requantization in between; with two, tile j's S and tile j-1's P·V are issued
//     together and P·V runs during tile j's softmax (ATTN_WG_OVERLAP).
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

#include "attention/attn_bf16.cuh"
#include "attention/wgmma_bf16.cuh"

// Consumer warpgroups per CTA (64 query rows each): 2, or 3 for a 192-row tile (the host
// reads ATTN_WG_CONSUMERS from its defines and launches 16·ATTN_WARPS rows, 128·(C+1) threads).
#ifndef ATTN_WG_CONSUMERS
#define ATTN_WG_CONSUMERS 2
#endif
#define ATTN_LAUNCH_BOUNDS __launch_bounds__(128 * (ATTN_WG_CONSUMERS + 1), 1)
#define ATTN_BODY attn::attention_wgmma

namespace attn {
namespace wg {

constexpr int CONSUMERS = ATTN_WG_CONSUMERS;
constexpr int THREADS = 128 * (CONSUMERS + 1);  // and one producer warpgroup
static_assert(BR == 64 * CONSUMERS, "the host launches BR = 16·ATTN_WARPS = 64·CONSUMERS query rows per CTA");

// Tile j's S issued together with tile j-1's P·V (two P register buffers).
#ifndef ATTN_WG_OVERLAP
#define ATTN_WG_OVERLAP (ATTN_WG_CONSUMERS == 2)
#endif
#ifndef ATTN_PRODUCER_REGS
#define ATTN_PRODUCER_REGS 72
#endif
constexpr int PRODUCER_REGS = ATTN_PRODUCER_REGS;
constexpr int CONSUMER_REGS = (65536 / 128 - PRODUCER_REGS) / CONSUMERS / 8 * 8;
static_assert(CONSUMER_REGS <= 256, "setmaxnreg takes at most 256");

#ifndef ATTN_STAGES
#define ATTN_STAGES 3
#endif
constexpr int STAGES = ATTN_STAGES;  // key tiles in flight between producer and consumers

// Keys per tile: the S accumulator (BC/2 registers) and O's (D/2) share the consumers'
// registers.
template <int D>
struct Geo {
    static_assert(D == 64 || D == 128, "the wgmma body runs head_dim 64 and 128");
    static constexpr int BC = D == 64 ? 128 : 64;
    static constexpr int Q_BYTES = BR * D * 2;
    static constexpr int K_BYTES = BC * D * 2, V_BYTES = D * BC * 2;
    static constexpr int STAGE_BYTES = K_BYTES + V_BYTES;
    // The dynamic shared memory the host gives a CTA (src/attention/kernel.rs:
    // Variant::dynamic_smem); the kernel traps if given less.
    static constexpr int SMEM = Q_BYTES + STAGES * STAGE_BYTES;
};

// Named barriers (0 is __syncthreads): tile s of the ring is full / empty; warpgroup w's Q
// is stored.
__device__ __forceinline__ int bar_full(int s) { return 1 + s; }
__device__ __forceinline__ int bar_empty(int s) { return 1 + STAGES + s; }
__device__ __forceinline__ int bar_q(int w) { return 1 + 2 * STAGES + w; }
static_assert(1 + 2 * STAGES + CONSUMERS <= 16, "16 named barriers");

__device__ __forceinline__ void bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void bar_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory"); }
// Generic-proxy stores to shared memory made visible to the async proxy (wgmma's reads).
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }
// Keeps the compiler from touching accumulator registers across a wgmma wait.
template <int R>
__device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// ... and A registers: an in-flight wgmma still reads them, so they must not be reused before
// its wait (ptxas would serialize the pipeline if they were).
template <int N, int R>
__device__ __forceinline__ void fence_regs(u32 (&a)[N][R]) {
#pragma unroll
    for (int i = 0; i < N; ++i)
#pragma unroll
        for (int r = 0; r < R; ++r) asm volatile("" : "+r"(a[i][r])::"memory");
}

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

// The key stored in slot t of a tile (0 4 1 5 2 6 3 7 within each 8: decode_word's order),
// and the slot of key κ.
FP4PROBE_HD constexpr int key_of_slot(int t) { return (t & ~7) | ((t & 7) >> 1) | ((t & 1) << 2); }
FP4PROBE_HD constexpr int slot_of_key(int k) { return (k & ~7) | ((k & 3) << 1) | ((k >> 2) & 1); }
FP4PROBE_HD constexpr bool slots_are_a_permutation() {
    for (int t = 0; t < 8; ++t)
        if (slot_of_key(key_of_slot(t)) != t || key_of_slot(t) / 8 != t / 8) return false;
    return true;
}
static_assert(slots_are_a_permutation(), "key slots");

// ---- FP4 → bf16 by shifts --------------------------------------------------------------
// E2M1 magnitude bits e1 e0 m placed at bf16 bits 8..6 (exponent field e, top mantissa bit
// m) read as (1 + m/2)·2^(e-127) for e ≥ 1 and m·2^-127 for e = 0: the code's value times
// 2^-126 in every case. Sign bit to bit 15. Pair k of word w holds codes k and k+4.
template <int K>
__device__ __forceinline__ u32 e2m1_pair_scaled_down(u32 w) {
    constexpr int MAG = 6 - 4 * K, SGN = 12 - 4 * K;
    const u32 mag = MAG >= 0 ? w << MAG : w >> -MAG;
    const u32 sgn = SGN >= 0 ? w << SGN : w >> -SGN;
    return (mag & 0x01c001c0u) | (sgn & 0x80008000u);
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

__device__ __forceinline__ uint4 ldg16(const u8* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }

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

template <int D, int FMT>
__device__ __forceinline__ void produce(unsigned char* stages, const u8* k_data, const u8* k_scale, const u8* v_data,
                                        const u8* v_scale, int tiles, int Sk, int Skp, int t) {
    constexpr int BC = Geo<D>::BC;
    TileChunks<D> tc;
    fetch<D, FMT>(tc, k_data, k_scale, v_data, v_scale, 0, Sk, Skp, t);
    for (int j = 0; j < tiles; ++j) {
        const int s = j % STAGES;
        if (j >= STAGES) bar_sync(bar_empty(s), THREADS);
        store<D, FMT>(tc, stages + s * Geo<D>::STAGE_BYTES, t);
        fence_async_smem();
        bar_arrive(bar_full(s), THREADS);
        if (j + 1 < tiles) fetch<D, FMT>(tc, k_data, k_scale, v_data, v_scale, (j + 1) * BC, Sk, Skp, t);
    }
    // Take the consumers' last releases, so no barrier is left half-arrived.
    for (int j = max(tiles - STAGES, 0); j < tiles; ++j) bar_sync(bar_empty(j % STAGES), THREADS);
}

// ---- the consumers -----------------------------------------------------------------------

// One warp's online-softmax state for its 16 rows (per row half of the lane, as attn_bf16.cuh).
struct RowState {
    float m_run[2] = {NEG_INF, NEG_INF}, l_run[2] = {0.0f, 0.0f};
};

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

// A consumer warpgroup's loop, pipelined as FlashAttention-3's intra-warpgroup overlap: tile
// j's S = Q·Kᵀ and tile j-1's O += P·V are issued together; the softmax of tile j runs while
// the tensor cores finish P·V, then O is rescaled by tile j's alpha (O·α_j + P_j·V_j in the
// next round: the same sequence of operations as attn_bf16.cuh).
template <int D, int FMT>
__device__ __forceinline__ void consume(const unsigned char* q_tile, const unsigned char* stages, float* out, u64 bh,
                                        int Sq, int Sk, int causal, int tiles, float c, float v_ts, int w, int t) {
    constexpr int BC = Geo<D>::BC;
    using WS = Wgmma<BC>;
    using WO = Wgmma<D>;
    const int lane = t % 32, warp = t / 32;  // warp of the warpgroup: rows 16·warp..+15
    const int q_wg = blockIdx.x * BR + 64 * w, q0 = q_wg + 16 * warp;
    const u32 q_addr = (u32)__cvta_generic_to_shared(q_tile) + 64 * w * D * 2;
    const u32 st_addr = (u32)__cvta_generic_to_shared(stages);
    auto k_addr = [&](int j) { return st_addr + (j % STAGES) * Geo<D>::STAGE_BYTES; };
    auto edge = [&](int key0) { return key0 + BC > Sk || (causal && key0 + BC - 1 > q_wg); };

    RowState st;
    float o[WO::regs];
#pragma unroll
    for (int i = 0; i < WO::regs; ++i) o[i] = 0.0f;
    float sacc[WS::regs], alpha[2];

    u32 a[BC / 16][L::kA_regs];

    u64 dq[D / 16], dk[D / 16], dv[BC / 16];
    step_descs<D>(dq, q_addr);
    bar_sync(bar_full(0), THREADS);
    step_descs<D>(dk, k_addr(0));
    wgmma_fence();
    issue_s<D>(sacc, dq, dk);
    wgmma_wait<0>();
    fence_regs(sacc);
    softmax_to_p<D, FMT>(sacc, st, c, edge(0), 0, q0, Sk, causal, lane, a, alpha);  // alpha = 0: O is 0

    // O·alpha, only when some row of the warp has a new maximum (rescale_o's rule, for the
    // wgmma accumulator's flat register list).
    auto rescale = [&]() {
        if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
            for (int i = 0; i < WO::regs; ++i) o[i] = __fmul_rn(o[i], alpha[d_half(i % L::kD_regs)]);
        }
    };
    // P·V of tile j (P in p_in) on its own, waited for; tile j's stage released.
    auto pv_alone = [&](int j, u32(&p_in)[BC / 16][L::kA_regs]) {
        step_descs<BC>(dv, k_addr(j) + Geo<D>::K_BYTES);
        wgmma_fence();
        issue_pv<D>(o, p_in, dv);
        wgmma_wait<0>();
        fence_regs(o);
        bar_arrive(bar_empty(j % STAGES), THREADS);
    };
    // One round: S of tile j and P·V of tile j-1 (P in p_in) issued together, tile j's P into
    // p_out. The loop runs rounds in pairs with the two P buffers swapped, so no P register is
    // copied: a copy into the buffer an in-flight wgmma reads would make ptxas serialize.
    auto round = [&](int j, u32(&p_in)[BC / 16][L::kA_regs], u32(&p_out)[BC / 16][L::kA_regs]) {
        step_descs<BC>(dv, k_addr(j - 1) + Geo<D>::K_BYTES);
        bar_sync(bar_full(j % STAGES), THREADS);
        step_descs<D>(dk, k_addr(j));
        wgmma_fence();
        issue_s<D>(sacc, dq, dk);
        issue_pv<D>(o, p_in, dv);
        wgmma_wait<1>();  // S of tile j; P·V of tile j-1 may still run
        fence_regs(sacc);
        softmax_to_p<D, FMT>(sacc, st, c, edge(j * BC), j * BC, q0, Sk, causal, lane, p_out, alpha);
        wgmma_wait<0>();
        fence_regs(o);
        fence_regs(p_in);
        bar_arrive(bar_empty((j - 1) % STAGES), THREADS);
        rescale();
    };
    // The last tile's P·V.
    auto finish = [&](u32(&p_in)[BC / 16][L::kA_regs]) { pv_alone(tiles - 1, p_in); };
#if !ATTN_WG_OVERLAP
    // Without the overlap (three consumer warpgroups have registers for one P buffer only):
    // each tile's P·V right after its softmax; the other warpgroups keep the tensor cores busy.
    for (int j = 1; j < tiles; ++j) {
        pv_alone(j - 1, a);
        bar_sync(bar_full(j % STAGES), THREADS);
        step_descs<D>(dk, k_addr(j));
        wgmma_fence();
        issue_s<D>(sacc, dq, dk);
        wgmma_wait<0>();
        fence_regs(sacc);
        softmax_to_p<D, FMT>(sacc, st, c, edge(j * BC), j * BC, q0, Sk, causal, lane, a, alpha);
        rescale();
    }
    finish(a);
#else
    u32 a2[BC / 16][L::kA_regs];
    int j = 1;
    for (; j + 1 < tiles; j += 2) {
        round(j, a, a2);
        round(j + 1, a2, a);
    }
    if (j < tiles) {
        round(j, a, a2);
        finish(a2);
    } else {
        finish(a);
    }
#endif

    // O / l times V's tensor scale (and 2^7 per NVFP4 operand scaling), f32 out [bh][Sq][D].
#pragma unroll
    for (int i = 0; i < WO::regs; ++i) {
        const int nt = i / L::kD_regs, r = i % L::kD_regs;
        const int row = q0 + L::d_row_formula(lane, r, 0), d = nt * L::kN + L::d_col_formula(lane, r, 0);
        if (row < Sq) out[(bh * Sq + row) * D + d] = __fmul_rn(__fdiv_rn(o[i], st.l_run[d_half(r)]), v_ts);
    }
}

}  // namespace wg

template <int D, int FMT>
__device__ void attention_wgmma(const u8* __restrict__ q_data, const u8* __restrict__ q_scale,
                                const u8* __restrict__ k_data, const u8* __restrict__ k_scale,
                                const u8* __restrict__ v_data, const u8* __restrict__ v_scale, float* __restrict__ out,
                                int Sq, int Sk, int Skp, int causal, const float* ts, float c0) {
    using namespace wg;
    constexpr int B = Blk<FMT>::n, BC = Geo<D>::BC;
    constexpr float OPERAND = WordScale<FMT>::OPERAND_LOG2 == 0 ? 1.0f : 128.0f;  // 2^-OPERAND_LOG2
    extern __shared__ __align__(128) unsigned char smem[];
    unsigned dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    if (dyn < (unsigned)Geo<D>::SMEM) __trap();  // the host's size must match Geo<D>::SMEM
    unsigned char* q_tile = smem;
    unsigned char* stages = smem + Geo<D>::Q_BYTES;

    // The warpgroup index through a shuffle from lane 0, so the compiler knows it is
    // warp-uniform: the wgmma descriptors built from it then live in uniform registers, with
    // no per-wgmma moves from vector registers.
    const int tid = threadIdx.x, wgi = __shfl_sync(0xffffffffu, tid / 128, 0), t = tid % 128;
    const u64 bh = blockIdx.y;
    const HeadOffsets at = head_offsets<D, FMT>(bh, Sq, Sk, Skp);
    const int key_end = cta_key_end(Sq, Sk, causal);
    const int tiles = (key_end + BC - 1) / BC;

    // Registers move from the producer (decode needs few) to the consumers (S, P and O
    // accumulators): 128·PRODUCER_REGS + 128·CONSUMERS·CONSUMER_REGS <= 64K.
    if (wgi == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(PRODUCER_REGS));
        produce<D, FMT>(stages, k_data + at.k_data, k_scale + at.k_scale, v_data + at.v_data, v_scale + at.v_scale, tiles,
                        Sk, Skp, t);
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(CONSUMER_REGS));
    const int w = wgi - 1;
    // This warpgroup's 64 Q rows, decoded once (rows past Sq zero).
    q_data += at.q_data, q_scale += at.q_scale;
#pragma unroll
    for (int c = 0; c < 64 * (D / 32) / 128; ++c) {
        const int i = t + 128 * c, r = i % 64, d0 = 32 * (i / 64), row = blockIdx.x * BR + 64 * w + r;
        Chunk ch = {{0u, 0u, 0u, 0u}, 0u};
        if (row < Sq) {
            ch.bytes = ldg16(q_data + (u64)row * (D / 2) + d0 / 2);
            ch.scales = load_scales<FMT>(q_scale + (u64)row * (D / B) + d0 / B);
        }
        decode_chunk<FMT, D>(ch, q_tile + 64 * w * D * 2, r, d0);
    }
    fence_async_smem();
    bar_sync(bar_q(w), 128);
    // S carries 2^OPERAND_LOG2 from each operand, O one from V.
    const float c = __fmul_rn(__fmul_rn(__fmul_rn(ts[0], ts[1]), c0), OPERAND * OPERAND);
    consume<D, FMT>(q_tile, stages, out, bh, Sq, Sk, causal, tiles, c, __fmul_rn(ts[2], OPERAND), w, t);
}

}  // namespace attn
