// The FP8 wgmma body of attn_fp4.cu (ATTN_WGMMA_FP8), for sm_90a: FP4 Q, K, V (NVFP4 or MXFP4,
// as prequantize and `fp4probe quantize` store them) widened to E4M3 in shared memory, both
// products on FP8 wgmma (m64nNk32 .e4m3, f32 accumulators), P rounded to E4M3 in registers.
// The arithmetic is docs/attention-fp8.md's, and src/attention/fp8.rs: reference_fp8 is its
// CPU reference (relative error at most 1e-3; the doc says where and why it is not bit-exact).
//
// The pipeline is attn_wgmma.cuh's (attn_wgmma_pipeline.cuh): a producer warpgroup widens
// each row block's Q and each key tile's K and Vᵀ into shared memory, STAGES tiles ahead; two
// consumer warpgroups (64 query rows each) issue S = Q·Kᵀ of tile j together with O += P·V of
// tile j-1 and take turns at the tensor cores; the grid is persistent and stream-K.
//
// Operands. Each row of Q, each group of K_FACTOR_KEYS keys of K and each row of Vᵀ (a channel
// of V over all keys) has one power-of-two factor 2^f (fp8.rs: row_factor_log2), computed by the
// pre-pass fp8_factors_* or fp8_prepass_* into the launch's factor buffer: [bh][Sq] for Q, [bh][Sk]
// for K (the group's factor at each key), [bh][D] for Vᵀ (ints). An element is RN_E4M3(code × block scale ×
// 2^-f), looked up by byte permutes in its block's table of the 8 magnitudes times the block's
// multiplier scale·2^-f (f16 products, exact wherever the element does not round to 0 in E4M3,
// converted by cvt.rn.satfinite.e4m3x2.f16x2). A tile's scores are multiplied by c·2^fq·2^fk,
// one number per row; O's column d by 2^fv·(V's tensor scale) at the end. l = Σ P on the tensor
// cores, P times a tile of ones (m64n8k32) per tile, the tiles' sums added in f32.
//
// Placement, all of it from measured tables:
//   - shared-memory tiles in wgmma's K-major layout, each row one swizzle row: 128B for rows of
//     128 bytes, 64B for rows of 64 (Q and K at head_dim 64, Vᵀ's 64-key rows at head_dim
//     128), written through the generated offset function
//     of the 8-bit study (generated/wgmma/fp4probe_wgmma_smem.cuh) and read through
//     descriptors made by its make_desc;
//   - S's accumulator registers through the measured wgmma D layout (d.f32.n64), and P's A
//     registers from them through the measured D→A handoff (handoff.d.f32.n64.a.e4m3.k32):
//     A step j's k position κ holds S column kPerm[κ], so Vᵀ's k position κ must hold that
//     column's key. The widening keeps the codes' order, so Vᵀ's position κ holds key κ, and
//     K's row c (S column c) holds key key_of_col(c) = kPerm⁻¹(c).
//   - at head_dim 128, O's staging for its bulk tensor stores through the TMA store table of
//     generated/tma/fp4probe_tma.cuh (store_rows_tma).
//
// Files: the geometry and the checks of the measured register layouts in attn_fp8_geometry.cuh,
// the widening and the workspace in attn_fp8_widen.cuh, the pre-passes in
// attn_fp8_prepasses.cuh; the producer, the consumers and the kernel here.

#pragma once

// Where K and Vᵀ are widened to E4M3, one compiled variant each (the host picks per shape:
// src/attention/paths.rs, fp8_widen_once): 0, by each CTA's producer, tile by tile, into shared
// memory, so nothing but FP4 is stored; 1, once per launch by the pre-pass fp8_prepass_* into the
// workspace (an E4M3 copy of K and Vᵀ, twice their FP4 bytes), stored there as each key tile's
// shared-memory image (swizzled, K's rows in column order, zero past the keys), so that one
// thread of the producer brings a tile into its stage with one bulk copy (cp.async.bulk),
// which completes on the stage's full barrier. Per CTA, every row block of a K/V head widens
// each of its tiles again, and that widening, not the consumers, bounds the kernel from a few
// row blocks per head on (reports/sm_90/attention/h200/README.md). One variant with the choice
// as an argument held both ways in the producer's registers and ran slower in both.
#ifndef ATTN_FP8_WIDEN_ONCE
#define ATTN_FP8_WIDEN_ONCE 0
#endif

// 1: where a launch's E4M3 K and V exceed PAIR_WAVES_MIN_KV_BYTES, the persistent schedule
// deals causal pairs of row blocks out whole in waves, head-major, if they all have the same
// tiles (attn_stream_k.cuh: pair_waves); 0: it cuts them all. The host reads both
// (src/attention/paths.rs: Variant::causal_pair_waves).
#ifndef ATTN_CAUSAL_PAIR_WAVES
#define ATTN_CAUSAL_PAIR_WAVES 1
#endif

// 1: a persistent causal launch whose pairs are not dealt in waves runs its row blocks whole,
// longest first, each CTA drawing its next one from a counter (attn_stream_k.cuh: dynamic);
// 0: it cuts them as stream-K pieces. The host reads both (src/attention/paths.rs:
// Variant::causal_dynamic).
#ifndef ATTN_CAUSAL_DYNAMIC
#define ATTN_CAUSAL_DYNAMIC 1
#endif

// The producer widens Q (and per CTA each key tile's 8 chunks, held in registers with their
// factors): at 80 registers (the bf16 body's) it spilled; 120 leaves the consumers 192, which
// they fit in. Widening once, 56 (the consumers 224) ran slower (src/attention/paths.rs:
// FP8_ONCE_KEYS_D128).
#ifndef ATTN_PRODUCER_REGS
#define ATTN_PRODUCER_REGS 120
#endif

