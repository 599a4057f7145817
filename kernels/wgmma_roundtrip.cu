// wgmma_roundtrip.cu: one warpgroup writes an A and a B tile into shared memory through the
// generated shared-memory forms (kernels/generated/wgmma/fp4probe_wgmma_smem.cuh), builds both
// descriptors with the generated make_desc, loads C (and, for A from registers, A) into
// registers through the generated tables, runs one wgmma through the generated wrapper, and
// writes D back through the generated D table. No layout is written here: where an element
// goes comes only from Smem<...>::offset and Traits::X::coord.
//
// `fp4probe codegen --verify` and tests/gpu_codegen.rs compile it with NVRTC for the device
// (appending one WG_SS or WG_RS line per case, see codegen::wgmma::verify) and compare D with
// the CPU GEMM bit for bit; tests/codegen_wgmma.rs compiles it for sm_90a without a GPU.
//
// Tiles in global memory, one 64-bit word per element holding its value bits, row-major:
//   a   m x k   a[m_i * K + k_i]
//   b   k x n   b[k_i * N + n_i]
//   c, d  m x n c[m_i * N + n_i]
// Shared memory: A's region from the 1024-byte-aligned base, B's from b_off; `bytes` in all.
// Both descriptors carry `base_offset`, and the offset functions are told it.
// Launch: one CTA of 128 threads, bytes + 1024 bytes of dynamic shared memory.

#include "generated/wgmma/fp4probe_wgmma.cuh"

#if defined(__CUDACC__)
namespace wgtile {

// The value bits `v` of a `Bits`-bit element at `at` of shared memory: a byte offset, or for
// 1-bit elements a bit offset (bit i of byte j is bit 8j + i; eight elements share a byte, so
// their bits are or-ed into zeroed words).
template <int Bits>
__device__ __forceinline__ void put(unsigned char* smem, unsigned at, unsigned long long v) {
  static_assert(Bits == 1 || Bits == 8 || Bits == 16 || Bits == 32, "1-bit or byte-sized elements");
  const unsigned byte = at;
  if constexpr (Bits == 1) {
    atomicOr(reinterpret_cast<unsigned*>(smem + at / 32u * 4u),
             static_cast<unsigned>(v & 1u) << (at % 32u));
  } else if constexpr (Bits == 8) {
    smem[byte] = static_cast<unsigned char>(v);
  } else if constexpr (Bits == 16) {
    *reinterpret_cast<unsigned short*>(smem + byte) = static_cast<unsigned short>(v);
  } else {
    *reinterpret_cast<unsigned*>(smem + byte) = static_cast<unsigned>(v);
  }
}

// This thread's registers of operand Op (a Traits::D or Traits::A) from a row-major tile.
template <class Op>
__device__ __forceinline__ void load(unsigned (&r)[Op::regs], const unsigned long long* tile,
                                     int lane) {
#pragma unroll
  for (int reg = 0; reg < Op::regs; ++reg) {
    r[reg] = 0;
#pragma unroll
    for (int elem = 0; elem < Op::elems_per_reg; ++elem) {
      const fp4probe::Coord x = Op::coord(lane, reg, elem);
      fp4probe::insert_bits(r[reg], elem, Op::container_bits, Op::value_shift, Op::value_bits,
                            tile[x.row * Op::cols + x.col]);
    }
  }
}

// This thread's registers of operand Op back into a row-major tile.
template <class Op>
__device__ __forceinline__ void store(const unsigned (&r)[Op::regs], unsigned long long* tile,
                                      int lane) {
#pragma unroll
  for (int reg = 0; reg < Op::regs; ++reg) {
#pragma unroll
    for (int elem = 0; elem < Op::elems_per_reg; ++elem) {
      const fp4probe::Coord x = Op::coord(lane, reg, elem);
      tile[x.row * Op::cols + x.col] = fp4probe::extract_bits(
          r[reg], elem, Op::container_bits, Op::value_shift, Op::value_bits);
    }
  }
}

template <class F, int MajorA, int MajorB, int Swz, bool RegA>
__device__ __forceinline__ void roundtrip(const unsigned long long* a, const unsigned long long* b,
                                          const unsigned long long* c, unsigned long long* d,
                                          unsigned lbo_a, unsigned sbo_a, unsigned lbo_b,
                                          unsigned sbo_b, unsigned b_off, unsigned bytes,
                                          unsigned base_offset) {
  namespace wg = fp4probe::wgmma;
  extern __shared__ unsigned char wg_smem_raw[];
  const unsigned raw = static_cast<unsigned>(__cvta_generic_to_shared(wg_smem_raw));
  unsigned char* smem = wg_smem_raw + (((raw + 1023u) & ~1023u) - raw);
  const unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int t = threadIdx.x;
  for (unsigned i = 4u * t; i < bytes; i += 4u * 128u) {
    *reinterpret_cast<unsigned*>(smem + i) = 0u;
  }
  __syncthreads();
  constexpr int M = F::m, N = F::n, K = F::k;
  using SB = wg::Smem<F::elem_bits, MajorB, Swz>;
  if constexpr (!RegA) {
    using SA = wg::Smem<F::elem_bits, MajorA, Swz>;
    for (int e = t; e < M * K; e += 128) {
      put<F::elem_bits>(smem, SA::offset(e / K, e % K, lbo_a, sbo_a, base, base_offset), a[e]);
    }
  }
  for (int e = t; e < K * N; e += 128) {
    put<F::elem_bits>(smem + b_off,
                      SB::offset(e % N, e / N, lbo_b, sbo_b, base + b_off, base_offset), b[e]);
  }
  // The generic-proxy writes above, made visible to wgmma's async proxy.
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  unsigned rd[F::D::regs];
  load<typename F::D>(rd, c, t);
  const unsigned long long db = wg::make_desc(base + b_off, lbo_b, sbo_b, base_offset,
                                              static_cast<wg::SwizzleMode>(Swz));
  if constexpr (RegA) {
    unsigned ra[F::A::regs];
    load<typename F::A>(ra, a, t);
    F::template mma_rs<0, MajorB == wg::kMajorMN>(rd, ra, db);
  } else {
    const unsigned long long da = wg::make_desc(base, lbo_a, sbo_a, base_offset,
                                                static_cast<wg::SwizzleMode>(Swz));
    F::template mma_ss<MajorA == wg::kMajorMN, MajorB == wg::kMajorMN>(rd, da, db);
  }
  store<typename F::D>(rd, d, t);
}

}  // namespace wgtile

