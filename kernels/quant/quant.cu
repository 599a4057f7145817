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

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef unsigned long long u64;

#define F32_INF_BITS 0x7f800000u
#define E8M0_NAN 0xffu
#define E4M3_NAN 0x7fu

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

struct InBF16 {
    static constexpr int UNROLL = UNROLL_16BIT;
    static __device__ __forceinline__ void load(const void* x, u64 g, float v[8]) {
        uint4 a = __ldg(reinterpret_cast<const uint4*>(x) + g);
        u32 w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            v[2 * i] = __uint_as_float(w[i] << 16);
            v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        }
    }
};

__device__ __forceinline__ float half_bits_to_f32(u32 h) {
    float f;
    unsigned short s = (unsigned short)h;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(s));
    return f;
}

struct InF16 {
    static constexpr int UNROLL = UNROLL_16BIT;
    static __device__ __forceinline__ void load(const void* x, u64 g, float v[8]) {
        uint4 a = __ldg(reinterpret_cast<const uint4*>(x) + g);
        u32 w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            v[2 * i] = half_bits_to_f32(w[i] & 0xffffu);
            v[2 * i + 1] = half_bits_to_f32(w[i] >> 16);
        }
    }
};

// ---- element and scale codecs (codes.rs) -----------------------------------------------------

// Nearest E2M1 code, ties to even, saturating, sign kept (codes.rs: e2m1_encode_bits, which
// is tested equal to the comparison form e2m1_encode). Branch-free, no conversion instruction:
// the E2M1 step is q = 0.5 below 2, 1 in [2,4), 2 in [4,8). Adding C = 1.5·2^23·q rounds |v|
// to a multiple of q (one IEEE rounding, ties to even) and leaves n = RN(|v|/q) in the low bits
// of the sum; the code is n plus twice the binade above 1. Beyond 5 (the tie 4|6) it is 7.
__device__ __forceinline__ u32 e2m1_encode(float v) {
    u32 bits = __float_as_uint(v) & 0x7fffffffu;
    u32 e = min(max(bits >> 23, 127u), 129u);
    float c = __uint_as_float(((e + 22u) << 23) | 0x400000u);
    u32 n = __float_as_uint(__fadd_rn(__uint_as_float(bits), c)) & 7u;
    u32 mag = __uint_as_float(bits) > 5.0f ? 7u : n + 2u * (e - 127u);
    return ((__float_as_uint(v) >> 28) & 8u) | mag;
}

// The value of an E2M1 code: 0, 0.5, then (1 + m/2)·2^(e-1) for exponent field e >= 1.
__device__ __forceinline__ float e2m1_decode(u32 c) {
    u32 m = c & 7u;
    u32 bits = m >= 2 ? (((m >> 1) + 126u) << 23) | ((m & 1u) << 22) : (m ? 0x3f000000u : 0u);
    return __uint_as_float(bits | ((c & 8u) << 28));
}

// 2^(b-127); byte 0 is the f32 subnormal 2^-127, 0xff is NaN (codes.rs: e8m0_to_f32).
__device__ __forceinline__ float e8m0_to_f32(u32 b) {
    return b == 0 ? __uint_as_float(0x00400000u)
                  : (b == E8M0_NAN ? __uint_as_float(0x7fffffffu) : __uint_as_float(b << 23));
}

// Clamp to [2^-6, 448] and round to E4M3, ties to even (codes.rs: e4m3_clamp_round).
__device__ __forceinline__ u32 e4m3_clamp_round(float v) {
    if (v != v) return E4M3_NAN;
    v = fminf(fmaxf(v, 0.015625f), 448.0f);
    u32 b = __float_as_uint(v);
    u32 r = b + 0x7ffffu + ((b >> 20) & 1u);
    return ((((r >> 23) & 0xffu) - 120u) << 3) | ((r >> 20) & 7u);
}

__device__ __forceinline__ float e4m3_to_f32(u32 b) {
    u32 e = (b >> 3) & 15u, m = b & 7u;
    if ((b & 0x7fu) == 0x7fu) return __uint_as_float(0x7fffffffu);
    float mag = e == 0 ? __fmul_rn((float)m, 0.001953125f) : __uint_as_float(((e + 120u) << 23) | (m << 20));
    return (b & 0x80u) ? -mag : mag;
}

