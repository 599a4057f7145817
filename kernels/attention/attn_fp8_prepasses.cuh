// The FP8 wgmma body's pre-passes (attn_wgmma_fp8.cuh), launched before it on the same stream
// (src/attention/kernel.rs: enqueue_fp8_passes): the row factors of Q, K and Vᵀ, and with
// ATTN_FP8_WIDEN_ONCE, K and Vᵀ widened to E4M3 into the launch's workspace. Included at the
// end of attn_wgmma_fp8.cuh, whose workspace layout (f8::Factors) and widening
// (f8::widen_chunk_bytes) they share.
#pragma once

namespace attn {

// log2 of a row's factor (fp8.rs: row_factor_log2) from the largest of its finite scale
// bytes: MXFP4 (E8M0, 0xff NaN) e - 6; NVFP4 (E4M3, 0x7f NaN, subnormal taken as 2^-6)
// e - 6, one more when the scale's mantissa field is 2 or more. -1: no finite scale (f = 0).
template <int FMT>
__device__ __forceinline__ int scale_key(u32 b) {
    if (FMT == MX) return b == 0xffu ? -1 : (int)b;
    b &= 0x7fu;
    return b == 0x7fu ? -1 : (int)b;
}
template <int FMT>
__device__ __forceinline__ int factor_of_key(int m) {
    if (m < 0) return 0;
    if (FMT == MX) return m - 127 - 6;
    return max(m >> 3, 1) - 7 - 6 + ((m & 7) >= 2);
}

// The largest scale key of n bytes, over a warp (every lane gets it).
template <int FMT>
__device__ __forceinline__ int warp_scale_key(const u8* s, u64 n, u32 lane) {
    int m = -1;
    for (u64 i = lane; i < n; i += 32) m = max(m, scale_key<FMT>(s[i]));
    return __reduce_max_sync(0xffffffffu, m);
}

// Factors into out = [Q rows][K rows][Vᵀ rows]: Q's rows a thread per row (blockIdx.y = 0);
// K's groups of f8::K_FACTOR_KEYS keys of a head (the last one ends at seq_k: its scale bytes
// are contiguous) and Vᵀ's rows (Skp/B bytes) a warp each (blockIdx.y = 1), a K group's factor
// written to each of its keys.
template <int FMT>
__device__ __forceinline__ void fp8_factors(const u8* q_scale, const u8* k_scale, const u8* v_scale, int* out,
                                            u32 q_rows, u32 k_rows, u32 v_rows, u32 qk_row_bytes, u32 v_row_bytes,
                                            u32 seq_k) {
    constexpr u32 G = f8::K_FACTOR_KEYS;
    const u32 threads = gridDim.x * blockDim.x, tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (blockIdx.y == 0) {
        for (u64 r = tid; r < q_rows; r += threads) {
            const u8* s = q_scale + r * qk_row_bytes;
            int m = -1;
            for (u32 i = 0; i < qk_row_bytes; ++i) m = max(m, scale_key<FMT>(s[i]));
            out[r] = factor_of_key<FMT>(m);
        }
        return;
    }
    const u32 lane = threadIdx.x % 32, warps = threads / 32, warp = tid / 32;
    const u64 per_head = (seq_k + G - 1) / G, k_groups = (u64)(k_rows / seq_k) * per_head;
    for (u64 r = warp; r < k_groups + v_rows; r += warps) {
        if (r < k_groups) {
            const u64 key0 = r / per_head * seq_k + r % per_head * G;
            const u32 keys = min(G, seq_k - (u32)(r % per_head) * G);
            const int f = factor_of_key<FMT>(warp_scale_key<FMT>(k_scale + key0 * qk_row_bytes, (u64)keys * qk_row_bytes, lane));
            for (u32 k = lane; k < keys; k += 32) out[q_rows + key0 + k] = f;
        } else {
            const u64 v = r - k_groups;
            const int m = warp_scale_key<FMT>(v_scale + v * v_row_bytes, v_row_bytes, lane);
            if (lane == 0) out[(u64)q_rows + k_rows + v] = factor_of_key<FMT>(m);
        }
    }
}

}  // namespace attn

