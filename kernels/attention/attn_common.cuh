// What the fused FP4 attention kernel bodies (attn_bf16.cuh: FP4 decoded to bf16 for
// mma.sync m16n8k16; attn_wgmma.cuh: the same on Hopper's wgmma; attn_block_scale.cuh: FP4
// straight into the block-scaled mma.sync of sm_120a; all compiled from attn_fp4.cu) share:
// the launch geometry, the accumulator-layout properties they check, the integer-maximum
// online softmax and P's requantization (src/attention/reference.rs states the scheme they
// implement).
#pragma once

#include "generated/fp4probe_common.cuh"
#include "quant/fp4_codecs.cuh"

namespace attn {

enum Fmt { MX = 0, NV = 1 };
// Elements per block scale.
template <int FMT>
struct Blk {
    static constexpr int n = FMT == MX ? 32 : 16;
};

// Warps per CTA (16 query rows each); the host passes the same value (src/attention/kernel.rs).
#ifndef ATTN_WARPS
#define ATTN_WARPS 8
#endif
constexpr int WARPS = ATTN_WARPS;

constexpr int BR = 16 * WARPS;  // query rows per CTA

#define NEG_INF __int_as_float(0xff800000u)

// ---- what both kernels assume of the accumulator layout ------------------------------------
// DL is a kernel's view of its MMA's generated D closed forms: DL::regs, DL::n, DL::row(lane,
// reg), DL::col(lane, reg) (see DLayout in each kernel source); the kernels static_assert
// these properties on it.

// The lanes holding one row of a D tile are lane, lane^1, lane^2, lane^3 (row reductions are
// two xor shuffles) and together they hold all n columns.
template <class DL>
FP4PROBE_HD constexpr bool d_rows_shared_by_xor_1_2() {
    for (int lane = 0; lane < 32; ++lane)
        for (int reg = 0; reg < DL::regs; ++reg) {
            const int row = DL::row(lane, reg);
            for (int x = 1; x < 4; ++x)
                if (DL::row(lane ^ x, reg) != row) return false;
        }
    for (int lane = 0; lane < 32; lane += 4)
        for (int half = 0; half < 2; ++half) {
            int seen = 0;
            for (int x = 0; x < 4; ++x)
                for (int reg = 0; reg < DL::regs; ++reg)
                    if (DL::row(lane + x, reg) / 8 == half)
                        seen |= 1 << DL::col(lane + x, reg);
            if (seen != (1 << DL::n) - 1) return false;
        }
    return true;
}

// Which of the two rows a lane holds (g or g+8) a D register belongs to: the same for every
// lane, so per-row state is indexed by a compile-time constant (no local memory).
template <class DL>
FP4PROBE_HD constexpr int d_half_of(int reg) { return DL::row(0, reg) / 8; }
template <class DL>
FP4PROBE_HD constexpr bool d_half_is_lane_independent() {
    for (int lane = 0; lane < 32; ++lane)
        for (int reg = 0; reg < DL::regs; ++reg)
            if (DL::row(lane, reg) / 8 != d_half_of<DL>(reg) || DL::row(lane, reg) % 8 != DL::row(lane, 0))
                return false;
    return true;
}

// 2^x by the SFU (ex2.approx: relative error below 2^-22, exact for integers; -inf gives 0).
__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// ---- P requantization -------------------------------------------------------------------

// P is scaled by 448·6 before requantization, so a row's largest value (in (1/2, 1]) maps
// near the top of NVFP4's range and E4M3 block scales stay normal for all but negligible
// blocks; the factor cancels in O = P·V / Σ P. A body may fold it into the exponent instead,
// exp2(x + log2(2688)), which equals exp2(x)·2688 to a few f32 ulps, like ex2 itself. (2^11,
// the largest power of two below 2688, would make the fold exact but moves the 2^-6 clamp of
// P's E4M3 scales 1.3× closer to the row maximum, where the tiled kernel and the two-pass
// reference may quantize a block differently: measured, the unsmoothed outlier case went from
// relative error 0 to 7e-4.)
constexpr float P_SCALE = 2688.0f;
constexpr float P_SCALE_LOG2 = 11.392317422778762f;  // RN(log2(2688))

// RN(1/6), for div_rn's Markstein division by 6.
#define SIXTH __uint_as_float(0x3e2aaaabu)

// The block scales of P for both row halves (g and g+8) of a lane, from the blocks' maxima
// (p already times P_SCALE), as reference.rs (p_requantize) forms them: MXFP4 RCEIL (E8M0
// amax/6 rounded up) or NVFP4 one-level (amax/6 correctly rounded, E4M3); elements are
// multiplied by rcp = RN(1/scale), exact for MXFP4's powers of two and for NVFP4 one rounding
// instead of a correctly rounded division (three instructions an element fewer; the scheme
// says so). `bytes` are the scale bytes (for the block-scaled MMA of sm_120a), `value` their
// values.
//
// P lies in [0, P_SCALE], which makes the general helpers' range checks dead: amax/6 is
// Markstein's division with no fallback (a dividend below 2^-100, where it could be inexact,
// gives a quotient far below the 2^-6 the scale is clamped to), and 1/value for a normal E4M3
// value is the fast path of the correctly rounded reciprocal (MUFU.RCP and one Newton step,
// what __frcp_rn runs for every input that is not near the ends of the exponent range).
template <int FMT>
struct PScale {
    float value[2], rcp[2];
    u32 bytes[2];
    __device__ __forceinline__ explicit PScale(const float (&amax)[2]) {
        if (FMT == MX) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                bytes[h] = e8m0_rceil_sixth(__float_as_uint(amax[h]));
                value[h] = e8m0_to_f32(bytes[h]);
                rcp[h] = e8m0_reciprocal(bytes[h]);
            }
        } else {
            float sixth[2];
#pragma unroll
            for (int h = 0; h < 2; ++h)  // (above 448: the conversion's satfinite gives 448)
                sixth[h] = fmaxf(div_markstein_nonneg(amax[h], 6.0f, SIXTH), 0.015625f);
            const u32 pair = e4m3x2_round(sixth[0], sixth[1]);
            e4m3x2_to_f32(pair, value[0], value[1]);
            bytes[0] = pair & 0xffu;
            bytes[1] = pair >> 8;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float r;
                asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(value[h]));
                rcp[h] = __fmaf_rn(r, __fmaf_rn(-value[h], r, 1.0f), r);
            }
        }
    }
    // p times the reciprocal scale of row half h, ready for E2M1 rounding.
    __device__ __forceinline__ float scaled(float p, int h) const { return __fmul_rn(p, rcp[h]); }
    // p requantized and dequantized: RN(E2M1-grid(scaled(p)) · value), which is what
    // e2m1_grid and a multiplication by the value give, in fewer steps. No saturation at 6:
    // scaled(p) <= amax / value (one ulp more for NVFP4's rounded reciprocal), at most 6 for
    // RCEIL and 6 / (1 - 2^-4) < 7 for the round-to-nearest E4M3 scale, so the grid never
    // rounds up to 8. MXFP4: the value is a
    // power of two, so rounding p / value to the grid and multiplying back is rounding p to
    // the grid scaled by the value: one add and subtract of max(binade(p), value)·1.5·2^22.
    __device__ __forceinline__ float requantized(float p, int h) const {
        if (FMT == MX) {
            const u32 binade = max(__float_as_uint(p) & 0x7f800000u, __float_as_uint(value[h]));
            const float c = __fmul_rn(__uint_as_float(binade), 6291456.0f);
            return __fsub_rn(__fadd_rn(p, c), c);
        }
        const float v = scaled(p, h);
        const u32 binade = max(__float_as_uint(v) & 0x7f800000u, 0x3f800000u);
        const float c = __fmul_rn(__uint_as_float(binade), 6291456.0f);
        return __fmul_rn(__fsub_rn(__fadd_rn(v, c), c), value[h]);
    }
};

