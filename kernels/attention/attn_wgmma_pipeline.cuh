// What the two wgmma bodies of attn_fp4.cu share (attn_wgmma.cuh: FP4 decoded to bf16;
// attn_wgmma_fp8.cuh: FP4 widened to E4M3): the warp-specialized pipeline of one producer
// warpgroup and two or three consumer warpgroups (register split, named barriers and
// mbarriers, the consumers' turns at the tensor cores, wgmma fences), the producer's copies and
// its walk of the stream-K schedule, and the consumers' ends (O stored, or a cut row block's
// pieces added up). attn_wgmma.cuh's header comment describes the pipeline.

#pragma once

#include "attention/attn_bf16.cuh"
#include "attention/attn_stream_k.cuh"

// Consumer warpgroups per CTA (64 query rows each): 2, or 3 for a 192-row tile (the host
// reads ATTN_WG_CONSUMERS from its defines and launches 16·ATTN_WARPS rows, 128·(C+1) threads).
#ifndef ATTN_WG_CONSUMERS
#define ATTN_WG_CONSUMERS 2
#endif
#define ATTN_LAUNCH_BOUNDS __launch_bounds__(128 * (ATTN_WG_CONSUMERS + 1), 1)

namespace attn {
namespace wg {


constexpr int CONSUMERS = ATTN_WG_CONSUMERS;
constexpr int THREADS = 128 * (CONSUMERS + 1);  // and one producer warpgroup
static_assert(BR == 64 * CONSUMERS, "the host launches BR = 16·ATTN_WARPS = 64·CONSUMERS query rows per CTA");

// Tile j's S issued together with tile j-1's P·V (two P register buffers).
#ifndef ATTN_WG_OVERLAP
#define ATTN_WG_OVERLAP (ATTN_WG_CONSUMERS == 2)
#endif
// The producer holds a row block's Q chunks and a key tile's at once when a segment starts;
// 80 registers cost three consumer warpgroups nothing (144 each with 72 or 80; two get 208).
#ifndef ATTN_PRODUCER_REGS
#define ATTN_PRODUCER_REGS 80
#endif
constexpr int PRODUCER_REGS = ATTN_PRODUCER_REGS;
// The CTA's register pool is what ptxas gives each thread under the launch bounds (64K over
// THREADS, in steps of 8: 168 for two consumer warpgroups, 128 for three) times THREADS; the
// consumers may take only what the producer gives back, or setmaxnreg.inc waits forever.
constexpr int LAUNCH_REGS = 65536 / THREADS / 8 * 8;
constexpr int CONSUMER_REGS = ((CONSUMERS + 1) * LAUNCH_REGS - PRODUCER_REGS) / CONSUMERS / 8 * 8;
static_assert(CONSUMER_REGS <= 256, "setmaxnreg takes at most 256");
static_assert(PRODUCER_REGS + CONSUMERS * CONSUMER_REGS <= (CONSUMERS + 1) * LAUNCH_REGS, "within the CTA's pool");

#ifndef ATTN_STAGES
#define ATTN_STAGES 3
#endif
constexpr int STAGES = ATTN_STAGES;  // key tiles in flight between producer and consumers

// Named barriers (0 is __syncthreads): tile s of the ring is empty and Q buffer b is empty
// (the producer waits there for every consumer); consumer warpgroup w's turn to issue
// (below); the producer's own (its next Work).
__device__ __forceinline__ int bar_empty(int s) { return 1 + s; }
__device__ __forceinline__ int bar_q_empty(int b) { return 1 + STAGES + b; }
__device__ __forceinline__ int bar_turn(int w) { return 3 + STAGES + w; }
__device__ __forceinline__ int bar_producer() { return 3 + STAGES + CONSUMERS; }
static_assert(4 + STAGES + CONSUMERS <= 16, "16 named barriers");

// "Full" (a stage of the ring, a Q buffer) is an mbarrier each: the producer's 128 threads
// arrive, and the consumer warpgroups wait for its phase without arriving. A named barrier
// counts its waiters among its arrivals, so all the consumer warpgroups had to reach it before
// any passed: every tile they met there, and the tensor cores stood idle while the last of them
// finished its softmax, whatever the turns (below) had staggered (Nsight Compute: 6% of the
// consumers' time waiting there, 9% more for their turns; experiments/full-barriers).
// Phase k of a barrier is its k-th use (ring position / STAGES, segment / 2), and a waiter
// waits for the parity k & 1; the producer cannot complete phase k + 1 before every consumer
// has released phase k's stage or buffer (the empty barriers), so no waiter misses a phase.
struct FullBarriers {
    unsigned long long stage[STAGES], q[2];
};
__device__ __forceinline__ u32 shared_addr(const void* p) { return (u32)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(const unsigned long long* b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_addr(b)), "r"(count) : "memory");
}
// Release: the arriving thread's shared stores (made visible to the async proxy first) are
// visible to a thread that has seen the phase complete.
__device__ __forceinline__ void mbar_arrive(const unsigned long long* b) {
    asm volatile("{ .reg .b64 state; mbarrier.arrive.shared::cta.b64 state, [%0]; }" ::"r"(shared_addr(b)) : "memory");
}
// ... and expect `bytes` more from the bulk copies that complete on it (one arrival).
__device__ __forceinline__ void mbar_arrive_expect_tx(const unsigned long long* b, u32 bytes) {
    asm volatile("{ .reg .b64 state; mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1; }" ::"r"(shared_addr(b)),
                 "r"(bytes)
                 : "memory");
}
// `bytes` (a multiple of 16, both addresses 16-byte aligned) from global memory to shared
// memory by the bulk-copy engine, completing as transaction bytes on mbarrier `b` (a CTA is a
// cluster of one: its shared::cta addresses are its shared::cluster ones).
__device__ __forceinline__ void bulk_copy_g2s(u32 dst, const void* src, u32 bytes, const unsigned long long* b) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(shared_addr(b))
                 : "memory");
}
__device__ __forceinline__ void mbar_wait(const unsigned long long* b, int phase) {
    const u32 addr = shared_addr(b), parity = (u32)phase & 1u;
    u32 done;
    do {
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done)
                     : "r"(addr), "r"(parity)
                     : "memory");
    } while (!done);
}

