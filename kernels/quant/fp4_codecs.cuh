// FP4 codecs shared by the CUDA kernels (kernels/quant/quant.cu, kernels/attention/*.cu):
// E2M1 elements, E8M0 and E4M3 scales, and correctly rounded division without a division
// instruction. Each mirrors a function of src/quant/codes.rs or src/quant/mod.rs and gives the
// same bits. No headers needed (NVRTC).
#pragma once

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef unsigned long long u64;

#define F32_INF_BITS 0x7f800000u
#define E8M0_NAN 0xffu
#define E4M3_NAN 0x7fu

// ---- element and scale codecs (codes.rs) -----------------------------------------------------

// |v| rounded to the E2M1 grid (ties to even) and saturated at 6, for v >= 0. The grid step
// is q = 0.5 below 2, 1 in [2,4), 2 in [4,8): adding C = 1.5·2^22·max(binade(v), 1), whose
// ulp is q, rounds v to a multiple of q in one IEEE rounding, and subtracting C gives it back.
// All but the binade mask and the two clamps run on the FMA pipes, which the integer-heavy
// bit form left idle (codes.rs: e2m1_encode_bits mirrors this, tested equal to e2m1_encode).
__device__ __forceinline__ float e2m1_grid(float v) {
    const u32 binade = max(__float_as_uint(v) & 0x7f800000u, 0x3f800000u);
    const float c = __fmul_rn(__uint_as_float(binade), 6291456.0f);
    return fminf(__fsub_rn(__fadd_rn(v, c), c), 6.0f);
}

// The E2M1 magnitude code of v >= 0, shifted left by 22. The grid values times 2^-126 are
// 2^-127 (0.5, an f32 subnormal), 2^-126 (1), ... 1.5·2^-124 (6), whose bit patterns are
// exactly code << 22: the f32 encoding does the code assignment, one FMUL.
__device__ __forceinline__ u32 e2m1_mag22(float v) {
    return __float_as_uint(__fmul_rn(e2m1_grid(v), 0x1p-126f));
}

// Nearest E2M1 code, ties to even, saturating, sign kept.
__device__ __forceinline__ u32 e2m1_encode(float v) {
    return ((__float_as_uint(v) >> 28) & 8u) | (e2m1_mag22(fabsf(v)) >> 22);
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

// The E8M0 byte of amax/6 rounded up to a power of two (RCEIL, scale.rs: mx_scale): amax
// times RN(1/6) in f32, then up a binade when any mantissa bit is set; f32 subnormals lie
// between 0 and 2^-126 with byte 0 = 2^-127 among them, so only those above it go up.
__device__ __forceinline__ u32 e8m0_rceil_sixth(u32 amax) {
    const u32 d = __float_as_uint(__fmul_rn(__uint_as_float(amax), __uint_as_float(0x3e2aaaabu)));
    if (d >= F32_INF_BITS) return E8M0_NAN;
    const u32 ex = d >> 23, mant = d & 0x7fffffu;
    const u32 up = ex == 0 ? (mant > 0x400000u) : (mant != 0);
    return (ex + up) & 0xffu;
}

// 2^(127-b), the exact reciprocal of a finite E8M0 scale b (codes.rs: e8m0_reciprocal).
__device__ __forceinline__ float e8m0_reciprocal(u32 b) { return e8m0_to_f32((254u - b) & 0xffu); }

// ---- 16-bit inputs and E4M3 pairs -------------------------------------------------------------

// bf16 and f16 bits widened exactly to f32.
__device__ __forceinline__ float bf16_bits_to_f32(u32 h) { return __uint_as_float(h << 16); }
__device__ __forceinline__ float f16_bits_to_f32(u32 h) {
    float f;
    const unsigned short s = (unsigned short)h;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(s));
    return f;
}

// Two values already within E4M3's normal range rounded to E4M3 (nearest, ties to even) by one
// conversion instruction (sm_89 and later): lo in the low byte, hi in the high byte.
__device__ __forceinline__ u32 e4m3x2_round(float lo, float hi) {
    unsigned short pair;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(hi), "f"(lo));
    return pair;
}

// The values of two E4M3 bytes (low byte first; 0x7f/0xff NaN), exactly, through f16.
__device__ __forceinline__ void e4m3x2_to_f32(u32 pair, float& lo, float& hi) {
    const unsigned short p = (unsigned short)pair;
    u32 h2;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(p));
    lo = f16_bits_to_f32(h2 & 0xffffu);
    hi = f16_bits_to_f32(h2 >> 16);
}

// Clamp to [2^-6, 448] and round to E4M3, ties to even (codes.rs: e4m3_clamp_round); exact
// like the bit form it replaced.
__device__ __forceinline__ u32 e4m3_clamp_round(float v) {
    if (v != v) return E4M3_NAN;
    return e4m3x2_round(fminf(fmaxf(v, 0.015625f), 448.0f), 0.0f) & 0xffu;
}

// An E4M3 byte's value (0x7f/0xff NaN).
__device__ __forceinline__ float e4m3_to_f32(u32 b) {
    float lo, hi;
    e4m3x2_to_f32(b & 0xffu, lo, hi);
    return lo;
}

// ---- bf16 pairs (MXFP4 of bf16 inputs) ------------------------------------------------------