// P of one key tile requantized in place (reference.rs: p_requantize): p holds this lane's NT
// D tiles of layout DL, and scaled_exp2_of(p, row half) is exp2(S - m)·P_SCALE of each (a
// multiplication by P_SCALE when the caller has taken exp2 already; a body may take it here
// instead, inside the blocks' loop, for its scheduler, with P_SCALE in the exponent). The
// values are requantized in blocks of the input format's size along the keys (B / DL::n tiles)
// per row and dequantized (still scaled: P_SCALE cancels in O / l); lsum gets this lane's sums
// of the dequantized values per row half, in the order the reference sums them.
template <int FMT, class DL, int NT, class Exp2>
__device__ __forceinline__ void requantize_p(float (&p)[NT][DL::regs], float (&lsum)[2], Exp2 scaled_exp2_of) {
    constexpr int PT = Blk<FMT>::n / DL::n;
    static_assert(NT % PT == 0, "a key tile holds whole P blocks");
    lsum[0] = lsum[1] = 0.0f;
#pragma unroll
    for (int blk = 0; blk < NT / PT; ++blk) {
        // The blocks' maxima start from their first element (P >= 0: the same as from 0).
        float amax[2];
        bool first[2] = {true, true};
#pragma unroll
        for (int nt = PT * blk; nt < PT * blk + PT; ++nt)
#pragma unroll
            for (int r = 0; r < DL::regs; ++r) {
                const int h = d_half_of<DL>(r);
                p[nt][r] = scaled_exp2_of(p[nt][r], h);
                amax[h] = first[h] ? p[nt][r] : fmaxf(amax[h], p[nt][r]);
                first[h] = false;
            }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            amax[h] = fmaxf(amax[h], __shfl_xor_sync(0xffffffffu, amax[h], 1));
            amax[h] = fmaxf(amax[h], __shfl_xor_sync(0xffffffffu, amax[h], 2));
        }
        const PScale<FMT> ps(amax);
#pragma unroll
        for (int nt = PT * blk; nt < PT * blk + PT; ++nt)
#pragma unroll
            for (int r = 0; r < DL::regs; ++r) {
                const int h = d_half_of<DL>(r);
                const float q = ps.requantized(p[nt][r], h);
                p[nt][r] = q;
                lsum[h] = __fadd_rn(lsum[h], q);
            }
    }
}