// The attention kernel is its pre-pass's programmatic dependent (src/attention/kernel.rs):
// griddepcontrol.wait returns once the pre-pass has completed and its writes are visible. 1:
// the producer waits after its set-up and first Work, the consumers after setmaxnreg, so the
// CTA's start runs beside the pre-pass's end; 0: every thread waits first.
#ifndef ATTN_FP8_EARLY_PROLOGUE
#define ATTN_FP8_EARLY_PROLOGUE 1
#endif
// At head_dim 128, O's column weights (2^fv_d times V's tensor scale) in shared memory,
// written by the producer beside each segment's Q (one row of D floats per Q buffer, released
// with it after O's store), so a segment's end waits on no global load; at 64 (where they ran
// 2% slower at S = 4096: experiments/fp8-o-tma) and with 0, the consumers load them from the
// factors at O's store.
#ifndef ATTN_FP8_SMEM_WEIGHTS
#define ATTN_FP8_SMEM_WEIGHTS 1
#endif

// The head_dim whose O leaves through shared memory and bulk tensor stores (Geo8::O_TMA; the
// host's FP8_O_TMA_HEAD_DIM in src/attention/paths.rs, which sizes the shared memory by it).
#ifndef ATTN_FP8_O_TMA_D
#define ATTN_FP8_O_TMA_D 128
#endif

// Keys per tile at D = 128 (the host's Variant::keys_per_tile sets it).
#ifndef ATTN_FP8_BC_D128
#define ATTN_FP8_BC_D128 64
#endif

#include "attention/attn_wgmma_pipeline.cuh"
#include "attention/wgmma_e4m3.cuh"
#include "generated/wgmma/d.f32.n64.cuh"
#include "generated/wgmma/fp4probe_wgmma_smem.cuh"
#include "generated/wgmma/handoff.d.f32.n64.a.e4m3.k32.cuh"
#include "generated/tma/fp4probe_tma.cuh"

#define ATTN_BODY attn::attention_wgmma_fp8
#define ATTN_FACTORS_ARG , factors

#include "attention/attn_fp8_geometry.cuh"
#include "attention/attn_fp8_widen.cuh"

