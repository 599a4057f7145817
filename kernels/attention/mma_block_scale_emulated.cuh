// A software model of the block-scaled e2m1 × e2m1 → f32 mma.sync of sm_120a
//   m16n8k64 .kind::mxf4nvf4 .scale_vec::{2X,4X} .{ue8m0,ue4m3}   (K = 64, packed FP4)
//   m16n8k32 .kind::mxf8f6f4 .scale_vec::1X .ue8m0               (K = 32, 8-bit containers)
// at selectors byte-id 0, thread-id 0, for running attn_block_scale.cuh on a GPU that lacks
// the instruction (ATTN_EMULATE_BLOCK_SCALE).
//
// It is written from the PTX ISA's description of the fragments and scale factors, not from
// kernels/generated, so a run checks the kernel's use of the generated tables against an
// independent statement of the instruction (g = lane / 4, t = lane % 4):
//   K = 64: A (16 × 64) register r, element e: row g + 8·(r%2), k 8t + e + 32·(r/2)
//           B (64 × 8)  register r, element e: k 8t + e + 32r, column g
//           element e in bits 4e..4e+3 of its register
//   K = 32: A (16 × 32) register r, element e: row g + 8·(r%2), k 4t + e + 16·(r/2)
//           B (32 × 8)  register r, element e: k 4t + e + 16r, column g
//           element e in bits 8e+2..8e+5 of its register (an e2m1 in an 8-bit container)
//   C, D (16 × 8 f32): register i: row g + 8·(i/2), column 2t + i%2
//   scale of A row m, k-block j: byte j of lane 4·(m%8) + m/8; of B column n: byte j of lane
//   4n; k-blocks of K / VEC k
#pragma once

#include "quant/fp4_codecs.cuh"

namespace emu {

template <int K, int VEC, bool UE4M3>
__device__ __noinline__ void mma_e2m1(unsigned (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2],
                                     const unsigned (&c)[4], unsigned sa, unsigned sb) {
    static_assert(K == 64 || K == 32, "m16n8k64 or m16n8k32");
    constexpr int E = K / 8, BITS = 32 / E, SHIFT = K == 64 ? 0 : 2;  // elements per register, layout
    // Each lane's registers, visible to the warp: a0..a3, b0, b1, scale_a, scale_b.
    __shared__ unsigned regs[ATTN_WARPS][32][8];
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    __syncwarp();
    unsigned* mine = regs[w][lane];
    for (int r = 0; r < 4; ++r) mine[r] = a[r];
    mine[4] = b[0];
    mine[5] = b[1];
    mine[6] = sa;
    mine[7] = sb;
    __syncwarp();
    const auto scale = [](unsigned byte) { return UE4M3 ? (double)e4m3_to_f32(byte) : (double)e8m0_to_f32(byte); };
    const auto elem = [](unsigned word, int e) { return (double)e2m1_decode((word >> (BITS * e + SHIFT)) & 0xfu); };
    for (int i = 0; i < 4; ++i) {
        const int m = lane / 4 + 8 * (i / 2), n = 2 * (lane % 4) + i % 2;
        double acc = 0.0;
        for (int k = 0; k < K; ++k) {
            const int j = k / (K / VEC), t = (k % (K / 2)) / E, e = k % E, half = k / (K / 2);
            const double av = elem(regs[w][4 * (m % 8) + t][m / 8 + 2 * half], e);
            const double bv = elem(regs[w][4 * n + t][4 + half], e);
            const double s_a = scale((regs[w][4 * (m % 8) + m / 8][6] >> (8 * j)) & 0xffu);
            const double s_b = scale((regs[w][4 * n][7] >> (8 * j)) & 0xffu);
            acc += av * bv * s_a * s_b;
        }
        d[i] = __float_as_uint((float)(acc + (double)__uint_as_float(c[i])));
    }
    __syncwarp();
}

}  // namespace emu