// ---- the online softmax's row state ---------------------------------------------------------

// The tile's row maxima tmax (per row half, this lane's part) reduced over the row's four
// lanes; the integer running maxima m_run advanced (reference.rs: reference_quantized);
// alpha = 2^(m_old - m_new) exactly (0 before the first key), m_use the maximum to subtract
// (0 while a row has seen only masked keys, so exp2(-inf - 0) = 0). SLACK > 0: the running
// maximum moves only when the tile's exceeds it by more than SLACK, so O is rescaled less
// often and the caller's P carries SLACK binades of headroom (its scale 2^-SLACK lower).
template <int SLACK = 0>
__device__ __forceinline__ void advance_row_max(float (&tmax)[2], float (&m_run)[2], float (&alpha)[2],
                                                float (&m_use)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        tmax[h] = fmaxf(tmax[h], __shfl_xor_sync(0xffffffffu, tmax[h], 1));
        tmax[h] = fmaxf(tmax[h], __shfl_xor_sync(0xffffffffu, tmax[h], 2));
        const float c = ceilf(tmax[h]);
        float m_new;
        if constexpr (SLACK == 0)
            m_new = fmaxf(m_run[h], c);
        else
            m_new = c > m_run[h] + (float)SLACK ? c : m_run[h];
        const int drop = m_run[h] == NEG_INF ? -1000 : (int)(m_run[h] - m_new);
        alpha[h] = drop < -126 ? 0.0f : __int_as_float((127 + drop) << 23);
        m_run[h] = m_new;
        m_use[h] = m_new == NEG_INF ? 0.0f : m_new;
    }
}

// l = l·alpha + (this tile's dequantized P summed over the row's four lanes).
__device__ __forceinline__ void advance_row_sum(float (&lsum)[2], float (&l_run)[2], const float (&alpha)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        lsum[h] = __fadd_rn(lsum[h], __shfl_xor_sync(0xffffffffu, lsum[h], 1));
        lsum[h] = __fadd_rn(lsum[h], __shfl_xor_sync(0xffffffffu, lsum[h], 2));
        l_run[h] = __fadd_rn(__fmul_rn(l_run[h], alpha[h]), lsum[h]);
    }
}

// O·alpha per row half, only when some row of the warp has a new maximum (alpha = 1 is the
// common case once the maxima settle; multiplying by 1 would change nothing).
template <class DL, int TILES>
__device__ __forceinline__ void rescale_o(float (&o)[TILES][DL::regs], const float (&alpha)[2]) {
    if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
        for (int j = 0; j < TILES; ++j)
#pragma unroll
            for (int r = 0; r < DL::regs; ++r) o[j][r] = __fmul_rn(o[j][r], alpha[d_half_of<DL>(r)]);
    }
}

// ---- what both kernels do at the ends -------------------------------------------------------

// Where head bh's operands start, in bytes from the tensors' starts (QuantizedQkv's layout:
// Q [bh][Sq][D/2] codes and [bh][Sq][D/B] scales, K [kv][Sk][D/2] and [kv][Sk][D/B], Vᵀ
// [kv][D][Skp/2] and [kv][D][Skp/B]). kv = bh / kv_group is the K/V head of Q head bh:
// grouped-query attention shares one K/V head among kv_group consecutive Q heads, and with
// H = kv_group·Hkv, (b·H + h) / kv_group = b·Hkv + h / kv_group (src/attention/shape.rs,
// kv_head_of). kv_group = 1 (the default) is multi-head attention.
struct HeadOffsets {
    u64 q_data, q_scale, k_data, k_scale, v_data, v_scale;
};
template <int D, int FMT>
__device__ __forceinline__ HeadOffsets head_offsets(u64 bh, int Sq, int Sk, int Skp, u32 kv_group = 1) {
    constexpr int B = Blk<FMT>::n;
    const u64 kv = bh / kv_group;
    return {bh * Sq * (D / 2), bh * Sq * (D / B), kv * Sk * (D / 2), kv * Sk * (D / B), kv * D * (Skp / 2), kv * D * (Skp / B)};
}

