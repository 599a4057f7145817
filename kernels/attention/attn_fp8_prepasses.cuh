// The FP8 wgmma body's pre-passes (attn_wgmma_fp8.cuh), one launched before it on the same
// stream (src/attention/kernel.rs: enqueue_fp8_passes): fp8_factors_*, the row factors of Q, K
// and Vᵀ; with ATTN_FP8_WIDEN_ONCE fp8_prepass_*, the same factors and K and Vᵀ widened to
// E4M3 into the launch's workspace. Included at the end of attn_wgmma_fp8.cuh; they share its
// workspace layout (f8::Factors) and widening (f8::widen_chunk), from attn_fp8_widen.cuh.
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

// The largest scale key of n bytes and m0, over a warp (every lane gets it).
template <int FMT>
__device__ __forceinline__ int warp_scale_key(const u8* s, u64 n, u32 lane, int m0 = -1) {
    int m = m0;
    for (u64 i = lane; i < n; i += 32) m = max(m, scale_key<FMT>(s[i]));
    return __reduce_max_sync(0xffffffffu, m);
}

// The largest scale key of a row's n scale bytes, by one thread.
template <int FMT>
__device__ __forceinline__ int row_scale_key(const u8* s, u32 n) {
    int m = -1;
    for (u32 i = 0; i < n; ++i) m = max(m, scale_key<FMT>(s[i]));
    return m;
}

// The largest scale key of a chunk's scale bytes (load_scales: MXFP4 one, NVFP4 two).
template <int FMT>
__device__ __forceinline__ int chunk_scale_key(u32 s) {
    if (FMT == MX) return scale_key<MX>(s);
    return max(scale_key<NV>(s & 0xffu), scale_key<NV>(s >> 8));
}

// Programmatic dependent launch (sm_90): the kernel launched after a pre-pass with the
// programmatic-serialization attribute (the FP8 body: src/attention/kernel.rs) may be
// scheduled once every CTA of the pre-pass has executed this; it reads nothing the pre-pass
// writes before its griddepcontrol.wait, which returns once the pre-pass has completed and its
// writes are visible. So each pre-pass allows it from its first instruction.
__device__ __forceinline__ void allow_dependent_launch() { asm volatile("griddepcontrol.launch_dependents;"); }

