//! Measurement on the GPU: load exactly the inspected cubin, calibrate, time, and judge each
//! point.

use super::inputs::{all_finite, bench_inputs};
use super::kernel::{BENCH_ENTRY, TIMING_WORDS, out_words_per_lane};
use super::prepare::{Prepared, PreparedKernel};
use super::report::*;
use super::sass::{CheckStatus, SassCheck};
use super::toolchain::Toolchain;
use crate::device::cuda::{CudaBackend, DeviceBuffer, KernelArg};
use crate::isa::Variant;
use crate::provenance::Provenance;
use anyhow::{Context, Result, anyhow, bail};
use std::collections::BTreeMap;

/// A loaded bench kernel, mma.sync or wgmma.
pub(crate) struct Loaded {
    pub function: cudarc::driver::sys::CUfunction,
    pub _module: crate::device::cuda::PtxModule,
    /// `cubin`, or `ptx-jit` where the driver compiled the PTX.
    pub how: &'static str,
    pub check: SassCheck,
    pub registers: Option<u32>,
}

/// Whether a cubin from `tc` can be loaded by a driver of version `driver`: a newer major
/// cannot; a newer minor of the same major loads under CUDA's minor-version compatibility
/// (and if it does not, loading fails and the bench falls back to the PTX JIT).
pub fn cubin_loadable(tc: &Toolchain, driver: (u32, u32)) -> Result<(), String> {
    match tc.version_pair() {
        Some((maj, _)) if maj > driver.0 => Err(format!(
            "{} is newer than the CUDA driver {}.{} can load",
            tc.describe(),
            driver.0,
            driver.1
        )),
        _ => Ok(()),
    }
}

fn load(backend: &CudaBackend, p: &Prepared, k: &PreparedKernel) -> Result<Loaded> {
    let no_cubin = if k.check.status == CheckStatus::Unverified {
        k.check.detail.clone()
    } else {
        "no cubin".to_string()
    };
    load_kernel(
        backend,
        p.toolchain.as_ref(),
        BenchKernel {
            cubin: k.cubin.as_deref(),
            ptx: &k.ptx,
            check: &k.check,
            body: k.shape.body_mmas(),
            entry: BENCH_ENTRY,
        },
        no_cubin,
        || {
            format!(
                "the bench kernel of {} ({} chains)",
                p.variant.id(),
                k.shape.chains
            )
        },
    )
}

/// What [`load_kernel`] loads: the assembled cubin where there is one, its PTX, the SASS
/// guard's verdict on the cubin, the mma instructions of the timed body, the entry's name.
pub(crate) struct BenchKernel<'a> {
    pub cubin: Option<&'a [u8]>,
    pub ptx: &'a str,
    pub check: &'a SassCheck,
    pub body: u32,
    pub entry: &'a str,
}

/// Load a bench kernel: its cubin where the toolchain's cubins load on this driver, else the
/// driver's JIT of its PTX, whose SASS the guard did not see (`no_cubin` says why there was
/// no cubin to load; `what` names the kernel in errors).
pub(crate) fn load_kernel(
    backend: &CudaBackend,
    toolchain: Option<&Toolchain>,
    k: BenchKernel,
    no_cubin: String,
    what: impl Fn() -> String,
) -> Result<Loaded> {
    let jit = |why: String| -> Result<(crate::device::cuda::PtxModule, SassCheck)> {
        let m = backend
            .load_ptx_module(k.ptx)
            .with_context(|| format!("loading {} through the PTX JIT", what()))?;
        Ok((
            m,
            SassCheck::unverified(
                k.body,
                format!("{why}; the driver JIT-compiled the PTX, whose SASS was not inspected"),
            ),
        ))
    };
    let loadable = toolchain.map(|tc| cubin_loadable(tc, backend.driver_version()));
    let (module, check, how) = match (k.cubin, loadable) {
        (Some(cubin), Some(Ok(()))) => match backend.load_cubin(cubin) {
            Ok(m) => (m, k.check.clone(), "cubin"),
            Err(e) => {
                let (m, c) = jit(format!("the cubin did not load ({e:#})"))?;
                (m, c, "ptx-jit")
            }
        },
        (_, Some(Err(why))) => {
            let (m, c) = jit(why)?;
            (m, c, "ptx-jit")
        }
        _ => {
            let (m, c) = jit(no_cubin)?;
            (m, c, "ptx-jit")
        }
    };
    let function = module.function(k.entry)?;
    // SAFETY: `function` belongs to `module`, loaded into the backend's context and alive.
    let registers = unsafe {
        backend.function_attribute(
            function,
            cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS,
        )
    }
    .ok()
    .map(|n| n as u32);
    Ok(Loaded {
        function,
        _module: module,
        how,
        check,
        registers,
    })
}

