// MXFP4 / NVFP4 quantization kernels, compiled at run time with NVRTC (no headers needed).
//
// Byte for byte the same as the CPU reference in src/quant/ (mod.rs, codes.rs, scale.rs):
// every rounding step below mirrors a line there, and nothing is left to the compiler's
// floating-point contraction (explicit __fmul_rn / __fmaf_rn / __fsub_rn).
//
// Work split: one thread owns a "group" of 16 consecutive elements (four 16-byte loads of
// f32, two of bf16/f16) and writes their codes as two 32-bit words. A quantization block is
// held by 1 or 2 neighbouring lanes, which reduce the block maximum with xor shuffles. Each
// thread handles UNROLL groups, all loaded before any is processed, so enough bytes are in
// flight to saturate HBM (f32: 2 groups, 128 bytes; 16-bit: UNROLL_16BIT_*/2 groups). Loads and
// stores are marked streaming (every byte is touched once): 2-4% faster than __ldg at
// 4096x8192 bf16 on the H100. No IEEE division per element: MXFP4 multiplies by an exact
// power of two; NVFP4 divides with one reciprocal per block and Markstein's two-FMA
// correction, which is the correctly rounded quotient (div_markstein). The integer ALU is what
// limits these kernels, so the E2M1 encoder runs mostly on the FMA pipes (fp4_codecs.cuh:
// e2m1_grid), and bf16 inputs of MXFP4 and one-level NVFP4 are encoded two elements an
// instruction in bf16/f16 pair arithmetic (e2m1x2_bf16_scaled, e2m1x2_bf16_nv1).

// The codecs (E2M1, E8M0, E4M3, division) are in fp4_codecs.cuh, where the groups and scale
// bytes go in scale_tiling.cuh; src/quant/cuda.rs puts both in front of this file.

// ---- input formats: the N elements of group g, as loaded (Raw) and widened exactly to f32 ---
//
// A group is what one thread quantizes: N = 8·CHUNKS = 16 consecutive elements, whose codes
// are CHUNKS 32-bit words: the per-block work (amax reduction, scale, reciprocal, stores) is
// paid once per 16 elements, which decided the throughput of the lighter inputs.
// Each format gives Raw, load, zero, widen (exact f32 values) and amax (the group's largest
// |x| as f32 bits, NaN above every number: scale.rs module comment).

// What an input format loads for a group: LOADS 16-byte loads. Streaming (evict-first) by
// default: the bytes are used once. KEEP loads with the normal policy, so what was read last
// stays in L2: the tensor-amax pass of two-level NVFP4, whose input the quantizer reads again
// next (in reverse order, starting with what is still in L2).
template <int LOADS>
struct Bytes {
    struct Raw {
        uint4 q[LOADS];
    };
    template <bool KEEP = false>
    static __device__ __forceinline__ Raw load(const void* x, u64 g) {
        const uint4* p = reinterpret_cast<const uint4*>(x) + LOADS * g;
        Raw r;
#pragma unroll
        for (int i = 0; i < LOADS; i++) r.q[i] = KEEP ? __ldg(p + i) : __ldcs(p + i);
        return r;
    }
    static __device__ __forceinline__ Raw zero() {
        Raw r;
#pragma unroll
        for (int i = 0; i < LOADS; i++) r.q[i] = make_uint4(0, 0, 0, 0);
        return r;
    }
    static __device__ __forceinline__ void words(const Raw& r, u32 (&w)[4 * LOADS]) {
#pragma unroll
        for (int i = 0; i < LOADS; i++) {
            w[4 * i] = r.q[i].x, w[4 * i + 1] = r.q[i].y, w[4 * i + 2] = r.q[i].z, w[4 * i + 3] = r.q[i].w;
        }
    }
};

// max(a, b) with NaN above every number (max.NaN), on f32 values.
__device__ __forceinline__ float fmax_nan(float a, float b) {
    float d;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
    return d;
}

// f32 inputs: 16 elements, four 16-byte loads, so a thread holds a whole NVFP4 block and half
// an MXFP4 block: the per-block work (amax, scale, reciprocal) is paid once per 16 elements,
// not per 8. The signs go into the codes with the magnitudes (SIGNED_MAGS: encode8_mag).
struct InF32 : Bytes<4> {
    // Groups a thread loads at once (UNROLL; UNROLL_MX for MXFP4), 128 bytes.
    static constexpr int CHUNKS = 2, N = 16, UNROLL = 2, UNROLL_MX = 2;
    static constexpr bool BF16 = false;  // MXFP4 codes from bf16 pairs (mx_bf16_chunk)
    static constexpr bool SIGNED_MAGS = true;
    static __device__ __forceinline__ void widen(const Raw& r, float v[N]) {
        u32 w[16];
        words(r, w);
#pragma unroll
        for (int i = 0; i < 16; i++) v[i] = __uint_as_float(w[i]);
    }
    static __device__ __forceinline__ u32 signs(const Raw&, int) { return 0; }
    // max |x| by max.NaN on the magnitudes (the abs folds into the compare): the same value
    // as the integer maximum of the magnitude bits, NaN (canonical, above +inf) if any is.
    static __device__ __forceinline__ u32 amax(const Raw& r) {
        u32 w[16];
        words(r, w);
        float m = fabsf(__uint_as_float(w[0]));
#pragma unroll
        for (int i = 1; i < 16; i++) m = fmax_nan(m, fabsf(__uint_as_float(w[i])));
        return __float_as_uint(m);
    }
};

// 8-element chunks a thread loads at once from 16-bit inputs, per format (an even number:
// groups of 16); the host passes the same values (src/quant/cuda.rs, unroll_16bit).
#ifndef UNROLL_16BIT_MX
#define UNROLL_16BIT_MX 2
#endif
#ifndef UNROLL_16BIT_NV
#define UNROLL_16BIT_NV 4
#endif