#define WG_ROUNDTRIP_PARAMS                                                                  \
  const unsigned long long *a, const unsigned long long *b, const unsigned long long *c,     \
      unsigned long long *d, unsigned lbo_a, unsigned sbo_a, unsigned lbo_b, unsigned sbo_b, \
      unsigned b_off, unsigned bytes, unsigned base_offset
#define WG_ROUNDTRIP_ARGS a, b, c, d, lbo_a, sbo_a, lbo_b, sbo_b, b_off, bytes, base_offset

// wgmma_roundtrip_<NAME>: A and B from shared memory, majors MA and MB, swizzle mode SWZ.
#define WG_SS(NAME, FAMILY, MA, MB, SWZ)                                                    \
  extern "C" __global__ void __launch_bounds__(128) wgmma_roundtrip_##NAME(                 \
      WG_ROUNDTRIP_PARAMS) {                                                                \
    wgtile::roundtrip<fp4probe::wgmma::FAMILY::Traits, fp4probe::wgmma::MA,                 \
                      fp4probe::wgmma::MB, fp4probe::wgmma::SWZ, false>(WG_ROUNDTRIP_ARGS); \
  }
// wgmma_roundtrip_<NAME>: A from registers, B from shared memory (major MB, swizzle SWZ).
#define WG_RS(NAME, FAMILY, MB, SWZ)                                                       \
  extern "C" __global__ void __launch_bounds__(128) wgmma_roundtrip_##NAME(                \
      WG_ROUNDTRIP_PARAMS) {                                                               \
    wgtile::roundtrip<fp4probe::wgmma::FAMILY::Traits, fp4probe::wgmma::kMajorK,           \
                      fp4probe::wgmma::MB, fp4probe::wgmma::SWZ, true>(WG_ROUNDTRIP_ARGS); \
  }
#endif  // __CUDACC__
