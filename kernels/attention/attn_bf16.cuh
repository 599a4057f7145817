// The bf16 body of attn_fp4.cu, for sm_90 and later: fused FP4 attention forward,
// O = softmax(Q·Kᵀ/√d)·V with Q, K, V in MXFP4 (E2M1 codes + E8M0 scales per 32) or NVFP4
// (E2M1 codes + E4M3 scales per 16, and an f32 tensor scale), as `fp4probe quantize` writes
// them; the score matrix kept in registers, both products on tensor cores (mma.sync m16n8k16
// bf16 → f32).
//
// Exactness: an E2M1 code times its E8M0 or E4M3 block scale is exactly a bf16 (at most six
// significant bits, within bf16's exponent range), so decoding FP4 to bf16 in registers loses
// nothing and the bf16 MMA forms exact products; block-scale semantics are preserved. NVFP4's
// tensor scales are applied to S (folded into the score factor) and to O. P is requantized
// after scaling by 448·6 relative to an integer running row maximum, in V's block format
// (NVFP4 one-level, or MXFP4 with RCEIL scales: reference.rs p_spec), so every rescaling
// factor is a power of two and the tiled online softmax equals the two-pass scheme of
// src/attention (reference_quantized); l is the sum of the dequantized P. The parts shared
// with the sm_120a kernel are in attn_common.cuh.
//
// Operand placement: every fragment coordinate comes from the generated tables' closed forms
// (kernels/generated/m16n8k16.f32.bf16.bf16.f32.cuh: a_/b_/d_row_formula, ..._col_formula);
// the kernel writes no lane formula of its own. What it relies on beyond them (that a D
// fragment row is shared by lanes lane^1, lane^2, and that two D tiles side by side are one A
// fragment) is checked against those closed forms by static_assert below.
//
// Inputs (row-major, bh = batch·heads + head, kv = bh / kv_group its K/V head):
//   q_data [bh][Sq][D/2], q_scale [bh][Sq][D/BLK]   FP4 along D (even index: low nibble)
//   k_data [kv][Sk][D/2], k_scale [kv][Sk][D/BLK]   BLK = 32 (MXFP4) or 16 (NVFP4)
//   v_data [kv][D][Skp/2], v_scale [kv][D][Skp/BLK] FP4 of Vᵀ along the keys, Skp = Sk
//                                                    rounded up to 32 (zero padding)
//   out    [bh][Sq][D] f32
//   ts     the tensor scales of Q, K, V (three f32 in device memory; 1 for MXFP4), so a
//          pipeline that quantizes on the GPU never waits for them on the host
//   c0     log2(e)/√D (f32); the kernel's score factor is (ts_q · ts_k) · c0
// Launch: grid (ceil(Sq/(16·ATTN_WARPS)), B·H), 32·ATTN_WARPS threads (16 query rows a warp),
// tiles of 64 keys (32 for D = 256). Per key tile: the tile's FP4 bytes, fetched into
// registers during the previous tile's work, are decoded to bf16 in shared memory by all
// threads; each warp then reads its B fragments with ldmatrix.x4.

#pragma once

#include "attention/attn_common.cuh"
#include "generated/m16n8k16.f32.bf16.bf16.f32.cuh"