// The bf16 amax of a group by packed bf16 max (1) or by integer max on the masked halves (0):
// a tuning knob (FP4PROBE_QUANT_DEFINES=BF16_AMAX_HMNMX=0).
#ifndef BF16_AMAX_HMNMX
#define BF16_AMAX_HMNMX 1
#endif

// 16-bit inputs: 16 elements, each widened exactly by Widen. The amax is taken on the packed
// halves (two elements per instruction); |x| orders like its bit pattern in bf16 and f16 as
// in f32, and widening keeps that order, NaN included.
template <class Widen>
struct In16 : Bytes<2> {
    static constexpr int CHUNKS = 2, N = 16, UNROLL = UNROLL_16BIT_NV / 2, UNROLL_MX = UNROLL_16BIT_MX / 2;
    static constexpr bool BF16 = Widen::BF16;
    static constexpr bool SIGNED_MAGS = false;
    static __device__ __forceinline__ void widen(const Raw& r, float v[N]) {
        u32 w[8];
        words(r, w);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            v[2 * i] = Widen::f32(w[i] & 0xffffu);
            v[2 * i + 1] = Widen::f32(w[i] >> 16);
        }
    }
    // The signs of chunk c's 8 elements at bits 4i+3, other bits anything. Element 2j is the
    // low half of word j (sign: bit 7 of byte 1), 2j+1 the high half (bit 7 of byte 3). Four
    // byte permutes gather the odd signs' bytes in order (sign at bit 7 of byte j) and the
    // even ones (shifted to bit 3); one select merges them: 7 instructions for 8 signs.
    static __device__ __forceinline__ u32 signs(const Raw& r, int c) {
        const uint4 q = r.q[c];
        const u32 lo = __byte_perm(q.x, q.y, 0x5173), hi = __byte_perm(q.z, q.w, 0x5173);
        const u32 odd = __byte_perm(lo, hi, 0x5410), even = __byte_perm(lo, hi, 0x7632);
        return (odd & 0x80808080u) | ((even >> 4) & ~0x80808080u);
    }
    static __device__ __forceinline__ u32 amax(const Raw& r) {
        const uint4 a = r.q[0], b = r.q[1];
        if constexpr (Widen::BF16 && BF16_AMAX_HMNMX) {
            // max.NaN.xorsign.abs on the bf16 pairs: |a| and |b| are operand modifiers, so the
            // tree is 7 instructions for 16 elements (the integer form masks every word
            // first); the max of two magnitudes is the integer max of their bits, NaN above
            // every number (max.NaN, canonical), subnormals kept (bf16 max has no ftz). The
            // signs the xorsign leaves are cleared with the widening: the high half's bits.
            const u32 m = bf16x2_max_abs(bf16x2_max_abs(bf16x2_max_abs(a.x, a.y), bf16x2_max_abs(a.z, a.w)),
                                         bf16x2_max_abs(bf16x2_max_abs(b.x, b.y), bf16x2_max_abs(b.z, b.w)));
            return bf16x2_max_abs(m, __byte_perm(m, 0, 0x1032)) & 0x7fff0000u;
        }
        const u32 m = __vmaxu2(__vmaxu2(__vmaxu2(a.x & 0x7fff7fffu, a.y & 0x7fff7fffu),
                                        __vmaxu2(a.z & 0x7fff7fffu, a.w & 0x7fff7fffu)),
                               __vmaxu2(__vmaxu2(b.x & 0x7fff7fffu, b.y & 0x7fff7fffu),
                                        __vmaxu2(b.z & 0x7fff7fffu, b.w & 0x7fff7fffu)));
        return __float_as_uint(Widen::f32(max(m & 0xffffu, m >> 16)));
    }
};

struct Bf16Bits {
    static constexpr bool BF16 = true;
    static __device__ __forceinline__ float f32(u32 h) { return bf16_bits_to_f32(h); }
};

struct F16Bits {
    static constexpr bool BF16 = false;
    static __device__ __forceinline__ float f32(u32 h) { return f16_bits_to_f32(h); }
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
        return e8m0_rceil_sixth(amax);
    }
    e = max(-127, min(128, e));
    return (u32)(e + 127) & 0xffu;
}

// Two-level NVFP4's tensor scale t and RN(1/t); nice: t is in [2^-40, 2^40] (a tensor amax
// from about 2.4e-9 to 3e15), where the block arithmetic needs no range checks: every block
// quotient the E4M3 clamp keeps is exact by Markstein's division, and every block scale t·blk
// has a normal reciprocal. One level: t = 1.
struct TensorScale {
    float t, rt;
    bool nice;
};

// The tensor scale of the tensor amax (f32 bits): amax / (6 · 448), 1 for an all-zero tensor
// (scale.rs: nv_tensor_scale).
__device__ __forceinline__ TensorScale tensor_scale_of(u32 amax) {
    TensorScale ts;
    ts.t = amax == 0 ? 1.0f : __fdiv_rn(__uint_as_float(amax), 2688.0f);
    ts.rt = __frcp_rn(ts.t);
    ts.nice = ts.t >= 0x1p-40f && ts.t <= 0x1p40f;
    return ts;
}

// NVFP4 block scale byte: (amax/6) [/ tensor scale], clamped, E4M3 (scale.rs: nv_scale). The
// clamp keeps amax/6 [/ t] only from 2^-6 to 448: there Markstein's division is exact, and
// outside its result (within an ulp) clamps the same, so one level and a nice t skip div_rn's
// checks (a nice t's quotient is taken of amax/6 capped at 2^80, which cannot overflow and
// still clamps to 448).
__device__ __forceinline__ u32 nv_scale(u32 amax, bool two_level, const TensorScale& ts) {
    if (amax >= F32_INF_BITS) return E4M3_NAN;
    const float a = __uint_as_float(amax), sixth = __uint_as_float(0x3e2aaaabu);
    if (!two_level) return e4m3_clamp_round(div_markstein_nonneg(a, 6.0f, sixth));
    if (ts.nice) {
        const float bs = fminf(div_markstein_nonneg(a, 6.0f, sixth), 0x1p80f);
        return e4m3_clamp_round(div_markstein_nonneg(bs, ts.t, ts.rt));
    }
    return e4m3_clamp_round(div_rn(div_rn(a, 6.0f, sixth), ts.t, ts.rt));
}