struct Buffers {
    input: DeviceBuffer,
    output: DeviceBuffer,
}

/// One launch: event time in ms.
fn launch(
    backend: &CudaBackend,
    l: &Loaded,
    b: &Buffers,
    timing: &DeviceBuffer,
    grid: u32,
    block: u32,
    iters: u64,
) -> Result<f64> {
    let args = [
        KernelArg::Ptr(b.input.ptr()),
        KernelArg::Ptr(b.output.ptr()),
        KernelArg::Ptr(timing.ptr()),
        KernelArg::U32(iters.min(MAX_ITERS) as u32),
    ];
    // SAFETY: the bench kernel's parameters are (u64 p_in, u64 p_out, u64 p_timing, u32
    // p_iters), matched by `args`. The caller sized the buffers for this grid: `input` and
    // `output` hold a record of 32 lanes for every (warp, chain) of the largest grid of this
    // kernel, `timing` TIMING_WORDS u64 for every warp of it, and grid × block never exceeds it.
    let ms = unsafe { backend.launch_timed(l.function, grid, block, &args) }?;
    Ok(ms as f64)
}

/// A trip count that makes one launch take about `target_ms`.
pub(crate) fn calibrate(mut run: impl FnMut(u64) -> Result<f64>, target_ms: f64) -> Result<u64> {
    let mut iters = 16u64;
    loop {
        let ms = run(iters)?;
        if ms >= target_ms / 4.0 || iters >= MAX_ITERS {
            let scaled = (iters as f64 * target_ms / ms.max(1e-6)).round() as u64;
            return Ok(scaled.clamp(1, MAX_ITERS));
        }
        iters = (iters * 8).min(MAX_ITERS);
    }
}

/// What the timed launches of one kernel point measured, one entry per launch. Each launch
/// leaves `words` u64 per timed warp (or warpgroup): cycles, nanoseconds, SM id.
#[derive(Default)]
pub(crate) struct Samples {
    pub time: Vec<f64>,
    pub cyc: Vec<f64>,
    pub tflops: Vec<f64>,
    pub clock: Vec<f64>,
    pub fpc: Vec<f64>,
    pub gclock: Vec<f64>,
    /// The last launch's timing words, for where the timed work ran.
    pub last: Vec<u64>,
}

impl Samples {
    /// One launch of `ms` milliseconds doing `flops` in `steps` timed steps per warp.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push(
        &mut self,
        t: &[u64],
        words: usize,
        ms: f64,
        steps: f64,
        flops: f64,
        sms: u32,
        latency: bool,
    ) {
        let cycles: Vec<f64> = t.chunks(words).map(|w| w[0] as f64).collect();
        let ns: Vec<f64> = t.chunks(words).map(|w| w[1] as f64).collect();
        let longest = cycles.iter().copied().fold(0.0, f64::max);
        self.time.push(ms);
        self.cyc.push(median(&cycles) / steps);
        if !latency {
            self.tflops.push(flops / (ms * 1e9));
            self.clock.push(longest / (ms * 1e3));
            self.fpc.push(flops / (sms as f64 * longest.max(1.0)));
        }
        let per_warp: Vec<f64> = cycles
            .iter()
            .zip(&ns)
            .filter(|(_, n)| **n > 0.0)
            .map(|(c, n)| c / n * 1e3)
            .collect();
        if !per_warp.is_empty() {
            self.gclock.push(median(&per_warp));
        }
        self.last = t.to_vec();
    }

    /// How many SMs the last launch's timed warps ran on, and the fewest and the most on one.
    pub(crate) fn sm_spread(&self, words: usize) -> (u32, u32, u32) {
        let mut per_sm: BTreeMap<u64, u32> = BTreeMap::new();
        for w in self.last.chunks(words) {
            *per_sm.entry(w[2]).or_default() += 1;
        }
        (
            per_sm.len() as u32,
            per_sm.values().copied().min().unwrap_or(0),
            per_sm.values().copied().max().unwrap_or(0),
        )
    }
}