namespace attn {

namespace L = ::fp4probe::m16n8k16_f32_bf16_bf16_f32;
// ---- what the kernel assumes of the layout, checked against the generated closed forms ----

struct DLayout {
    enum : int { regs = L::kD_regs, n = L::kN };
    static FP4PROBE_HD constexpr int row(int lane, int reg) { return L::d_row_formula(lane, reg, 0); }
    static FP4PROBE_HD constexpr int col(int lane, int reg) { return L::d_col_formula(lane, reg, 0); }
};
static_assert(d_rows_shared_by_xor_1_2<DLayout>(), "D rows are not shared by lane^1, lane^2");
static_assert(d_half_is_lane_independent<DLayout>(), "D register halves differ between lanes");
FP4PROBE_HD constexpr int d_half(int reg) { return d_half_of<DLayout>(reg); }

// Keys per tile: 64, or 32 for D = 256 (the decoded tiles must fit 48 KiB of shared memory).
template <int D>
struct Tile {
    static constexpr int BC = D == 256 ? 32 : 64;
    static constexpr int NT = BC / L::kN;  // n8 tiles of S per key tile
};
// The D register of tile (k / kN) that holds A element (reg, elem) of the same lane, when two
// D tiles side by side (columns 0..7, 8..15) are read as one A fragment (16 x 16); -1 if none.
FP4PROBE_HD constexpr int d_reg_for_a(int lane, int reg, int elem) {
    const int m = L::a_row_formula(lane, reg, elem), k = L::a_col_formula(lane, reg, elem);
    for (int dreg = 0; dreg < L::kD_regs; ++dreg)
        if (L::d_row_formula(lane, dreg, 0) == m && L::d_col_formula(lane, dreg, 0) == k % L::kN) return dreg;
    return -1;
}
FP4PROBE_HD constexpr int d_tile_for_a(int lane, int reg, int elem) { return L::a_col_formula(lane, reg, elem) / L::kN; }
FP4PROBE_HD constexpr bool d_tiles_form_a() {
    for (int lane = 0; lane < 32; ++lane)
        for (int reg = 0; reg < L::kA_regs; ++reg)
            for (int e = 0; e < L::kA_elems_per_reg; ++e)
                if (d_reg_for_a(lane, reg, e) != d_reg_for_a(0, reg, e) || d_reg_for_a(lane, reg, e) < 0 ||
                    d_tile_for_a(lane, reg, e) != d_tile_for_a(0, reg, e))
                    return false;
    return true;
}
static_assert(d_tiles_form_a(), "two D tiles are not one A fragment lane by lane");

// A and B registers hold two elements that are neighbours along k, the even one first: one
// FP4 byte (low nibble first) decodes to one register.
FP4PROBE_HD constexpr bool k_pairs_are_bytes() {
    for (int lane = 0; lane < 32; ++lane) {
        for (int reg = 0; reg < L::kA_regs; ++reg)
            if (L::a_col_formula(lane, reg, 0) % 2 != 0 || L::a_col_formula(lane, reg, 1) != L::a_col_formula(lane, reg, 0) + 1 ||
                L::a_row_formula(lane, reg, 1) != L::a_row_formula(lane, reg, 0))
                return false;
        for (int reg = 0; reg < L::kB_regs; ++reg)
            if (L::b_row_formula(lane, reg, 0) % 2 != 0 || L::b_row_formula(lane, reg, 1) != L::b_row_formula(lane, reg, 0) + 1 ||
                L::b_col_formula(lane, reg, 1) != L::b_col_formula(lane, reg, 0))
                return false;
    }
    return L::kA_elems_per_reg == 2 && L::kB_elems_per_reg == 2;
}
static_assert(k_pairs_are_bytes(), "A/B register pairs are not k-neighbours");

// B fragments come from shared memory by ldmatrix.x4, whose result layout the PTX ISA fixes:
// in matrix i (8 rows × 8 b16, row addresses from lanes 8i..8i+7), lane l receives row l/4,
// columns 2(l%4) and 2(l%4)+1, in register i. With B stored n-major (a row per n, k along the
// row), that is B register r = matrix r exactly when the measured B layout puts k = 8r +
// 2(l%4) + e and n = l/4 in lane l. Checked here against the generated closed forms; the
// kernel relies on nothing else about ldmatrix.
FP4PROBE_HD constexpr bool b_is_ldmatrix_layout() {
    for (int lane = 0; lane < 32; ++lane)
        for (int reg = 0; reg < L::kB_regs; ++reg)
            for (int e = 0; e < L::kB_elems_per_reg; ++e)
                if (L::b_row_formula(lane, reg, e) != 8 * reg + 2 * (lane % 4) + e || L::b_col_formula(lane, reg, e) != lane / 4)
                    return false;
    return L::kB_regs == 2 && L::kN == 8;
}
static_assert(b_is_ldmatrix_layout(), "B fragments are not ldmatrix's layout");

// Four 8×8 b16 matrices from shared memory; this lane gives the address of row lane%8 of
// matrix lane/8 (ldmatrix's convention). Volatile: it must stay between the barriers.
__device__ __forceinline__ void ldsm_x4(u32 (&r)[4], const void* row) {
    const u32 a = (u32)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

// ---- FP4 → bf16 -------------------------------------------------------------------------

// Two E2M1 codes (low nibble first) as bf16x2, unscaled: the magnitude bytes come from two
// byte tables by PRMT (low and high byte of 0, 0.5, 1, 1.5, 2, 3, 4, 6), the signs by shifts.
__device__ __forceinline__ u32 e2m1x2_to_bf16x2(u32 byte) {
    const u32 sel = (byte & 0x7u) | (byte & 0x70u);
    const u32 lo = __byte_perm(0xC0800000u, 0xC0804000u, sel);
    const u32 hi = __byte_perm(0x3F3F3F00u, 0x40404040u, sel);
    return __byte_perm(lo, hi, 0x5140) | ((byte & 0x8u) << 12) | ((byte & 0x80u) << 24);
}

// A block scale as bf16x2 (both halves). E8M0: 2^(s-127), byte 0 the bf16 subnormal 2^-127,
// 0xff NaN. E4M3 (NVFP4 scales are clamped to normals, [2^-6, 448]): exponent rebiased by 120.
template <int FMT>
__device__ __forceinline__ u32 scale_to_bf16x2(u32 s) {
    u32 h;
    if (FMT == MX) {
        h = s == 0 ? 0x0040u : (s == 0xffu ? 0x7fc0u : (s << 7));
    } else {
        h = ((s & 0x7fu) << 4) + 0x3c00u;
    }
    return h | (h << 16);
}

// Exact: every code·scale lies in bf16's range with at most six significant bits.
__device__ __forceinline__ u32 bf16x2_mul(u32 a, u32 b) {
    u32 d;
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}

template <int FMT>
__device__ __forceinline__ u32 decode(u32 byte, u32 scale_byte) {
    return bf16x2_mul(e2m1x2_to_bf16x2(byte), scale_to_bf16x2<FMT>(scale_byte));
}

__device__ __forceinline__ u32 f32x2_to_bf16x2(float lo, float hi) {
    u32 d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}

// ---- the kernel -------------------------------------------------------------------------

// A K tile and a Vᵀ tile, decoded once per CTA to bf16 (each element by one thread; every
// warp then reads its fragments with 32-bit loads). Rows are padded by 8 bf16 so that the 8
// rows × 4 pairs a fragment load touches fall in 32 different banks.
template <int D, int FMT>
struct Smem {
    static constexpr int BC = Tile<D>::BC;
    alignas(16) unsigned short k[BC][D + 8];
    alignas(16) unsigned short vt[D][BC + 8];
};

// 16 FP4 bytes (32 elements) with their block scales, as loaded from global memory: one
// scale byte (MXFP4) or two (NVFP4, low byte first) in `scales`.
struct Chunk {
    uint4 bytes;
    u32 scales;
};

// 32 elements decoded to 16 bf16x2 words and stored at dst (16-byte aligned).
template <int FMT>
__device__ __forceinline__ void decode32(const Chunk& c, unsigned short* dst) {
    const u32 w[4] = {c.bytes.x, c.bytes.y, c.bytes.z, c.bytes.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        // Bytes 4q..4q+3 hold elements 8q..8q+7: block 8q/32 (MXFP4) or 8q/16 (NVFP4).
        const u32 sc = FMT == MX ? c.scales : (c.scales >> (8 * (q / 2))) & 0xffu;
        uint4 out;
        out.x = decode<FMT>(w[q] & 0xffu, sc);
        out.y = decode<FMT>((w[q] >> 8) & 0xffu, sc);
        out.z = decode<FMT>((w[q] >> 16) & 0xffu, sc);
        out.w = decode<FMT>(w[q] >> 24, sc);
        *reinterpret_cast<uint4*>(dst + 8 * q) = out;
    }
}

// The FP4 bytes of one key tile that this thread decodes: K chunks first, then Vᵀ chunks.
// Loaded a tile ahead (fetch_tile) into registers, so the global-memory latency of the next
// tile overlaps the tensor-core work on this one; decoded to shared memory at the top of the
// next iteration (store_tile).
template <int D>
struct Prefetch {
    static constexpr int BC = Tile<D>::BC;
    static constexpr int K_CHUNKS = BC * (D / 32), V_CHUNKS = D * (BC / 32);
    static constexpr int KC = (K_CHUNKS + WARPS * 32 - 1) / (WARPS * 32);
    static constexpr int VC = (V_CHUNKS + WARPS * 32 - 1) / (WARPS * 32);
    Chunk k[KC], v[VC];
};

template <int FMT>
__device__ __forceinline__ u32 load_scales(const u8* p) {
    return FMT == MX ? (u32)*p : (u32)*reinterpret_cast<const unsigned short*>(p);
}

// Chunk i of the K tile is row i / (D/32), elements (i % (D/32))·32..; chunk i of the Vᵀ tile
// is row d = i / (BC/32), keys key0 + (i % (BC/32))·32... Rows past Sk (K) and keys past Skp
// (Vᵀ) read as zero codes.
template <int D, int FMT>
__device__ __forceinline__ void fetch_tile(Prefetch<D>& pf, const u8* k_data, const u8* k_scale, const u8* v_data,
                                           const u8* v_scale, int key0, int Sk, int Skp, int tid) {
    constexpr int B = Blk<FMT>::n, BC = Tile<D>::BC;
    const Chunk zero = {{0u, 0u, 0u, 0u}, 0u};
#pragma unroll
    for (int c = 0; c < Prefetch<D>::KC; ++c) {
        const int i = tid + c * WARPS * 32;
        const int row = i / (D / 32), e0 = (i % (D / 32)) * 32, key = key0 + row;
        pf.k[c] = zero;
        if (i < Prefetch<D>::K_CHUNKS && key < Sk) {
            pf.k[c].bytes = *reinterpret_cast<const uint4*>(k_data + (u64)key * (D / 2) + e0 / 2);
            pf.k[c].scales = load_scales<FMT>(k_scale + (u64)key * (D / B) + e0 / B);
        }
    }
#pragma unroll
    for (int c = 0; c < Prefetch<D>::VC; ++c) {
        const int i = tid + c * WARPS * 32;
        const int d = i / (BC / 32), e0 = (i % (BC / 32)) * 32, key = key0 + e0;
        pf.v[c] = zero;
        if (i < Prefetch<D>::V_CHUNKS && key < Skp) {
            pf.v[c].bytes = *reinterpret_cast<const uint4*>(v_data + (u64)d * (Skp / 2) + key / 2);
            pf.v[c].scales = load_scales<FMT>(v_scale + (u64)d * (Skp / B) + key / B);
        }
    }
}

template <int D, int FMT>
__device__ __forceinline__ void store_tile(Smem<D, FMT>& sm, const Prefetch<D>& pf, int tid) {
    constexpr int BC = Tile<D>::BC;
#pragma unroll
    for (int c = 0; c < Prefetch<D>::KC; ++c) {
        const int i = tid + c * WARPS * 32;
        if (i < Prefetch<D>::K_CHUNKS) decode32<FMT>(pf.k[c], &sm.k[i / (D / 32)][(i % (D / 32)) * 32]);
    }
#pragma unroll
    for (int c = 0; c < Prefetch<D>::VC; ++c) {
        const int i = tid + c * WARPS * 32;
        if (i < Prefetch<D>::V_CHUNKS) decode32<FMT>(pf.v[c], &sm.vt[i / (BC / 32)][(i % (BC / 32)) * 32]);
    }
}

template <int D, int FMT>
__device__ void attention(const u8* __restrict__ q_data, const u8* __restrict__ q_scale, const u8* __restrict__ k_data,
                          const u8* __restrict__ k_scale, const u8* __restrict__ v_data, const u8* __restrict__ v_scale,
                          float* __restrict__ out, int Sq, int Sk, int Skp, int causal, const float* ts, float c0,
                          u32 /*bh_count*/, u32* /*counters*/, float* /*partials*/,
                          u32 kv_group) {  // a grid of (row blocks, heads)
    const float c = __fmul_rn(__fmul_rn(ts[0], ts[1]), c0), v_ts = ts[2];
    constexpr int B = Blk<FMT>::n, BC = Tile<D>::BC, NT = Tile<D>::NT;
    __shared__ Smem<D, FMT> sm;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const u64 bh = blockIdx.y;
    const int q0 = blockIdx.x * BR + warp * 16;
    const HeadOffsets at = head_offsets<D, FMT>(bh, Sq, Sk, Skp, kv_group);
    q_data += at.q_data, q_scale += at.q_scale, k_data += at.k_data, k_scale += at.k_scale;
    v_data += at.v_data, v_scale += at.v_scale;

    // Q fragments, decoded once: D/16 chunks of k.
    u32 qa[D / 16][L::kA_regs];
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc)
#pragma unroll
        for (int r = 0; r < L::kA_regs; ++r) {
            const int row = q0 + L::a_row_formula(lane, r, 0), d = kc * 16 + L::a_col_formula(lane, r, 0);
            qa[kc][r] = row < Sq ? decode<FMT>(q_data[(u64)row * (D / 2) + d / 2], q_scale[(u64)row * (D / B) + d / B]) : 0u;
        }

    // Per row half (D rows g and g+8 of the lane): integer running max, sum, output.
    float m_run[2] = {NEG_INF, NEG_INF}, l_run[2] = {0.0f, 0.0f};
    float o[D / 8][L::kD_regs];
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
#pragma unroll
        for (int r = 0; r < L::kD_regs; ++r) o[j][r] = 0.0f;

    const int key_end = cta_key_end(Sq, Sk, causal);
    Prefetch<D> pf;
    fetch_tile<D, FMT>(pf, k_data, k_scale, v_data, v_scale, 0, Sk, Skp, tid);
    for (int key0 = 0; key0 < key_end; key0 += BC) {
        __syncthreads();
        store_tile<D, FMT>(sm, pf, tid);
        __syncthreads();
        if (key0 + BC < key_end) fetch_tile<D, FMT>(pf, k_data, k_scale, v_data, v_scale, key0 + BC, Sk, Skp, tid);

        // S = Q·Kᵀ for 16 rows × BC keys. One ldmatrix.x4 gives the B fragments of n8 tile nt
        // for two k16 steps (K rows are the n of B, d along the row).
        u32 s[NT][L::kD_regs];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
            for (int r = 0; r < L::kD_regs; ++r) s[nt][r] = 0u;
#pragma unroll
            for (int kc = 0; kc < D / 16; kc += 2) {
                u32 m[4];
                ldsm_x4(m, &sm.k[nt * L::kN + lane % 8][kc * 16 + 8 * (lane / 8)]);
                const u32 b0[L::kB_regs] = {m[0], m[1]}, b1[L::kB_regs] = {m[2], m[3]};
                L::mma(s[nt], qa[kc], b0, s[nt]);
                L::mma(s[nt], qa[kc + 1], b1, s[nt]);
            }
        }

        // Scores in log2 units, masked; the tile's row maxima.
        float p[NT][L::kD_regs];
        float tmax[2] = {NEG_INF, NEG_INF};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int r = 0; r < L::kD_regs; ++r) {
                const int row = q0 + L::d_row_formula(lane, r, 0);
                const int key = key0 + nt * L::kN + L::d_col_formula(lane, r, 0);
                const bool masked = key >= Sk || (causal && key > row);
                const float v = masked ? NEG_INF : __fmul_rn(__uint_as_float(s[nt][r]), c);
                p[nt][r] = v;
                const int h = d_half(r);
                tmax[h] = fmaxf(tmax[h], v);
            }
        float alpha[2], m_use[2];
        advance_row_max(tmax, m_run, alpha, m_use);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int r = 0; r < L::kD_regs; ++r) {
                const int h = d_half(r);
                p[nt][r] = ex2(__fsub_rn(p[nt][r], m_use[h]));
            }

        float lsum[2];
        requantize_p<FMT, DLayout>(p, lsum, [](float e, int) { return __fmul_rn(e, P_SCALE); });
        advance_row_sum(lsum, l_run, alpha);
        rescale_o<DLayout>(o, alpha);

        // O += P·V: P's D tiles read as A fragments (checked above), V from Vᵀ in shared memory
        // (Vᵀ rows are the n of B, keys along the row): one ldmatrix.x4 per n8 tile j gives
        // the B fragments of two k16 steps.
