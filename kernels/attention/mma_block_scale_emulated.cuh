// A software model of
//   mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::{2X,4X}
//       .f32.e2m1.e2m1.f32.{ue8m0,ue4m3}   (selectors byte-id 0, thread-id 0)
// for running attn_fp4_sm120a.cu on a GPU that lacks the instruction (ATTN_EMULATE_BLOCK_SCALE).
//
// It is written from the PTX ISA's description of the fragments and scale factors, not from
// kernels/generated, so a run checks the kernel's use of the generated tables against an
// independent statement of the instruction:
//   A (16 × 64): register r, element e of lane l is row l/4 + 8·(r%2), k 8·(l%4) + e + 32·(r/2)
//   B (64 × 8):  register r, element e of lane l is k 8·(l%4) + e + 32·r, column l/4
//   C, D (16 × 8 f32): register i of lane l is row l/4 + 8·(i/2), column 2·(l%4) + i%2
//   element e in bits 4e..4e+3 of its register
//   scale of A row m, k-block j: byte j of lane 4·(m%8) + m/8; of B column n: byte j of lane 4n
//   k-blocks of 64 / VEC k
// Arithmetic as the fp4probe emulator's model (src/device/emulator.rs): every product exact, C
// plus the sum formed in f64 and rounded once to f32. A model, not the hardware: the scale
// and fragment probes measure the real instruction on sm_120.
#pragma once

#include "quant/fp4_codecs.cuh"

namespace emu {

template <int VEC, bool UE4M3>
__device__ __noinline__ void mma_m16n8k64_e2m1(unsigned (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2],
                                               const unsigned (&c)[4], unsigned sa, unsigned sb) {
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
    for (int i = 0; i < 4; ++i) {
        const int m = lane / 4 + 8 * (i / 2), n = 2 * (lane % 4) + i % 2;
        double acc = 0.0;
        for (int k = 0; k < 64; ++k) {
            const int j = k / (64 / VEC), e = k % 8;
            const unsigned aw = regs[w][4 * (m % 8) + (k % 32) / 8][m / 8 + 2 * (k / 32)];
            const unsigned bw = regs[w][4 * n + (k % 32) / 8][4 + k / 32];
            const double av = e2m1_decode((aw >> (4 * e)) & 0xfu), bv = e2m1_decode((bw >> (4 * e)) & 0xfu);
            const double s_a = scale((regs[w][4 * (m % 8) + m / 8][6] >> (8 * j)) & 0xffu);
            const double s_b = scale((regs[w][4 * n][7] >> (8 * j)) & 0xffu);
            acc += av * bv * s_a * s_b;
        }
        d[i] = __float_as_uint((float)(acc + (double)__uint_as_float(c[i])));
    }
    __syncwarp();
}

}  // namespace emu