namespace attn {
namespace f8 {

using namespace wg;

// ---- the producer ---------------------------------------------------------------------------

__device__ __forceinline__ void griddep_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// The E4M3 K and V bytes (K/V heads × Sk × D × 2) above which the causal schedule deals pairs
// out in waves: where the ranges of all CTAs, which cover every head at once, read more K and
// V than the L2 holds. Side by side on the H200 (experiments/fp8-head-waves), at 128 MiB (S =
// 16384, d = 128) the waves ran causal 2.3-11.9% faster, at 64 MiB (d = 64) 0.4-0.7%, at
// 32 MiB (S = 4096, d = 128) 1.4-2.4% slower, at 16 MiB (d = 64) 1.8-4.6% slower.
constexpr u64 PAIR_WAVES_MIN_KV_BYTES = 48ull << 20;

// Chunks of one key tile per producer thread: K chunk i is key i % BC, d from 32·(i / BC);
// Vᵀ chunk i is channel i % D, keys from 32·(i / D).
template <int D>
struct TileChunks8 {
    static constexpr int BC = Geo8<D>::BC;
    static constexpr int KC = BC * (D / 32) / 128, VC = D * (BC / 32) / 128;
    static_assert(KC * 128 == BC * (D / 32) && VC * 128 == D * (BC / 32), "whole chunks per thread");
    Chunk k[KC], v[VC];
    int fk[KC], fv[VC];
};

template <int D, int FMT>
__device__ __forceinline__ void fetch8(TileChunks8<D>& tc, const u8* k_data, const u8* k_scale, const u8* v_data,
                                       const u8* v_scale, const int* fk, const int* fv, int key0, int Sk, int Skp, int t) {
    constexpr int B = Blk<FMT>::n, BC = Geo8<D>::BC;
    const Chunk zero = {{0u, 0u, 0u, 0u}, 0u};
#pragma unroll
    for (int c = 0; c < TileChunks8<D>::KC; ++c) {
        const int i = t + 128 * c, key = key0 + i % BC, d0 = 32 * (i / BC);
        tc.k[c] = zero;
        tc.fk[c] = 0;
        if (key < Sk) {
            tc.k[c].bytes = ldg16(k_data + (u64)key * (D / 2) + d0 / 2);
            tc.k[c].scales = load_scales<FMT>(k_scale + (u64)key * (D / B) + d0 / B);
            tc.fk[c] = __ldg(fk + key);
        }
    }
#pragma unroll
    for (int c = 0; c < TileChunks8<D>::VC; ++c) {
        const int i = t + 128 * c, d = i % D, key = key0 + 32 * (i / D);
        tc.v[c] = zero;
        tc.fv[c] = __ldg(fv + d);
        if (key < Skp) {
            tc.v[c].bytes = ldg16(v_data + (u64)d * (Skp / 2) + key / 2);
            tc.v[c].scales = load_scales<FMT>(v_scale + (u64)d * (Skp / B) + key / B);
        }
    }
}

// The tile into its stage: K rows in column order (key i % BC to row col_of_key), Vᵀ rows by
// channel; and the tile's key factor 2^fk (one for the tile's keys: fp8.rs, K_FACTOR_KEYS) into
// kf, from thread 0's first chunk, key0's.
template <int D, int FMT>
__device__ __forceinline__ void store8(const TileChunks8<D>& tc, unsigned char* stage, float* kf, int t) {
    using G = Geo8<D>;
    constexpr int BC = G::BC;
    unsigned char* k_tile = stage;
    unsigned char* v_tile = stage + G::K_BYTES;
#pragma unroll
    for (int c = 0; c < TileChunks8<D>::KC; ++c) {
        const int i = t + 128 * c, col = col_of_key(i % BC);
        widen_chunk<FMT, G::QK_SWIZZLE, G::QK_SBO>(tc.k[c], tc.fk[c], k_tile, col, 32 * (i / BC));
    }
    if (t == 0) *kf = pow2(tc.fk[0]);
#pragma unroll
    for (int c = 0; c < TileChunks8<D>::VC; ++c) {
        const int i = t + 128 * c;
        widen_chunk<FMT, G::V_SWIZZLE, G::V_SBO>(tc.v[c], tc.fv[c], v_tile, i % D, 32 * (i / D));
    }
}

// The producer's walk: per segment its Work, the row block's Q widened into one of two Q
// buffers, then its key tiles through the ring, each fetched while the one before is stored.
template <int D, int FMT>
__device__ __forceinline__ void produce8(int Sq, int Sk, int causal, u32 bh_count, unsigned char* q_tiles, Work* works,
                                         unsigned char* stages, float* kf, FullBarriers* full, const Operands& op,
                                         const Factors& fac, float (*o_weight)[D], float v_ts, u32* tickets, int t) {
    using G = Geo8<D>;
    constexpr int B = Blk<FMT>::n, BC = G::BC, QW = 64 * (D / 32) / 128;
    static_assert(QW * 128 == 64 * (D / 32), "whole Q chunks per thread");
    __shared__ Schedule sched;
    __shared__ Schedule::Cursor cursor;
    if (t == 0) {
        const u64 kv_bytes = (u64)(bh_count / op.kv_group) * Sk * D * 2;
        sched.init(Sq, Sk, causal, BC, bh_count, gridDim.x, ATTN_CAUSAL_PAIR_WAVES && kv_bytes > PAIR_WAVES_MIN_KV_BYTES,
                   ATTN_CAUSAL_DYNAMIC ? tickets : nullptr);
        sched.start(cursor, blockIdx.x);
    }
    const int Skp = op.Skp;
    // The ones rows, before the first stage is told full (its fence orders them for the tensor
    // cores too); no tile overwrites them.
    for (int s = 0; s < (G::O_TMA ? 1 : STAGES); ++s)
        for (int i = t; i < G::ONES_BYTES / 4; i += 128)
            reinterpret_cast<u32*>(stages + (G::ONES_OFFSET - 2 * G::Q_BYTES) + s * G::STAGE_BYTES)[i] = 0x38383838u;
    if (ATTN_FP8_WIDEN_ONCE) {
        // Thread 0 alone tells the stages full: every thread's ones before it does.
        fence_async_smem();
        bar_sync(bar_producer(), 128);
    }
    int ring = 0, seg = 0;
    u32 drawn = 0;  // thread 0, dynamic schedule: the ticket drawn as the last segment started
    TL(TlMarks tm;)
    for (;; ++seg) {
        TL(tl_reset(tm); tm.v[0] = tl_clk();)
        if (seg >= 2) bar_sync(bar_q_empty(seg & 1), THREADS);
        if (t == 0 && seg > 0 && sched.dynamic) sched.set_drawn(cursor, drawn);
        if (t == 0) next_work(&sched, &cursor, &works[seg & 1]);
        bar_sync(bar_producer(), 128);
        // Launched as the pre-pass's programmatic dependent (kernel.rs): from here on the
        // producer reads what the pre-pass writes (the factors, the key tiles); its set-up and
        // first Work above do not, and run while the pre-pass ends (a no-op when launched
        // plainly).
        if (seg == 0 && ATTN_FP8_EARLY_PROLOGUE) griddep_wait();
        TL(tm.v[1] = tl_clk();)
        const Work sg = works[seg & 1];
        if (sg.tiles == 0) break;
        TL(tm.rb = sg.rb, tm.t0 = sg.t0, tm.t1 = sg.t1;)
        const HeadOffsets at = head_offsets<D, FMT>(sg.bh, Sq, Sk, Skp, op.kv_group);
        const u8 *k_data = op.k_data + at.k_data, *k_scale = op.k_scale + at.k_scale;
        const u8 *v_data = op.v_data + at.v_data, *v_scale = op.v_scale + at.v_scale;
        const int* fk = fac.k_of(sg.bh, Sk);
        const int* fv = fac.v_of(sg.bh, D);
        TileChunks8<D> tc;
        if (!ATTN_FP8_WIDEN_ONCE) fetch8<D, FMT>(tc, k_data, k_scale, v_data, v_scale, fk, fv, sg.t0 * BC, Sk, Skp, t);
        // Q rows rb·BR.. (past Sq zero), consumer w's 64 rows into its own tile: chunk c of a
        // thread is row i % 64 of consumer c / QW, d from 32·(i / 64), i = t + 128·(c % QW).
        unsigned char* q_tile = q_tiles + (seg & 1) * G::Q_BYTES;
#pragma unroll
        for (int c = 0; c < CONSUMERS * QW; ++c) {
            const int i = t + 128 * (c % QW), r = 64 * (c / QW) + i % 64, row = sg.rb * BR + r, d0 = 32 * (i / 64);
            Chunk qc = {{0u, 0u, 0u, 0u}, 0u};
            int fq = 0;
            if (row < Sq) {
                qc.bytes = ldg16(op.q_data + at.q_data + (u64)row * (D / 2) + d0 / 2);
                qc.scales = load_scales<FMT>(op.q_scale + at.q_scale + (u64)row * (D / B) + d0 / B);
                fq = __ldg(fac.q + (u64)sg.bh * Sq + row);
            }
            widen_chunk<FMT, G::QK_SWIZZLE, G::QK_SBO>(qc, fq, q_tile + (c / QW) * G::Q_WG_BYTES, i % 64, d0);
        }
        if (G::SMEM_WEIGHTS)
            for (int d = t; d < D; d += 128) o_weight[seg & 1][d] = __fmul_rn(pow2(__ldg(fv + d)), v_ts);
        fence_async_smem();
        mbar_arrive(&full->q[seg & 1]);
        if (t == 0 && sched.dynamic) drawn = sched.draw();
        TL(tm.v[2] = tl_clk();)
        if (ATTN_FP8_WIDEN_ONCE) {
            // A tile's image, one bulk copy into its stage, issued by thread 0 once the stage is
            // empty; the copy's bytes complete the stage's full barrier, whose one arrival
            // (thread 0's, after the tile's key factor) expects them.
            const u8* img = fac.tiles8_of_kv<D>(sg.bh / op.kv_group, Sk);
            for (int j = sg.t0; j < sg.t1; ++j) {
                const int s = ring % STAGES;
                TL_SUM(6, if (ring >= STAGES) bar_sync(bar_empty(s), THREADS))
                if (t == 0) {
                    kf[s] = pow2(__ldg(fk + j * BC));
                    mbar_arrive_expect_tx(&full->stage[s], G::TILE8_BYTES);
                    bulk_copy_g2s(shared_addr(stages + s * G::STAGE_BYTES), img + (u64)j * G::TILE8_BYTES,
                                  G::TILE8_BYTES, &full->stage[s]);
                }
                TL(if (j == sg.t0) tm.v[3] = tl_clk();)
                ++ring;
            }
            TL(tm.v[4] = tl_clk(); tl_keep(tm, 0, seg, t);)
            continue;
        }
        for (int j = sg.t0; j < sg.t1; ++j) {
            const int s = ring % STAGES;
            if (ring >= STAGES) bar_sync(bar_empty(s), THREADS);
            store8<D, FMT>(tc, stages + s * G::STAGE_BYTES, kf + s, t);
            fence_async_smem();
            mbar_arrive(&full->stage[s]);
            ++ring;
            if (j + 1 < sg.t1) fetch8<D, FMT>(tc, k_data, k_scale, v_data, v_scale, fk, fv, (j + 1) * BC, Sk, Skp, t);
        }
        TL(tm.v[4] = tl_clk(); tl_keep(tm, 0, seg, t);)
    }
    if (t == 0 && sched.dynamic) sched.retire();
    // The end (the Work of no tiles) told; take the consumers' last releases, so no named
    // barrier is left half-arrived.
    mbar_arrive(&full->q[seg & 1]);
    for (int r = max(ring - STAGES, 0); r < ring; ++r) bar_sync(bar_empty(r % STAGES), THREADS);
    if (seg >= 1) bar_sync(bar_q_empty((seg - 1) & 1), THREADS);
    TL(tl_end(seg, Sq, causal, FMT, t);)
}

// ---- the consumers --------------------------------------------------------------------------


// An edge tile's S: register i is masked (-inf) where its key, key0 + lane_key + reg_key(i),
// reaches Sk or passes its row.
template <int D>
__device__ __forceinline__ void mask_edge(float (&x)[Geo8<D>::BC / 2], int key0, int q0, int Sk, int causal, int lane) {
    int bound[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int key_end = causal ? min(Sk, q0 + lane_row(lane, h) + 1) : Sk;
        bound[h] = key_end - key0 - kLaneKeys.key[lane];
    }
#pragma unroll
    for (int i = 0; i < Geo8<D>::BC / 2; ++i)
        if (reg_key(i) >= bound[acc_half(i)]) x[i] = NEG_INF;
}

// S of one key tile to P in E4M3: masked where the tile reaches past Sk or the diagonal (EDGE);
// the row's integer running maximum advanced from the maxima of S times the tile's cq =
// c·2^fq·2^fk (a power-of-two factor per tile: exact); p = ex2(S·cq + 8 - m) rounded to E4M3
// by cvt.rn.satfinite.e4m3x2.f32 into the A registers of P·V's k32 steps. l is not summed
// here: the tensor cores sum it (issue_pv8).
template <int D, bool EDGE>
__device__ __forceinline__ void softmax_to_p8_(const float (&sacc)[Geo8<D>::BC / 2], RowState& st, const float (&cq)[2],
                                               int key0, int q0, int Sk, int causal, int lane,
                                               u32 (&a)[Geo8<D>::BC / 32][4], float (&alpha)[2]) {
    constexpr int S_REGS = Geo8<D>::BC / 2, P_STEPS = Geo8<D>::BC / 32;
    float x[S_REGS];
#pragma unroll
    for (int i = 0; i < S_REGS; ++i) {
        x[i] = sacc[i];
        if (EDGE && !Geo8<D>::MASK_BY_COMPARE) {
            const int row = q0 + lane_row(lane, acc_half(i));
            const int key = key0 + kColumnKeys.key[reg_col(lane, i)];
            if (key >= Sk || (causal && key > row)) x[i] = NEG_INF;
        }
    }
    if (EDGE && Geo8<D>::MASK_BY_COMPARE) mask_edge<D>(x, key0, q0, Sk, causal, lane);
    float tmax[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        constexpr int NT = S_REGS / 4;
        float m[NT];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) m[nt] = fmaxf(x[4 * nt + 2 * h], x[4 * nt + 2 * h + 1]);
#pragma unroll
        for (int w = 1; w < NT; w *= 2)
#pragma unroll
            for (int nt = 0; nt + w < NT; nt += 2 * w) m[nt] = fmaxf(m[nt], m[nt + w]);
        tmax[h] = __fmul_rn(m[0], cq[h]);
    }
    float m_use[2], add[2];
    constexpr int SLACK = Geo8<D>::MAX_SLACK;
    advance_row_max<SLACK>(tmax, st.m_run, alpha, m_use);
    // P's 2^8 (fp8.rs: P_SCALE_LOG2), 2^(8 - SLACK) under a running maximum up to SLACK below
    // the tile's: P stays at most 2^8 either way.
#pragma unroll
    for (int h = 0; h < 2; ++h) add[h] = __fsub_rn(8.0f - SLACK, m_use[h]);
    float p[S_REGS];
#pragma unroll
    for (int i = 0; i < S_REGS; ++i) p[i] = ex2(__fmaf_rn(x[i], cq[acc_half(i)], add[acc_half(i)]));
#pragma unroll
    for (int j = 0; j < P_STEPS; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            u32 pair[2];
#pragma unroll
            for (int e = 0; e < 2; ++e)
                pair[e] = e4m3x2_round(p[a_src(j, 4 * r + 2 * e)], p[a_src(j, 4 * r + 2 * e + 1)]);
            a[j][r] = pair[0] | (pair[1] << 16);
        }
}

// ... with the row factors cq_row = c·2^fq and the tile's key factor kf.
template <int D>
__device__ __forceinline__ void softmax_to_p8(const float (&sacc)[Geo8<D>::BC / 2], float kf, RowState& st,
                                              const float (&cq_row)[2], bool edge, int key0, int q0, int Sk, int causal,
                                              int lane, u32 (&a)[Geo8<D>::BC / 32][4], float (&alpha)[2]) {
    const float cq[2] = {__fmul_rn(cq_row[0], kf), __fmul_rn(cq_row[1], kf)};
    if (edge)
        softmax_to_p8_<D, true>(sacc, st, cq, key0, q0, Sk, causal, lane, a, alpha);
    else
        softmax_to_p8_<D, false>(sacc, st, cq, key0, q0, Sk, causal, lane, a, alpha);
}

// The descriptors of a tile's k32 steps (32 bytes apart along the row; the start address
// field counts 16 bytes), formed and pinned before the chain's wgmma.fence.
template <int SWIZZLE, int SBO, int STEPS>
__device__ __forceinline__ void step_descs8(u64 (&d)[STEPS], u32 addr) {
    const u64 d0 = tile_desc<SWIZZLE, SBO>(addr);
#pragma unroll
    for (int i = 0; i < STEPS; ++i) d[i] = d0 + (u64)(2 * i);
#pragma unroll
    for (int i = 0; i < STEPS; ++i) asm volatile("" : "+l"(d[i]));
}

template <int D>
__device__ __forceinline__ void issue_s8(float (&sacc)[Geo8<D>::BC / 2], const u64 (&dq)[D / 32],
                                         const u64 (&dk)[D / 32]) {
#pragma unroll
    for (int kk = 0; kk < D / 32; ++kk) WgmmaE4m3<Geo8<D>::BC>::ss(sacc, dq[kk], dk[kk], kk);
    wgmma_commit();
}
// O += P·V, and the tile's l = P·1 from 0: the ones atom's k32 steps are 32 bytes apart as
// Vᵀ's, from `ones` (the atom after the ring's descriptor) with O_TMA, else from the one in
// the tile's stage, V_BYTES past its Vᵀ (the descriptor's address field counts 16 bytes).
template <int D>
__device__ __forceinline__ void issue_pv8(float (&o)[D / 2], float (&lt)[4], const u32 (&a)[Geo8<D>::BC / 32][4],
                                          const u64 (&dv)[Geo8<D>::BC / 32], u64 ones) {
    using G = Geo8<D>;
#pragma unroll
    for (int j = 0; j < G::BC / 32; ++j) {
        WgmmaE4m3<D>::rs(o, a[j], dv[j], 1);
        WgmmaE4m3<8>::rs(lt, a[j], G::O_TMA ? ones + (u64)(2 * j) : dv[j] + (u64)(G::V_BYTES / 16), j > 0);
    }
    wgmma_commit();
}

// A consumer warpgroup's work on one segment, as attn_wgmma.cuh's consume with two consumer
// warpgroups (tile j's S issued with tile j-1's P·V, turns at the tensor cores, only the live
// tiles computed).
template <int D>
__device__ __forceinline__ void consume8(u32 q_addr, unsigned char* stages, const float* kf, const FullBarriers* full,
                                         int ring0, const Work& sg, int Sq, int Sk, int causal, const float (&cq)[2],
                                         int w, int t, float (&o)[D / 2], RowState& st TL(, TlMarks& tm)) {
    using G = Geo8<D>;
    constexpr int BC = G::BC, S_REGS = BC / 2, P_STEPS = BC / 32;
    const int lane = t % 32, warp = t / 32;
    const int q_wg = sg.rb * BR + 64 * w, q0 = q_wg + 16 * warp;
    const int tiles = sg.t1 - sg.t0;
    const u32 st_addr = shared_addr(stages);
    auto stage = [&](int i) { return (ring0 + i) % STAGES; };
    auto k_addr = [&](int i) { return st_addr + stage(i) * G::STAGE_BYTES; };
    const u64 ones = tile_desc<G::V_SWIZZLE, G::V_SBO>(st_addr + (G::ONES_OFFSET - 2 * G::Q_BYTES));
    auto kf_of = [&](int i) { return kf[stage(i)]; };
    auto key0 = [&](int i) { return (sg.t0 + i) * BC; };
    auto edge = [&](int i) { return key0(i) + BC > Sk || (causal && key0(i) + BC - 1 > q_wg); };
    const int q_last = min(q_wg + 63, Sq - 1);
    int live = q_wg < Sq ? tiles : 0;
    if (causal && live > 0) live = min(tiles, max(0, (q_last + 1 - key0(0) + BC - 1) / BC));
    TL(tm.live = live;)

    st = RowState();
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
    float sacc[S_REGS], alpha[2], lt[4];
    u32 a[P_STEPS][4], a2[P_STEPS][4];
    u64 dq[D / 32], dk[D / 32], dv[P_STEPS];
    step_descs8<G::QK_SWIZZLE, G::QK_SBO>(dq, q_addr);
    auto await_full = [&](int i) { TL_SUM(6, mbar_wait(&full->stage[stage(i)], (ring0 + i) / STAGES)) };
    auto take = [&]() { TL_SUM(7, turn_take(w)) };
    auto await_tile = [&](int i) {
        await_full(i);
        step_descs8<G::QK_SWIZZLE, G::QK_SBO>(dk, k_addr(i));
    };
    auto v_descs = [&](int i) { step_descs8<G::V_SWIZZLE, G::V_SBO>(dv, k_addr(i) + G::K_BYTES); };
    auto pass_through = [&](int from) {
        for (int i = from; i < tiles; ++i) {
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
    issue_s8<D>(sacc, dq, dk);
    turn_pass(w);
    wgmma_wait<0>();
    fence_regs(sacc);
    softmax_to_p8<D>(sacc, kf_of(0), st, cq, edge(0), key0(0), q0, Sk, causal, lane, a, alpha);
    // A tile's l (its 8 columns equal: registers 0, 1 are row half 0, 2, 3 half 1) into the
    // f32 l (fp8.rs: reference_fp8, step 5).
    auto add_tile_l = [&]() {
        static_assert(acc_half(0) == 0 && acc_half(2) == 1, "the n8 accumulator's registers by row half");
#pragma unroll
        for (int h = 0; h < 2; ++h) st.l_run[h] = __fadd_rn(st.l_run[h], lt[2 * h]);
    };
    auto rescale = [&]() {
        if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
            for (int i = 0; i < D / 2; ++i) o[i] = __fmul_rn(o[i], alpha[acc_half(i)]);
#pragma unroll
            for (int h = 0; h < 2; ++h) st.l_run[h] = __fmul_rn(st.l_run[h], alpha[h]);
        }
    };
    auto round = [&](int i, u32(&p_in)[P_STEPS][4], u32(&p_out)[P_STEPS][4]) {
        v_descs(i - 1);
        await_tile(i);
        take();
        wgmma_fence();
        issue_s8<D>(sacc, dq, dk);
        issue_pv8<D>(o, lt, p_in, dv, ones);
        turn_pass(w);
        wgmma_wait<1>();
        fence_regs(sacc);
        softmax_to_p8<D>(sacc, kf_of(i), st, cq, edge(i), key0(i), q0, Sk, causal, lane, p_out, alpha);
        wgmma_wait<0>();
        fence_regs(o);
        fence_regs(lt);
        fence_regs(p_in);
        bar_arrive(bar_empty(stage(i - 1)), THREADS);
        add_tile_l();
        rescale();
    };
    auto finish = [&](u32(&p_in)[P_STEPS][4]) {
        const int n = live;
        const bool in_next_turn = n < tiles;
        v_descs(n - 1);
        if (in_next_turn) await_full(n);
        take();
        TL(tm.v[3] = tl_clk();)
        wgmma_fence();
        issue_pv8<D>(o, lt, p_in, dv, ones);
        turn_pass(w);
        wgmma_wait<0>();
        TL(tm.v[4] = tl_clk();)
        fence_regs(o);
        fence_regs(lt);
        bar_arrive(bar_empty(stage(n - 1)), THREADS);
        add_tile_l();
        if (in_next_turn) bar_arrive(bar_empty(stage(n)), THREADS);
        if (n < tiles) pass_through(in_next_turn ? n + 1 : n);
    };
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
}

// ---- O through shared memory ------------------------------------------------------------------

// A whole segment's O leaves each consumer warp as D / 32 tensor stores
// (cp.async.bulk.tensor, boxes of its 16 rows × 32 f32 columns, 128B swizzle) from the warp's
// staging slab in shared memory, so the warp starts its next segment while the copy engine
// writes instead of after its own 8-byte global stores (a segment's end took 2.6 tile times:
// reports/sm_90/attention/experiments/fp8-boundaries; what the slabs gained:
// experiments/fp8-o-tma). Each element goes to the shared byte the TMA store table measured on
// the H200 places it at (generated/tma/fp4probe_tma.cuh, store.u32.128B.16x32: the map's box
// and swizzle).
namespace OT = ::fp4probe::tma::store_u32_128B_16x32;
static_assert(OT::kElemBytes == 4 && OT::kBoxRows == 16 && OT::kBoxCols == 32 && OT::kBoxOffset == 0 &&
                  OT::kSwizzleBytes == 128 && OT::kLoad == 0,
              "O's boxes: 16 rows × 32 f32 from a 1024-byte boundary, 128B swizzle (the host's tensor map)");
constexpr int O_BOX_BYTES = OT::kBoxRows * OT::kBoxCols * 4;

// The bulk copies and their waits, by lane 0 of the warp only, as predicated instructions:
// a branch around them would leave ptxas unsure the warp is converged at the consumers'
// .aligned instructions, and it then compiles a second, collective path of the tile loop.
__device__ __forceinline__ void tma_store_2d_lane0(int lane, const void* map, u32 src, int col, int row) {
    asm volatile(
        "{ .reg .pred p; setp.eq.s32 p, %0, 0;\n"
        "@p cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%1, {%2, %3}], [%4]; }" ::"r"(lane),
        "l"(map), "r"(col), "r"(row), "r"(src)
        : "memory");
}
__device__ __forceinline__ void bulk_commit_lane0(int lane) {
    asm volatile("{ .reg .pred p; setp.eq.s32 p, %0, 0; @p cp.async.bulk.commit_group; }" ::"r"(lane) : "memory");
}
// Lane 0's bulk groups have read their shared memory / are complete.
__device__ __forceinline__ void bulk_wait_read_lane0(int lane) {
    asm volatile("{ .reg .pred p; setp.eq.s32 p, %0, 0; @p cp.async.bulk.wait_group.read 0; }" ::"r"(lane) : "memory");
}
__device__ __forceinline__ void bulk_wait_lane0(int lane) {
    asm volatile("{ .reg .pred p; setp.eq.s32 p, %0, 0; @p cp.async.bulk.wait_group 0; }" ::"r"(lane) : "memory");
}

// Where a lane's pairs lie in its slab: for the lane's first pair (its row r < 8, column c < 8
// of the warp's D tile 0) the table gives byte b; the pair of n8 tile nt, row half h lies at
// b ^ 32·(nt % 4), plus 1024·h and one box (2048 bytes) per 32 columns. That is what the
// swizzle is (the XOR of address bits 7..9 into 4..6) and the measured table says so: checked
// here for every row, column pair and tile.
FP4PROBE_HD constexpr bool o_slab_offsets_decompose() {
    for (int r = 0; r < 8; ++r)
        for (int c = 0; c < 8; c += 2)
            for (int h = 0; h < 2; ++h)
                for (int nt = 0; nt < 16; ++nt) {
                    const int col = 8 * nt + c;
                    const u32 at = col / OT::kBoxCols * O_BOX_BYTES + OT::smem_byte(r + 8 * h, col % OT::kBoxCols);
                    if (at != ((OT::smem_byte(r, c) ^ (32u * (nt % 4))) + 1024u * h + (u32)O_BOX_BYTES * (nt / 4)))
                        return false;
                }
    return true;
}
static_assert(o_slab_offsets_decompose(), "O's slab bytes: the lane's first pair's, XOR 32 per n8 tile");
// ... where a lane's first pair is in row r < 8, columns c, c + 1 < 8, and its row half h
// pair in row r + 8h, the same columns (m16n8k16's D layout, as store_rows reads it).
FP4PROBE_HD constexpr bool lane_pairs_in_rows_r_and_r_plus_8() {
    for (int lane = 0; lane < 32; ++lane) {
        const int r = L::d_row_formula(lane, 0, 0), c = L::d_col_formula(lane, 0, 0);
        if (r >= 8 || c >= 8 || c % 2 != 0 || L::kN != 8) return false;
        for (int h = 0; h < 2; ++h)
            if (L::d_row_formula(lane, 2 * h, 0) != r + 8 * h || L::d_col_formula(lane, 2 * h, 0) != c) return false;
    }
    return true;
}
static_assert(lane_pairs_in_rows_r_and_r_plus_8(), "D pairs: rows r and r + 8 of the lane, columns c, c + 1 < 8");

// store_rows's values (O / l times each column's weight) for this warp's 16 rows, the rows
// `row0`.. of the map's [bh·Sq][D] (all below Sq: a box past Sq would write the next head's
// rows), through the warp's slab at shared address `slab` (O_WARP_BYTES, 1024-byte aligned).
// Lane 0 issues the copies and waits for the previous ones to have read the slab.
template <int D, class Weight>
__device__ __forceinline__ void store_rows_tma(const float (&o)[D / 2], const float (&l)[2], const Weight& weight,
                                               const void* o_map, u32 slab, int row0, int lane) {
    static_assert(L::kD_regs == 4 && d_half(0) == 0 && d_half(2) == 1, "D registers 0,1: row half 0; 2,3: half 1");
    static_assert(Geo8<D>::O_WARP_BYTES == (D / OT::kBoxCols) * O_BOX_BYTES, "a slab: the warp's boxes");
    bulk_wait_read_lane0(lane);
    __syncwarp();
    // Formed here, not hoisted out of the segment loop, where four more registers a thread
    // made ptxas spill.
    u32 first = OT::smem_byte(L::d_row_formula(lane, 0, 0), L::d_col_formula(lane, 0, 0));
    asm volatile("" : "+r"(first));
    u32 base[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) base[k] = slab + (first ^ (32u * k));
    // Every value first (the lane's two rows share their columns' weights), then every store:
    // computed between the stores, the pairs share a few registers and each store's operand read
    // holds up the next pair's arithmetic (reports/sm_90/attention/experiments/fp8-o-tma).
    float2 w[D / L::kN], v[2][D / L::kN];
#pragma unroll
    for (int nt = 0; nt < D / L::kN; ++nt) w[nt] = weight(nt * L::kN + L::d_col_formula(lane, 0, 0));
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const RowDivisor by(l[h]);
#pragma unroll
        for (int nt = 0; nt < D / L::kN; ++nt) v[h][nt] = o_pair(by, o[nt * L::kD_regs + 2 * h], o[nt * L::kD_regs + 2 * h + 1], w[nt]);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int nt = 0; nt < D / L::kN; ++nt)
            asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(base[nt % 4] + 1024u * h + (u32)O_BOX_BYTES * (nt / 4)),
                         "f"(v[h][nt].x), "f"(v[h][nt].y)
                         : "memory");
    fence_async_smem();
    __syncwarp();
#pragma unroll
    for (int b = 0; b < D / OT::kBoxCols; ++b) tma_store_2d_lane0(lane, o_map, slab + b * O_BOX_BYTES, b * OT::kBoxCols, row0);
    bulk_commit_lane0(lane);
}

}  // namespace f8

