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
// ATTN_FP8_WIDEN_ONCE: K's rows (kv_bh·Sk of D elements) and Vᵀ's (kv_bh·D of Skp) to
// E4M3 in the workspace, a thread per 32-element chunk (grid-stride), each row with its factor
// (fp8_factors_* ran first): the bytes the producer would otherwise widen per CTA.
template <int FMT>
__device__ __forceinline__ void fp8_widen(const u8* k_data, const u8* k_scale, const u8* v_data, const u8* v_scale,
                                          int* factors, u32 bh_count, u32 Sq, u32 Sk, u32 D, u32 Skp, u32 kv_group) {
    constexpr u32 B = Blk<FMT>::n;
    const f8::Factors fac(factors, bh_count, (int)Sq, (int)Sk, (int)D, (int)Skp, kv_group);
    const u64 kv_bh = bh_count / kv_group;
    const u64 k_chunks = kv_bh * Sk * (D / 32), v_chunks = kv_bh * D * (Skp / 32);
    const u64 threads = (u64)gridDim.x * blockDim.x;
    for (u64 c = (u64)blockIdx.x * blockDim.x + threadIdx.x; c < k_chunks + v_chunks; c += threads) {
        const bool is_k = c < k_chunks;
        const u64 i = is_k ? c : c - k_chunks;
        const u32 len = is_k ? D : Skp;
        const u64 row = i / (len / 32), k0 = 32 * (i % (len / 32));
        const u8* data = is_k ? k_data : v_data;
        const u8* scale = is_k ? k_scale : v_scale;
        Chunk ch;
        ch.bytes = __ldg(reinterpret_cast<const uint4*>(data + row * (len / 2) + k0 / 2));
        ch.scales = load_scales<FMT>(scale + row * (len / B) + k0 / B);
        uint4 o[2];
        f8::widen_chunk_bytes<FMT>(ch, __ldg((is_k ? fac.k : fac.v) + row), o);
        uint4* dst = reinterpret_cast<uint4*>((is_k ? fac.k8 : fac.v8) + row * len + k0);
        dst[0] = o[0];
        dst[1] = o[1];
    }
}
}  // namespace attn

#define FP8_WIDEN_ENTRY(NAME, FMT)                                                                              \
    extern "C" __global__ void __launch_bounds__(256)                                                           \
        NAME(const unsigned char* k_data, const unsigned char* k_scale, const unsigned char* v_data,             \
             const unsigned char* v_scale, int* factors, unsigned bh_count, unsigned Sq, unsigned Sk, unsigned D, \
             unsigned Skp, unsigned kv_group) {                                                                  \
        attn::fp8_widen<FMT>(k_data, k_scale, v_data, v_scale, factors, bh_count, Sq, Sk, D, Skp, kv_group);    \
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