// ---- one group ------------------------------------------------------------------------------


// What one block's elements are multiplied (MX) or divided (NV) by, and what a code is worth;
// fast: NV's Markstein division is exact for every element (markstein_safe; always for one
// level, whose divisor is an E4M3 value from 2^-6 to 448).
struct BlockScale {
    float mul_or_div, rcp, value;
    bool fast;
};

template <int FMT>
__device__ __forceinline__ BlockScale block_scale(u32 byte, bool two_level, const TensorScale& ts) {
    BlockScale s;
    if (FMT == MX) {
        s.mul_or_div = e8m0_reciprocal(byte);
        s.rcp = s.mul_or_div;
        s.value = e8m0_to_f32(byte);
    } else {
        float blk = e4m3_to_f32(byte);
        s.value = two_level ? __fmul_rn(ts.t, blk) : blk;
        s.mul_or_div = s.value;
        const bool checked = two_level && !ts.nice;
        s.fast = !checked || markstein_safe(s.value);
        s.rcp = checked ? __frcp_rn(s.value) : rcp_rn_normal(s.value);
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

// Placing the 8 codes of a chunk into its word. Element i's magnitude code, given as
// code << 22 (e2m1_mag22), goes to bits 4i..4i+2 as the high word of mag22·2^(10+4i): an
// integer multiply, which runs on the FMA pipe, where the shift-and-or it replaces would
// load the integer ALU, the kernels' bottleneck. The multipliers sit in constant memory so
// the compiler cannot turn them back into shifts.
__constant__ u32 kNibbleHi[6] = {1u << 10, 1u << 14, 1u << 18, 1u << 22, 1u << 26, 1u << 30};

__device__ __forceinline__ u32 place_mag(u32 mag22, int i) {
    return i < 6 ? __umulhi(mag22, kNibbleHi[i]) : mag22 * (i == 6 ? 4u : 64u);
}

// x >> N as a multiply-high, on the FMA pipe (the integer ALU is what limits these kernels;
// the multipliers sit in constant memory so the compiler cannot turn them back into shifts).
__constant__ u32 kShrMul[10] = {0, 1u << 31, 1u << 30, 1u << 29, 1u << 28, 1u << 27, 1u << 26, 1u << 25, 1u << 24, 1u << 23};
template <int N>
__device__ __forceinline__ u32 shr(u32 x) { return __umulhi(x, kShrMul[N]); }

// The E2M1 codes of the bf16 pair x times the power of two s (a bf16 pair), each a nibble (sign
// at bit 3) at bit 6 of its half. |x|·s is exact but where it underflows, which only happens
// to values that encode to zero either way; the sign is x's, so -0 and tiny negatives give 0x8.
__device__ __forceinline__ u32 e2m1x2_bf16_scaled(u32 x, u32 s) {
    const u32 y = bf16x2_fma(x & 0x7fff7fffu, s, 0u);
    return e2m1_mag6_bf16x2(y) | (shr<6>(x) & 0x02000200u);
}

// The E2M1 codes of the bf16 pair x divided by a one-level NVFP4 block scale s (an E4M3 value;
// rs = RN(1/s)), each a nibble (sign at bit 3) at bit 9 of its half. No division and no f32
// grid: RN(|x|·rs) then RN to f16, whose error (< 2^-10.9 relative) is below the distance
// (> 2^-8 relative) from any x/s to an E2M1 midpoint it does not equal, since x has 8 and
// s 4 significant bits; a quotient equal to a midpoint lands on it exactly. So the codes are
// those of the correctly rounded quotient (pair_codes.rs tests this for every bf16 x and scale).
__device__ __forceinline__ u32 e2m1x2_bf16_nv1(u32 x, float rs) {
    const u32 a = x & 0x7fff7fffu;
    const u32 y = f16x2_from_f32(__fmul_rn(__uint_as_float(a << 16), rs), __fmul_rn(__uint_as_float(a & 0xffff0000u), rs));
    return e2m1_mag9_f16x2(y) | (shr<3>(x) & 0x10001000u);
}

// Four pairs of nibbles at bit B of each half (elements 0-7) as one word, element i at bits
// 4i..4i+3: p0 >> B puts elements 0, 1 at bits 0 and 16, p1 >> (B - 8) elements 2, 3 at 8 and
// 24; times 0x10010 (x << 16 plus x << 4) that word holds 0..3 in order in its high half.
template <int B>
__device__ __forceinline__ u32 e2m1x8_place_pairs(u32 p0, u32 p1, u32 p2, u32 p3) {
    const u32 x01 = shr<B>(p0) + (B >= 8 ? shr<(B >= 8 ? B - 8 : 1)>(p1) : p1 << (8 - B));
    const u32 x23 = shr<B>(p2) + (B >= 8 ? shr<(B >= 8 ? B - 8 : 1)>(p3) : p3 << (8 - B));
    return __byte_perm(x01 * 0x10010u, x23 * 0x10010u, 0x7632);
}

// Chunk c's MXFP4 codes of a bf16 group, the elements times the power of two s2 (a bf16 pair),
// two elements an instruction on the pairs as loaded: no widening, and about half the
// instructions of the f32 path (encode8_mag) per element.
__device__ __forceinline__ u32 mx_bf16_chunk(const Bytes<2>::Raw& r, int c, u32 s2) {
    const uint4 q = r.q[c];
    return e2m1x8_place_pairs<6>(e2m1x2_bf16_scaled(q.x, s2), e2m1x2_bf16_scaled(q.y, s2),
                                 e2m1x2_bf16_scaled(q.z, s2), e2m1x2_bf16_scaled(q.w, s2));
}

// Chunk c's one-level NVFP4 codes of a bf16 group, rs = RN(1/block scale) (e2m1x2_bf16_nv1).
__device__ __forceinline__ u32 nv1_bf16_chunk(const Bytes<2>::Raw& r, int c, float rs) {
    const uint4 q = r.q[c];
    return e2m1x8_place_pairs<9>(e2m1x2_bf16_nv1(q.x, rs), e2m1x2_bf16_nv1(q.y, rs),
                                 e2m1x2_bf16_nv1(q.z, rs), e2m1x2_bf16_nv1(q.w, rs));
}

// Two-level NVFP4 of bf16 inputs through e2m1_mag22_nv2 (1) or the f32 path (0): a tuning
// knob (FP4PROBE_QUANT_DEFINES=NV2_BF16_PATH=0) for comparing the two in one run.
#ifndef NV2_BF16_PATH
#define NV2_BF16_PATH 1
#endif

// The E2M1 magnitude code, as code << 22, of the bf16 value x (widened) over a two-level
// NVFP4 divisor d (rd = RN(1/d); a nice tensor scale, so Markstein's division is exact):
// Markstein's correctly rounded quotient q (div_markstein_nonneg), clamped at 6, then
// e2m1_grid's rounding scaled by 2^-126: C' = 2^-126·1.5·2^22·max(binade, 1) is the binade's
// bits plus a constant, floored at binade 1 (one signed add-and-max), whose ulp is the grid
// step times 2^-126; RN(q·2^-126 + C') in one FMA (the product is exact inside it, subnormal
// or not) is the grid value times 2^-126 plus C', and subtracting C' leaves that value exactly,
// whose bits are code << 22 (e2m1_mag22). Eight instructions where div_markstein_nonneg and
// e2m1_mag22 take ten; pair_codes.rs mirrors it and checks it against the divided reference,
// the grid rounding for every f32 quotient below 7. Rounding |x|·rd onto the grid in one FMA,
// without the exact quotient, measured slower (H200, reports/sm_90/quant/experiments/
// two-level-bf16): the blocks where that differs from the division are those where a midpoint
// times d lies next to a bf16 value, and with a bf16 tensor amax (d = amax/2688 · scale,
// 2688 = 2^7·3·7) they were a quarter of the blocks, so warps ran both paths.
template <bool CLAMP = true>
__device__ __forceinline__ u32 e2m1_mag22_nv2(float x, float d, float rd) {
    const float a = fabsf(x);
    const float y = __fmul_rn(a, rd);
    const float m = __fmaf_rn(__fmaf_rn(-y, d, a), rd, y);
    // Unclamped (the caller knows m < 7), m in [6, 7) lands on 6 as clamped.
    const float q = CLAMP ? fminf(m, 6.0f) : m;
    const float c = __int_as_float(__viaddmax_s32(__float_as_int(q) & 0x7f800000, 0x0b400000 - 0x3f000000, 0x0bc00000));
    return __float_as_uint(__fsub_rn(__fmaf_rn(q, 0x1p-126f, c), c));
}

// Chunk c's two-level NVFP4 magnitude codes of a bf16 group (e2m1_mag22_nv2), placed.
__device__ __forceinline__ u32 nv2_bf16_chunk(const Bytes<2>::Raw& r, int c, float d, float rd) {
    const uint4 q = r.q[c];
    const u32 w[4] = {q.x, q.y, q.z, q.w};
    u32 word = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        word += place_mag(e2m1_mag22_nv2(__uint_as_float(w[i] << 16), d, rd), 2 * i);
        word += place_mag(e2m1_mag22_nv2(__uint_as_float(w[i] & 0xffff0000u), d, rd), 2 * i + 1);
    }
    return word;
}

// The 8 magnitude codes of a chunk scaled by s, placed in a word; SIGNED: with the signs of v
// (each put at bit 25 of its code << 22 before placing, one logic op an element), else
// without (the caller adds them).
template <int FMT, bool SIGNED>
__device__ __forceinline__ u32 encode8_mag(const float v[8], BlockScale s) {
    if (FMT == NV && !s.fast) {
        Eight e;
#pragma unroll
        for (int i = 0; i < 8; i++) e.v[i] = v[i];
        return encode8_div_ieee(e, s.mul_or_div) & (SIGNED ? 0xffffffffu : 0x77777777u);
    }
    u32 word = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const float a = fabsf(v[i]);
        const float y = FMT == MX ? __fmul_rn(a, s.mul_or_div) : div_markstein_nonneg(a, s.mul_or_div, s.rcp);
        const u32 mag22 = e2m1_mag22(y);
        word += place_mag(SIGNED ? mag22 | (shr<6>(__float_as_uint(v[i])) & 0x02000000u) : mag22, i);
    }
    return word;
}

