//! The wgmma bench on the GPU: load exactly the inspected cubins, time the latency kernel and
//! the throughput kernels, and judge each point (see `super::wgmma` for what is reported).

use super::measure::{BenchKernel, Loaded, Samples, calibrate, load_kernel};
use super::report::{BenchDevice, PointStatus, Stat};
use super::sass::{CheckStatus, SassCheck};
use super::wgmma::*;
use super::wgmma_prepare::{WgKernel, WgPrepared};
use crate::device::cuda::{CudaBackend, DeviceBuffer, KernelArg};
use crate::provenance::Provenance;
use crate::wgmma::WgVariant;
use crate::wgmma::bench::{
    WG_BENCH_ENTRY, WG_TIMING_WORDS, WgShape, accumulators_finite, bench_ptx_version, d_words,
    sass_mnemonic, smem_bytes, wg_inputs,
};
use anyhow::{Result, anyhow, bail};

fn load(backend: &CudaBackend, p: &WgPrepared, k: &WgKernel) -> Result<Loaded> {
    load_kernel(
        backend,
        p.toolchain.as_ref(),
        BenchKernel {
            cubin: k.cubin.as_deref(),
            ptx: &k.ptx,
            check: &k.check,
            body: k.shape.wgmma_per_iter(),
            entry: WG_BENCH_ENTRY,
        },
        k.check.detail.clone(),
        || {
            format!(
                "the wgmma bench kernel of {} ({})",
                p.variant.id(),
                describe_shape(&k.shape)
            )
        },
    )
}

/// CTAs of `threads` threads and `smem` bytes of dynamic shared memory that fit on one SM.
///
/// # Safety
/// `f` must be a function of a module loaded into the backend's context and still loaded.
unsafe fn ctas_that_fit(
    backend: &CudaBackend,
    f: cudarc::driver::sys::CUfunction,
    threads: u32,
    smem: u32,
) -> Result<u32> {
    backend
        .context()
        .bind_to_thread()
        .map_err(|e| anyhow!("binding the CUDA context: {e:?}"))?;
    let mut n: i32 = 0;
    // SAFETY: the caller guarantees `f` is a live function of the bound context; `n` is a
    // valid out-pointer.
    let r = unsafe {
        cudarc::driver::sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
            &mut n,
            f,
            threads as i32,
            smem as usize,
        )
    };
    if r != cudarc::driver::sys::CUresult::CUDA_SUCCESS {
        bail!("cuOccupancyMaxActiveBlocksPerMultiprocessor failed: {r:?}");
    }
    Ok(n.max(0) as u32)
}

struct Buffers {
    input: DeviceBuffer,
    output: DeviceBuffer,
    timing: DeviceBuffer,
}

/// One launch of `grid` CTAs: event time in ms.
fn launch(
    backend: &CudaBackend,
    l: &Loaded,
    b: &Buffers,
    grid: u32,
    shape: WgShape,
    smem: u32,
    iters: u64,
) -> Result<f64> {
    let args = [
        KernelArg::Ptr(b.input.ptr()),
        KernelArg::Ptr(b.output.ptr()),
        KernelArg::Ptr(b.timing.ptr()),
        KernelArg::U32(iters.min(WG_MAX_ITERS) as u32),
    ];
    let threads = shape.threads();
    // SAFETY: the kernel's parameters are (u64 p_in, u64 p_out, u64 p_timing, u32 p_iters),
    // matched by `args`. `input` holds the rs A registers and the shared-memory image for the
    // most warpgroups of any kernel of this variant, `output` the accumulators of every thread
    // of the largest grid, `timing` WG_TIMING_WORDS u64 for every warpgroup of it; `smem` is
    // the image plus the alignment slack, allowed by set_max_dynamic_smem.
    let ms = backend.time_ms(|| unsafe {
        backend.launch_3d_smem(l.function, (grid, 1, 1), (threads, 1), smem, &args)
    })?;
    Ok(ms as f64)
}