// a·b + c on the two bf16 halves of a word at once, rounded once to nearest even, subnormals
// kept (fma.rn.bf16x2 from sm_80; the mul and add forms need sm_90).
__device__ __forceinline__ u32 bf16x2_fma(u32 a, u32 b, u32 c) {
    u32 d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

// max(|a|, |b|) on the two bf16 halves at once, NaN (canonical) if either is NaN; the sign of
// each half is the xor of the inputs' signs (the caller clears it).
__device__ __forceinline__ u32 bf16x2_max_abs(u32 a, u32 b) {
    u32 d;
    asm("max.NaN.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}

// 2^(127-b), the reciprocal of a finite E8M0 scale b, in both halves of a bf16 pair (exponent
// field 254 - b; b = 254 gives 2^-127, the bf16 subnormal 0x0040).
__device__ __forceinline__ u32 e8m0_reciprocal_bf16x2(u32 b) {
    return (b == 254u ? 0x40u : (254u - b) << 7) * 0x10001u;
}

// The E2M1 magnitude codes of the two bf16 values of y (each >= 0 and below 8), as code << 6
// in each half (pair_codes.rs mirrors this). e2m1_grid on pairs: C = 64·max(binade,
// 1) has the E2M1 step as its bf16 ulp and y + C stays in C's binade (y < 2·binade), so one
// rounding puts y on the grid; (y + C)·2^-126 - C·2^-126, exact in one FMA, is the grid value
// times 2^-126, whose bf16 bits are code << 6 (0.5: the subnormal 2^-127, 0x0040; 6: 0x01C0);
// 8 (y in [7, 8)) saturates to code 7. C's bits are the binade's with 6 added to the exponent
// (one add-and-max, VIADDMNMX); -C·2^-126 is a product, on the FMA pipe like the rest.
__device__ __forceinline__ u32 e2m1_mag6_bf16x2(u32 y) {
    const u32 t = y & 0x7f807f80u;
    const u32 c = __viaddmax_u16x2(t, 0x03000300u, 0x42804280u);
    const u32 neg_c = bf16x2_fma(c, 0x80808080u, 0u);
    const u32 k = bf16x2_fma(bf16x2_fma(y, 0x3f803f80u, c), 0x00800080u, neg_c);
    return __vminu2(k, 0x01c001c0u);
}

// ---- f16 pairs (NVFP4 of bf16 inputs, one level) -----------------------------------------------

__device__ __forceinline__ u32 f16x2_fma(u32 a, u32 b, u32 c) {
    u32 d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

// Two f32 values as an f16 pair, rounded to nearest even (lo in the low half).
__device__ __forceinline__ u32 f16x2_from_f32(float lo, float hi) {
    u32 d;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}

// The E2M1 magnitude codes of the two f16 values of y (each >= 0, any size, +inf included),
// as code << 9 in each half (pair_codes.rs mirrors this): e2m1_mag6_bf16x2 in f16,
// saturated first (y can exceed 8 here). C = 512·max(binade, 1) has the E2M1 step as its f16
// ulp; the grid value times 2^-14 (f16's smallest normal) has the bits code << 9.
__device__ __forceinline__ u32 e2m1_mag9_f16x2(u32 y) {
    const u32 ym = __vminu2(y, 0x46004600u);
    const u32 c = __viaddmax_u16x2(ym & 0x7c007c00u, 0x24002400u, 0x60006000u);
    const u32 neg_c = f16x2_fma(c, 0x84008400u, 0u);
    return f16x2_fma(f16x2_fma(ym, 0x3c003c00u, c), 0x04000400u, neg_c);
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
// is put back (b > 0 always), so -0 and tiny negatives still encode as 0x8. For a >= 0
// (div_markstein_nonneg) there is no sign to restore.
__device__ __forceinline__ float div_markstein_nonneg(float a, float b, float rb) {
    float q = __fmul_rn(a, rb);
    float r = __fmaf_rn(-q, b, a);
    return __fmaf_rn(r, rb, q);
}

__device__ __forceinline__ float div_markstein(float a, float b, float rb) {
    float q1 = div_markstein_nonneg(a, b, rb);
    return __uint_as_float(__float_as_uint(q1) | (__float_as_uint(a) & 0x80000000u));
}
// RN(1/b) for b whose reciprocal is a normal number far from the ends of the range (every
// E4M3 value from 2^-6 to 448; markstein_safe divisors): the fast path of __frcp_rn without its
// range check (an approximate reciprocal, then one Newton step rounded once).
__device__ __forceinline__ float rcp_rn_normal(float b) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(b));
    return __fmaf_rn(r, -__fmaf_rn(b, r, -1.0f), r);
}

// a / b for per-block quantities (one call per group, not per element).
__device__ __forceinline__ float div_rn(float a, float b, float rb) {
    float aa = fabsf(a);
    bool safe = markstein_safe(b) && (a == 0.0f || (aa >= 0x1p-100f && aa <= 0x1p100f));
    return safe ? div_markstein(a, b, rb) : div_ieee(a, b);
}

// |v| rounded to the E2M1 grid and saturated at 6, as a float: what
// e2m1_decode(e2m1_encode(v)) gives for v >= 0, without forming the code.
__device__ __forceinline__ float e2m1_round(float v) { return e2m1_grid(fabsf(v)); }
