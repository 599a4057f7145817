// tile_roundtrip.cu: one warp moves an A, a B and a C tile from global memory into registers
// through the generated lane tables (kernels/generated/*.cuh), runs one mma.sync, and writes D
// back through the generated D table. No lane formula is written here: where each element goes
// comes only from T::X::coord(lane, reg, elem), and how it sits in its register only from the
// generated container width and value shift.
//
// Run by `fp4probe codegen --verify` and tests/gpu_codegen.rs (which compile it with NVRTC for
// the device and compare D with the CPU GEMM bit for bit); tests/codegen.rs checks that it
// compiles for compute_90 and compute_120a and that ptxas assembles the PTX for sm_90 and
// sm_120a, and, compiled as plain C++ (where only tile::load and tile::store exist), that
// load and store place every element of every variant exactly where fp4probe's Rust tables do.
//
// Memory layout of every tile: one 64-bit word per element holding the element's value bits,
// right-aligned (an e4m3 is 8 bits, a bf16 16, an e2m1 4, an f64 64; integers two's complement
// in their width), row-major:
//   a        m x k   a[m_i * K + k_i]
//   b        k x n   b[k_i * N + n_i]    (row-major k x n, the orientation of the PTX ISA's B)
//   c, d     m x n   c[m_i * N + n_i]
//   scale_a, scale_b: one 32-bit word per lane, read by block-scaled variants only (their
//   {byte-id, thread-id} selectors are 0 here).
// Launch: one CTA of 32 threads.

#include "generated/fp4probe_common.cuh"
#include "generated/m16n8k16.f16.f16.f16.f16.cuh"
#include "generated/m16n8k16.f32.bf16.bf16.f32.cuh"
#include "generated/m16n8k256.s32.b1.b1.s32.and.popc.cuh"
#include "generated/m16n8k32.f32.e4m3.e4m3.f32.cuh"
#include "generated/m16n8k32.s32.s8.s8.s32.cuh"
#include "generated/m16n8k64.s32.s4.s4.s32.cuh"
#include "generated/m16n8k8.f32.tf32.tf32.f32.cuh"
#include "generated/m8n8k4.f64.f64.f64.f64.cuh"
#if defined(__CUDA_ARCH_FEAT_SM120_ALL)
#include "generated/m16n8k32.kind_f8f6f4.f32.e3m2.e2m1.f32.cuh"
#include "generated/m16n8k32.kind_mxf8f6f4.block_scale.scale_vec_1X.f32.e2m1.e2m1.f32.ue8m0.cuh"
#include "generated/m16n8k64.kind_mxf4nvf4.block_scale.scale_vec_4X.f32.e2m1.e2m1.f32.ue4m3.cuh"
#endif

#if defined(__CUDACC__)
#define TILE_HD __host__ __device__ __forceinline__
#define TILE_UNROLL _Pragma("unroll")
#else
#define TILE_HD inline
#define TILE_UNROLL
#endif

namespace tile {

// The registers of operand Op (a Traits::A/B/C/D) for this lane, from a row-major tile.
template <class Op>
TILE_HD void load(typename Op::reg_t (&r)[Op::regs], const unsigned long long* tile, int lane) {
  TILE_UNROLL
  for (int reg = 0; reg < Op::regs; ++reg) {
    r[reg] = 0;
    TILE_UNROLL
    for (int elem = 0; elem < Op::elems_per_reg; ++elem) {
      const fp4probe::Coord x = Op::coord(lane, reg, elem);
      fp4probe::insert_bits(r[reg], elem, Op::container_bits, Op::value_shift, Op::value_bits,
                            tile[x.row * Op::cols + x.col]);
    }
  }
}

// This lane's registers of operand Op back into a row-major tile.
template <class Op>
TILE_HD void store(const typename Op::reg_t (&r)[Op::regs], unsigned long long* tile, int lane) {
  TILE_UNROLL
  for (int reg = 0; reg < Op::regs; ++reg) {
    TILE_UNROLL
    for (int elem = 0; elem < Op::elems_per_reg; ++elem) {
      const fp4probe::Coord x = Op::coord(lane, reg, elem);
      tile[x.row * Op::cols + x.col] = fp4probe::extract_bits(
          r[reg], elem, Op::container_bits, Op::value_shift, Op::value_bits);
    }
  }
}

#if defined(__CUDACC__)
template <class T>
__device__ __forceinline__ void roundtrip(const unsigned long long* a, const unsigned long long* b,
                                          const unsigned long long* c, const unsigned* scale_a,
                                          const unsigned* scale_b, unsigned long long* d) {
  const int lane = threadIdx.x % 32;
  typename T::A::reg_t ra[T::A::regs];
  typename T::B::reg_t rb[T::B::regs];
  typename T::C::reg_t rc[T::C::regs];
  typename T::D::reg_t rd[T::D::regs];
  load<typename T::A>(ra, a, lane);
  load<typename T::B>(rb, b, lane);
  load<typename T::C>(rc, c, lane);
  if constexpr (T::block_scaled) {
    T::mma(rd, ra, rb, rc, scale_a[lane], scale_b[lane]);
  } else {
    (void)scale_a;
    (void)scale_b;
    T::mma(rd, ra, rb, rc);
  }
  store<typename T::D>(rd, d, lane);
}
#endif  // __CUDACC__

}  // namespace tile

#if defined(__CUDACC__)

// extern "C" tile_roundtrip_<variant>(a, b, c, scale_a, scale_b, d) for fp4probe::<variant>.
#define TILE_ROUNDTRIP_KERNEL(NS)                                                             \
  extern "C" __global__ void __launch_bounds__(32)                                           \
      tile_roundtrip_##NS(const unsigned long long* a, const unsigned long long* b,          \
                          const unsigned long long* c, const unsigned* scale_a,              \
                          const unsigned* scale_b, unsigned long long* d) {                  \
    tile::roundtrip<fp4probe::NS::Traits>(a, b, c, scale_a, scale_b, d);                     \
  }

// sm_80 .. sm_90 variants (run on the H100 by `fp4probe codegen --verify`).
TILE_ROUNDTRIP_KERNEL(m16n8k32_f32_e4m3_e4m3_f32)
TILE_ROUNDTRIP_KERNEL(m16n8k16_f32_bf16_bf16_f32)
TILE_ROUNDTRIP_KERNEL(m16n8k16_f16_f16_f16_f16)
TILE_ROUNDTRIP_KERNEL(m16n8k8_f32_tf32_tf32_f32)
TILE_ROUNDTRIP_KERNEL(m16n8k32_s32_s8_s8_s32)
TILE_ROUNDTRIP_KERNEL(m16n8k64_s32_s4_s4_s32)
TILE_ROUNDTRIP_KERNEL(m8n8k4_f64_f64_f64_f64)
TILE_ROUNDTRIP_KERNEL(m16n8k256_s32_b1_b1_s32_and_popc)

// sm_120a variants: compiled (and assembled) only for sm_120a; not run without a Blackwell GPU.
#if defined(__CUDA_ARCH_FEAT_SM120_ALL)
TILE_ROUNDTRIP_KERNEL(m16n8k32_kind_f8f6f4_f32_e3m2_e2m1_f32)
TILE_ROUNDTRIP_KERNEL(m16n8k32_kind_mxf8f6f4_block_scale_scale_vec_1X_f32_e2m1_e2m1_f32_ue8m0)
TILE_ROUNDTRIP_KERNEL(m16n8k64_kind_mxf4nvf4_block_scale_scale_vec_4X_f32_e2m1_e2m1_f32_ue4m3)
#endif
#endif  // __CUDACC__