// Squared error of the block's codes: sequential FMA within each 8-element chunk, then the
// chunks summed pairwise, first within the thread, then across the block's lanes (mod.rs:
// block_sse; the order is the same whatever the group size).
template <int TPB, int CHUNKS>
__device__ __forceinline__ float block_sse(const float* v, const u32* words, float value) {
    float part[CHUNKS];
#pragma unroll
    for (int c = 0; c < CHUNKS; c++) {
        float acc = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            float d = __fsub_rn(v[8 * c + i], __fmul_rn(e2m1_decode(words[c] >> (4 * i)), value));
            acc = __fmaf_rn(d, d, acc);
        }
        part[c] = acc;
    }
    float acc = CHUNKS == 2 ? __fadd_rn(part[0], part[CHUNKS - 1]) : part[0];
#pragma unroll
    for (int o = 1; o < TPB; o <<= 1) acc = __fadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, o));
    return acc;
}

// The UNROLL groups base, base + blockDim.x, ... of this thread, all loads issued before
// any value is used; groups past the end read as zeros.
template <class In, int UNROLL, bool KEEP = false>
__device__ __forceinline__ void load_groups(const void* x, u64 base, u32 groups, typename In::Raw (&raw)[UNROLL]) {
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const u64 g = base + (u64)u * blockDim.x;
        raw[u] = g < groups ? In::template load<KEEP>(x, g) : In::zero();
    }
}

