// The on-the-fly path's pre-passes, in every module attn_fp4.cu builds (bf16 or block-scale),
// so the host finds them in the kernel it loaded.
#pragma once

#include "quant/fp4_codecs.cuh"

// Vᵀ for the on-the-fly path: V [bh][Sk][D] (16- or 32-bit elements, moved as bits) to
// Vᵀ [bh][D][Skp], zeros in keys Sk..Skp. 32 × 32 tiles through shared memory (padded
// against bank conflicts); grid (Skp/32, D/32, bh), 32 × 8 threads.
template <class T>
__device__ __forceinline__ void transpose_pad(const T* v, T* vt, unsigned Sk, unsigned Skp, unsigned D) {
    __shared__ T tile[32][33];
    const unsigned long long bh = blockIdx.z;
    const unsigned key0 = blockIdx.x * 32, d0 = blockIdx.y * 32;
    for (unsigned r = threadIdx.y; r < 32; r += 8) {
        const unsigned key = key0 + r;
        tile[r][threadIdx.x] = key < Sk ? v[(bh * Sk + key) * D + d0 + threadIdx.x] : (T)0;
    }
    __syncthreads();
    for (unsigned r = threadIdx.y; r < 32; r += 8)
        vt[(bh * D + d0 + r) * Skp + key0 + threadIdx.x] = tile[threadIdx.x][r];
}

extern "C" __global__ void __launch_bounds__(256)
    transpose_pad_16bit(const unsigned short* v, unsigned short* vt, unsigned Sk, unsigned Skp, unsigned D) {
    transpose_pad<unsigned short>(v, vt, Sk, Skp, D);
}

extern "C" __global__ void __launch_bounds__(256)
    transpose_pad_32bit(const unsigned* v, unsigned* vt, unsigned Sk, unsigned Skp, unsigned D) {
    transpose_pad<unsigned>(v, vt, Sk, Skp, D);
}

// K smoothing (src/attention/prequant.rs: smooth_k, bit for bit): per (bh, channel) the mean of
// K over the keys, summed in f64 in key order and rounded once to f32, then K' = K - mean in
// f32, written as f32 [bh][Sk][D] for the quantizer. One thread per channel (the sum's order
// is the reference's), grid bh, D threads; neighbouring threads read neighbouring channels.
template <class Widen>
__device__ __forceinline__ void smooth_k(const void* k, float* out, unsigned Sk, unsigned D) {
    const unsigned long long base = (unsigned long long)blockIdx.x * Sk * D;
    const unsigned c = threadIdx.x;
    double sum = 0.0;
    for (unsigned key = 0; key < Sk; ++key) sum += (double)Widen::at(k, base + (unsigned long long)key * D + c);
    const float mean = (float)(sum / (double)Sk);
    for (unsigned key = 0; key < Sk; ++key) {
        const unsigned long long i = base + (unsigned long long)key * D + c;
        out[i] = __fsub_rn(Widen::at(k, i), mean);
    }
}

struct AtF32 {
    static __device__ __forceinline__ float at(const void* p, unsigned long long i) { return reinterpret_cast<const float*>(p)[i]; }
};
struct AtBf16 {
    static __device__ __forceinline__ float at(const void* p, unsigned long long i) {
        return bf16_bits_to_f32(reinterpret_cast<const unsigned short*>(p)[i]);
    }
};
struct AtF16 {
    static __device__ __forceinline__ float at(const void* p, unsigned long long i) {
        return f16_bits_to_f32(reinterpret_cast<const unsigned short*>(p)[i]);
    }
};

#define SMOOTH_ENTRY(NAME, AT)                                                                          \
    extern "C" __global__ void __launch_bounds__(256) NAME(const void* k, float* out, unsigned Sk, unsigned D) { \
        smooth_k<AT>(k, out, Sk, D);                                                                    \
    }
SMOOTH_ENTRY(smooth_k_f32, AtF32)
SMOOTH_ENTRY(smooth_k_bf16, AtBf16)
SMOOTH_ENTRY(smooth_k_f16, AtF16)
