// The block-scale body of attn_fp4.cu (ATTN_BLOCK_SCALE), for sm_120a: fused FP4 attention
// forward, O = softmax(Q·Kᵀ/√d)·V, with the FP4 operands fed straight to the block-scaled
// tensor-core instruction, no decoding:
//   mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale
//     MXFP4: .scale_vec::2X ... .ue8m0 (E8M0 scales per 32 k)
//     NVFP4: .scale_vec::4X ... .ue4m3 (E4M3 scales per 16 k)
//   or, with ATTN_MXF8F6F4 (MXFP4 only), the article's instruction
//   mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X ... .ue8m0,
//     FP4 widened to 8-bit containers in registers.
// Same inputs, launch and entry points as attn_bf16.cuh (see there and attn_fp4.cu), same arithmetic
// (src/attention/reference.rs: reference_quantized): the integer running maximum, P scaled by
// 448·6 and requantized in V's block format (NVFP4 one-level, MXFP4 RCEIL: one instruction
// takes one scale type for both operands, so P's scales are V's type), l the sum of the
// dequantized P. NVFP4's tensor scales are applied to S (score factor) and to O.
//
// Operand placement comes from the generated headers of the two instructions (closed forms
// a_/b_/d_row_formula, ..._col_formula; scale tables kScaleA/B_lane/_byte through
// scale_a_lane() and friends); the kernel writes no lane formula of its own. What it relies on
// beyond them is static_assert-ed below:
// - an A or B register is a run of FP4 memory: 8 consecutive k of one row (column), element e
//   in bits 4e..4e+3, the packed layout (even index in the low nibble), or with k32 4 k
//   widened to containers;
// - the scale words: a lane supplies the scales of one row (column) of A (B), k-block j in
//   byte j (selectors byte-id 0, thread-id 0);
// - S's D fragments are P's A fragment lane by lane once the keys are relabelled: P·V's k
//   slot κ is key κ of the key step (kK keys; so V loads are contiguous), and S's n8 tile j,
//   column n is computed for key key[j][n] (Plan), the k slot that the lane holding that D
//   element puts it in. The relabelling permutes keys within a step only, and every P block
//   (16 or 32 k slots) is a block of consecutive keys, so block-scale semantics are untouched.
//
// Built with ATTN_EMULATE_BLOCK_SCALE (for sm_90), the instruction is replaced by a software
// model written from the PTX ISA's layouts (mma_block_scale_emulated.cuh), so the data flow
// above can be validated on a GPU without the instruction. That checks the kernel; the
// instruction itself is measured by `fp4probe fragment` / `scale` on sm_120 hardware.

#pragma once

#include "attention/attn_common.cuh"
#ifdef ATTN_MXF8F6F4
#include "generated/m16n8k32.kind_mxf8f6f4.block_scale.scale_vec_1X.f32.e2m1.e2m1.f32.ue8m0.cuh"
#else
#include "generated/m16n8k64.kind_mxf4nvf4.block_scale.scale_vec_2X.f32.e2m1.e2m1.f32.ue8m0.cuh"
#include "generated/m16n8k64.kind_mxf4nvf4.block_scale.scale_vec_4X.f32.e2m1.e2m1.f32.ue4m3.cuh"
#endif
#ifdef ATTN_EMULATE_BLOCK_SCALE
#include "attention/mma_block_scale_emulated.cuh"
#endif