#[allow(clippy::too_many_arguments)]
fn run_point(
    backend: &CudaBackend,
    v: &WgVariant,
    k: &WgKernel,
    l: &Loaded,
    b: &Buffers,
    s: &WgSettings,
    sms: u32,
    preheat: &mut f64,
) -> Result<WgPoint> {
    let shape = k.shape;
    let mut r = WgPoint::skeleton(k, &l.check, s.ctas_per_sm);
    r.registers_per_thread = l.registers;
    let smem = smem_bytes(v, shape.warpgroups);
    r.dynamic_smem_bytes = smem;
    // SAFETY: `l` holds the module `l.function` belongs to, loaded and alive.
    unsafe { backend.set_max_dynamic_smem(l.function, smem) }?;
    let threads = shape.threads();
    let per_sm = r.ctas_per_sm;
    // SAFETY: as above.
    let fit = unsafe { ctas_that_fit(backend, l.function, threads, smem) }?;
    if fit < per_sm {
        r.reason = Some(format!(
            "does not fit: {} registers/thread and {smem} bytes of shared memory allow {fit} \
             CTA(s) of {threads} threads per SM, {per_sm} needed",
            l.registers.map_or("?".into(), |n| n.to_string())
        ));
        return Ok(r);
    }
    let grid = if shape.is_latency() { 1 } else { sms * per_sm };
    r.grid = grid;
    let groups_total = (grid * shape.warpgroups) as usize;
    let go = |iters| launch(backend, l, b, grid, shape, smem, iters);
    if !shape.is_latency() && *preheat > 0.0 {
        let until = std::time::Instant::now() + std::time::Duration::from_secs_f64(*preheat / 1e3);
        let iters = calibrate(go, 20.0)?;
        while std::time::Instant::now() < until {
            go(iters)?;
        }
        *preheat = 0.0;
    }
    let iters = calibrate(go, s.target_ms)?.min(WG_MAX_ITERS);
    for _ in 0..s.warmup {
        go(iters)?;
    }
    let per_group = iters * shape.wgmma_per_iter() as u64;
    let wgmmas = per_group * groups_total as u64;
    let flops = wgmmas as f64 * v.flops() as f64;
    let mut samples = Samples::default();
    for _ in 0..s.runs.max(1) {
        let ms = go(iters)?;
        let t = b.timing.read_u64(groups_total * WG_TIMING_WORDS)?;
        samples.push(
            &t,
            WG_TIMING_WORDS,
            ms,
            per_group as f64,
            flops,
            sms,
            shape.is_latency(),
        );
    }
    r.iters = iters;
    r.wgmma_per_launch = wgmmas;
    r.time_ms = Stat::of(&samples.time);
    r.tflops = Stat::of(&samples.tflops);
    r.flops_per_sm_per_clock = Stat::of(&samples.fpc);
    r.clock_mhz = Stat::of(&samples.clock);
    r.clock_globaltimer_mhz = Stat::of(&samples.gclock);
    r.cycles_per_wgmma = Stat::of(&samples.cyc);

    let (used, lo, hi) = samples.sm_spread(WG_TIMING_WORDS);
    let (want_sms, want_each) = if shape.is_latency() {
        (1, 1)
    } else {
        (sms, shape.warpgroups * per_sm)
    };
    let placement = WgPlacement {
        sms_used: used,
        min_warpgroups_per_sm: lo,
        max_warpgroups_per_sm: hi,
        as_intended: used == want_sms && lo == want_each && hi == want_each,
    };
    r.placement = Some(placement);
    if !placement.as_intended {
        r.note = Some(format!(
            "warpgroups did not land as intended: {} SMs used, {lo}..{hi} warpgroups each",
            placement.sms_used
        ));
    }
    let words = grid as usize * threads as usize * d_words(v, shape) as usize;
    let finite = accumulators_finite(v, &b.output.read_u32(words)?);
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

/// Measure a prepared variant: the latency kernel, then every throughput kernel.
pub fn measure_wgmma(
    backend: &CudaBackend,
    p: &WgPrepared,
    s: &WgSettings,
) -> Result<WgBenchReport> {
    use crate::device::Backend;
    let start = std::time::Instant::now();
    let v = &p.variant;
    let cc = backend.compute_capability();
    if cc != (9, 0) {
        bail!(
            "wgmma.mma_async runs on sm_90a (Hopper, compute capability 9.0) only; this device \
             is {}.{}",
            cc.0,
            cc.1
        );
    }
    let sms = backend.sm_count()?;
    let clock_khz = backend.clock_rate_khz().ok();
    let max_wg = p
        .kernels
        .iter()
        .map(|k| k.shape.warpgroups)
        .max()
        .unwrap_or(1);
    let per_sm = s.ctas_per_sm.max(1);
    let grid = sms * per_sm;
    let out_words = p
        .kernels
        .iter()
        .map(|k| k.shape.threads() as usize * d_words(v, k.shape) as usize)
        .max()
        .unwrap_or(0)
        * grid as usize;
    let host = wg_inputs(v, max_wg, s.seed);
    let b = Buffers {
        input: DeviceBuffer::from_words(backend, &host, "wgmma inputs")?,
        output: DeviceBuffer::zeroed(backend, out_words * 4, "wgmma accumulators")?,
        timing: DeviceBuffer::zeroed(
            backend,
            grid as usize * max_wg as usize * WG_TIMING_WORDS * 8,
            "wgmma timing",
        )?,
    };
    drop(host);
    let mut preheat = s.preheat_ms;
    let mut records = Vec::new();
    let mut points = Vec::new();
    for k in &p.kernels {
        if k.skipped.is_some() {
            points.push(WgPoint::skeleton(k, &k.check, per_sm));
            records.push(record(k, "not-built", None, k.check.clone()));
            continue;
        }
        let l = load(backend, p, k)?;
        points.push(run_point(backend, v, k, &l, &b, s, sms, &mut preheat)?);
        records.push(record(k, l.how, l.registers, l.check.clone()));
    }
    let latency = points.remove(0);
    let clocks: Vec<f64> = points
        .iter()
        .filter(|p| p.accepted())
        .filter_map(|p| p.clock_mhz.map(|c| c.median))
        .collect();
    let info = backend.info();
    Ok(WgBenchReport {
        schema: WG_BENCH_SCHEMA.into(),
        variant: v.id(),
        instruction: v.opcode(),
        sass_instruction: sass_mnemonic(v),
        n: v.n,
        flops_per_wgmma: v.flops(),
        unit: unit(v).into(),
        backend: info.backend,
        provenance: Provenance::new(info, p.latency().ptx.clone()),
        device: BenchDevice {
            name: info.name.clone(),
            compute_capability: format!("{}.{}", cc.0, cc.1),
            driver: info.driver.clone(),
            sm_count: sms,
            clock_rate_attribute_mhz: clock_khz.map(|k| k as f64 / 1e3),
            measured_clock_mhz: Stat::of(&clocks),
        },
        target: p.target.to_string(),
        ptx_version: bench_ptx_version(v).into(),
        toolchain: p.toolchain.clone(),
        settings: s.clone(),
        kernels: records,
        latency,
        points,
        wall_s: start.elapsed().as_secs_f64(),
    })
}

fn record(k: &WgKernel, how: &str, registers: Option<u32>, check: SassCheck) -> WgKernelRecord {
    WgKernelRecord {
        shape: k.shape,
        loaded: how.into(),
        registers_per_thread: registers,
        sass_check: check,
        ptxas_log: k.ptxas_log.clone(),
        skipped: k.skipped.clone(),
        ptx: k.ptx.clone(),
    }
}