// barrier.sync / .arrive without .aligned (bar.sync is barrier.sync.aligned): the warps that
// meet at one barrier reach it from different instructions (a warpgroup with no live tile
// waits for a stage in consume's pass_through while the others wait in the tile loop), which
// .aligned does not allow (compute-sanitizer synccheck: "Divergent thread(s) in block"). The
// SASS is the same BAR.SYNC / BAR.ARV with one encoding bit apart.
__device__ __forceinline__ void bar_sync(int id, int n) { asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void bar_arrive(int id, int n) { asm volatile("barrier.arrive %0, %1;" ::"r"(id), "r"(n) : "memory"); }
// Turns (FlashAttention-3's ping-pong scheduling): the consumer warpgroups issue their wgmma
// one after another, w after w - 1 (C - 1 before 0), so the tensor cores run one warpgroup's
// products while the others run their softmax. Left alone, the warpgroups fall into step: all
// wait on the tensor cores at once, then all leave them idle while they compute P. Turn w is
// bar_turn(w): w takes it (waits), w - 1 passes it (arrives) once it has issued. Every
// warpgroup takes the same number of turns (per segment its tiles + 1, or 2 a tile at D = 64
// with three warpgroups, where S and P·V are issued apart), so the count stays balanced;
// warpgroup C - 1 passes one turn first (attention_wgmma) and warpgroup 0 takes the last one
// at the end.
#ifndef ATTN_WG_PINGPONG
#define ATTN_WG_PINGPONG 1
#endif
__device__ __forceinline__ void turn_take(int w) {
    if (ATTN_WG_PINGPONG) asm volatile("barrier.sync %0, 256;" ::"r"(bar_turn(w)) : "memory");
}
__device__ __forceinline__ void turn_pass(int w) {
    if (ATTN_WG_PINGPONG) asm volatile("barrier.arrive %0, 256;" ::"r"(bar_turn(w + 1 == CONSUMERS ? 0 : w + 1)) : "memory");
}
// Generic-proxy stores to shared memory made visible to the async proxy (wgmma's reads).
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }
// Keeps the compiler from touching accumulator registers across a wgmma wait.
template <int R>
__device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// ... and A registers: an in-flight wgmma still reads them, so they must not be reused before
// its wait (ptxas would serialize the pipeline if they were).
template <int N, int R>
__device__ __forceinline__ void fence_regs(u32 (&a)[N][R]) {
#pragma unroll
    for (int i = 0; i < N; ++i)
#pragma unroll
        for (int r = 0; r < R; ++r) asm volatile("" : "+r"(a[i][r])::"memory");
}