namespace attn {

// The kernel's view of one generated instruction header: its closed forms, scale tables (at
// selectors byte-id 0, thread-id 0) and the instruction.
#ifdef ATTN_EMULATE_BLOCK_SCALE
#define ATTN_BS_MMA(NS, VEC, UE4M3) emu::mma_e2m1<NS::kK, VEC, UE4M3>(d, a, b, c, sa, sb)
#else
#define ATTN_BS_MMA(NS, VEC, UE4M3) NS::mma<0, 0, 0, 0>(d, a, b, c, sa, sb)
#endif
#define ATTN_BS_VARIANT(FMT_, NS, VEC, UE4M3)                                                                     \
    template <>                                                                                                   \
    struct Bs<FMT_> {                                                                                             \
        enum : int { kK = NS::kK, kN = NS::kN, kA_regs = NS::kA_regs, kB_regs = NS::kB_regs, kD_regs = NS::kD_regs }; \
        enum : int { kKB = NS::kScale_kblocks, kKPB = NS::kScale_k_per_block };                                   \
        enum : int { kA_elems = NS::kA_elems_per_reg, kB_elems = NS::kB_elems_per_reg };                          \
        enum : int { kA_bits = NS::kA_container_bits, kB_bits = NS::kB_container_bits };                          \
        enum : int { kA_shift = NS::kA_value_shift, kB_shift = NS::kB_value_shift, kVec = VEC };                  \
        static FP4PROBE_HD constexpr int a_row(int l, int r, int e) { return NS::a_row_formula(l, r, e); }        \
        static FP4PROBE_HD constexpr int a_col(int l, int r, int e) { return NS::a_col_formula(l, r, e); }        \
        static FP4PROBE_HD constexpr int b_row(int l, int r, int e) { return NS::b_row_formula(l, r, e); }        \
        static FP4PROBE_HD constexpr int b_col(int l, int r, int e) { return NS::b_col_formula(l, r, e); }        \
        static FP4PROBE_HD constexpr int d_row(int l, int r) { return NS::d_row_formula(l, r, 0); }               \
        static FP4PROBE_HD constexpr int d_col(int l, int r) { return NS::d_col_formula(l, r, 0); }               \
        static FP4PROBE_HD constexpr int sa_lane(int row, int kb) { return NS::scale_a_lane(0, 0, row, kb); }     \
        static FP4PROBE_HD constexpr int sa_byte(int row, int kb) { return NS::scale_a_byte(0, 0, row, kb); }     \
        static FP4PROBE_HD constexpr int sb_lane(int col, int kb) { return NS::scale_b_lane(0, 0, col, kb); }     \
        static FP4PROBE_HD constexpr int sb_byte(int col, int kb) { return NS::scale_b_byte(0, 0, col, kb); }     \
        static __device__ __forceinline__ void mma(u32 (&d)[4], const u32 (&a)[4], const u32 (&b)[2],             \
                                                   const u32 (&c)[4], u32 sa, u32 sb) {                           \
            ATTN_BS_MMA(NS, VEC, UE4M3);                                                                          \
        }                                                                                                         \
    };

// The instruction per input format. Default: m16n8k64 kind::mxf4nvf4 for both (MXFP4
// scale_vec::2X ue8m0, NVFP4 4X ue4m3). With ATTN_MXF8F6F4: MXFP4 only, by m16n8k32
// kind::mxf8f6f4 scale_vec::1X ue8m0 (FP4 in 8-bit containers, bits 5..2), the instruction
// the article used; it has no E4M3 scales, so there is no NVFP4 entry.
template <int FMT>
struct Bs;
#ifdef ATTN_MXF8F6F4
ATTN_BS_VARIANT(MX, ::fp4probe::m16n8k32_kind_mxf8f6f4_block_scale_scale_vec_1X_f32_e2m1_e2m1_f32_ue8m0, 1, false)
#else
ATTN_BS_VARIANT(MX, ::fp4probe::m16n8k64_kind_mxf4nvf4_block_scale_scale_vec_2X_f32_e2m1_e2m1_f32_ue8m0, 2, false)
ATTN_BS_VARIANT(NV, ::fp4probe::m16n8k64_kind_mxf4nvf4_block_scale_scale_vec_4X_f32_e2m1_e2m1_f32_ue4m3, 4, true)
#endif

// The D layout as attn_common.cuh's checks take it.
template <int FMT>
struct DLayoutOf {
    enum : int { regs = Bs<FMT>::kD_regs, n = Bs<FMT>::kN };
    static FP4PROBE_HD constexpr int row(int lane, int reg) { return Bs<FMT>::d_row(lane, reg); }
    static FP4PROBE_HD constexpr int col(int lane, int reg) { return Bs<FMT>::d_col(lane, reg); }
};

// S tiles (n8) per key step (kK keys): one P·V k-step.
template <int FMT>
struct Step {
    static constexpr int NT = Bs<FMT>::kK / Bs<FMT>::kN;
};

// ---- what the kernel assumes of the layouts, checked against the generated closed forms ----

// Every A and B register is E consecutive k of one row (column), starting at a multiple of E,
// element e's 4 value bits at bit C·e + shift: E = 8 packed nibbles (C = 4, shift 0), one
// 32-bit word of FP4 memory; or E = 4 bytes with the nibble in bits 5..2 (C = 8, shift 2),
// one 16-bit word of FP4 memory widened by fp4_containers.
template <int FMT>
FP4PROBE_HD constexpr bool registers_are_fp4_runs() {
    using M = Bs<FMT>;
    const bool packed = M::kA_elems == 8 && M::kA_bits == 4 && M::kA_shift == 0;
    const bool container = M::kA_elems == 4 && M::kA_bits == 8 && M::kA_shift == 2;
    if (!(packed || container) || M::kB_elems != M::kA_elems || M::kB_bits != M::kA_bits || M::kB_shift != M::kA_shift)
        return false;
    constexpr int E = M::kA_elems;
    for (int lane = 0; lane < 32; ++lane) {
        for (int r = 0; r < M::kA_regs; ++r)
            for (int e = 0; e < E; ++e)
                if (M::a_col(lane, r, e) != M::a_col(lane, r, 0) + e || M::a_col(lane, r, 0) % E != 0 ||
                    M::a_row(lane, r, e) != M::a_row(lane, r, 0))
                    return false;
        for (int r = 0; r < M::kB_regs; ++r)
            for (int e = 0; e < E; ++e)
                if (M::b_row(lane, r, e) != M::b_row(lane, r, 0) + e || M::b_row(lane, r, 0) % E != 0 ||
                    M::b_col(lane, r, e) != M::b_col(lane, r, 0))
                    return false;
    }
    return true;
}

// A scale word supplies one row (B: column) with k-block j in byte j, and the row's lane is
// the same for every k-block.
template <int FMT>
FP4PROBE_HD constexpr bool scale_words_are_rows() {
    using M = Bs<FMT>;
    for (int kb = 0; kb < M::kKB; ++kb) {
        for (int row = 0; row < 16; ++row)
            if (M::sa_byte(row, kb) != kb || M::sa_lane(row, kb) != M::sa_lane(row, 0) || M::sa_lane(row, kb) < 0)
                return false;
        for (int col = 0; col < M::kN; ++col)
            if (M::sb_byte(col, kb) != kb || M::sb_lane(col, kb) != M::sb_lane(col, 0) || M::sb_lane(col, kb) < 0)
                return false;
    }
    return true;
}

// How S's D tiles become P's A fragment, worked out once at compile time (Plan, plan()):
// - src[reg][elem]: P·V's A element (reg, elem) comes from S's D element (tile, dreg) of the
//   same lane, encoded tile * kD_regs + dreg: the i-th A element of a row half (in (reg,
//   elem) order) pairs with the i-th D element of that half (in (tile, dreg) order), taken
//   from lane 0 (the check below shows the rows match in every lane);
// - key[tile][n]: the key (k slot of the step) S tile j, column n is computed for, the k slot
//   of the A element its D value is paired with (-1 if none);
// - holder[row][kb]: a lane holding P block (row, kb) and the register it is in.
template <int FMT>
struct Plan {
    int src[4][8];
    int key[Step<FMT>::NT][8];
    int holder_lane[16][4], holder_reg[16][4];
};
template <int FMT>
FP4PROBE_HD constexpr int a_block(int lane, int r) { return Bs<FMT>::a_col(lane, r, 0) / Bs<FMT>::kKPB; }
template <int FMT>
FP4PROBE_HD constexpr Plan<FMT> plan() {
    using M = Bs<FMT>;
    Plan<FMT> p{};
    for (int r = 0; r < 4; ++r)
        for (int e = 0; e < 8; ++e) p.src[r][e] = -1;
    for (int h = 0; h < 2; ++h) {
        int i = 0;
        for (int r = 0; r < M::kA_regs; ++r)
            for (int e = 0; e < M::kA_elems; ++e) {
                if (M::a_row(0, r, e) / 8 != h) continue;
                int k = 0;
                for (int j = 0; j < Step<FMT>::NT; ++j)
                    for (int d = 0; d < M::kD_regs; ++d)
                        if (M::d_row(0, d) / 8 == h && k++ == i) p.src[r][e] = j * M::kD_regs + d;
                ++i;
            }
    }
    for (int j = 0; j < Step<FMT>::NT; ++j)
        for (int n = 0; n < 8; ++n) p.key[j][n] = -1;
    for (int lane = 0; lane < 32; ++lane)
        for (int r = 0; r < M::kA_regs; ++r)
            for (int e = 0; e < M::kA_elems; ++e) {
                const int src = p.src[r][e];
                if (src >= 0) p.key[src / M::kD_regs][M::d_col(lane, src % M::kD_regs)] = M::a_col(lane, r, e);
            }
    for (int row = 0; row < 16; ++row)
        for (int kb = 0; kb < 4; ++kb) p.holder_lane[row][kb] = p.holder_reg[row][kb] = -1;
    for (int lane = 0; lane < 32; ++lane)
        for (int r = 0; r < M::kA_regs; ++r) {
            const int row = M::a_row(lane, r, 0), kb = a_block<FMT>(lane, r);
            if (kb < 4) {
                p.holder_lane[row][kb] = lane;
                p.holder_reg[row][kb] = r;
            }
        }
    return p;
}
// The plan as a constant table (like the generated ones): device code reads it with indices
// that are compile-time after unrolling, so every read folds to an immediate (a local
// constexpr copy would be built in local memory at run time).
template <int FMT>
FP4PROBE_TABLE Plan<FMT> kPlan = plan<FMT>();

// The pairing is consistent: in every lane the paired elements share a row and the key of
// every D element is the k slot of its A element (so one key per (tile, column), however many
// lanes hold it); the keys are a permutation of the step's kK; a lane's keys are one per-lane
// base plus a per-tile offset (key[j][n] = key[0][n] + key[j][0] - key[0][0]).
template <int FMT>
FP4PROBE_HD constexpr bool s_tiles_form_p_fragment() {
    using M = Bs<FMT>;
    constexpr const Plan<FMT>& p = kPlan<FMT>;
    for (int lane = 0; lane < 32; ++lane)
        for (int r = 0; r < M::kA_regs; ++r)
            for (int e = 0; e < M::kA_elems; ++e) {
                const int src = p.src[r][e];
                if (src < 0) return false;
                const int d = src % M::kD_regs;
                if (M::d_row(lane, d) != M::a_row(lane, r, e) || p.key[src / M::kD_regs][M::d_col(lane, d)] != M::a_col(lane, r, e))
                    return false;
            }
    unsigned long long seen = 0;
    for (int j = 0; j < Step<FMT>::NT; ++j)
        for (int n = 0; n < M::kN; ++n) {
            if (p.key[j][n] < 0 || p.key[j][n] != p.key[0][n] + p.key[j][0] - p.key[0][0]) return false;
            seen |= 1ull << p.key[j][n];
        }
    return seen == (M::kK == 64 ? ~0ull : (1ull << M::kK) - 1) && M::kK <= 64 && M::kN == 8;
}

// A P block (one row, kKPB keys) spans both of a lane's registers of that row (the two k
// halves) when it is longer than half a step (m16n8k32 1X: one block a step), else one.
template <int FMT>
FP4PROBE_HD constexpr int p_block_regs() { return Bs<FMT>::kKPB > Bs<FMT>::kK / 2 ? 2 : 1; }
// The lanes that share a P block of a row: lane ^ x for x in the mask's span (1: pairs,
// 3: quads), kA_elems elements per register each.
template <int FMT>
FP4PROBE_HD constexpr int p_block_lanes_mask() { return Bs<FMT>::kKPB / (Bs<FMT>::kA_elems * p_block_regs<FMT>()) - 1; }
template <int FMT>
FP4PROBE_HD constexpr bool p_blocks_are_lane_groups() {
    constexpr int X = p_block_lanes_mask<FMT>();
    if (X != 1 && X != 3) return false;
    for (int lane = 0; lane < 32; ++lane)
        for (int r = 0; r < Bs<FMT>::kA_regs; ++r)
            for (int other = 0; other < 32; ++other) {
                const bool same_row = Bs<FMT>::a_row(other, r, 0) == Bs<FMT>::a_row(lane, r, 0);
                const bool grouped = (other & ~X) == (lane & ~X);
                if (same_row && (a_block<FMT>(other, r) == a_block<FMT>(lane, r)) != grouped) return false;
            }
    return true;
}

// The A registers of row half h are h and h + 2 (s = 0, 1: the step's two k halves), as
// d_half numbers the D registers; a lane's P scale bytes are indexed (h, s).
template <int FMT>
FP4PROBE_HD constexpr bool a_regs_are_half_and_side() {
    for (int lane = 0; lane < 32; ++lane)
        for (int r = 0; r < Bs<FMT>::kA_regs; ++r)
            if (Bs<FMT>::a_row(lane, r, 0) / 8 != r % 2 || Bs<FMT>::a_col(lane, r, 0) / (Bs<FMT>::kK / 2) != r / 2) return false;
    return Bs<FMT>::kA_regs == 4;
}

#define ATTN_BS_CHECKS(FMT_)                                                                                    \
    static_assert(d_rows_shared_by_xor_1_2<DLayoutOf<FMT_>>(), "D rows are not shared by lane^1, lane^2");    \
    static_assert(d_half_is_lane_independent<DLayoutOf<FMT_>>(), "D register halves differ between lanes");  \
    static_assert(registers_are_fp4_runs<FMT_>(), "A/B registers are not runs of FP4 memory");              \
    static_assert(scale_words_are_rows<FMT_>(), "a scale word does not hold one row's k-blocks in order");    \
    static_assert(s_tiles_form_p_fragment<FMT_>(), "S's D tiles do not pair with P's A fragment");           \
    static_assert(p_blocks_are_lane_groups<FMT_>(), "P blocks are not held by xor lane groups");             \
    static_assert(a_regs_are_half_and_side<FMT_>(), "A registers are not (row half, k half)");
ATTN_BS_CHECKS(MX)
#ifndef ATTN_MXF8F6F4
ATTN_BS_CHECKS(NV)
#endif

// ---- per-lane constants ------------------------------------------------------------------

// What this lane loads and supplies, from the tables (loops over compile-time indices, so
// each is a few selects at kernel start).
template <int FMT>
struct LaneMap {
    int a_scale_row;  // the row whose scale word this lane supplies (-1: none)
    int b_scale_col;  // the column whose scale word this lane supplies (-1: none)
    int k_base;       // key[0][its B column]: the key of the K row it loads for tile 0
    int ks_base;      // key[0][b_scale_col]: the key whose K scales it supplies for tile 0
    int d_key_base;   // key[0][d_col(lane, 0)]: the key of its S value (tile 0, register 0)
    int p_src[4];     // P scale byte kb: the lane that holds it ...
    int p_shift[4];   // ... at this bit offset of that lane's packed P scale word
    __device__ __forceinline__ explicit LaneMap(int lane) {
        using M = Bs<FMT>;
        constexpr const Plan<FMT>& p = kPlan<FMT>;
        a_scale_row = b_scale_col = -1;
        k_base = ks_base = d_key_base = 0;
#pragma unroll
        for (int row = 0; row < 16; ++row)
            if (M::sa_lane(row, 0) == lane) a_scale_row = row;
#pragma unroll
        for (int n = 0; n < M::kN; ++n) {
            if (M::sb_lane(n, 0) == lane) {
                b_scale_col = n;
                ks_base = p.key[0][n];
            }
            if (M::b_col(lane, 0, 0) == n) k_base = p.key[0][n];
            if (M::d_col(lane, 0) == n) d_key_base = p.key[0][n];
        }
#pragma unroll
        for (int kb = 0; kb < 4; ++kb) {
            p_src[kb] = lane;
            p_shift[kb] = 0;
        }
#pragma unroll
        for (int row = 0; row < 16; ++row)
#pragma unroll
            for (int kb = 0; kb < M::kKB; ++kb)
                if (row == a_scale_row) {
                    p_src[kb] = p.holder_lane[row][kb];
                    p_shift[kb] = 8 * p.holder_reg[row][kb];
                }
    }
};

// Key offsets within the step, the same in every lane: tile j's keys are the lane's base plus
// tile_off(j) (K rows, K scales) and its S register d's are d_key_base + d_off(j, d).
template <int FMT>
FP4PROBE_HD constexpr int tile_off(int j) {
    constexpr const Plan<FMT>& p = kPlan<FMT>;
    return p.key[j][0] - p.key[0][0];
}
template <int FMT>
FP4PROBE_HD constexpr int d_off(int j, int d) {
    constexpr const Plan<FMT>& p = kPlan<FMT>;
    return p.key[j][Bs<FMT>::d_col(0, d)] - p.key[0][Bs<FMT>::d_col(0, 0)];
}
template <int FMT>
FP4PROBE_HD constexpr bool d_keys_are_separable() {
    constexpr const Plan<FMT>& p = kPlan<FMT>;
    for (int lane = 0; lane < 32; ++lane)
        for (int j = 0; j < Step<FMT>::NT; ++j)
            for (int d = 0; d < Bs<FMT>::kD_regs; ++d)
                if (p.key[j][Bs<FMT>::d_col(lane, d)] != p.key[0][Bs<FMT>::d_col(lane, 0)] + d_off<FMT>(j, d)) return false;
    return true;
}
static_assert(d_keys_are_separable<MX>(), "S keys are not a lane base plus offsets");
#ifndef ATTN_MXF8F6F4
static_assert(d_keys_are_separable<NV>(), "S keys are not a lane base plus offsets");
#endif

// P blocks of every (row, k-block) have a holder, in the register of the row's half.
template <int FMT>
FP4PROBE_HD constexpr bool p_blocks_have_holders() {
    constexpr const Plan<FMT>& p = kPlan<FMT>;
    for (int row = 0; row < 16; ++row)
        for (int kb = 0; kb < Bs<FMT>::kKB; ++kb)
            if (p.holder_lane[row][kb] < 0 || p.holder_reg[row][kb] % 2 != row / 8) return false;
    return true;
}
static_assert(p_blocks_have_holders<MX>(), "a P block has no holder");
#ifndef ATTN_MXF8F6F4
static_assert(p_blocks_have_holders<NV>(), "a P block has no holder");
#endif

// kKB scale bytes (one per k-block) from p, as one word: 1, 2 (MXFP4) or 4 (NVFP4) bytes. For
// Q and K, whose scale rows are D / B bytes (a multiple of kKB), so p is aligned.
template <int FMT>
__device__ __forceinline__ u32 load_scale_word(const u8* p) {
    constexpr int KB = Bs<FMT>::kKB;
    return KB == 4 ? __ldg(reinterpret_cast<const unsigned*>(p))
                   : (KB == 2 ? (u32)__ldg(reinterpret_cast<const unsigned short*>(p)) : (u32)__ldg(p));
}

// Four E2M1 codes (16 bits, low nibble first) as four 8-bit containers, code in bits 5..2.
__device__ __forceinline__ u32 fp4_containers(u32 h) {
    const u32 y = __byte_perm(h, 0u, 0x1100);  // bytes b0 b0 b1 b1
    return ((y & 0x000f000fu) | ((y >> 4) & 0x0f000f00u)) << 2;
}

// One A/B register from FP4 memory at p (its first element): a 32-bit word of 8 packed codes,
// or 16 bits widened to 4 containers (registers_are_fp4_runs).
template <int FMT>
__device__ __forceinline__ u32 load_reg(const u8* p) {
    if (Bs<FMT>::kA_bits == 4) return __ldg(reinterpret_cast<const unsigned*>(p));
    return fp4_containers(__ldg(reinterpret_cast<const unsigned short*>(p)));
}

// ---- the kernel -------------------------------------------------------------------------

template <int D, int FMT>
__device__ void attention(const u8* __restrict__ q_data, const u8* __restrict__ q_scale, const u8* __restrict__ k_data,
                          const u8* __restrict__ k_scale, const u8* __restrict__ v_data, const u8* __restrict__ v_scale,
                          float* __restrict__ out, int Sq, int Sk, int Skp, int causal, const float* ts, float c0,
                          u32 /*bh_count*/, u32* /*counters*/, float* /*partials*/,
                          u32 kv_group) {  // a grid of (row blocks, heads)
    using M = Bs<FMT>;
    using DL = DLayoutOf<FMT>;
    constexpr int B = Blk<FMT>::n, NT = Step<FMT>::NT, KC = D / M::kK, KB = M::kKB;
    static_assert(M::kKPB == B, "the instruction's scale block is not the format's block");
    const float c = __fmul_rn(__fmul_rn(ts[0], ts[1]), c0), v_ts = ts[2];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const u64 bh = blockIdx.y;
    const int q0 = blockIdx.x * BR + warp * 16;
    const HeadOffsets at = head_offsets<D, FMT>(bh, Sq, Sk, Skp, kv_group);
    q_data += at.q_data, q_scale += at.q_scale, k_data += at.k_data, k_scale += at.k_scale;
    v_data += at.v_data, v_scale += at.v_scale;
    const LaneMap<FMT> lm(lane);

    // Q: A fragments and scale words straight from memory, per k-step (kK) along D.
    u32 qa[KC][M::kA_regs], qs[KC];
#pragma unroll
    for (int kc = 0; kc < KC; ++kc) {
#pragma unroll
        for (int r = 0; r < M::kA_regs; ++r) {
            const int row = q0 + M::a_row(lane, r, 0), d = kc * M::kK + M::a_col(lane, r, 0);
            qa[kc][r] = row < Sq ? load_reg<FMT>(q_data + (u64)row * (D / 2) + d / 2) : 0u;
        }
        const int srow = q0 + lm.a_scale_row;
        qs[kc] = lm.a_scale_row >= 0 && srow < Sq ? load_scale_word<FMT>(q_scale + (u64)srow * (D / B) + kc * KB) : 0u;
    }

    float m_run[2] = {NEG_INF, NEG_INF}, l_run[2] = {0.0f, 0.0f};
    float o[D / 8][M::kD_regs];
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
#pragma unroll
        for (int r = 0; r < M::kD_regs; ++r) o[j][r] = 0.0f;

    const int key_end = cta_key_end(Sq, Sk, causal);
    for (int key0 = 0; key0 < key_end; key0 += M::kK) {
        // S = Q·Kᵀ for 16 rows × kK keys: tile j, column n is key key0 + key[j][n].
        u32 s[NT][M::kD_regs];
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const int key = key0 + lm.k_base + tile_off<FMT>(j);
#pragma unroll
            for (int r = 0; r < M::kD_regs; ++r) s[j][r] = 0u;
#pragma unroll
            for (int kc = 0; kc < KC; ++kc) {
                u32 kb[M::kB_regs];
#pragma unroll
                for (int r = 0; r < M::kB_regs; ++r)
                    kb[r] = key < Sk ? load_reg<FMT>(k_data + (u64)key * (D / 2) + (kc * M::kK + M::b_row(lane, r, 0)) / 2) : 0u;
                u32 ks = 0u;
                if (lm.b_scale_col >= 0) {
                    const int sk = key0 + lm.ks_base + tile_off<FMT>(j);
                    if (sk < Sk) ks = load_scale_word<FMT>(k_scale + (u64)sk * (D / B) + kc * KB);
                }
                M::mma(s[j], qa[kc], kb, s[j], qs[kc], ks);
            }
        }

        // Scores in log2 units, masked; the tile's row maxima.
        float p[NT][M::kD_regs];
        float tmax[2] = {NEG_INF, NEG_INF};
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int r = 0; r < M::kD_regs; ++r) {
                const int row = q0 + M::d_row(lane, r);
                const int key = key0 + lm.d_key_base + d_off<FMT>(j, r);
                const bool masked = key >= Sk || (causal && key > row);
                const float v = masked ? NEG_INF : __fmul_rn(__uint_as_float(s[j][r]), c);
                p[j][r] = v;
                tmax[d_half_of<DL>(r)] = fmaxf(tmax[d_half_of<DL>(r)], v);
            }
        float alpha[2], m_use[2];
        advance_row_max(tmax, m_run, alpha, m_use);