// IEEE division, kept out of line: only blocks whose scale is near the ends of the exponent
// range come here, so the hot path carries no division code at all.
__device__ __noinline__ float div_ieee(float a, float b) { return __fdiv_rn(a, b); }

// True when Markstein's division (div_markstein) is exact for this divisor and every dividend
// whose quotient can matter: 1/b and the remainders stay normal. Dividends too small for an
// exact remainder (|a| < 2^-100) give |a/b| < 2^-20 here, which encodes to zero either way.
__device__ __forceinline__ bool markstein_safe(float b) {
    float ab = fabsf(b);
    return ab >= 0x1p-80f && ab <= 0x1p100f;
}

// a / b correctly rounded, given rb = RN(1/b) and markstein_safe(b). Markstein: q = RN(a·rb)
// is within an ulp of a/b, the remainder a - q·b is exact in one FMA, and q + r·rb rounds to
// RN(a/b). The last FMA can lose the sign of a zero quotient (+0 + -0 = +0); the sign of a
// is put back (b > 0 always), so -0 and tiny negatives still encode as 0x8.
__device__ __forceinline__ float div_markstein(float a, float b, float rb) {
    float q = __fmul_rn(a, rb);
    float r = __fmaf_rn(-q, b, a);
    float q1 = __fmaf_rn(r, rb, q);
    return __uint_as_float(__float_as_uint(q1) | (__float_as_uint(a) & 0x80000000u));
}

// a / b for per-block quantities (one call per group, not per element).
__device__ __forceinline__ float div_rn(float a, float b, float rb) {
    float aa = fabsf(a);
    bool safe = markstein_safe(b) && (a == 0.0f || (aa >= 0x1p-100f && aa <= 0x1p100f));
    return safe ? div_markstein(a, b, rb) : div_ieee(a, b);
}

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

template <class In, int FMT, bool SEARCH>
__device__ __forceinline__ void quantize(const void* x, u32 groups, u32* data, u8* scale,
                                         const u32* tensor_amax, float* tensor_scale_out, u32 mode) {
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
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        u64 g = base + (u64)u * blockDim.x;
        if (g < groups) {
            In::load(x, g, v[u]);
        } else {
#pragma unroll
            for (int i = 0; i < 8; i++) v[u][i] = 0.0f;
        }
    }
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
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            u64 g = base + (u64)u * blockDim.x;
            if (g < groups) {
                In::load(x, g, v[u]);
            } else {
#pragma unroll
                for (int i = 0; i < 8; i++) v[u][i] = 0.0f;
            }
        }
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

#define QUANT_ENTRY(NAME, IN, FMT, SEARCH)                                                       \
    extern "C" __global__ void __launch_bounds__(256)                                            \
        NAME(const void* x, u32 groups, u32* data, u8* scale, const u32* tensor_amax,           \
             float* tensor_scale_out, u32 mode) {                                                \
        quantize<IN, FMT, SEARCH>(x, groups, data, scale, tensor_amax, tensor_scale_out, mode);  \
    }

QUANT_ENTRY(quant_mxfp4_f32, InF32, MX, false)
QUANT_ENTRY(quant_mxfp4_bf16, InBF16, MX, false)
QUANT_ENTRY(quant_mxfp4_f16, InF16, MX, false)
QUANT_ENTRY(quant_nvfp4_f32, InF32, NV, false)
QUANT_ENTRY(quant_nvfp4_bf16, InBF16, NV, false)
QUANT_ENTRY(quant_nvfp4_f16, InF16, NV, false)
QUANT_ENTRY(search_mxfp4_f32, InF32, MX, true)
QUANT_ENTRY(search_mxfp4_bf16, InBF16, MX, true)
QUANT_ENTRY(search_mxfp4_f16, InF16, MX, true)
QUANT_ENTRY(search_nvfp4_f32, InF32, NV, true)
QUANT_ENTRY(search_nvfp4_bf16, InBF16, NV, true)
QUANT_ENTRY(search_nvfp4_f16, InF16, NV, true)

#define AMAX_ENTRY(NAME, IN)                                                                 \
    extern "C" __global__ void __launch_bounds__(256) NAME(const void* x, u32 groups, u32* out) { \
        finite_amax<IN>(x, groups, out);                                                     \
    }

AMAX_ENTRY(finite_amax_f32, InF32)
AMAX_ENTRY(finite_amax_bf16, InBF16)
AMAX_ENTRY(finite_amax_f16, InF16)