#ifdef ATTN_TIMELINE
// A timeline of every CTA for tuning the wgmma bodies (attn_wgmma.cuh, attn_wgmma_fp8.cuh),
// off unless FP4PROBE_ATTN_DEFINES sets ATTN_TIMELINE=1: each warpgroup (role 0 the producer,
// 1 + w consumer w) keeps clock64 marks of its first TL_SEGS segments in registers per segment,
// and its thread 0 stores them to a device array; the kernel attn_timeline_print (attn_fp4.cu),
// which the host launches after it (AttentionKernel::print_timeline), prints them. A call
// inside the attention kernel would make ptxas serialize every wgmma of it. The marks and how
// to read them: reports/sm_90/attention/experiments/fp8-boundaries (the bf16 body's producer
// marks its first and last tile stored into the ring where the FP8 body's issues copies).
#define TL(...) __VA_ARGS__
constexpr int TL_SEGS = 48, TL_EVENTS = 8, TL_CTAS = 1024;
struct TlMarks {
    long long v[TL_EVENTS];  // 0..5 clock readings (0: not reached), 6 and 7 sums of waits
    int rb, t0, t1, live;
};
struct TlCta {
    long long start;  // the CTA's clock at its start, which the marks count from
    int fmt, Sq, causal, segs;
};
__device__ TlMarks tl_marks[TL_CTAS][CONSUMERS + 1][TL_SEGS];
__device__ TlCta tl_cta[TL_CTAS];
__device__ int tl_grid;
__device__ __forceinline__ long long tl_clk() { return clock64(); }
__device__ __forceinline__ void tl_reset(TlMarks& m) {
#pragma unroll
    for (int e = 0; e < TL_EVENTS; ++e) m.v[e] = 0;
    m.rb = m.t0 = m.t1 = m.live = -1;
}
// Thread 0 of the warpgroup keeps segment seg's marks.
__device__ __forceinline__ void tl_keep(const TlMarks& m, int role, int seg, int t) {
    if (t == 0 && seg < TL_SEGS && blockIdx.x < TL_CTAS) tl_marks[blockIdx.x][role][seg] = m;
}
__device__ __forceinline__ void tl_begin() {
    if (threadIdx.x == 0 && blockIdx.x < TL_CTAS) tl_cta[blockIdx.x].start = clock64();
    if (threadIdx.x == 0 && blockIdx.x == 0) tl_grid = (int)gridDim.x;
}
// The producer, at its end: the launch's shape and the CTA's segments.
__device__ __forceinline__ void tl_end(int segs, int Sq, int causal, int fmt, int t) {
    if (t != 0 || blockIdx.x >= TL_CTAS) return;
    TlCta& c = tl_cta[blockIdx.x];
    c.fmt = fmt, c.Sq = Sq, c.causal = causal, c.segs = segs;
}
// One line a kept segment: fmt Sq causal cta role seg rb t0 t1 live, marks 0..5 from the CTA's
// start (-1: not reached), the sums 6 and 7.
__device__ void tl_print_all() {
    for (int g = 0; g < min(tl_grid, TL_CTAS); ++g) {
        const TlCta& c = tl_cta[g];
        for (int role = 0; role <= CONSUMERS; ++role)
            for (int s = 0; s < min(c.segs, TL_SEGS); ++s) {
                const TlMarks& m = tl_marks[g][role][s];
                long long e[TL_EVENTS];
                for (int i = 0; i < TL_EVENTS; ++i) e[i] = i >= 6 ? m.v[i] : m.v[i] > 0 ? m.v[i] - c.start : -1;
                printf("TL %d %d %d %d %d %d %d %d %d %d %lld %lld %lld %lld %lld %lld %lld %lld\n", c.fmt, c.Sq,
                       c.causal, g, role, s, m.rb, m.t0, m.t1, m.live, e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]);
            }
    }
}
// A wait (the statement given) whose cycles go into the segment's mark `slot` (6: a consumer's
// full stages or the producer's empty ones, 7: a consumer's turns); without the timeline, the
// wait alone.
#define TL_SUM(slot, ...)                        \
    {                                            \
        const long long tl_w0 = tl_clk();        \
        __VA_ARGS__;                             \
        tm.v[slot] += tl_clk() - tl_w0;          \
    }
