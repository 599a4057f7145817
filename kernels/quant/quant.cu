// MXFP4 / NVFP4 quantization kernels, compiled at run time with NVRTC (no headers needed).
//
// Byte for byte the same as the CPU reference in src/quant/ (mod.rs, codes.rs, scale.rs):
// every rounding step below mirrors a line there, and nothing is left to the compiler's
// floating-point contraction (explicit __fmul_rn / __fmaf_rn / __fsub_rn).
//
// Work split: one thread owns a "group" of 8 consecutive elements (two 16-byte loads of f32,
// one of bf16/f16) and writes their 8 codes as one 32-bit word. A quantization block is 4
// groups (MXFP4, 32 elements) or 2 (NVFP4, 16), held by neighbouring lanes, which reduce the
// block maximum with xor shuffles. Each thread handles UNROLL groups, all loaded before any is
// processed, so enough bytes are in flight to saturate HBM (In::UNROLL groups: 4 of f32,
// UNROLL_16BIT of 16-bit inputs). No IEEE division per element:
// MXFP4 multiplies by an exact power of two; NVFP4 divides with one reciprocal per block and
// Markstein's two-FMA correction, which is the correctly rounded quotient (div_markstein).

// The codecs (E2M1, E8M0, E4M3, division) are in fp4_codecs.cuh, which src/quant/cuda.rs
// puts in front of this file.

// ---- input formats: 8 elements of group g, widened exactly to f32 ---------------------------

struct InF32 {
    static constexpr int UNROLL = 4;
    static __device__ __forceinline__ void load(const void* x, u64 g, float v[8]) {
        const uint4* p = reinterpret_cast<const uint4*>(x) + 2 * g;
        uint4 a = __ldg(p), b = __ldg(p + 1);
        v[0] = __uint_as_float(a.x); v[1] = __uint_as_float(a.y);
        v[2] = __uint_as_float(a.z); v[3] = __uint_as_float(a.w);
        v[4] = __uint_as_float(b.x); v[5] = __uint_as_float(b.y);
        v[6] = __uint_as_float(b.z); v[7] = __uint_as_float(b.w);
    }
};

// Groups a thread loads at once for 16-bit inputs; the host passes the same value (see
// src/quant/cuda.rs, UNROLL_16BIT).
#ifndef UNROLL_16BIT
#define UNROLL_16BIT 4
#endif

// 16-bit inputs: one 16-byte load of 8 elements, each widened exactly by Widen.
template <class Widen>
struct In16 {
    static constexpr int UNROLL = UNROLL_16BIT;
    static __device__ __forceinline__ void load(const void* x, u64 g, float v[8]) {
        uint4 a = __ldg(reinterpret_cast<const uint4*>(x) + g);
        u32 w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            v[2 * i] = Widen::f32(w[i] & 0xffffu);
            v[2 * i + 1] = Widen::f32(w[i] >> 16);
        }
    }
};

struct Bf16Bits {
    static __device__ __forceinline__ float f32(u32 h) { return __uint_as_float(h << 16); }
};

struct F16Bits {
    static __device__ __forceinline__ float f32(u32 h) {
        float f;
        unsigned short s = (unsigned short)h;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(s));
        return f;
    }
};

typedef In16<Bf16Bits> InBF16;
typedef In16<F16Bits> InF16;

// ---- scale choice (scale.rs) ------------------------------------------------------------------

// E8M0 scale byte of a block maximum (bits of |x|) in torchao mode 0 floor, 1 ceil, 2 even,
// 3 rceil (scale.rs: mx_scale).
__device__ __forceinline__ u32 mx_scale(u32 mode, u32 amax) {
    if (amax >= F32_INF_BITS) return E8M0_NAN;
    int e;
    if (mode == 0) {
        e = (int)(amax >> 23) - 129;
    } else if (mode == 1) {
        e = (int)(amax >> 23) - 129 + ((amax & 0x7fffffu) != 0);
    } else if (mode == 2) {
        u32 r = (amax + (1u << 21)) & 0xff800000u;
        if (r >= F32_INF_BITS) return E8M0_NAN;
        e = (int)(r >> 23) - 129;
    } else {
        u32 d = __float_as_uint(__fmul_rn(__uint_as_float(amax), __uint_as_float(0x3e2aaaabu)));
        if (d >= F32_INF_BITS) return E8M0_NAN;
        u32 ex = d >> 23, mant = d & 0x7fffffu;
        u32 up = ex == 0 ? (mant > 0x400000u) : (mant != 0);
        return (ex + up) & 0xffu;
    }
    e = max(-127, min(128, e));
    return (u32)(e + 127) & 0xffu;
}

// NVFP4 block scale byte: (amax/6) [/ tensor scale], clamped, E4M3 (scale.rs: nv_scale).
__device__ __forceinline__ u32 nv_scale(u32 amax, bool two_level, float t, float rt) {
    if (amax >= F32_INF_BITS) return E4M3_NAN;
    float bs = div_rn(__uint_as_float(amax), 6.0f, __uint_as_float(0x3e2aaaabu));
    return e4m3_clamp_round(two_level ? div_rn(bs, t, rt) : bs);
}

