// The FP8 wgmma body's geometry (attn_wgmma_fp8.cuh, which includes this after its
// ATTN_FP8_* settings and the generated tables): its tiles' sizes and places in shared memory,
// the E4M3 tiles' offsets and descriptors from the measured 8-bit shared-memory forms, and the
// measured register layouts (S's accumulators, the D→A handoff) checked at compile time.
#pragma once

namespace attn {
namespace f8 {

using namespace wg;
namespace SM = ::fp4probe::wgmma;
namespace WD = ::fp4probe::wgmma::d_f32_n64;
namespace HO = ::fp4probe::wgmma::handoff_d_f32_n64_a_e4m3_k32;

// ---- geometry -------------------------------------------------------------------------------

// Keys per tile: S's accumulator (BC/2 registers) and O's (D/2) share the consumers'
// registers, 128 keys at D = 64; at D = 128, 128 where the producer only copies tiles
// (ATTN_FP8_WIDEN_ONCE) and 64 where it widens them, whose registers then spill at 128
// (the host sets ATTN_FP8_BC_D128: src/attention/paths.rs, Variant::keys_per_tile).
// Q and K rows are D bytes, Vᵀ rows BC bytes: each row one swizzle row of its mode (128B for
// 128-byte rows, 64B for 64-byte ones), 8 rows one swizzle atom (SBO).
// Keys that share K's factor (fp8.rs: K_FACTOR_KEYS): a key tile lies in one group, so the
// factor multiplies the tile's scores once, with the row's.
constexpr int K_FACTOR_KEYS = 128;

template <int D>
struct Geo8 {
    static_assert(D == 64 || D == 128, "the FP8 wgmma body runs head_dim 64 and 128");
    static constexpr int BC = D == 64 ? 128 : ATTN_FP8_BC_D128;
    static_assert(K_FACTOR_KEYS % BC == 0, "a key tile within one factor group");
    static constexpr int QK_SWIZZLE = D == 128 ? SM::kSwizzle128B : SM::kSwizzle64B;
    static constexpr int V_SWIZZLE = BC == 128 ? SM::kSwizzle128B : SM::kSwizzle64B;
    static constexpr int QK_SBO = 8 * D, V_SBO = 8 * BC;
    static constexpr int Q_WG_BYTES = 64 * D;  // one consumer warpgroup's rows
    static constexpr int Q_BYTES = BR * D;
    // O leaves through shared memory and bulk tensor stores (store_rows_tma) at D = 128; at
    // D = 64, where a segment's end costs less, 8-byte stores from registers (store_rows) ran
    // faster on the H200 (reports/sm_90/attention/experiments/fp8-o-tma).
    static constexpr bool O_TMA = D == ATTN_FP8_O_TMA_D;
    // How far a row's running maximum may trail the tile's before it moves (and O is
    // rescaled): 1 at D = 64, where it ran 3-4% faster on the H200, 0 at D = 128, where it
    // ran 1% slower (reports/sm_90/attention/experiments/fp8-softmax-issue). P's scale is
    // 2^(8 - MAX_SLACK); the final O / l is the same (docs/attention-fp8.md).
    static constexpr int MAX_SLACK = D == 64 ? 1 : 0;
    // An edge tile's mask (the causal diagonal, keys past Sk): by one compare of a register's
    // key part with a bound per row half (mask_edge) at D = 128, where it ran causal S = 4096
    // 1.6-1.8% and S = 1024 5-6% faster on the H200; by a column-key table at D = 64, where
    // the compare ran 2-13% slower (reports/sm_90/attention/experiments/fp8-edge-mask).
    static constexpr bool MASK_BY_COMPARE = D == 128;
    static constexpr bool SMEM_WEIGHTS = ATTN_FP8_SMEM_WEIGHTS && D == 128;
    // Shared memory: two Q buffers, the ring of STAGES stages (a stage: K's tile, then Vᵀ's),
    // the swizzle atoms of 8 rows like Vᵀ's that are all ones (E4M3 1.0, written once per
    // launch: l = P·1 on the tensor cores, an m64n8k32 chain beside P·V's, each tile's from 0),
    // with O_TMA one after the ring, then every consumer warp's O staging (O_WARP_BYTES),
    // without it one at the end of each stage.
    static constexpr int K_BYTES = BC * D, V_BYTES = D * BC, ONES_BYTES = 8 * BC;
    // Every tile starts on a 1024-byte boundary: the swizzle reads address bits 4..9, which
    // the offset function is then called with as 0.
    static constexpr int STAGE_BYTES = (K_BYTES + V_BYTES + (O_TMA ? 0 : ONES_BYTES) + 1023) / 1024 * 1024;
    static constexpr int RING_END = 2 * Q_BYTES + STAGES * STAGE_BYTES;
    static constexpr int ONES_OFFSET = O_TMA ? RING_END : 2 * Q_BYTES + K_BYTES + V_BYTES;  // the (first) ones atom
    static constexpr int O_WARP_BYTES = 16 * D * 4;  // a warp's 16 rows of f32 O
    static constexpr int O_OFFSET = RING_END + (O_TMA ? (ONES_BYTES + 1023) / 1024 * 1024 : 0);
    static constexpr int SMEM = O_OFFSET + (O_TMA ? 4 * CONSUMERS * O_WARP_BYTES : 0);
    // A key tile's image in the workspace (ATTN_FP8_WIDEN_ONCE): its stage's K and Vᵀ tiles.
    static constexpr int TILE8_BYTES = K_BYTES + V_BYTES;
    FP4PROBE_HD static constexpr int tiles(int Sk) { return (Sk + BC - 1) / BC; }
    static_assert(Q_WG_BYTES % 1024 == 0 && K_BYTES % 1024 == 0 && O_OFFSET % 1024 == 0,
                  "tiles on 1024-byte boundaries");
    static_assert(ONES_OFFSET % (V_SWIZZLE == SM::kSwizzle128B ? 1024 : 512) == 0, "the ones atom on its swizzle's boundary");
};
// The host's copy: src/attention/paths.rs (Variant::dynamic_smem).

template <int SWIZZLE>
using SmemK8 = SM::Smem<8, SM::kMajorK, SWIZZLE>;

// Byte offset of element (row, k) in a K-major E4M3 tile of rows of SBO/8 bytes.
template <int SWIZZLE, int SBO>
__device__ __forceinline__ u32 tile_offset(int row, int k) {
    return SmemK8<SWIZZLE>::offset((unsigned)row, (unsigned)k, 16u, (unsigned)SBO, 0u, 0u);
}
// The descriptor of a tile at shared address `addr` (a k32 step's 32 bytes further along the
// row for each step: the measured form is linear in k inside a swizzle row).
template <int SWIZZLE, int SBO>
__device__ __forceinline__ u64 tile_desc(u32 addr) {
    return SM::make_desc(addr, 16u, (unsigned)SBO, 0u, (SM::SwizzleMode)SWIZZLE);
}

// ---- the measured register layouts ------------------------------------------------------------

// The m64nN accumulator is N/8 tiles of 4 registers (d.f32.n64 for N = 64); a register's row
// half (rows g or g+8 of the warp's 16) and its column.
FP4PROBE_HD constexpr int acc_half(int reg) { return WD::d_row_formula(0, reg % 32, 0) / 8 % 2; }
FP4PROBE_HD constexpr int acc_col(int t, int reg) { return WD::d_col_formula(t, reg % 32, 0) + 64 * (reg / 32); }
FP4PROBE_HD constexpr bool acc_layout_is_periodic() {
    for (int t = 0; t < 128; ++t)
        for (int r = 0; r < 32; ++r) {
            if (WD::d_row_formula(t, r, 0) != WD::d_row_formula(t % 32, r, 0) + 16 * (t / 32)) return false;
            if (WD::d_row_formula(t, r, 0) % 16 != WD::d_row_formula(t % 32, r % 4, 0) % 8 + 8 * acc_half(r)) return false;
            if (WD::d_col_formula(t, r, 0) != WD::d_col_formula(t, r % 4, 0) + 8 * (r / 4)) return false;
            if (r + 1 < 32 && r % 2 == 0 && WD::d_col_formula(t, r + 1, 0) != WD::d_col_formula(t, r, 0) + 1) return false;
        }
    return WD::kD_regs == 32;
}
static_assert(acc_layout_is_periodic(),
              "the wgmma accumulator: warps hold 16-row bands, n8 tiles of 4 registers, registers 2k, 2k+1 adjacent");
// ... and the per-warp view the pipeline's store_rows reads (m16n8k16's D layout) is the same.
FP4PROBE_HD constexpr bool acc_matches_warp_view() {
    for (int lane = 0; lane < 32; ++lane)
        for (int r = 0; r < 32; ++r)
            if (WD::d_row_formula(lane, r, 0) != L::d_row_formula(lane, r % 4, 0) ||
                WD::d_col_formula(lane, r, 0) != L::d_col_formula(lane, r % 4, 0) + 8 * (r / 4))
                return false;
    return true;
}
static_assert(acc_matches_warp_view(), "wgmma's D per warp is m16n8k16's D tiles side by side");

// The handoff: A register r of step j, byte e, is accumulator register a_src(j, 4r + e);
// its k position κ within the step holds S column kPerm[κ]. The measured table covers N = 64
// (two steps); both repeat every 32 columns, so the 128-key tile's four steps are read from it.
FP4PROBE_HD constexpr int a_src(int j, int slot) { return HO::kSrc[j % 2][slot] + 32 * (j / 2); }
FP4PROBE_HD constexpr int k_perm(int k) { return HO::kPerm[k % 64] + 64 * (k / 64); }
FP4PROBE_HD constexpr bool handoff_is_periodic() {
    for (int s = 0; s < HO::kASlots; ++s)
        if (HO::kSrc[1][s] != HO::kSrc[0][s] + 16) return false;
    for (int k = 0; k < 32; ++k)
        if (HO::kPerm[32 + k] != HO::kPerm[k] + 32 || HO::kPerm[k] / 32 != 0) return false;
    // The two bytes of each converted pair lie in one row half.
    for (int j = 0; j < 2; ++j)
        for (int s = 0; s < HO::kASlots; s += 2)
            if (acc_half(HO::kSrc[j][s]) != acc_half(HO::kSrc[j][s + 1])) return false;
    return HO::kAElems == 4 && HO::kK == 32 && HO::kSteps == 2;
}
static_assert(handoff_is_periodic(), "the e4m3 D→A handoff repeats every 32 columns, pairs within a row half");

FP4PROBE_HD constexpr int k_perm_inv(int c) {
    for (int k = 0; k < 128; ++k)
        if (k_perm(k) == c) return k;
    return -1;
}
// The key (within the tile) of S column c, and the column of key κ.
FP4PROBE_HD constexpr int key_of_col(int c) { return k_perm_inv(c); }
FP4PROBE_HD constexpr int col_of_key(int k) { return k_perm(k); }
FP4PROBE_HD constexpr bool columns_are_a_permutation() {
    for (int c = 0; c < 128; ++c)
        if (col_of_key(key_of_col(c)) != c || key_of_col(c) / 32 != c / 32) return false;
    return true;
}
static_assert(columns_are_a_permutation(), "S columns and keys: a permutation within each 32");
// The masks of edge tiles by compare (MASK_BY_COMPARE): the key (within the tile) of a lane's
// S register i is a part of the lane plus a part of the register, a constant after unrolling,
// and its row a part of the lane plus 8 per row half; so a register is masked when its
// constant reaches one bound per row half, formed once a tile (a compare and a select an
// element).
// The S column of a lane's register i (n8 tiles of four registers, side by side).
FP4PROBE_HD constexpr int reg_col(int lane, int i) { return 8 * (i / 4) + L::d_col_formula(lane, i % 4, 0); }
FP4PROBE_HD constexpr int reg_key(int i) { return key_of_col(reg_col(0, i)); }
FP4PROBE_HD constexpr int lane_key(int lane) { return key_of_col(L::d_col_formula(lane, 0, 0)) - reg_key(0); }
FP4PROBE_HD constexpr int lane_row(int lane, int h) { return L::d_row_formula(lane, 2 * h, 0); }
FP4PROBE_HD constexpr bool mask_parts_are_separable() {
    for (int lane = 0; lane < 32; ++lane)
        for (int i = 0; i < 64; ++i) {
            if (lane_key(lane) < 0 || lane_key(lane) > 255) return false;  // kLaneKeys' bytes
            if (key_of_col(reg_col(lane, i)) != lane_key(lane) + reg_key(i)) return false;
            if (L::d_row_formula(lane, i % 4, 0) != lane_row(lane, acc_half(i))) return false;
        }
    return true;
}
static_assert(mask_parts_are_separable(),
              "the handoff's key of an S register: a lane part plus a register part; its row: the lane's, per row half");
// key_of_col as a table (the mask of an edge tile without MASK_BY_COMPARE; a lane's columns are
// known only at run time) and lane_key as one (key_of_col searches the permutation: a
// constant expression only).
struct ColumnKeys {
    unsigned char key[128];
    FP4PROBE_HD constexpr ColumnKeys() : key() {
        for (int c = 0; c < 128; ++c) key[c] = (unsigned char)key_of_col(c);
    }
};
__constant__ ColumnKeys kColumnKeys = ColumnKeys();
struct LaneKeys {
    unsigned char key[32];
    FP4PROBE_HD constexpr LaneKeys() : key() {
        for (int lane = 0; lane < 32; ++lane) key[lane] = (unsigned char)lane_key(lane);
    }
};
__constant__ LaneKeys kLaneKeys = LaneKeys();

}  // namespace f8
}  // namespace attn