// The keys row block rb (BR query rows) visits: all of them, or with the causal mask those up
// to its last row.
__device__ __forceinline__ int row_block_key_end(int rb, int Sq, int Sk, int causal) {
    const int q_last = min(rb * BR + BR, Sq) - 1;
    return causal ? min(Sk, q_last + 1) : Sk;
}
// ... for a grid of one CTA per row block.
__device__ __forceinline__ int cta_key_end(int Sq, int Sk, int causal) {
    return row_block_key_end(blockIdx.x, Sq, Sk, causal);
}

// Division by one row's l, rounded as __fdiv_rn rounds: its fast path's steps (an approximate
// reciprocal refined once, then the quotient corrected by its FMA residual, which makes it the
// correctly rounded o / l while nothing is subnormal or overflows), with the reciprocal formed
// once per row instead of once per value. __fdiv_rn spent 11 instructions and a branch on each
// of a thread's D / 2 values; this spends 3.
struct RowDivisor {
    float l, r;
    __device__ __forceinline__ explicit RowDivisor(float l_) : l(l_) {
        float r0;
        asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r0) : "f"(l_));
        r = __fmaf_rn(r0, __fmaf_rn(r0, -l_, 1.0f), r0);
    }
    __device__ __forceinline__ float div(float o) const {
        const float q = __fmul_rn(o, r);
        return __fmaf_rn(r, __fmaf_rn(-q, l, o), q);
    }
};

// O / l times V's tensor scale, f32 out [bh][Sq][D], from the accumulators of a warp's 16 rows
// starting at q0 (D / n tiles of the D layout DL).
template <class DL, int D>
__device__ __forceinline__ void store_o(const float (&o)[D / DL::n][DL::regs], const float (&l_run)[2], float v_ts,
                                        float* out, u64 bh, int Sq, int q0, int lane) {
    const RowDivisor by[2] = {RowDivisor(l_run[0]), RowDivisor(l_run[1])};
#pragma unroll
    for (int j = 0; j < D / DL::n; ++j)
#pragma unroll
        for (int r = 0; r < DL::regs; ++r) {
            const int row = q0 + DL::row(lane, r), d = j * DL::n + DL::col(lane, r);
            if (row < Sq) out[(bh * Sq + row) * D + d] = __fmul_rn(by[d_half_of<DL>(r)].div(o[j][r]), v_ts);
        }
}

}  // namespace attn

// An entry point attn_<format>_d<D> around the body's ATTN_BODY<D, FMT> (attn::attention, or
// what the body names) with the body's ATTN_LAUNCH_BOUNDS (the host's signature:
// src/attention/kernel.rs, enqueue_raw). bh_count, counters and partials are for the
// persistent wgmma bodies (attn_stream_k.cuh); the others take a grid of (row blocks, heads).
// factors is the FP8 body's row factors (attn_wgmma_fp8.cuh; ATTN_FACTORS_ARG passes it on),
// null for the others. kv_group is Q heads per K/V head (head_offsets), 1 without
// grouped-query attention.
#define ATTN_ENTRY(NAME, D, FMT)                                                                   \
    extern "C" __global__ void ATTN_LAUNCH_BOUNDS                                                  \
        NAME(const unsigned char* q_data, const unsigned char* q_scale, const unsigned char* k_data,   \
             const unsigned char* k_scale, const unsigned char* v_data, const unsigned char* v_scale,  \
             float* out, unsigned Sq, unsigned Sk, unsigned Skp, unsigned causal, const float* ts,     \
             unsigned c0_bits, unsigned bh_count, unsigned* counters, float* partials,                \
             const int* factors, unsigned kv_group) {                                              \
        ATTN_BODY<D, FMT>(q_data, q_scale, k_data, k_scale, v_data, v_scale, out, (int)Sq, (int)Sk, \
                          (int)Skp, (int)causal, ts, __uint_as_float(c0_bits), bh_count, counters,  \
                          partials ATTN_FACTORS_ARG, kv_group);                                     \
    }