#pragma unroll
        for (int kc = 0; kc < BC / 16; kc += 2) {
            u32 a[2][L::kA_regs];
#pragma unroll
            for (int x = 0; x < 2; ++x)
#pragma unroll
                for (int r = 0; r < L::kA_regs; ++r) {
                    const int t0 = 2 * (kc + x) + d_tile_for_a(0, r, 0), t1 = 2 * (kc + x) + d_tile_for_a(0, r, 1);
                    a[x][r] = f32x2_to_bf16x2(p[t0][d_reg_for_a(0, r, 0)], p[t1][d_reg_for_a(0, r, 1)]);
                }
#pragma unroll
            for (int j = 0; j < D / 8; ++j) {
                u32 m[4];
                ldsm_x4(m, &sm.vt[j * L::kN + lane % 8][kc * 16 + 8 * (lane / 8)]);
                const u32 b0[L::kB_regs] = {m[0], m[1]}, b1[L::kB_regs] = {m[2], m[3]};
                u32 acc[L::kD_regs];
#pragma unroll
                for (int r = 0; r < L::kD_regs; ++r) acc[r] = __float_as_uint(o[j][r]);
                L::mma(acc, a[0], b0, acc);
                L::mma(acc, a[1], b1, acc);
#pragma unroll
                for (int r = 0; r < L::kD_regs; ++r) o[j][r] = __uint_as_float(acc[r]);
            }
        }
    }

    store_o<DLayout, D>(o, l_run, v_ts, out, bh, Sq, q0, lane);
}

}  // namespace attn
