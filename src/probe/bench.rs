//! `fp4probe bench`: dependent-chain latency and independent-chain throughput of one `mma.sync`
//! variant, with the SASS of the timed loop checked before a figure is trusted.
//!
//! Pieces, in the order they run:
//! 1. [`bench_kernel`] fills `probes/bench.ptx` for a variant and a [`KernelShape`] (chains per
//!    warp, dependent steps per chain per iteration, A/B operand sets per chain).
//! 2. [`Toolchain`] assembles it to a cubin and disassembles it. On a GPU machine the system
//!    ptxas comes first (`FP4PROBE_CUDA_BIN`, `PATH`, `/usr/local/cuda/bin`: the one installed
//!    with the driver), the pinned one under `.tools/` only where there is no other.
//!    [`lowering`] reads what one `mma.sync` becomes from the single-mma fragment kernel
//!    (`crate::probe::ptx::fragment_kernel`, same variant, target and toolchain);
//!    [`check_loop`] finds the timed loop (the one backward branch between the two `%clock64`
//!    reads), follows the CALLs in it (ptxas emulates some variants in a subroutine), and
//!    requires UNROLL × CHAINS × (tensor instructions of one mma.sync) per iteration and no
//!    local memory. Where ptxas merged identical A·B products (lowerings that add C outside the
//!    tensor instruction, e.g. FP8 on sm_90: the first build finds fewer tensor instructions
//!    than expected), [`prepare`] rebuilds the kernel with distinct A/B for every `mma.sync` of
//!    the loop body ([`KernelShape::distinct`]) and records that it did.
//! 3. [`measure`] loads exactly the inspected cubin (`cuModuleLoadData`; what runs is what was
//!    checked). If the cubin cannot be loaded (a ptxas newer than the driver), the PTX goes
//!    through the driver's JIT instead and every figure of that kernel is rejected as
//!    unverified. It then calibrates the trip count per point (launches of about
//!    `target_ms`), runs `warmup` untimed and `runs` timed launches, and keeps median, min,
//!    max and n of each figure. Latency: one warp, one chain, one block; cycles per dependent
//!    mma.sync from `%clock64`. Throughput: SMs × `blocks_per_sm` blocks, W warps per SM, C
//!    chains per warp; TFLOP/s from CUDA-event time, flops per SM per clock from the longest
//!    warp's `%clock64` cycles (= TFLOP/s ÷ (SMs × measured clock), the measured clock being
//!    those cycles ÷ the event time; `%globaltimer` gives a second clock estimate). `%smid`
//!    shows where the warps ran.
//!
//! A point's figures are results only if its kernel's SASS check passed and every final
//! accumulator is finite; otherwise the point is `rejected` (the JSON keeps what was measured,
//! the CSV and the table leave the figures out). Points that cannot run (too many registers
//! for W warps on one SM) are `skipped`.
//!
//! Output: `<dir>/<variant>.bench.json` ([`BenchReport`], schema `fp4probe.bench/1`) and
//! `<dir>/bench.csv` ([`merge_csv`]: one row per throughput point, every variant benchmarked
//! into that folder; re-running a variant replaces its rows). The CSV's `latency_cycles` is the
//! point's own cycles per dependent mma.sync of one chain (its median warp); the dedicated
//! one-warp latency is `latency` in the JSON.
//!
//! Inputs ([`bench_inputs`]): every (warp, chain, lane) gets its own A, B and C words from a
//! hash, so no two chains of a launch compute the same thing. Values are non-zero, exactly
//! representable and small: A and B elements are ±0.25 or ±0.5 (±0.5 for e2m1, whose smallest
//! non-zero magnitude is 0.5; ±1 or ±2 for signed integers, 1 or 2 for unsigned; random
//! non-zero words for b1), C elements ±0.5 or ±1 (integers ±1, ±2), scale factors 1. Each chain
//! adds the same A·B to its accumulator every step, so the accumulator grows linearly until the
//! increment falls below half a unit in the last place of the accumulator and rounding absorbs
//! it: with |a·b| ≤ 0.25 and k ≤ 32 for the f16-accumulating variants the increment is at most
//! 8, which stalls an f16 accumulator below 2^15 (the largest finite f16 is 65504); f32 and f64
//! accumulators stall near 2^24 and 2^53 times the increment; s32 wraps (or saturates with
//! `.satfinite`). So no Inf or NaN ever appears, and the host checks the final accumulators
//! of the last launch to make sure ([`PointResult::finite`]).
//!
//! A and B do not change inside the loop, so conversions of A and B (F2FP for FP8 on sm_90)
//! may be hoisted out of it by ptxas: [`hoisted_note`] says so where it happened, and the
//! figure is then the tensor work plus what stayed in the loop.
//!
//! Submodules, one job each: [`kernel`] (the PTX text), [`inputs`] (operand values),
//! [`toolchain`] (ptxas and the disassembler), [`sass`] (SASS parsing and the guard),
//! [`prepare`] (assemble and check, no GPU), [`report`] (settings, figures, JSON and CSV),
//! [`measure`] (loading and timing on the GPU). Everything public is re-exported here.

pub mod inputs;
pub mod kernel;
pub mod measure;
pub mod prepare;
pub mod report;
pub mod sass;
pub mod toolchain;
pub mod wgmma;
pub mod wgmma_measure;
pub mod wgmma_prepare;

pub use inputs::*;
pub use kernel::*;
pub use measure::*;
pub use prepare::*;
pub use report::*;
pub use sass::*;
pub use toolchain::*;