#[allow(clippy::too_many_arguments)]
fn run_point(
    backend: &CudaBackend,
    v: &Variant,
    k: &PreparedKernel,
    l: &Loaded,
    b: &Buffers,
    timing: &DeviceBuffer,
    s: &Settings,
    sms: u32,
    latency: bool,
    warps_per_sm: u32,
) -> Result<PointResult> {
    let chains = k.shape.chains;
    let kind = if latency { "latency" } else { "throughput" };
    let mut r = PointResult::skeleton(kind, warps_per_sm, chains, k, &l.check);
    r.registers_per_thread = l.registers;
    let (grid, block) = if latency {
        (1, 32)
    } else {
        let bps = s.blocks_per_sm.max(1);
        if !warps_per_sm.is_multiple_of(bps) {
            r.reason = Some(format!(
                "{warps_per_sm} warps per SM do not split into {bps} blocks"
            ));
            return Ok(r);
        }
        let block = warps_per_sm / bps * 32;
        if block > 1024 {
            r.reason = Some(format!("{block} threads per block is over 1024"));
            return Ok(r);
        }
        // SAFETY: `l` holds the module `l.function` belongs to, loaded and alive.
        let fit = unsafe { backend.max_active_blocks_per_sm(l.function, block) }?;
        if fit < bps {
            r.reason = Some(format!(
                "does not fit: {} registers/thread allow {fit} block(s) of {block} threads per \
                 SM, {bps} needed",
                l.registers.map_or("?".into(), |n| n.to_string())
            ));
            return Ok(r);
        }
        (sms * bps, block)
    };
    r.grid = grid;
    r.threads_per_block = block;
    let warps_total = (grid * block / 32) as usize;
    let go = |iters| launch(backend, l, b, timing, grid, block, iters);
    let iters = calibrate(go, s.target_ms)?;
    for _ in 0..s.warmup {
        go(iters)?;
    }
    let per_warp_mmas = iters * k.shape.body_mmas() as u64;
    let mmas = per_warp_mmas * warps_total as u64;
    let flops = mmas as f64 * v.flops() as f64;
    let steps = (iters * k.shape.unroll as u64) as f64;
    let mut samples = Samples::default();
    for _ in 0..s.runs.max(1) {
        let ms = go(iters)?;
        let t = timing.read_u64(warps_total * TIMING_WORDS)?;
        samples.push(&t, TIMING_WORDS, ms, steps, flops, sms, latency);
    }
    r.iters = iters;
    r.mma_per_launch = mmas;
    r.time_ms = Stat::of(&samples.time);
    r.tflops = Stat::of(&samples.tflops);
    r.flops_per_sm_per_clock = Stat::of(&samples.fpc);
    r.clock_mhz = Stat::of(&samples.clock);
    r.clock_globaltimer_mhz = Stat::of(&samples.gclock);
    r.cycles_per_mma_per_chain = Stat::of(&samples.cyc);

    let (used, lo, hi) = samples.sm_spread(TIMING_WORDS);
    let expect_sms = if latency { 1 } else { sms };
    let placement = Placement {
        sms_used: used,
        min_warps_per_sm: lo,
        max_warps_per_sm: hi,
        as_intended: used == expect_sms && lo == warps_per_sm && hi == warps_per_sm,
    };
    r.placement = Some(placement);
    if !placement.as_intended {
        r.note = Some(format!(
            "warps did not land as intended: {} SMs used, {lo}..{hi} warps each",
            placement.sms_used
        ));
    }
    let d_words = warps_total * chains as usize * 32 * out_words_per_lane(v);
    let finite = all_finite(v, &b.output.read_u32(d_words)?);
    r.finite = Some(finite);
    (r.status, r.reason) = if l.check.status != CheckStatus::Verified {
        (PointStatus::Rejected, Some(l.check.cell()))
    } else if !finite {
        (
            PointStatus::Rejected,
            Some("non-finite accumulators after the run".into()),
        )
    } else {
        (PointStatus::Accepted, None)
    };
    Ok(r)
}

