// The FP8 wgmma body's operands (attn_wgmma_fp8.cuh): FP4 chunks widened to E4M3 through each
// block's table of magnitudes, and the launch's workspace of factors and key-tile images that
// the pre-pass (attn_fp8_prepasses.cuh) writes. After attn_fp8_geometry.cuh.
#pragma once

namespace attn {
namespace f8 {

using namespace wg;

// ---- FP4 to E4M3 ----------------------------------------------------------------------------

__device__ __forceinline__ u32 hmul2(u32 a, u32 b) {
    u32 d;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
__device__ __forceinline__ u32 e4m3x2_of_f16x2(u32 h) {
    unsigned short d;
    asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(d) : "r"(h));
    return d;
}
__device__ __forceinline__ u32 prmt(u32 a, u32 b, u32 sel) {
    u32 d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
}

// A block's multiplier scale·2^-f as f16x2 (both halves). MXFP4: 2^(s - 127 - f) (at most 2^6
// by f's choice; below 2^-24 it is 0, and so is every element it scales in E4M3). NVFP4: the
// E4M3 scale's value times 2^-f, rounded to f16 (exact from 2^-14 up; below, every element
// rounds to 0 in E4M3 whatever the multiplier's last bits).
template <int FMT>
__device__ __forceinline__ u32 block_multiplier(u32 s, int f) {
    u32 h;
    if (FMT == MX) {
        const int k = (int)s - 127 - f;
        h = k >= -14 ? (u32)(k + 15) << 10 : k >= -24 ? 1u << (k + 24) : 0u;
    } else {
        const float v = __fmul_rn(e4m3_to_f32(s & 0x7fu), __int_as_float((127 - max(min(f, 126), -126)) << 23));
        unsigned short b;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(b) : "f"(v));
        h = b;
    }
    return h | (h << 16);
}

// A block's widening as a byte table: byte i of {lo, hi} is the E4M3 byte of magnitude code i
// (0, 0.5, 1, 1.5, 2, 3, 4, 6) times the multiplier: the f16 product (exact wherever the
// element does not round to 0 in E4M3) rounded by cvt.rn.satfinite.e4m3x2.f16x2. Four f16x2
// multiplies and conversions a block, then a word of codes is two byte permutes.
struct Table8 {
    u32 lo, hi;
};
__device__ __forceinline__ Table8 block_table(u32 mult) {
    const u32 m01 = e4m3x2_of_f16x2(hmul2(0x38000000u, mult));  // 0, 0.5
    const u32 m23 = e4m3x2_of_f16x2(hmul2(0x3e003c00u, mult));  // 1, 1.5
    const u32 m45 = e4m3x2_of_f16x2(hmul2(0x42004000u, mult));  // 2, 3
    const u32 m67 = e4m3x2_of_f16x2(hmul2(0x46004400u, mult));  // 4, 6
    return {m01 | (m23 << 16), m45 | (m67 << 16)};
}

// Four codes (the nibbles of c's low 16 bits, code i in nibble i) to four E4M3 bytes in order:
// the magnitude from the table (prmt selects byte (nibble & 7)), the sign from a second prmt
// whose selector keeps the code's sign bit, prmt's sign-replicate flag: 0x7f for a positive
// code, 0x00 for a negative one, so adding 1 to each byte leaves bit 7 clear exactly for the
// negative codes.
__device__ __forceinline__ u32 widen_quad(u32 c, const Table8& t) {
    const u32 mag = prmt(t.lo, t.hi, c & 0x7777u);
    const u32 pos = prmt(0x7f7f7f7fu, 0x7f7f7f7fu, c) + 0x01010101u;
    return mag | (~pos & 0x80808080u);
}
// 8 codes (one word) to 8 E4M3 bytes, in order.
__device__ __forceinline__ uint2 widen_word(u32 w, const Table8& t) {
    return make_uint2(widen_quad(w, t), widen_quad(w >> 16, t));
}

// 32 codes (a chunk: 16 bytes along a row) with their scales and the row's factor f, widened
// to 32 E4M3 bytes (two 16-byte halves).
template <int FMT>
__device__ __forceinline__ void widen_chunk_bytes(const Chunk& c, int f, uint4 (&out)[2]) {
    const u32 w[4] = {c.bytes.x, c.bytes.y, c.bytes.z, c.bytes.w};
    uint2 o[4];
    if (FMT == MX) {
        const Table8 t = block_table(block_multiplier<MX>(c.scales, f));
#pragma unroll
        for (int q = 0; q < 4; ++q) o[q] = widen_word(w[q], t);
    } else {
        const Table8 t0 = block_table(block_multiplier<NV>(c.scales & 0xffu, f));
        const Table8 t1 = block_table(block_multiplier<NV>(c.scales >> 8, f));
#pragma unroll
        for (int q = 0; q < 4; ++q) o[q] = widen_word(w[q], q < 2 ? t0 : t1);
    }
    out[0] = make_uint4(o[0].x, o[0].y, o[1].x, o[1].y);
    out[1] = make_uint4(o[2].x, o[2].y, o[3].x, o[3].y);
}
// ... to row `row` of a tile, from k0.
template <int FMT, int SWIZZLE, int SBO>
__device__ __forceinline__ void widen_chunk(const Chunk& c, int f, unsigned char* tile, int row, int k0) {
    uint4 o[2];
    widen_chunk_bytes<FMT>(c, f, o);
    *reinterpret_cast<uint4*>(tile + tile_offset<SWIZZLE, SBO>(row, k0)) = o[0];
    *reinterpret_cast<uint4*>(tile + tile_offset<SWIZZLE, SBO>(row, k0 + 16)) = o[1];
}

// 2^f as f32 (f within the normal exponents: the factors of finite inputs are).
__device__ __forceinline__ float pow2(int f) { return __int_as_float((127 + max(min(f, 127), -126)) << 23); }

// The launch's workspace (the host's copy: src/attention/kernel.rs, Fp8Workspace): the row
// factors of Q, K and Vᵀ (fp8_factors_* or fp8_prepass_*: [bh][Sq], [kv_bh][Sk], [kv_bh][D] ints;
// K and Vᵀ have kv_bh = bh_count / kv_group heads), then, for ATTN_FP8_WIDEN_ONCE, the E4M3 key tiles
// (fp8_prepass_*: [kv_bh][ceil(Sk / BC)] images of TILE8_BYTES, Geo8's K tile then its Vᵀ tile),
// then the tensor map of O (128 bytes, written by the host: store_rows_tma), each part from a
// 256-byte boundary.
FP4PROBE_HD constexpr u64 round256(u64 n) { return (n + 255) / 256 * 256; }
struct Factors {
    const int *q, *k, *v;
    u8* tiles8;
    const void* o_map;
    u32 kv_group;
    // `tile_bytes`: Geo8<D>::TILE8_BYTES where the pre-pass widens K and Vᵀ into the workspace,
    // else 0.
    __device__ __forceinline__ Factors(const int* base, u32 bh_count, int Sq, int Sk, int D, u32 kv_group_, int bc,
                                       int tile_bytes)
        : kv_group(kv_group_) {
        const u64 kv_bh = bh_count / kv_group_;
        q = base;
        k = q + (u64)bh_count * Sq;
        v = k + kv_bh * Sk;
        tiles8 = (u8*)base + round256(4 * ((u64)bh_count * Sq + kv_bh * (Sk + D)));
        o_map = tiles8 + round256(kv_bh * (u64)((Sk + bc - 1) / bc) * tile_bytes);
    }
    // The K rows and Vᵀ rows of Q head bh's K/V head (head_offsets).
    __device__ __forceinline__ const int* k_of(u32 bh, int Sk) const { return k + (u64)(bh / kv_group) * Sk; }
    __device__ __forceinline__ const int* v_of(u32 bh, int D) const { return v + (u64)(bh / kv_group) * D; }
    // The first E4M3 key tile of K/V head kv (ATTN_FP8_WIDEN_ONCE).
    template <int D>
    __device__ __forceinline__ u8* tiles8_of_kv(u64 kv, int Sk) const {
        return tiles8 + kv * (u64)Geo8<D>::tiles(Sk) * Geo8<D>::TILE8_BYTES;
    }
};

}  // namespace f8
}  // namespace attn