// ---- one group ------------------------------------------------------------------------------

enum { MX = 0, NV = 1 };

// What one block's elements are multiplied (MX) or divided (NV) by, and what a code is worth.
struct BlockScale {
    float mul_or_div, rcp, value;
};

template <int FMT>
__device__ __forceinline__ BlockScale block_scale(u32 byte, bool two_level, float t) {
    BlockScale s;
    if (FMT == MX) {
        s.mul_or_div = e8m0_to_f32((254u - byte) & 0xffu);
        s.rcp = s.mul_or_div;
        s.value = e8m0_to_f32(byte);
    } else {
        float blk = e4m3_to_f32(byte);
        s.value = two_level ? __fmul_rn(t, blk) : blk;
        s.mul_or_div = s.value;
        s.rcp = __frcp_rn(s.value);
    }
    return s;
}

// Codes of 8 elements scaled by s. NVFP4 divides: by Markstein when the block's scale allows
// (uniform across the block's lanes), else by the out-of-line IEEE path. The fallback takes
// the values by value: a pointer would force the caller's registers into local memory.
struct Eight {
    float v[8];
};

__device__ __noinline__ u32 encode8_div_ieee(Eight e, float total) {
    u32 word = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) word |= e2m1_encode(__fdiv_rn(e.v[i], total)) << (4 * i);
    return word;
}

template <int FMT>
__device__ __forceinline__ u32 encode8(const float v[8], BlockScale s) {
    if (FMT == NV && !markstein_safe(s.mul_or_div)) {
        Eight e;
#pragma unroll
        for (int i = 0; i < 8; i++) e.v[i] = v[i];
        return encode8_div_ieee(e, s.mul_or_div);
    }
    u32 word = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        float y = FMT == MX ? __fmul_rn(v[i], s.mul_or_div) : div_markstein(v[i], s.mul_or_div, s.rcp);
        word |= e2m1_encode(y) << (4 * i);
    }
    return word;
}

// Squared error of this group's codes, then summed over the block's lanes: sequential FMA
// within the group, pairwise across groups (mod.rs: block_sse).
template <int TPB>
__device__ __forceinline__ float block_sse(const float v[8], u32 word, float value) {
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        float d = __fsub_rn(v[i], __fmul_rn(e2m1_decode(word >> (4 * i)), value));
        acc = __fmaf_rn(d, d, acc);
    }
#pragma unroll
    for (int o = 1; o < TPB; o <<= 1) acc = __fadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, o));
    return acc;
}

// The In::UNROLL groups base, base + blockDim.x, ... of this thread, all loads issued before
// any value is used; groups past the end read as zeros.
template <class In>
__device__ __forceinline__ void load_groups(const void* x, u64 base, u32 groups, float (&v)[In::UNROLL][8]) {
#pragma unroll
    for (int u = 0; u < In::UNROLL; u++) {
        const u64 g = base + (u64)u * blockDim.x;
        if (g < groups) {
            In::load(x, g, v[u]);
        } else {
#pragma unroll
            for (int i = 0; i < 8; i++) v[u][i] = 0.0f;
        }
    }
}

// MODE is compile-time (one entry point per mode): a run-time mode would put a branch into
// every group, which splits the unrolled groups into separately scheduled pieces.
template <class In, int FMT, bool SEARCH, u32 MODE>
__device__ __forceinline__ void quantize(const void* x, u32 groups, u32* data, u8* scale,
                                         const u32* tensor_amax, float* tensor_scale_out) {
    constexpr u32 mode = MODE;
    constexpr int TPB = FMT == MX ? 4 : 2;
    // NVFP4 two-level (mode 2): tensor scale from the finite amax the first kernel found.
    const bool two_level = FMT == NV && mode == 2;
    float t = 1.0f, rt = 1.0f;
    if (two_level) {
        u32 ab = *tensor_amax;
        t = ab == 0 ? 1.0f : __fdiv_rn(__uint_as_float(ab), 2688.0f);
        rt = __frcp_rn(t);
        if (blockIdx.x == 0 && threadIdx.x == 0) *tensor_scale_out = t;
    }
    constexpr int UNROLL = In::UNROLL;
    const u64 base = (u64)blockIdx.x * blockDim.x * UNROLL + threadIdx.x;
    float v[UNROLL][8];
    load_groups<In>(x, base, groups, v);
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        u64 g = base + (u64)u * blockDim.x;
        // NaN-propagating |x| maximum on the bit patterns (scale.rs module comment).
        u32 amax = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) amax = max(amax, __float_as_uint(v[u][i]) & 0x7fffffffu);