// The codes of one group, CHUNKS words: magnitudes from the scaled values, signs from the
// inputs.
template <class In, int FMT>
__device__ __forceinline__ void encode_group(const typename In::Raw& raw, const float* v, BlockScale s, u32* words) {
#pragma unroll
    for (int c = 0; c < In::CHUNKS; c++) {
        words[c] = In::SIGNED_MAGS ? encode8_mag<FMT, true>(v + 8 * c, s)
                                   : encode8_mag<FMT, false>(v + 8 * c, s) | (In::signs(raw, c) & 0x88888888u);
    }
}

// The codes of one group (CHUNKS words) under its block's finite scale byte `naive`; with
// SEARCH, `byte` becomes the best byte of the window and the codes its codes. bf16 inputs
// take the pair forms where they give the same codes (MXFP4; one-level NVFP4), the rest the
// f32 values.
template <class In, int FMT, bool SEARCH, u32 MODE, int TPB>
__device__ __forceinline__ void group_codes(const typename In::Raw& raw, u32 naive, bool two_level, const TensorScale& ts,
                                            u32& byte, u32* words) {
    constexpr int CHUNKS = In::CHUNKS;
    if constexpr (FMT == MX && !SEARCH && In::BF16) {
        const u32 s2 = e8m0_reciprocal_bf16x2(naive);
#pragma unroll
        for (int c = 0; c < CHUNKS; c++) words[c] = mx_bf16_chunk(raw, c, s2);
    } else if constexpr (FMT == NV && !SEARCH && In::BF16 && MODE == 1) {
        const float rs = rcp_rn_normal(e4m3_to_f32(naive));
#pragma unroll
        for (int c = 0; c < CHUNKS; c++) words[c] = nv1_bf16_chunk(raw, c, rs);
    } else {
        BlockScale s = block_scale<FMT>(naive, two_level, ts);
        if constexpr (FMT == NV && !SEARCH && In::BF16 && MODE == 2) {
            if (NV2_BF16_PATH && ts.nice) {
#pragma unroll
                for (int c = 0; c < CHUNKS; c++)
                    words[c] = nv2_bf16_chunk(raw, c, s.mul_or_div, s.rcp) | (In::signs(raw, c) & 0x88888888u);
                return;
            }
        }
        float v[In::N];
        In::widen(raw, v);
        encode_group<In, FMT>(raw, v, s, words);
        if (SEARCH) {
            // Windowed search (mod.rs: search_candidates): MX tries e+1; NV tries the E4M3
            // bytes within ±5, nearest first; a candidate wins only if strictly better. A
            // candidate outside the scale range is evaluated as the naive scale (never better),
            // so the loop stays uniform.
            float best = block_sse<TPB, CHUNKS>(v, words, s.value);
            const int steps = FMT == MX ? 1 : 10;
            for (int k = 1; k <= steps; k++) {
                int off = FMT == MX ? 1 : ((k + 1) / 2) * ((k & 1) ? -1 : 1);
                int cand = (int)naive + off;
                bool ok = FMT == MX ? (naive < 254u) : (cand >= 0x08 && cand <= 0x7e);
                u32 c = ok ? (u32)cand : naive;
                BlockScale cs = block_scale<FMT>(c, two_level, ts);
                u32 w[CHUNKS];
                encode_group<In, FMT>(raw, v, cs, w);
                float e = block_sse<TPB, CHUNKS>(v, w, cs.value);
                if (ok && e < best) {
                    best = e;
                    byte = c;
#pragma unroll
                    for (int i = 0; i < CHUNKS; i++) words[i] = w[i];
                }
            }
        }
    }
}

// Two-level NVFP4 of bf16 inputs under a nice tensor scale (1; 0: group_codes as for any
// tensor scale, a tuning knob: FP4PROBE_QUANT_DEFINES=NV2_BF16_NICE=0): the tile loop is
// compiled a second time with the tensor scale known nice, so a group takes no branch on it,
// the block scale byte comes from one branch-free sequence, the clamp of the quotients at 6
// runs only in warps where a block scale is 448 (elsewhere every quotient is below 7, where
// the grid rounding gives 6 unclamped: pair_codes.rs), and the signs are gathered with
// sign-replicating byte permutes: 15.4 instructions an element against 17.2 (linear, Nsight
// Compute, H200), 86 / 79-80 / 80-81% of the copy (linear / 128x4 / 8x4) against 84 / 78 /
// 79-80% (reports/sm_90/quant/experiments/grid-fma-and-loop).
#ifndef NV2_BF16_NICE
#define NV2_BF16_NICE 1
#endif

// Two-level NVFP4 block scale byte under a nice tensor scale: nv_scale's nice branch, with the
// E4M3 saturation of the conversion doing the clamp at 448.
__device__ __forceinline__ u32 nv2_scale_nice(u32 amax, const TensorScale& ts) {
    const float a = __uint_as_float(amax), sixth = __uint_as_float(0x3e2aaaabu);
    const float bs = fminf(div_markstein_nonneg(a, 6.0f, sixth), 0x1p80f);
    const u32 byte = e4m3x2_round(fmaxf(div_markstein_nonneg(bs, ts.t, ts.rt), 0.015625f), 0.0f) & 0xffu;
    return amax >= F32_INF_BITS ? E4M3_NAN : byte;
}

// The signs of a chunk's 8 bf16 elements at bits 4i+3, every other bit zero: two permutes
// gather the sign bytes (odd elements' first), two more put them in order with each byte's
// sign replicated through it (prmt's sign mode), and the masks keep bit 7 of the odd and bit
// 3 of the even.
__device__ __forceinline__ u32 prmt_sign(u32 a, u32 b, u32 sel) {
    u32 d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
}
__device__ __forceinline__ u32 bf16_signs8(const uint4 q) {
    const u32 lo = __byte_perm(q.x, q.y, 0x5173), hi = __byte_perm(q.z, q.w, 0x5173);
    return (prmt_sign(lo, hi, 0xdc98) & 0x80808080u) | (prmt_sign(lo, hi, 0xfeba) & 0x08080808u);
}