        // P requantized straight into P·V's A fragment: register r (row half r % 2, k half
        // r / 2) takes its E values from S (Plan::src), scaled by P_SCALE; the block maximum is
        // reduced over the registers (p_block_regs) and lanes sharing the block; codes go into
        // their containers, scale bytes into one packed word per lane (byte r), from which the
        // scale word is gathered.
        constexpr int E = M::kA_elems;
        float vals[2][2][E], amax[2][2];
#pragma unroll
        for (int s2 = 0; s2 < 2; ++s2)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                amax[s2][h] = 0.0f;
#pragma unroll
                for (int e = 0; e < E; ++e) {
                    const int src = kPlan<FMT>.src[h + 2 * s2][e];
                    const int j = src / M::kD_regs, d = src % M::kD_regs;
                    const float x = __fmul_rn(ex2(__fsub_rn(p[j][d], m_use[h])), P_SCALE);
                    vals[s2][h][e] = x;
                    amax[s2][h] = fmaxf(amax[s2][h], x);
                }
            }
        if (p_block_regs<FMT>() == 2) {
#pragma unroll
            for (int h = 0; h < 2; ++h) amax[0][h] = amax[1][h] = fmaxf(amax[0][h], amax[1][h]);
        }
        u32 pa[M::kA_regs], packed = 0u;
        float lsum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int s2 = 0; s2 < 2; ++s2) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                amax[s2][h] = fmaxf(amax[s2][h], __shfl_xor_sync(0xffffffffu, amax[s2][h], 1));
                if (p_block_lanes_mask<FMT>() == 3)
                    amax[s2][h] = fmaxf(amax[s2][h], __shfl_xor_sync(0xffffffffu, amax[s2][h], 2));
            }
            const PScale<FMT> ps(amax[s2]);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                u32 word = 0u;
