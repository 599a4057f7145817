// Fused FP4 attention forward, O = softmax(Q·Kᵀ/√d)·V, as `fp4probe attention` compiles it with
// NVRTC: one source, three bodies for two targets (sm_90a and sm_120a).
//   default            attn_bf16.cuh: FP4 decoded to bf16 in registers, mma.sync m16n8k16
//                      bf16 (sm_90 and later)
//   ATTN_WGMMA         attn_wgmma.cuh: attn_bf16.cuh's arithmetic on Hopper's warpgroup MMA
//                      (wgmma.mma_async, a producer warpgroup decoding K and V into shared
//                      memory; sm_90a, head_dim 64 and 128)
//   ATTN_WGMMA_FP8     attn_wgmma_fp8.cuh: FP4 widened to E4M3 in shared memory, both products
//                      on FP8 wgmma (docs/attention-fp8.md; sm_90a, head_dim 64 and 128)
//   ATTN_BLOCK_SCALE   attn_block_scale.cuh: FP4 straight into the block-scaled mma.sync of
//                      sm_120a (m16n8k64 kind::mxf4nvf4; with ATTN_MXF8F6F4, m16n8k32
//                      kind::mxf8f6f4, MXFP4 only; with ATTN_EMULATE_BLOCK_SCALE, a software
//                      model of the instruction for any sm_90+ GPU)
// All read the same operands (src/attention/prequant.rs), export the same entry points with
// the same arguments (src/attention/kernel.rs: enqueue_raw) and compute the same arithmetic
// (src/attention/reference.rs: reference_quantized); what they share is attn_common.cuh.

#if defined(ATTN_BLOCK_SCALE)
#include "attention/attn_block_scale.cuh"
#elif defined(ATTN_WGMMA)
#include "attention/attn_wgmma.cuh"
#elif defined(ATTN_WGMMA_FP8)
#include "attention/attn_wgmma_fp8.cuh"
#else
#include "attention/attn_bf16.cuh"
#endif
#ifndef ATTN_BODY
#define ATTN_BODY attn::attention
#define ATTN_LAUNCH_BOUNDS __launch_bounds__(attn::WARPS * 32)
#endif
#ifndef ATTN_FACTORS_ARG
#define ATTN_FACTORS_ARG
#endif

ATTN_ENTRY(attn_mxfp4_d64, 64, attn::MX)
ATTN_ENTRY(attn_mxfp4_d128, 128, attn::MX)
#if !defined(ATTN_WGMMA) && !defined(ATTN_WGMMA_FP8)
ATTN_ENTRY(attn_mxfp4_d256, 256, attn::MX)
#endif
#ifndef ATTN_MXF8F6F4
ATTN_ENTRY(attn_nvfp4_d64, 64, attn::NV)
ATTN_ENTRY(attn_nvfp4_d128, 128, attn::NV)
#if !defined(ATTN_WGMMA) && !defined(ATTN_WGMMA_FP8)
ATTN_ENTRY(attn_nvfp4_d256, 256, attn::NV)
#endif
#endif

#if defined(ATTN_TIMELINE) && (defined(ATTN_WGMMA) || defined(ATTN_WGMMA_FP8))
// A wgmma body's timeline of its last launch (attn_wgmma_pipeline.cuh), printed by one thread.
extern "C" __global__ void attn_timeline_print() { attn::wg::tl_print_all(); }
#endif

#include "attention/attn_prepasses.cuh"