#pragma unroll
        for (int o = 1; o < TPB; o <<= 1) amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        u32 byte = FMT == MX ? mx_scale(mode, amax) : nv_scale(amax, two_level, t, rt);
        const u32 nan_byte = FMT == MX ? E8M0_NAN : E4M3_NAN;
        // Every lane runs the same instructions from here on: block_sse shuffles across the
        // warp with a full mask, so no lane may branch around it. A NaN block is encoded with
        // a stand-in scale (scale 1) and its results are replaced at the end.
        const bool nan_block = byte == nan_byte;
        const u32 naive = nan_block ? (FMT == MX ? 127u : 0x38u) : byte;
        BlockScale s = block_scale<FMT>(naive, two_level, t);
        u32 word = encode8<FMT>(v[u], s);
        if (SEARCH) {
            // Windowed search (mod.rs: search_candidates): MX tries e+1; NV tries the E4M3
            // bytes within ±5, nearest first; a candidate wins only if strictly better. A
            // candidate outside the scale range is evaluated as the naive scale (never better),
            // so the loop stays uniform.
            float best = block_sse<TPB>(v[u], word, s.value);
            const int steps = FMT == MX ? 1 : 10;
            for (int k = 1; k <= steps; k++) {
                int off = FMT == MX ? 1 : ((k + 1) / 2) * ((k & 1) ? -1 : 1);
                int cand = (int)naive + off;
                bool ok = FMT == MX ? (naive < 254u) : (cand >= 0x08 && cand <= 0x7e);
                u32 c = ok ? (u32)cand : naive;
                BlockScale cs = block_scale<FMT>(c, two_level, t);
                u32 w = encode8<FMT>(v[u], cs);
                float e = block_sse<TPB>(v[u], w, cs.value);
                if (ok && e < best) {
                    best = e;
                    byte = c;
                    word = w;
                }
            }
        }
        if (nan_block) {
            byte = nan_byte;
            word = 0;
        }
        if (g < groups) {
            data[g] = word;
            if ((g & (TPB - 1)) == 0) scale[g / TPB] = (u8)byte;
        }
    }
}

// Maximum |x| over the finite elements, as f32 bits, into *out (zeroed by the caller). Each
// thread loads UNROLL groups before reducing them (bytes in flight), strides over the grid,
// and each warp does one atomicMax (integer order = float order for non-negative floats).
template <class In>
__device__ __forceinline__ void finite_amax(const void* x, u32 groups, u32* out) {
    constexpr int UNROLL = In::UNROLL;
    u32 m = 0;
    const u64 stride = (u64)gridDim.x * blockDim.x * UNROLL;
    for (u64 base = (u64)blockIdx.x * blockDim.x * UNROLL + threadIdx.x; base < groups; base += stride) {
        float v[UNROLL][8];
        load_groups<In>(x, base, groups, v);
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
#pragma unroll
            for (int i = 0; i < 8; i++) {
                u32 b = __float_as_uint(v[u][i]) & 0x7fffffffu;
                if (b < F32_INF_BITS) m = max(m, b);
            }
        }
    }
    m = __reduce_max_sync(0xffffffffu, m);
    if ((threadIdx.x & 31u) == 0) atomicMax(out, m);
}

// MXFP4 modes: 0 floor, 1 ceil, 2 even, 3 rceil; NVFP4: 1 one-level, 2 two-level.
#define QUANT_ENTRY(NAME, IN, FMT, SEARCH, MODE)                                                 \
    extern "C" __global__ void __launch_bounds__(256)                                            \
        NAME(const void* x, u32 groups, u32* data, u8* scale, const u32* tensor_amax,           \
             float* tensor_scale_out) {                                                          \
        quantize<IN, FMT, SEARCH, MODE>(x, groups, data, scale, tensor_amax, tensor_scale_out);  \
    }

#define QUANT_INPUTS(OP, FMTNAME, FMT, SEARCH, MODENAME, MODE)                 \
    QUANT_ENTRY(OP##_##FMTNAME##_##MODENAME##_f32, InF32, FMT, SEARCH, MODE)   \
    QUANT_ENTRY(OP##_##FMTNAME##_##MODENAME##_bf16, InBF16, FMT, SEARCH, MODE) \
    QUANT_ENTRY(OP##_##FMTNAME##_##MODENAME##_f16, InF16, FMT, SEARCH, MODE)

#define QUANT_MODES(OP, SEARCH)                            \
    QUANT_INPUTS(OP, mxfp4, MX, SEARCH, floor, 0)          \
    QUANT_INPUTS(OP, mxfp4, MX, SEARCH, ceil, 1)           \
    QUANT_INPUTS(OP, mxfp4, MX, SEARCH, even, 2)           \
    QUANT_INPUTS(OP, mxfp4, MX, SEARCH, rceil, 3)          \
    QUANT_INPUTS(OP, nvfp4, NV, SEARCH, one_level, 1)      \
    QUANT_INPUTS(OP, nvfp4, NV, SEARCH, two_level, 2)

QUANT_MODES(quant, false)
QUANT_MODES(search, true)

#define AMAX_ENTRY(NAME, IN)                                                                 \
    extern "C" __global__ void __launch_bounds__(256) NAME(const void* x, u32 groups, u32* out) { \
        finite_amax<IN>(x, groups, out);                                                     \
    }

AMAX_ENTRY(finite_amax_f32, InF32)
AMAX_ENTRY(finite_amax_bf16, InBF16)
AMAX_ENTRY(finite_amax_f16, InF16)