// Factors into out = [Q rows][K rows][Vᵀ rows]: Q's rows a thread per row (blockIdx.y = 0);
// K's groups of f8::K_FACTOR_KEYS keys of a head (the last one ends at seq_k: its scale bytes
// are contiguous) and Vᵀ's rows (Skp/B bytes) a warp each (blockIdx.y = 1), a K group's factor
// written to each of its keys.
template <int FMT>
__device__ __forceinline__ void fp8_factors(const u8* q_scale, const u8* k_scale, const u8* v_scale, int* out,
                                            u32 q_rows, u32 k_rows, u32 v_rows, u32 qk_row_bytes, u32 v_row_bytes,
                                            u32 seq_k) {
    constexpr u32 G = f8::K_FACTOR_KEYS;
    allow_dependent_launch();
    const u32 threads = gridDim.x * blockDim.x, tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (blockIdx.y == 0) {
        for (u64 r = tid; r < q_rows; r += threads) {
            out[r] = factor_of_key<FMT>(row_scale_key<FMT>(q_scale + r * qk_row_bytes, qk_row_bytes));
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
// ATTN_FP8_WIDEN_ONCE's pre-pass, one launch: the factors fp8_factors writes (same places,
// same values) and K and Vᵀ widened to E4M3 in the workspace, as the key tiles' shared-memory
// images the producer copies whole (f8::Factors::tiles8_of_kv), each 32-element chunk with its
// row's factor through the same offset function as the stage: K's key i of a tile to row
// col_of_key(i) of its K tile, Vᵀ's channel d to row d of its Vᵀ tile; keys past Sk in K and
// past Skp in Vᵀ zero (the consumers mask the scores of keys past Sk, and P·V must not meet a
// NaN there). keys_per_tile: the host's (Variant::keys_per_tile), which must be this module's
// tile. Each group's or row's factor is reduced from the scale bytes of the chunks it widens,
// loaded before any store, so a CTA has all its loads in flight at once and the pass runs
// near copy bandwidth. A CTA's task (grid-stride, so any grid covers them; the host's count:
// kernel.rs, fp8_prepass_ctas), in this order:
//   - Q_ROWS rows of Q, QR a thread (factors only: the producer widens Q), first, so that
//     these few latency-bound CTAs run beside the others;
//   - V_ROWS rows of Vᵀ, a warp each, U chunks a lane in flight (the rows' scale bytes past
//     those chunks read first, for the factor);
//   - K_GROUPS groups of K_FACTOR_KEYS keys of a K/V head (the last ends at the tiles' keys),
//     KC chunks a thread, each group's factor a CTA-wide maximum.
namespace prepass {
constexpr u32 THREADS = 256, QR = 8, Q_ROWS = THREADS * QR, V_ROWS = THREADS / 32, U = 4, K_GROUPS = 2;
}  // namespace prepass

template <int FMT, int D>
__device__ __forceinline__ void prepass_v_rows(const u8* v_data, const u8* v_scale, const f8::Factors& fac, int* v_out,
                                               u64 row, u32 Sk, u32 Skp, u32 keys) {
    using G = f8::Geo8<D>;
    using namespace prepass;
    constexpr u32 B = Blk<FMT>::n, BC = G::BC;
    const u32 lane = threadIdx.x % 32, vpr = keys / 32, row_bytes = Skp / B;
    const u8* data = v_data + row * (Skp / 2);
    const u8* scale = v_scale + row * row_bytes;
    u8* tiles = fac.tiles8_of_kv<D>(row / D, (int)Sk) + G::K_BYTES;
    int f = 0;
    for (u32 c0 = 0; c0 < vpr; c0 += 32 * U) {
        Chunk ch[U];
        int m = -1;
#pragma unroll
        for (u32 j = 0; j < U; ++j) {
            const u32 key0 = 32 * (c0 + 32 * j + lane);
            ch[j] = Chunk{{0u, 0u, 0u, 0u}, 0u};
            if (key0 < Skp) {
                ch[j].bytes = __ldg(reinterpret_cast<const uint4*>(data + key0 / 2));
                ch[j].scales = load_scales<FMT>(scale + key0 / B);
                m = max(m, chunk_scale_key<FMT>(ch[j].scales));
            }
        }
        if (c0 == 0) {
            // The first chunks' scale bytes, then the rest of the row's.
            const u32 seen = min(row_bytes, 32 * 32 * U / B);
            f = factor_of_key<FMT>(warp_scale_key<FMT>(scale + seen, row_bytes - seen, lane, m));
            if (lane == 0) v_out[row] = f;
        }
#pragma unroll
        for (u32 j = 0; j < U; ++j) {
            const u32 i = c0 + 32 * j + lane, key0 = 32 * i;
            if (i < vpr)
                f8::widen_chunk<FMT, G::V_SWIZZLE, G::V_SBO>(ch[j], f, tiles + (u64)(key0 / BC) * G::TILE8_BYTES,
                                                            (int)(row % D), (int)(key0 % BC));
        }
    }
}

template <int FMT, int D>
__device__ __forceinline__ void prepass_k_groups(const u8* k_data, const u8* k_scale, const f8::Factors& fac,
                                                 int* k_out, u64 kv, u32 key_lo, u32 Sk, u32 keys) {
    using G = f8::Geo8<D>;
    using namespace prepass;
    constexpr u32 B = Blk<FMT>::n, BC = G::BC, KPR = D / 32, GK = f8::K_FACTOR_KEYS, KEYS = K_GROUPS * GK;
    constexpr u32 KC = KEYS * KPR / THREADS, KEYS_PER_PASS = THREADS / KPR;
    static_assert(KC * THREADS == KEYS * KPR && GK % KEYS_PER_PASS == 0, "whole chunks per thread, a group each");
    static_assert(KEYS <= THREADS, "a thread per key for the factors");
    __shared__ int warp_max[K_GROUPS][THREADS / 32];
    const u32 t = threadIdx.x, real = min(KEYS, Sk - key_lo), held = min(KEYS, keys - key_lo);
    Chunk ch[KC];
    int m[K_GROUPS], col[KC];
#pragma unroll
    for (u32 h = 0; h < K_GROUPS; ++h) m[h] = -1;
    // Chunk j of a thread: key t / KPR + j·KEYS_PER_PASS of the task (group j·KEYS_PER_PASS / GK),
    // to row col[j] of its K tile (a table look-up, issued with the loads).
#pragma unroll
    for (u32 j = 0; j < KC; ++j) {
        const u32 key = t / KPR + j * KEYS_PER_PASS, k0 = 32 * (t % KPR);
        col[j] = f8::col_of_key((int)((key_lo + key) % BC));
        ch[j] = Chunk{{0u, 0u, 0u, 0u}, 0u};
        if (key < real) {
            const u64 row = kv * Sk + key_lo + key;
            ch[j].bytes = __ldg(reinterpret_cast<const uint4*>(k_data + row * (D / 2) + k0 / 2));
            ch[j].scales = load_scales<FMT>(k_scale + row * (D / B) + k0 / B);
            m[j * KEYS_PER_PASS / GK] = max(m[j * KEYS_PER_PASS / GK], chunk_scale_key<FMT>(ch[j].scales));
        }
    }
    int f[K_GROUPS];
#pragma unroll
    for (u32 h = 0; h < K_GROUPS; ++h) {
        m[h] = __reduce_max_sync(0xffffffffu, m[h]);
        if (t % 32 == 0) warp_max[h][t / 32] = m[h];
    }
    __syncthreads();
#pragma unroll
    for (u32 h = 0; h < K_GROUPS; ++h) {
#pragma unroll
        for (u32 w = 0; w < THREADS / 32; ++w) m[h] = max(m[h], warp_max[h][w]);
        f[h] = factor_of_key<FMT>(m[h]);
    }
    __syncthreads();  // the next task's maxima
    if (t < real) {  // key t of the task, in group t / GK
        int fk = f[0];
#pragma unroll
        for (u32 h = 1; h < K_GROUPS; ++h) fk = t >= h * GK ? f[h] : fk;
        k_out[kv * Sk + key_lo + t] = fk;
    }
    u8* tiles = fac.tiles8_of_kv<D>(kv, (int)Sk);
#pragma unroll
    for (u32 j = 0; j < KC; ++j) {
        const u32 key = t / KPR + j * KEYS_PER_PASS, k0 = 32 * (t % KPR), abs_key = key_lo + key;
        if (key < held)
            f8::widen_chunk<FMT, G::QK_SWIZZLE, G::QK_SBO>(ch[j], key < real ? f[j * KEYS_PER_PASS / GK] : 0,
                                                          tiles + (u64)(abs_key / BC) * G::TILE8_BYTES, col[j],
                                                          (int)k0);
    }
}

template <int FMT, int D>
__device__ __forceinline__ void fp8_prepass_tiles(const u8* q_scale, const u8* k_data, const u8* k_scale,
                                                  const u8* v_data, const u8* v_scale, int* factors, u32 bh_count,
                                                  u32 Sq, u32 Sk, u32 Skp, u32 kv_group, u32 keys_per_tile) {
    using G = f8::Geo8<D>;
    using namespace prepass;
    constexpr u32 B = Blk<FMT>::n, BC = G::BC, GK = f8::K_FACTOR_KEYS;
    // Another variant's module: its tiles would not be this one's.
    if (keys_per_tile != BC || blockDim.x != THREADS) __trap();
    allow_dependent_launch();
    const f8::Factors fac(factors, bh_count, (int)Sq, (int)Sk, D, kv_group, BC, G::TILE8_BYTES);
    int* q_out = factors;
    int* k_out = const_cast<int*>(fac.k);
    int* v_out = const_cast<int*>(fac.v);
    const u64 kv_bh = bh_count / kv_group, v_rows = kv_bh * D, q_rows = (u64)bh_count * Sq;
    const u32 keys = G::tiles((int)Sk) * BC, k_per_head = (Sk + K_GROUPS * GK - 1) / (K_GROUPS * GK);
    const u64 q_tasks = (q_rows + Q_ROWS - 1) / Q_ROWS, v_tasks = (v_rows + V_ROWS - 1) / V_ROWS;
    const u64 tasks = q_tasks + v_tasks + kv_bh * k_per_head;
    for (u64 task = blockIdx.x; task < tasks; task += gridDim.x) {
        if (task < q_tasks) {
            // Rows r0 + THREADS·i: each thread's loads all issued before its maxima.
            const u64 r0 = task * Q_ROWS + threadIdx.x;
            int m[QR];
#pragma unroll
            for (u32 i = 0; i < QR; ++i) {
                m[i] = r0 + THREADS * i < q_rows ? row_scale_key<FMT>(q_scale + (r0 + THREADS * i) * (D / B), D / B) : -1;
            }
#pragma unroll
            for (u32 i = 0; i < QR; ++i)
                if (r0 + THREADS * i < q_rows) q_out[r0 + THREADS * i] = factor_of_key<FMT>(m[i]);
        } else if (task < q_tasks + v_tasks) {
            const u64 row = (task - q_tasks) * V_ROWS + threadIdx.x / 32;
            if (row < v_rows) prepass_v_rows<FMT, D>(v_data, v_scale, fac, v_out, row, Sk, Skp, keys);
        } else {
            const u64 k = task - q_tasks - v_tasks;
            prepass_k_groups<FMT, D>(k_data, k_scale, fac, k_out, k / k_per_head,
                                     (u32)(k % k_per_head) * K_GROUPS * GK, Sk, keys);
        }
    }
}
template <int FMT>
__device__ __forceinline__ void fp8_prepass(const u8* q_scale, const u8* k_data, const u8* k_scale, const u8* v_data,
                                            const u8* v_scale, int* factors, u32 bh_count, u32 Sq, u32 Sk, u32 D,
                                            u32 Skp, u32 kv_group, u32 keys_per_tile) {
    if (D == 64)
        fp8_prepass_tiles<FMT, 64>(q_scale, k_data, k_scale, v_data, v_scale, factors, bh_count, Sq, Sk, Skp, kv_group,
                                   keys_per_tile);
    else if (D == 128)
        fp8_prepass_tiles<FMT, 128>(q_scale, k_data, k_scale, v_data, v_scale, factors, bh_count, Sq, Sk, Skp, kv_group,
                                    keys_per_tile);
    else
        __trap();  // the host launches the FP8 body at head_dim 64 and 128 only
}
}  // namespace attn

#define FP8_PREPASS_ENTRY(NAME, FMT)                                                                              \
    extern "C" __global__ void __launch_bounds__(256)                                                             \
        NAME(const unsigned char* q_scale, const unsigned char* k_data, const unsigned char* k_scale,              \
             const unsigned char* v_data, const unsigned char* v_scale, int* factors, unsigned bh_count,           \
             unsigned Sq, unsigned Sk, unsigned D, unsigned Skp, unsigned kv_group, unsigned keys_per_tile) {      \
        attn::fp8_prepass<FMT>(q_scale, k_data, k_scale, v_data, v_scale, factors, bh_count, Sq, Sk, D, Skp,      \
                               kv_group, keys_per_tile);                                                           \
    }
FP8_PREPASS_ENTRY(fp8_prepass_mxfp4, attn::MX)
FP8_PREPASS_ENTRY(fp8_prepass_nvfp4, attn::NV)

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