// The kernel: a persistent CTA (blockIdx.x of gridDim.x) walks its stream-K segments.
template <int D, int FMT>
__device__ void attention_wgmma_fp8(const u8* __restrict__ q_data, const u8* __restrict__ q_scale,
                                    const u8* __restrict__ k_data, const u8* __restrict__ k_scale,
                                    const u8* __restrict__ v_data, const u8* __restrict__ v_scale,
                                    float* __restrict__ out, int Sq, int Sk, int Skp, int causal, const float* ts,
                                    float c0, u32 bh_count, u32* counters, float* partials, const int* factors,
                                    u32 kv_group) {
    using namespace f8;
    using G = Geo8<D>;
    static_assert(CONSUMERS == 2, "the FP8 body runs two consumer warpgroups");
    extern __shared__ __align__(1024) unsigned char smem[];
    unsigned dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    if (dyn < (unsigned)G::SMEM || (shared_addr(smem) & 1023u) != 0) __trap();  // the host's size, the swizzle's alignment
    unsigned char* q_tiles = smem;
    unsigned char* stages = smem + 2 * G::Q_BYTES;
    __shared__ Work works[2];
    __shared__ FullBarriers full;
    __shared__ float kf[STAGES];  // each stage's key factor 2^fk
    __shared__ __align__(8) float o_weight[2][D];  // each Q buffer's segment's O column weights
    if (threadIdx.x == 0) {
#pragma unroll
        // A stage is told full by the producer's 128 threads, or by its bulk copy's thread.
        for (int s = 0; s < STAGES; ++s) mbar_init(&full.stage[s], ATTN_FP8_WIDEN_ONCE ? 1 : 128);
        mbar_init(&full.q[0], 128);
        mbar_init(&full.q[1], 128);
    }
    __syncthreads();
    TL(tl_begin();)
    if (!ATTN_FP8_EARLY_PROLOGUE) griddep_wait();
    const int tid = threadIdx.x, wgi = __shfl_sync(0xffffffffu, tid / 128, 0), t = tid % 128;
    const Factors fac(factors, bh_count, Sq, Sk, D, kv_group, G::BC, ATTN_FP8_WIDEN_ONCE ? G::TILE8_BYTES : 0);
    if (wgi == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(PRODUCER_REGS));
        produce8<D, FMT>(Sq, Sk, causal, bh_count, q_tiles, works, stages, kf, &full,
                         Operands{q_data, q_scale, k_data, k_scale, v_data, v_scale, Skp, kv_group}, fac, o_weight, ts[2],
                         counters + (u64)((Sq + BR - 1) / BR) * bh_count * CONSUMERS * 4, t);
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(CONSUMER_REGS));
    if (ATTN_FP8_EARLY_PROLOGUE) griddep_wait();  // before the consumers' first factor
    const int w = wgi - 1;
    const float c = __fmul_rn(__fmul_rn(ts[0], ts[1]), c0);
    const float v_ts = ts[2];
    const u32 q_addr = shared_addr(q_tiles) + w * G::Q_WG_BYTES;
    const u32 o_slab = shared_addr(smem) + G::O_OFFSET + (4 * w + t / 32) * G::O_WARP_BYTES;
    if (w == CONSUMERS - 1) turn_pass(w);
    TL(TlMarks tm;)
    for (int seg = 0, ring = 0;; ++seg) {
        TL(tl_reset(tm); tm.v[0] = tl_clk();)
        mbar_wait(&full.q[seg & 1], seg / 2);
        TL(tm.v[1] = tl_clk();)
        const Work wk = works[seg & 1];
        if (wk.tiles == 0) {
            if (w == 0) turn_take(w);
            if (G::O_TMA) bulk_wait_lane0(t % 32);  // O's copies out of the slab, before the CTA ends
            return;
        }
        TL(tm.rb = wk.rb, tm.t0 = wk.t0, tm.t1 = wk.t1;)
        // The rows' factors c·2^fq (rows past Sq: 1, their results are not stored).
        const int r0 = wk.rb * BR + 64 * w + 16 * (t / 32) + L::d_row_formula(t % 32, 0, 0);
        float cq[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = r0 + 8 * h;
            cq[h] = __fmul_rn(c, row < Sq ? pow2(__ldg(fac.q + (u64)wk.bh * Sq + row)) : 1.0f);
        }
        float o[D / 2];
        RowState st;
        consume8<D>(q_addr + (seg & 1) * G::Q_BYTES, stages, kf, &full, ring, wk, Sq, Sk, causal, cq, w, t, o, st TL(, tm));
        if (!G::SMEM_WEIGHTS) bar_arrive(bar_q_empty(seg & 1), THREADS);
        ring += wk.t1 - wk.t0;
        // O's column d: 2^fv_d times V's tensor scale, both rounded once (fp8.rs: reference_fp8).
        const int* fv = fac.v_of(wk.bh, D);
        const float* ow = o_weight[seg & 1];
        const auto weight = [&](int d) {
            if (G::SMEM_WEIGHTS) return *reinterpret_cast<const float2*>(ow + d);
            return make_float2(__fmul_rn(pow2(__ldg(fv + d)), v_ts), __fmul_rn(pow2(__ldg(fv + d + 1)), v_ts));
        };
        // Through the slab where all the warpgroup's rows are below Sq (a condition the same
        // for the warpgroup's warps, so no branch divides a warp).
        const int q_wg = wk.rb * BR + 64 * w, q0 = q_wg + 16 * (t / 32);
        if (!wk.whole())
            finish_split<D>(wk, o, st, partials, counters, weight, out, Sq, w, t);
        else if (G::O_TMA && q_wg + 64 <= Sq)
            store_rows_tma<D>(o, st.l_run, weight, fac.o_map, o_slab, (int)wk.bh * Sq + q0, t % 32);
        else
            store_rows<D>(o, st.l_run, weight, out, wk.bh, Sq, q0, t % 32);
        if (G::SMEM_WEIGHTS) bar_arrive(bar_q_empty(seg & 1), THREADS);  // the weights read
        TL(tm.v[5] = tl_clk(); tl_keep(tm, 1 + w, seg, t);)
    }
}

}  // namespace attn

#include "attention/attn_fp8_prepasses.cuh"