#pragma unroll
                for (int e = 0; e < E; ++e) {
                    const float g = e2m1_grid(ps.scaled(vals[s2][h][e], h));
                    word |= (__float_as_uint(__fmul_rn(g, 0x1p-126f)) >> 22) << (M::kA_bits * e + M::kA_shift);
                    lsum[h] = __fadd_rn(lsum[h], __fmul_rn(g, ps.value[h]));
                }
                pa[h + 2 * s2] = word;
                packed |= ps.bytes[h] << (8 * (h + 2 * s2));
            }
        }
        u32 ps_word = 0u;
#pragma unroll
        for (int kb = 0; kb < KB; ++kb)
            ps_word |= ((__shfl_sync(0xffffffffu, packed, lm.p_src[kb]) >> lm.p_shift[kb]) & 0xffu) << (8 * kb);
        advance_row_sum(lsum, l_run, alpha);
        rescale_o<DL>(o, alpha);

        // O += P·V: V's B fragment is Vᵀ row d, keys key0 + k slot (contiguous words).
#pragma unroll
        for (int jd = 0; jd < D / 8; ++jd) {
            const int d = jd * M::kN + M::b_col(lane, 0, 0);
            u32 vb[M::kB_regs];
#pragma unroll
            for (int r = 0; r < M::kB_regs; ++r) {
                const int key = key0 + M::b_row(lane, r, 0);
                vb[r] = key < Skp ? load_reg<FMT>(v_data + (u64)d * (Skp / 2) + key / 2) : 0u;
            }
            // Vᵀ scale rows are Skp / B bytes long, only 2-byte (NVFP4) or 1-byte (MXFP4)
            // aligned, and a 64-key step's second half may lie past Skp (a multiple of 32):
            // bytes.
            u32 vs = 0u;
            if (lm.b_scale_col >= 0) {
                const u8* sp = v_scale + (u64)(jd * M::kN + lm.b_scale_col) * (Skp / B) + key0 / B;
#pragma unroll
                for (int kb = 0; kb < KB; ++kb)
                    if (key0 + kb * B < Skp) vs |= (u32)__ldg(sp + kb) << (8 * kb);
            }
            u32 acc[M::kD_regs];
#pragma unroll
            for (int r = 0; r < M::kD_regs; ++r) acc[r] = __float_as_uint(o[jd][r]);
            M::mma(acc, pa, vb, acc, ps_word, vs);
#pragma unroll
            for (int r = 0; r < M::kD_regs; ++r) o[jd][r] = __uint_as_float(acc[r]);
        }
    }

    store_o<DL, D>(o, l_run, v_ts, out, bh, Sq, q0, lane);
}

}  // namespace attn