/// Measure a prepared variant on the device: the latency point, then the sweep.
pub fn measure(backend: &CudaBackend, p: &Prepared, s: &Settings) -> Result<BenchReport> {
    use crate::device::Backend;
    let start = std::time::Instant::now();
    let v = &p.variant;
    backend.check_supported(v)?;
    if s.warps_per_sm.is_empty() || s.chains.is_empty() {
        bail!("nothing to sweep: give at least one warps-per-SM and one chain count");
    }
    let sms = backend.sm_count()?;
    let clock_khz = backend.clock_rate_khz().ok();
    let max_w = *s.warps_per_sm.iter().max().unwrap_or(&1) as usize;
    let max_warps = sms as usize * max_w;
    let timing = DeviceBuffer::zeroed(backend, max_warps * TIMING_WORDS * 8, "timing")?;
    let mut kernels = Vec::new();
    let mut latency = None;
    let mut points = Vec::new();
    let mut preheat = s.preheat_ms;
    for k in &p.kernels.iter().rev().collect::<Vec<_>>() {
        let l = load(backend, p, k)?;
        let c = k.shape.chains;
        let records = max_warps * c as usize;
        let seed = s.seed ^ ((c as u64) << 32);
        let host = bench_inputs(v, k.shape, records, seed);
        let b = Buffers {
            input: DeviceBuffer::from_words(backend, &host, "inputs")?,
            output: DeviceBuffer::zeroed(
                backend,
                records * 32 * out_words_per_lane(v) * 4,
                "accumulators",
            )?,
        };
        drop(host);
        if preheat > 0.0 {
            // The most chains at the most warps per SM: the heaviest load of the sweep.
            let block = 32 * max_w as u32;
            // SAFETY: `l` holds the module `l.function` belongs to, loaded and alive.
            if unsafe { backend.max_active_blocks_per_sm(l.function, block) }? >= 1 {
                let until =
                    std::time::Instant::now() + std::time::Duration::from_secs_f64(preheat / 1e3);
                let go = |iters| launch(backend, &l, &b, &timing, sms, block, iters);
                let iters = calibrate(go, 20.0)?;
                while std::time::Instant::now() < until {
                    go(iters)?;
                }
                preheat = 0.0;
            }
        }
        if c == 1 {
            latency = Some(run_point(backend, v, k, &l, &b, &timing, s, sms, true, 1)?);
        }
        if s.chains.contains(&c) {
            for &w in &s.warps_per_sm {
                points.push(run_point(backend, v, k, &l, &b, &timing, s, sms, false, w)?);
            }
        }
        kernels.push(KernelRecord {
            chains: c,
            unroll: k.shape.unroll,
            sets_per_chain: k.shape.sets_per_chain,
            loaded: l.how.to_string(),
            registers_per_thread: l.registers,
            sass_check: l.check.clone(),
            rebuilt: k.rebuilt.clone(),
            ptx: k.ptx.clone(),
        });
    }
    kernels.sort_by_key(|k| k.chains);
    points.sort_by_key(|p| (p.warps_per_sm, p.chains));
    let clocks: Vec<f64> = points
        .iter()
        .filter(|p| p.status == PointStatus::Accepted)
        .filter_map(|p| p.clock_mhz.map(|c| c.median))
        .collect();
    let info = backend.info();
    let latency_ptx = p.kernel(1).map(|k| k.ptx.clone()).unwrap_or_default();
    Ok(BenchReport {
        schema: BENCH_SCHEMA.into(),
        variant: v.id(),
        instruction: v.opcode(),
        flops_per_mma: v.flops(),
        backend: info.backend,
        provenance: Provenance::new(info, latency_ptx),
        device: BenchDevice {
            name: info.name.clone(),
            compute_capability: info
                .compute_capability
                .map(|(a, b)| format!("{a}.{b}"))
                .unwrap_or_default(),
            driver: info.driver.clone(),
            sm_count: sms,
            clock_rate_attribute_mhz: clock_khz.map(|k| k as f64 / 1e3),
            measured_clock_mhz: Stat::of(&clocks),
        },
        target: p.target.to_string(),
        toolchain: p.toolchain.clone(),
        settings: s.clone(),
        lowering: p.lowering.as_ref().ok().cloned(),
        lowering_error: p.lowering.as_ref().err().cloned(),
        kernels,
        latency: latency.ok_or_else(|| anyhow!("no one-chain kernel was prepared"))?,
        points,
        wall_s: start.elapsed().as_secs_f64(),
    })
}