namespace attn {
// ATTN_FP8_WIDEN_ONCE: K and Vᵀ to E4M3 in the workspace, as the key tiles' shared-memory
// images the producer copies whole (f8::Factors::tiles8_of_kv), a thread per 32-element
// chunk (grid-stride), each row with its factor (fp8_factors_* ran first): K's key i of a
// tile to row col_of_key(i) of its K tile, Vᵀ's channel d to row d of its Vᵀ tile, through
// the same offset function as the stage; keys past Sk in K and past Skp in Vᵀ zero (the
// consumers mask the scores of keys past Sk, and P·V must not meet a NaN there).
// keys_per_tile: the host's (Variant::keys_per_tile), which must be this module's tile.
template <int FMT, int D>
__device__ __forceinline__ void fp8_widen_tiles(const u8* k_data, const u8* k_scale, const u8* v_data, const u8* v_scale,
                                                const int* factors, u32 bh_count, u32 Sq, u32 Sk, u32 Skp, u32 kv_group,
                                                u32 keys_per_tile) {
    using G = f8::Geo8<D>;
    constexpr u32 B = Blk<FMT>::n, BC = G::BC, KPR = D / 32;
    if (keys_per_tile != BC) __trap();  // another variant's module: its tiles would not be this one's
    const f8::Factors fac(factors, bh_count, (int)Sq, (int)Sk, D, kv_group);
    const u64 kv_bh = bh_count / kv_group;
    const u32 keys = G::tiles((int)Sk) * BC, VPR = keys / 32;
    const u64 k_chunks = kv_bh * keys * KPR, v_chunks = kv_bh * D * VPR;
    const u64 threads = (u64)gridDim.x * blockDim.x;
    for (u64 c = (u64)blockIdx.x * blockDim.x + threadIdx.x; c < k_chunks + v_chunks; c += threads) {
        Chunk ch = {{0u, 0u, 0u, 0u}, 0u};
        if (c < k_chunks) {
            const u64 kv = c / ((u64)keys * KPR);
            const u32 key = (u32)(c / KPR % keys), k0 = 32 * (u32)(c % KPR);
            int f = 0;
            if (key < Sk) {
                const u64 row = kv * Sk + key;
                ch.bytes = __ldg(reinterpret_cast<const uint4*>(k_data + row * (D / 2) + k0 / 2));
                ch.scales = load_scales<FMT>(k_scale + row * (D / B) + k0 / B);
                f = __ldg(fac.k + row);
            }
            u8* tile = fac.tiles8_of_kv<D>(kv, (int)Sk) + (u64)(key / BC) * G::TILE8_BYTES;
            f8::widen_chunk<FMT, G::QK_SWIZZLE, G::QK_SBO>(ch, f, tile, f8::col_of_key((int)(key % BC)), (int)k0);
        } else {
            const u64 i = c - k_chunks, row = i / VPR;  // kv·D + d
            const u32 key0 = 32 * (u32)(i % VPR);
            if (key0 < Skp) {
                ch.bytes = __ldg(reinterpret_cast<const uint4*>(v_data + row * (Skp / 2) + key0 / 2));
                ch.scales = load_scales<FMT>(v_scale + row * (Skp / B) + key0 / B);
            }
            u8* tile = fac.tiles8_of_kv<D>(row / D, (int)Sk) + (u64)(key0 / BC) * G::TILE8_BYTES + G::K_BYTES;
            f8::widen_chunk<FMT, G::V_SWIZZLE, G::V_SBO>(ch, __ldg(fac.v + row), tile, (int)(row % D), (int)(key0 % BC));
        }
    }
}
template <int FMT>
__device__ __forceinline__ void fp8_widen(const u8* k_data, const u8* k_scale, const u8* v_data, const u8* v_scale,
                                          const int* factors, u32 bh_count, u32 Sq, u32 Sk, u32 D, u32 Skp, u32 kv_group,
                                          u32 keys_per_tile) {
    if (D == 64)
        fp8_widen_tiles<FMT, 64>(k_data, k_scale, v_data, v_scale, factors, bh_count, Sq, Sk, Skp, kv_group, keys_per_tile);
    else if (D == 128)
        fp8_widen_tiles<FMT, 128>(k_data, k_scale, v_data, v_scale, factors, bh_count, Sq, Sk, Skp, kv_group, keys_per_tile);
    else
        __trap();  // the host launches the FP8 body at head_dim 64 and 128 only
}
}  // namespace attn

#define FP8_WIDEN_ENTRY(NAME, FMT)                                                                              \
    extern "C" __global__ void __launch_bounds__(256)                                                           \
        NAME(const unsigned char* k_data, const unsigned char* k_scale, const unsigned char* v_data,             \
             const unsigned char* v_scale, int* factors, unsigned bh_count, unsigned Sq, unsigned Sk, unsigned D, \
             unsigned Skp, unsigned kv_group, unsigned keys_per_tile) {                                          \
        attn::fp8_widen<FMT>(k_data, k_scale, v_data, v_scale, factors, bh_count, Sq, Sk, D, Skp, kv_group,     \
                             keys_per_tile);                                                                     \
    }
FP8_WIDEN_ENTRY(fp8_widen_mxfp4, attn::MX)
FP8_WIDEN_ENTRY(fp8_widen_nvfp4, attn::NV)

#define FP8_FACTORS_ENTRY(NAME, FMT)                                                                           \
    extern "C" __global__ void __launch_bounds__(256)                                                          \
        NAME(const unsigned char* q_scale, const unsigned char* k_scale, const unsigned char* v_scale, int* out,  \
             unsigned q_rows, unsigned k_rows, unsigned v_rows, unsigned qk_row_bytes, unsigned v_row_bytes,      \
             unsigned seq_k) {                                                                                    \
        attn::fp8_factors<FMT>(q_scale, k_scale, v_scale, out, q_rows, k_rows, v_rows, qk_row_bytes, v_row_bytes, \
                               seq_k);                                                                            \
    }
FP8_FACTORS_ENTRY(fp8_factors_mxfp4, attn::MX)
FP8_FACTORS_ENTRY(fp8_factors_nvfp4, attn::NV)