#else
#define TL(...)
#define TL_SUM(slot, ...) __VA_ARGS__;
#endif

__device__ __forceinline__ uint4 ldg16(const u8* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
// cp.async of N bytes (16: .cg, 4: .ca) from global to shared memory, of which the first
// `valid` are read and the rest zero-filled; and the wait for this thread's copies.
template <int N>
__device__ __forceinline__ void cp_async(u32 dst, const u8* src, int valid) {
    if (N == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(valid) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// The launch's operands (every head; head_offsets finds one), V's padded key length and the
// Q heads per K/V head.
struct Operands {
    const u8 *q_data, *q_scale, *k_data, *k_scale, *v_data, *v_scale;
    int Skp;
    u32 kv_group;
};

// The consumers' next Work, by one producer thread: the schedule and its cursor stay in shared
// memory, out of the producer's registers (which hold a segment's Q and a key tile at once).
__device__ __noinline__ void next_work(const Schedule* sc, Schedule::Cursor* cur, Work* out) {
    Segment sg;
    if (sc->next(*cur, sg))
        *out = sc->work(sg);
    else
        out->tiles = 0;
}

// One warp's online-softmax state for its 16 rows (per row half of the lane, as attn_bf16.cuh).
struct RowState {
    float m_run[2] = {NEG_INF, NEG_INF}, l_run[2] = {0.0f, 0.0f};
};

// O / l times each column's weight (weight(d) gives columns d and d + 1: V's tensor scale and
// the body's operand factors), f32 out [bh][Sq][D], for this thread's accumulator registers
// (an m64nD accumulator, D / 2 registers; rows from q0). D registers 2k and 2k+1 are adjacent
// columns of one row: one 8-byte store each, so a quad of lanes writes whole 32-byte sectors
// (scalar stores wrote every sector half by half, and a segment's end waited on them).
template <class DL>
FP4PROBE_HD constexpr bool d_pairs_are_adjacent() {
    for (int lane = 0; lane < 32; ++lane)
        for (int r = 0; r < DL::regs; r += 2)
            if (DL::row(lane, r + 1) != DL::row(lane, r) || DL::col(lane, r + 1) != DL::col(lane, r) + 1 ||
                DL::col(lane, r) % 2 != 0)
                return false;
    return true;
}
static_assert(d_pairs_are_adjacent<DLayout>(), "D registers 2k, 2k+1: adjacent columns, the first even");

// One stored pair: O / l times the columns' weights, each rounded once (store_rows, and the FP8
// body's store_rows_tma).
__device__ __forceinline__ float2 o_pair(const RowDivisor& by, float o0, float o1, float2 w) {
    return make_float2(__fmul_rn(by.div(o0), w.x), __fmul_rn(by.div(o1), w.y));
}

template <int D, class Weight>
__device__ __forceinline__ void store_rows(const float (&o)[D / 2], const float (&l)[2], const Weight& weight,
                                           float* out, u64 bh, int Sq, int q0, int lane) {
    static_assert(L::kD_regs == 4 && d_half(0) == 0 && d_half(2) == 1, "D registers 0,1: row half 0; 2,3: half 1");
    // Per row half h: the lane's row, its address formed once (every pair of the row is at a
    // constant offset from it), and its divisor.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int row = q0 + L::d_row_formula(lane, 2 * h, 0);
        if (row >= Sq) continue;
        const RowDivisor by(l[h]);
        float* dst = out + (bh * Sq + row) * D + L::d_col_formula(lane, 2 * h, 0);
#pragma unroll
        for (int nt = 0; nt < D / L::kN; ++nt) {
            const int i = nt * L::kD_regs + 2 * h;
            const float2 w = weight(nt * L::kN + L::d_col_formula(lane, 2 * h, 0));
            *reinterpret_cast<float2*>(dst + nt * L::kN) = o_pair(by, o[i], o[i + 1], w);
        }
    }
}

// A piece's partial result in the workspace: per (CTA, slot) and consumer warpgroup, the 128
// threads' O registers, then their row maxima and sums (two each), [word][thread] so a
// warpgroup's stores and loads are coalesced. src/attention/schedule.rs sizes the workspace
// from WORDS.
template <int D>
struct Partial {
    static constexpr int WORDS = D / 2 + 4;
    static __device__ __forceinline__ float* at(float* partials, u32 g, int slot, int w) {
        return partials + ((u64)(2 * g + slot) * CONSUMERS + w) * (128 * WORDS);
    }
};

// The end of a piece of a cut item (attn_stream_k.cuh): its partial result to the workspace;
// the last piece of the item to get here adds all of them up, in piece order, each scaled by
// 2^(its maximum - the largest), and stores O. Per warp (its 16 rows and 32 columns of the
// partials are its own): counters holds the pieces ended so far per item, warpgroup and warp,
// and is left at 0 for the next launch. (Per warp, so no named barrier is needed: the
// warpgroups' turns take those.)
template <int D, class Weight>
__device__ __forceinline__ void finish_split(const Work& wk, const float (&o)[D / 2], const RowState& st,
                                             float* partials, u32* counters, const Weight& weight, float* out, int Sq, int w,
                                             int t) {
    constexpr int R = D / 2;
    float* mine = Partial<D>::at(partials, blockIdx.x, wk.slot(blockIdx.x), w);
#pragma unroll
    for (int i = 0; i < R; ++i) __stcg(mine + i * 128 + t, o[i]);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        __stcg(mine + (R + h) * 128 + t, st.m_run[h]);
        __stcg(mine + (R + 2 + h) * 128 + t, st.l_run[h]);
    }
    __threadfence();
    __syncwarp();
    int last = 0;
    if (t % 32 == 0) {
        u32* count = counters + ((u64)wk.item * CONSUMERS + w) * 4 + t / 32;
        last = atomicAdd(count, 1u) == wk.g1 - wk.g0;
        if (last) atomicExch(count, 0u);
    }
    if (!__shfl_sync(0xffffffffu, last, 0)) return;
    __threadfence();
    float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f}, sum[R];
#pragma unroll
    for (int i = 0; i < R; ++i) sum[i] = 0.0f;
    for (u32 p = wk.g0; p <= wk.g1; ++p) {
        const float* part = Partial<D>::at(partials, p, wk.slot(p), w);
#pragma unroll
        for (int h = 0; h < 2; ++h) m[h] = fmaxf(m[h], __ldcg(part + (R + h) * 128 + t));
    }
    for (u32 p = wk.g0; p <= wk.g1; ++p) {
        const float* part = Partial<D>::at(partials, p, wk.slot(p), w);
        float f[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            // 2^(m_p - m) exactly (both integers); 0 for a piece that saw only masked keys.
            const float mp = __ldcg(part + (R + h) * 128 + t);
            const int drop = mp == NEG_INF ? -1000 : (int)(mp - m[h]);
            f[h] = drop < -126 ? 0.0f : __int_as_float((127 + drop) << 23);
            l[h] = __fadd_rn(l[h], __fmul_rn(__ldcg(part + (R + 2 + h) * 128 + t), f[h]));
        }
#pragma unroll
        for (int i = 0; i < R; ++i) sum[i] = __fadd_rn(sum[i], __fmul_rn(__ldcg(part + i * 128 + t), f[d_half(i % L::kD_regs)]));
    }
    store_rows<D>(sum, l, weight, out, wk.bh, Sq, wk.rb * BR + 64 * w + 16 * (t / 32), t % 32);
}

}  // namespace wg
}  // namespace attn