// Chunk c's two-level NVFP4 codes of a bf16 group, signs included, under a nice tensor scale.
template <bool CLAMP>
__device__ __forceinline__ u32 nv2_bf16_chunk_nice(const Bytes<2>::Raw& r, int c, float d, float rd) {
    const uint4 q = r.q[c];
    const u32 w[4] = {q.x, q.y, q.z, q.w};
    u32 word = bf16_signs8(q);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        word += place_mag(e2m1_mag22_nv2<CLAMP>(__uint_as_float(w[i] << 16), d, rd), 2 * i);
        word += place_mag(e2m1_mag22_nv2<CLAMP>(__uint_as_float(w[i] & 0xffff0000u), d, rd), 2 * i + 1);
    }
    return word;
}

// One CTA tile's groups: scales, codes, stores. NICE2: two-level NVFP4 of bf16 under a nice
// tensor scale (NV2_BF16_NICE).
template <class In, int FMT, bool SEARCH, u32 MODE, bool NICE2, int UNROLL>
__device__ __forceinline__ void quantize_tile(const typename In::Raw (&raw)[UNROLL], const Tiling<FMT, UNROLL>& tl,
                                              const typename Tiling<FMT, UNROLL>::Where& where, const TensorScale& ts,
                                              u32* data, u8* scale, const ScaleGeom& geom) {
    constexpr u32 mode = MODE;
    constexpr int CHUNKS = In::CHUNKS;
    constexpr int TPB = (FMT == MX ? 32 : 16) / In::N;  // lanes per quantization block
    const bool two_level = FMT == NV && mode == 2;
    // NICE2: the block scale bytes of the tile's groups first, then one vote a tile on the clamp
    // at 6 (any lane's block at 448, or NaN): on the lanes of reports/sm_90/quant/experiments/
    // band-walk, 429 instructions a tile where a vote a group took 434 linear and 441 in the
    // tiled layouts; 90-91 / 86-87 / 88% of the copy against 89-90 / 86 / 87% (linear / 128x4 /
    // 8x4, H200).
    u32 nice_bytes[UNROLL];
    bool clamp = false;
    if constexpr (NICE2) {
#pragma unroll
        for (int u = 0; u < UNROLL; u++) nice_bytes[u] = nv2_scale_nice(In::amax(raw[u]), ts);
        u32 top = 0;
#pragma unroll
        for (int u = 0; u < UNROLL; u++) top = max(top, nice_bytes[u]);
        clamp = __any_sync(0xffffffffu, top >= 0x7eu);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const GroupAt at = tl.at(where, u, geom);
        u32 byte;
        const u32 nan_byte = FMT == MX ? E8M0_NAN : E4M3_NAN;
        u32 words[CHUNKS];
        bool nan_block;
        if constexpr (NICE2) {
            byte = nice_bytes[u];
            nan_block = byte == nan_byte;
            // A NaN block's scale decodes to NaN: its codes are garbage, replaced below.
            const float d = __fmul_rn(ts.t, e4m3_to_f32(byte)), rd = rcp_rn_normal(d);
            if (clamp) {
#pragma unroll
                for (int c = 0; c < CHUNKS; c++) words[c] = nv2_bf16_chunk_nice<true>(raw[u], c, d, rd);
            } else {
#pragma unroll
                for (int c = 0; c < CHUNKS; c++) words[c] = nv2_bf16_chunk_nice<false>(raw[u], c, d, rd);
            }
        } else {
            u32 amax = In::amax(raw[u]);
#pragma unroll
            for (int o = 1; o < TPB; o <<= 1) amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, o));
            byte = FMT == MX ? mx_scale(mode, amax) : nv_scale(amax, two_level, ts);
            // Every lane runs the same instructions from here on: block_sse shuffles across the
            // warp with a full mask, so no lane may branch around it. A NaN block is encoded with
            // a stand-in scale (scale 1) and its results are replaced at the end.
            nan_block = byte == nan_byte;
            const u32 naive = nan_block ? (FMT == MX ? 127u : 0x38u) : byte;
            group_codes<In, FMT, SEARCH, MODE, TPB>(raw[u], naive, two_level, ts, byte, words);
        }
        if (nan_block) {
            byte = nan_byte;
#pragma unroll
            for (int i = 0; i < CHUNKS; i++) words[i] = 0;
        }
        if (at.valid) {
            if (CHUNKS == 2) {
                __stcs(reinterpret_cast<uint2*>(data) + at.g, make_uint2(words[0], words[CHUNKS - 1]));
            } else {
                __stcs(data + at.g, words[0]);
            }
            if (Tiling<FMT, UNROLL>::BANDS) {
                scale[at.scale] = (u8)byte;
            } else if ((at.g & (TPB - 1)) == 0) {
                scale[scale_offset((u32)(at.g / TPB), geom)] = (u8)byte;
            }
        }
    }
}

// This CTA's tiles tile, tile + stride, ... (Tiling; raw and where: the first, loaded), each
// tile's place stepped from the last one's (Tiling::step, which walks from the end where the
// tiles are taken from there). Loading the next tile
// before encoding this one (registers for two tiles, the grid capped at 5 CTAs an SM so CTAs
// loop) measured slower: bf16 two-level NVFP4 60% of the copy against 81% (reports/sm_90/quant/
// experiments/nice-loop-and-prefetch); so did copying it into a shared-memory ring with
// cp.async, 75-78% (experiments/ring): the kernel is bound by its instructions, not by its loads.
template <class In, int FMT, bool SEARCH, u32 MODE, bool NICE2, int UNROLL>
__device__ __forceinline__ void tile_loop(const void* x, const Tiling<FMT, UNROLL>& tl, u32 tile,
                                          typename In::Raw (&raw)[UNROLL], typename Tiling<FMT, UNROLL>::Where where,
                                          const TensorScale& ts, u32* data, u8* scale, const ScaleGeom& geom) {
    if constexpr (Tiling<FMT, UNROLL>::BANDS) {
        // The host launches a grid of the stride (Tiling), so a CTA's tiles are its first and
        // those stride, 2·stride, ... tiles on; a smaller grid would leave tiles out, so it
        // stops the kernel instead.
        if (gridDim.x < min(tl.stride, tl.tiles)) __trap();
        while (true) {
            quantize_tile<In, FMT, SEARCH, MODE, NICE2>(raw, tl, where, ts, data, scale, geom);
            // The walk ends where the scale offset leaves the scale bytes, either way (wrapping
            // below 0: layout.rs, BandWalk).
            where = tl.step(where, geom);
            if (where.scale >= geom.scale_bytes) return;
            load_tile<In>(x, tl, where, geom, raw);
        }
    } else {
        while (true) {
            quantize_tile<In, FMT, SEARCH, MODE, NICE2>(raw, tl, where, ts, data, scale, geom);
            tile += tl.stride;
            if (tile >= tl.tiles) return;
            where = tl.step(where, geom);
            load_tile<In>(x, tl, where, geom, raw);
        }
    }
}

// MODE is compile-time (one entry point per mode): a run-time mode would put a branch into
// every group, which splits the unrolled groups into separately scheduled pieces. `chunks`
// counts 8-element chunks (the host's unit for every input type).
template <class In, int FMT, bool SEARCH, u32 MODE>
__device__ __forceinline__ void quantize(const void* x, u32 chunks, u32* data, u8* scale,
                                         const u32* tensor_amax, float* tensor_scale_out, ScaleGeom geom) {
    constexpr int CHUNKS = In::CHUNKS;
    // NVFP4 two-level (mode 2): the tensor scale, from the finite amax the first kernel found
    // (or the caller gave), is computed after the first tile's loads are issued and written
    // out at the end: before them, the division (whose slow paths are calls) and the store
    // (which may alias x) kept every load of x waiting for the amax load.
    const bool two_level = FMT == NV && MODE == 2;
    constexpr bool NICE2 = NV2_BF16_NICE && FMT == NV && MODE == 2 && In::BF16 && !SEARCH;
    TensorScale ts{1.0f, 1.0f, true};
    // Groups a thread loads at once.
    constexpr int UNROLL = FMT == MX ? In::UNROLL_MX : In::UNROLL;
    // CTA tiles of QUANT_THREADS·UNROLL groups (Tiling); a CTA takes tiles blockIdx.x, +
    // stride, ... (the host launches one CTA per tile, except two-level NVFP4 of bf16, whose
    // grid it caps so that CTAs loop and pay the prologue once for several tiles: cuda.rs,
    // LOOPING_CTAS_PER_SM; in bands, to whole tile rows: layout.rs, BandWalk). The tile size
    // is a compile-time power of two: with blockDim.x it would be a 64-bit division ahead of
    // every load. Two-level: tiles are taken from the
    // tensor's end, which the amax pass (finite_amax) read last and left in L2.
    const Tiling<FMT, UNROLL> tl(chunks / CHUNKS, geom, two_level);
    if constexpr (!NICE2) {
        // One load site: the loop as written.
        for (u32 tile = blockIdx.x; tile < tl.tiles; tile += gridDim.x) {
            const typename Tiling<FMT, UNROLL>::Where where = tl.where(two_level ? tl.tiles - 1 - tile : tile, geom);
            typename In::Raw raw[UNROLL];
            load_tile<In>(x, tl, where, geom, raw);
            if (two_level && tile == blockIdx.x) ts = tensor_scale_of(*tensor_amax);
            quantize_tile<In, FMT, SEARCH, MODE, false>(raw, tl, where, ts, data, scale, geom);
        }
    } else if (blockIdx.x < min(tl.stride, tl.tiles)) {
        const u32 tile = blockIdx.x;
        const typename Tiling<FMT, UNROLL>::Where where = tl.where(two_level ? tl.tiles - 1 - tile : tile, geom);
        typename In::Raw raw[UNROLL];
        load_tile<In>(x, tl, where, geom, raw);
        if (two_level) ts = tensor_scale_of(*tensor_amax);
        // NICE2: the loop a second time, for a nice tensor scale.
        if (NICE2 && ts.nice) {
            tile_loop<In, FMT, SEARCH, MODE, NICE2>(x, tl, tile, raw, where, ts, data, scale, geom);
        } else {
            tile_loop<In, FMT, SEARCH, MODE, false>(x, tl, tile, raw, where, ts, data, scale, geom);
        }
    }
    // CTA 0 has a tile unless the tensor is empty.
    if (two_level && blockIdx.x == 0 && threadIdx.x == 0)
        *tensor_scale_out = tl.tiles != 0 ? ts.t : tensor_scale_of(*tensor_amax).t;
}

// Maximum |x| over the finite elements, as f32 bits, into *out (zeroed by the caller). Each
// thread loads UNROLL groups before reducing them (bytes in flight), strides over the grid,
// and each CTA does one atomicMax (integer order = float order for non-negative floats).
template <class In>
__device__ __forceinline__ void finite_amax(const void* x, u32 chunks, u32* out) {
    constexpr int UNROLL = In::UNROLL;
    const u32 groups = chunks / In::CHUNKS;
    u32 m = 0;
    const u64 stride = (u64)gridDim.x * blockDim.x * UNROLL;
    for (u64 base = (u64)blockIdx.x * blockDim.x * UNROLL + threadIdx.x; base < groups; base += stride) {
        typename In::Raw raw[UNROLL];
        load_groups<In, UNROLL, true>(x, base, groups, raw);
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            // The group's largest |x| by In::amax (16-bit inputs: two halves an instruction),
            // in which NaN and Inf rank above every number; only a group holding one of them
            // is walked element by element to skip it.
            const u32 group = In::amax(raw[u]);
            if (group < F32_INF_BITS) {
                m = max(m, group);
                continue;
            }
            float v[In::N];
            In::widen(raw[u], v);
#pragma unroll
            for (int i = 0; i < In::N; i++) {
                u32 b = __float_as_uint(v[i]) & 0x7fffffffu;
                if (b < F32_INF_BITS) m = max(m, b);
            }
        }
    }
    // One atomic per CTA, not per warp: a few thousand atomics on one word serialise in L2
    // and showed as several microseconds of the pass.
    __shared__ u32 warp_max[32];
    m = __reduce_max_sync(0xffffffffu, m);
    if ((threadIdx.x & 31u) == 0) warp_max[threadIdx.x / 32] = m;
    __syncthreads();
    if (threadIdx.x < 32) {
        m = threadIdx.x < blockDim.x / 32 ? warp_max[threadIdx.x] : 0u;
        m = __reduce_max_sync(0xffffffffu, m);
        if (threadIdx.x == 0) atomicMax(out, m);
    }
}

// Resident 256-thread CTAs per SM the compiler must leave registers for (__launch_bounds__),
// per entry. Measured on the H100 (tests/gpu/run-quant-occupancy-experiment.sh, NVRTC 13.0,
// two interleaved rounds): bf16 inputs gain from more resident warps to hide the latency of
// their longer per-byte arithmetic, MXFP4 +4% at 8 CTAs (32 registers) and NVFP4 +3% at 5
// (48 registers; at 6 and 8 it gains less or loses). f32 inputs lose 2-25% under any cap
// (spills); the search kernels and f16 inputs (not measured) would spill too. On the H200
// (reports/sm_90/quant/speed, the register-cap call): bf16 MXFP4 at 4 CTAs -4%, bf16 NVFP4 at
// 4 the same; f32 at 4, one-level NVFP4 -2 to -4% (60 registers offline, no spill), the other
// f32 entries the same; bf16 one-level NVFP4 at 6 (40 registers) the same or a point lower
// in row order (reports/sm_90/quant/experiments/two-level-bf16), and in the bands of the tiled
// layouts 92% of the copy against 91 / 90% at 5 (128x4 / 8x4; reports/sm_90/quant/speed), so
// 6 there.
// Everything else, and other GPUs, keep the compiler's choice. For tuning (FP4PROBE_QUANT_DEFINES,
// src/quant/cuda.rs): QUANT_MIN_BLOCKS sets one value for every entry; QUANT_MIN_BLOCKS_F32,
// _BF16_MX and _BF16_NV the value of the quantization entries of those inputs and formats,
// _BF16_NV1 that of one-level NVFP4 alone (default _BF16_NV, 6 in the tiled layouts).
#ifndef QUANT_MIN_BLOCKS_F32
#define QUANT_MIN_BLOCKS_F32 1
#endif
#ifndef QUANT_MIN_BLOCKS_BF16_MX
#define QUANT_MIN_BLOCKS_BF16_MX (__CUDA_ARCH__ == 900 ? 8 : 1)
#endif
#ifndef QUANT_MIN_BLOCKS_BF16_NV
#define QUANT_MIN_BLOCKS_BF16_NV (__CUDA_ARCH__ == 900 ? 5 : 1)
#endif
#ifndef QUANT_MIN_BLOCKS_BF16_NV1
#define QUANT_MIN_BLOCKS_BF16_NV1 (__CUDA_ARCH__ == 900 && SCALE_LAYOUT != 0 ? 6 : QUANT_MIN_BLOCKS_BF16_NV)
#endif
template <class In, int FMT, bool SEARCH, u32 MODE>
struct MinBlocks {
#ifdef QUANT_MIN_BLOCKS
    static constexpr int value = QUANT_MIN_BLOCKS;
#else
    static constexpr int value = SEARCH    ? 1
                                 : In::BF16 ? (FMT == MX ? QUANT_MIN_BLOCKS_BF16_MX
                                               : MODE == 1 ? QUANT_MIN_BLOCKS_BF16_NV1
                                                           : QUANT_MIN_BLOCKS_BF16_NV)
                                 : In::SIGNED_MAGS ? QUANT_MIN_BLOCKS_F32
                                                   : 1;
#endif
};

// MXFP4 modes: 0 floor, 1 ceil, 2 even, 3 rceil; NVFP4: 1 one-level, 2 two-level.
#define QUANT_ENTRY(NAME, IN, FMT, SEARCH, MODE)                                                 \
    extern "C" __global__ void __launch_bounds__(QUANT_THREADS, (MinBlocks<IN, FMT, SEARCH, MODE>::value)) \
        NAME(const void* x, u32 chunks, u32* data, u8* scale, const u32* tensor_amax,           \
             float* tensor_scale_out, u32 cols, u32 magic, u32 shift, u32 row_tile_bytes,       \
             u32 hcount, u32 hmagic, u32 hshift, u32 tiles, u32 stride, u32 step_g, u32 step_scale, u32 scale_bytes) { \
        quantize<IN, FMT, SEARCH, MODE>(x, chunks, data, scale, tensor_amax, tensor_scale_out,   \
                                        ScaleGeom{cols, magic, shift, row_tile_bytes, hcount, hmagic, hshift, \
                                                  tiles, stride, step_g, step_scale, scale_bytes}); \
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
    extern "C" __global__ void __launch_bounds__(QUANT_THREADS) NAME(const void* x, u32 chunks, u32* out) { \
        finite_amax<IN>(x, chunks, out);                                                     \
    }

AMAX_ENTRY(finite_amax_f32, InF32)
AMAX_ENTRY(finite_amax_bf16, InBF16)
AMAX_ENTRY(finite_amax_f16, InF16)
