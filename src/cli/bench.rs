//! `fp4probe bench`: dependent-chain latency and independent-chain throughput of mma.sync
//! variants on the GPU, and of wgmma.mma_async variants (`--wgmma`, `--wgmma-sweep`), each
//! figure guarded by a check of the timed loop's SASS.

use super::select::VariantArgs;
use crate::device::Backend;
use crate::device::cuda::CudaBackend;
use crate::isa::Target;
use crate::probe::bench::{
    self, BenchReport, CheckStatus, Lowering, PointResult, PointStatus, Prepared, SassCheck,
    Settings, Stat, Toolchain, bench_target, cubin_loadable, hoisted_note, loop_per_mma,
    prepare_all,
};
use crate::wgmma::bench::Layout;
use anyhow::{Result, anyhow, bail};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Latency and throughput of mma.sync, with the SASS of the timed loop checked.
///
/// Latency: one warp, one accumulator chain, cycles per dependent mma.sync (%clock64).
/// Throughput: every SM runs W warps of C independent chains; TFLOP/s from CUDA-event time,
/// flops per SM per clock from the longest warp's %clock64 cycles. Each point is the median of
/// --runs timed launches after --warmup untimed ones, the trip count calibrated so a launch
/// takes about --target-ms. A figure counts only if the timed loop's SASS (of the very cubin
/// that ran) executes UNROLL × CHAINS × (tensor instructions of one mma.sync) per iteration;
/// otherwise it is reported as rejected. Writes <dir>/<variant>.bench.json and merges
/// <dir>/bench.csv (one row per sweep point; rows of re-run variants are replaced).
///
/// Every knob is bounded (see each option): the kernel's body is CHAINS × UNROLL mma.sync that
/// ptxas assembles, so an unbounded one is a way to exhaust memory and disk, not a measurement.
/// The bounds leave room above the defaults and every value a real run has used.
///
/// wgmma (sm_90a): --wgmma VARIANT or --wgmma-sweep TYPE. A persistent grid of one CTA per SM
/// (--blocks-per-sm), each of W warpgroups (--warpgroups) issuing commit groups of
/// --wgmma-group wgmma from shared memory and keeping --in-flight groups running; latency from
/// one warpgroup whose wgmma each wait for the one before (--unroll per iteration). The guard
/// requires exactly the expected HGMMA/QGMMA/IGMMA/BGMMA per iteration, one WARPGROUP.DEPBAR
/// per group, no spills and no ptxas wgmma advisory. Writes <dir>/<variant>.wgmma-bench.json
/// and merges <dir>/wgmma-bench.csv.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  fp4probe bench --variant m16n8k16.f32.bf16.bf16.f32
  fp4probe bench --all -q                         every variant this GPU runs
  fp4probe bench --variant m16n8k32.f32.e4m3.e4m3.f32 --warps 4,8 --chains 2,4
  fp4probe bench --all --sass-only sm_90          no GPU: assemble and check every kernel
  fp4probe bench --wgmma m64n256k16.f32.bf16.bf16.ss
  fp4probe bench --wgmma-sweep f32.e4m3.e4m3.ss --wgmma-n 64,128,256
  fp4probe bench --wgmma m64n256k32.f32.e4m3.e4m3.rs --sass-only sm_90a")]
pub struct Args {
    #[command(flatten)]
    pub select: VariantArgs,
    /// Output folder (default: results/sm_XY of the device; the committed figures in reports/
    /// are written only when named here).
    #[arg(short, long, conflicts_with = "sass_only")]
    pub output: Option<PathBuf>,
    /// Write through a symbolic link, FIFO or device given as output and replace read-only or
    /// foreign files there (a bench.csv with another header, say).
    #[arg(long)]
    pub force: bool,
    /// Warps per SM to sweep (1 to 64: no SM holds more than 2048 threads).
    #[arg(
        long,
        value_delimiter = ',',
        default_values_t = [1u32, 2, 4, 8, 16],
        value_parser = clap::value_parser!(u32).range(1..=64),
        conflicts_with_all = ["sass_only", "wgmma_sel"],
    )]
    pub warps: Vec<u32>,
    /// Independent accumulator chains per warp to sweep (1 to 32; beyond 8 most variants
    /// already spill registers).
    #[arg(
        long,
        value_delimiter = ',',
        default_values_t = [1u32, 2, 4, 8],
        value_parser = clap::value_parser!(u32).range(1..=32),
        conflicts_with = "wgmma_sel",
    )]
    pub chains: Vec<u32>,
    /// Dependent mma.sync per chain per loop iteration (1 to 64); with --wgmma, dependent wgmma
    /// per iteration of the latency kernel.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub unroll: u32,
    /// Blocks per SM, each of warps/blocks warps (1 to 32, the most an SM holds); with --wgmma,
    /// CTAs per SM of the throughput grid.
    #[arg(
        long,
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..=32),
        conflicts_with = "sass_only",
    )]
    pub blocks_per_sm: u32,
    /// Untimed launches before the timed ones (0 to 1000).
    #[arg(
        long,
        default_value_t = 2,
        value_parser = clap::value_parser!(u32).range(0..=1000),
        conflicts_with = "sass_only",
    )]
    pub warmup: u32,
    /// Timed launches per point, figures are their median, min, max (1 to 1000).
    #[arg(
        long,
        default_value_t = 5,
        value_parser = clap::value_parser!(u32).range(1..=1000),
        conflicts_with = "sass_only",
    )]
    pub runs: u32,
    /// Calibrate the trip count so one launch takes about this many milliseconds (over 0, at
    /// most 1000).
    #[arg(
        long,
        default_value_t = 3.0,
        value_parser = target_ms,
        allow_negative_numbers = true,
        conflicts_with = "sass_only",
    )]
    pub target_ms: f64,
    /// Keep the GPU busy this long before the first measurement, so clocks have ramped up
    /// (0 to 60000 ms).
    #[arg(
        long,
        default_value_t = 500.0,
        value_parser = preheat_ms,
        allow_negative_numbers = true,
        conflicts_with = "sass_only",
    )]
    pub preheat_ms: f64,
    /// Seed of the input values.
    #[arg(long, default_value_t = 1, conflicts_with = "sass_only")]
    pub seed: u64,
    /// No GPU: only assemble the kernels for TARGET (e.g. sm_90) and check their SASS (with
    /// --chains, --unroll, --jobs; the timing options have nothing to time).
    #[arg(long, value_name = "TARGET")]
    pub sass_only: Option<Target>,
    /// Threads that assemble and disassemble (default: every core; 1 to 1024).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024))]
    pub jobs: Option<usize>,
    /// One line per variant instead of a table.
    #[arg(short, long)]
    pub quiet: bool,
    /// wgmma: bench one dense wgmma.mma_async variant by catalog id
    /// (m64n256k16.f32.bf16.bf16.ss, m64n256k32.f32.e4m3.e4m3.rs, ...).
    #[arg(long, value_name = "VARIANT", group = "wgmma_sel", conflicts_with_all = ["variant", "shape", "kind", "a", "b", "c", "d", "scale_vec", "stype", "op", "satfinite", "all"])]
    pub wgmma: Option<String>,
    /// wgmma: latency and throughput for every N of one type set: the id after the shape
    /// (f32.bf16.bf16.ss, f32.e4m3.e4m3.rs, s32.s8.s8.ss; `ss` when no source is named).
    #[arg(long, value_name = "TYPE", group = "wgmma_sel", conflicts_with_all = ["variant", "shape", "kind", "a", "b", "c", "d", "scale_vec", "stype", "op", "satfinite", "all"])]
    pub wgmma_sweep: Option<String>,
    /// wgmma sweep: only these N (8 to 256, each one the type set has).
    #[arg(
        long,
        value_delimiter = ',',
        requires = "wgmma_sweep",
        value_parser = clap::value_parser!(u32).range(8..=256),
    )]
    pub wgmma_n: Vec<u32>,
    /// wgmma: warpgroups per CTA to sweep (1 to 4; 512 threads leave 128 registers each).
    #[arg(
        long,
        value_delimiter = ',',
        default_values_t = [1u32, 2, 3],
        requires = "wgmma_sel",
        value_parser = clap::value_parser!(u32).range(1..=4),
    )]
    pub warpgroups: Vec<u32>,
    /// wgmma: accumulator sets per warpgroup to sweep (1 to 8; sets that do not fit the
    /// registers are skipped).
    #[arg(
        long,
        value_delimiter = ',',
        default_values_t = [1u32, 2],
        requires = "wgmma_sel",
        value_parser = clap::value_parser!(u32).range(1..=8),
    )]
    pub accumulators: Vec<u32>,
    /// wgmma: wgmma per commit group of the throughput kernels (1 to 16).
    #[arg(long, default_value_t = 4, requires = "wgmma_sel", value_parser = clap::value_parser!(u32).range(1..=16))]
    pub wgmma_group: u32,
    /// wgmma: commit groups left running after each commit (wgmma.wait_group N, 1 to 4).
    #[arg(long, default_value_t = 1, requires = "wgmma_sel", value_parser = clap::value_parser!(u32).range(1..=4))]
    pub in_flight: u32,
    /// wgmma: shared-memory layout the descriptors describe.
    #[arg(long, value_enum, default_value_t = Layout::Swizzle128, requires = "wgmma_sel")]
    pub wgmma_layout: Layout,
}

fn millis(s: &str) -> Result<f64, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of milliseconds"))
}

fn target_ms(s: &str) -> Result<f64, String> {
    let x = millis(s)?;
    // Written so that NaN fails too.
    if x > 0.0 && x <= 1000.0 {
        Ok(x)
    } else {
        Err(format!("{x} is not over 0 and at most 1000 (milliseconds)"))
    }
}

fn preheat_ms(s: &str) -> Result<f64, String> {
    let x = millis(s)?;
    if (0.0..=60_000.0).contains(&x) {
        Ok(x)
    } else {
        Err(format!("{x} is not in 0..=60000 (milliseconds)"))
    }
}

/// The sweep's settings; clap has bounded every value.
/// A sweep list in increasing order, each value once.
fn dedup(xs: &[u32]) -> Vec<u32> {
    let mut v = xs.to_vec();
    v.sort_unstable();
    v.dedup();
    v
}

fn settings(a: &Args) -> Result<Settings> {
    Ok(Settings {
        warps_per_sm: dedup(&a.warps),
        chains: dedup(&a.chains),
        unroll: a.unroll,
        blocks_per_sm: a.blocks_per_sm,
        warmup: a.warmup,
        runs: a.runs,
        target_ms: a.target_ms,
        seed: a.seed,
        preheat_ms: a.preheat_ms.max(0.0),
    })
}

fn jobs(a: &Args) -> usize {
    a.jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(4, |n| n.get()))
        .max(1)
}

fn stat(s: &Option<Stat>, digits: usize) -> String {
    s.map_or("-".into(), |s| format!("{:.*}", digits, s.median))
}

/// One kernel as the table header describes it.
struct KernelView<'a> {
    chains: u32,
    unroll: u32,
    sets: u32,
    loaded: Option<&'a str>,
    check: &'a SassCheck,
    rebuilt: Option<&'a String>,
}

fn print_kernels(target: &str, lowering: Result<&Lowering, &String>, kernels: &[KernelView]) {
    match lowering {
        Ok(l) => println!("  one mma.sync on {target}: {}", l.summary),
        Err(e) => println!("  one mma.sync on {target}: unknown ({e})"),
    }
    for k in kernels {
        let c = k.check;
        println!(
            "  kernel {} chain(s) × {} step(s), {} A/B set(s) per chain{}: {}",
            k.chains,
            k.unroll,
            k.sets,
            k.loaded.map(|l| format!(", {l}")).unwrap_or_default(),
            c.cell()
        );
        if !c.loop_opcodes.is_empty() {
            println!("    timed loop per mma.sync: {}", loop_per_mma(c));
        }
        if let Some(r) = k.rebuilt {
            println!("    note: {r}");
        }
        if let (Ok(l), 1) = (lowering, k.chains)
            && let Some(n) = hoisted_note(l, c)
        {
            println!("    note: {n}");
        }
    }
}

fn print_prepared(p: &Prepared) {
    let views: Vec<KernelView> = p
        .kernels
        .iter()
        .map(|k| KernelView {
            chains: k.shape.chains,
            unroll: k.shape.unroll,
            sets: k.shape.sets_per_chain,
            loaded: None,
            check: &k.check,
            rebuilt: k.rebuilt.as_ref(),
        })
        .collect();
    print_kernels(&p.target.to_string(), p.lowering.as_ref(), &views);
}

fn point_line(p: &PointResult) -> String {
    let figures = p.status == PointStatus::Accepted;
    let f = |s: &Option<Stat>, d: usize| if figures { stat(s, d) } else { "-".into() };
    let verdict = match p.status {
        PointStatus::Accepted => "ok".to_string(),
        PointStatus::Rejected if p.reason.as_deref() == Some(p.sass_check.as_str()) => format!(
            "REJECTED: the SASS check of the {}-chain kernel (above)",
            p.chains
        ),
        PointStatus::Rejected => format!("REJECTED: {}", p.reason.as_deref().unwrap_or("?")),
        PointStatus::Skipped => format!("skipped: {}", p.reason.as_deref().unwrap_or("?")),
    };
    let note = p
        .note
        .as_deref()
        .map(|n| format!(" ({n})"))
        .unwrap_or_default();
    format!(
        "  {:>8} {:>6} {:>10} {:>12} {:>9} {:>13} {:>5}  {verdict}{note}",
        p.warps_per_sm,
        p.chains,
        f(&p.tflops, 2),
        f(&p.flops_per_sm_per_clock, 1),
        f(&p.clock_mhz, 0),
        f(&p.cycles_per_mma_per_chain, 2),
        p.registers_per_thread.map_or("-".into(), |r| r.to_string()),
    )
}

fn print_report(r: &BenchReport) {
    let d = &r.device;
    println!(
        "{} on {} ({} SMs, clock attribute {} MHz, driver {}), target {}",
        r.variant,
        d.name,
        d.sm_count,
        d.clock_rate_attribute_mhz
            .map_or("?".into(), |c| format!("{c:.0}")),
        d.driver.as_deref().unwrap_or("?"),
        r.target
    );
    match &r.toolchain {
        Some(tc) => println!("  assembled by {}", tc.describe()),
        None => println!("  no ptxas: every kernel went through the PTX JIT"),
    }
    let views: Vec<KernelView> = r
        .kernels
        .iter()
        .map(|k| KernelView {
            chains: k.chains,
            unroll: k.unroll,
            sets: k.sets_per_chain,
            loaded: Some(k.loaded.as_str()),
            check: &k.sass_check,
            rebuilt: k.rebuilt.as_ref(),
        })
        .collect();
    print_kernels(
        &r.target,
        r.lowering
            .as_ref()
            .ok_or(r.lowering_error.as_ref().unwrap_or(&String::new())),
        &views,
    );
    let l = &r.latency;
    match l.status {
        PointStatus::Accepted => {
            let s = l.cycles_per_mma_per_chain.expect("measured");
            println!(
                "  latency: {:.2} cycles per dependent mma.sync (1 warp, 1 chain, {} iterations × \
                 {}; median of {}, {:.2}..{:.2})",
                s.median, l.iters, l.unroll, s.n, s.min, s.max
            );
            if r.lowering.as_ref().is_some_and(|x| x.c_added_outside) {
                println!(
                    "    note: this lowering adds C outside the tensor instruction, so the chain \
                     through C runs through that add; the tensor instructions of successive \
                     steps do not wait for each other"
                );
            }
        }
        _ => println!(
            "  latency: {} ({})",
            if l.status == PointStatus::Skipped {
                "skipped"
            } else {
                "REJECTED"
            },
            l.reason.as_deref().unwrap_or("?")
        ),
    }
    println!(
        "  {:>8} {:>6} {:>10} {:>12} {:>9} {:>13} {:>5}  SASS",
        "warps/SM", "chains", "TFLOP/s", "flop/SM/clk", "clock MHz", "cyc/mma/chain", "regs"
    );
    for p in &r.points {
        println!("{}", point_line(p));
    }
    if let Some(c) = d.measured_clock_mhz {
        println!(
            "  measured SM clock: {:.0} MHz (median over accepted points; {:.0}..{:.0})",
            c.median, c.min, c.max
        );
    }
}

fn one_line(r: &BenchReport) -> String {
    let best = r
        .points
        .iter()
        .filter(|p| p.status == PointStatus::Accepted)
        .filter_map(|p| p.tflops.map(|t| (t.median, p)))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let lat = match r.latency.status {
        PointStatus::Accepted => format!("{} cycles", stat(&r.latency.cycles_per_mma_per_chain, 2)),
        _ => "rejected".into(),
    };
    let accepted = r
        .points
        .iter()
        .filter(|p| p.status == PointStatus::Accepted)
        .count();
    match best {
        Some((t, p)) => format!(
            "{}: latency {lat}; best {t:.2} TFLOP/s ({} flop/SM/clk) at {} warps/SM × {} chains; \
             {accepted}/{} points accepted ({:.1} s)",
            r.variant,
            stat(&p.flops_per_sm_per_clock, 1),
            p.warps_per_sm,
            p.chains,
            r.points.len(),
            r.wall_s
        ),
        None => format!(
            "{}: latency {lat}; no accepted throughput point ({:.1} s)",
            r.variant, r.wall_s
        ),
    }
}

fn sass_only(a: &Args, target: Target) -> Result<ExitCode> {
    let s = settings(a)?;
    let variants = a.select.select()?;
    let tc = Toolchain::offline().ok_or_else(|| {
        anyhow!(
            "ptxas not found (set {}, put it on PATH, or run .ci/install-cuda-tools)",
            crate::tools::CUDA_BIN_ENV
        )
    })?;
    let cc = (target.major, target.minor);
    let mut items = Vec::new();
    for v in &variants {
        let t = bench_target(v, cc);
        let runs = if target.arch_specific {
            v.min_target.runs_on(cc)
        } else {
            !v.min_target.arch_specific && v.min_target.runs_on(cc)
        };
        if !runs {
            if variants.len() == 1 {
                bail!(
                    "{} requires {}; it does not run on {target}",
                    v.id(),
                    v.min_target
                );
            }
            if !a.quiet {
                println!("skip {}: requires {}", v.id(), v.min_target);
            }
            continue;
        }
        items.push((v.clone(), t));
    }
    println!("assembling with {}", tc.describe());
    let start = Instant::now();
    let prepared = prepare_all(&items, Some(&tc), &s.chains, s.unroll, jobs(a));
    let mut bad = 0;
    for p in &prepared {
        let ok = p
            .kernels
            .iter()
            .all(|k| k.check.status == CheckStatus::Verified);
        if !ok {
            bad += 1;
        }
        if a.quiet {
            println!(
                "{} {}: {}",
                if ok { "OK  " } else { "FAIL" },
                p.variant.id(),
                p.lowering
                    .as_ref()
                    .map_or_else(|e| e.clone(), |l| l.summary.clone())
            );
        } else {
            println!("{}", p.variant.id());
            print_prepared(p);
        }
    }
    println!(
        "{} of {} variants have every kernel verified for {target} ({:.1} s)",
        prepared.len() - bad,
        prepared.len(),
        start.elapsed().as_secs_f64()
    );
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The GPU, or why bench cannot run here; `sass_only` is the offline form of the command.
fn open_gpu(sass_only: &str) -> Result<CudaBackend> {
    CudaBackend::open().map_err(|why| {
        anyhow!(
            "fp4probe bench needs a CUDA GPU, and there is none here: {why:#}. Timings mean \
             nothing on the emulator, so bench does not fall back to it. Without a GPU, \
             `fp4probe bench {sass_only}` still assembles the kernels and checks their SASS"
        )
    })
}

/// The toolchain for a run on a device whose driver is `driver`, with a warning for each way
/// its figures could end up unverified.
fn device_toolchain(driver: (u32, u32)) -> Option<Toolchain> {
    let tc = Toolchain::for_device();
    match &tc {
        None => eprintln!(
            "warning: no ptxas found: every kernel goes through the driver's PTX JIT, whose SASS \
             cannot be inspected, so every figure is reported as unverified and rejected"
        ),
        Some(t) => {
            if t.source == bench::ToolSource::Pinned {
                eprintln!(
                    "warning: no system ptxas (PATH, /usr/local/cuda/bin): using the pinned {}",
                    t.describe()
                );
            }
            if let Err(why) = cubin_loadable(t, driver) {
                eprintln!(
                    "warning: {why}: kernels go through the PTX JIT, and every figure is \
                     reported as unverified and rejected"
                );
            } else if t.version_pair().is_some_and(|v| v > driver) {
                eprintln!(
                    "warning: {} is newer than the driver ({}.{}); its cubins load under \
                     minor-version compatibility, or the bench falls back to the PTX JIT",
                    t.describe(),
                    driver.0,
                    driver.1
                );
            }
        }
    }
    tc
}

pub fn run(a: Args) -> Result<ExitCode> {
    if a.wgmma.is_some() || a.wgmma_sweep.is_some() {
        return wgmma::run(&a);
    }
    if let Some(t) = a.sass_only {
        return sass_only(&a, t);
    }
    let s = settings(&a)?;
    let variants = a.select.select()?;
    let backend = open_gpu("--sass-only sm_90 ...")?;
    let info = backend.info().clone();
    let cc = backend.compute_capability();
    let driver = backend.driver_version();
    let out_dir = a
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("results/sm_{}{}", cc.0, cc.1)));

    let outputs = crate::outfile::Outputs::new(a.force);
    // A foreign bench.csv is refused before anything is timed.
    outputs.check(
        &out_dir.join("bench.csv"),
        crate::outfile::Ours::marked(&bench::CSV_HEADER.join(",")),
    )?;
    let tc = device_toolchain(driver);

    let single = variants.len() == 1;
    let mut items = Vec::new();
    for v in &variants {
        if let Err(why) = backend.check_supported(v) {
            if single {
                return Err(why.context(format!("cannot bench {} on this device", v.id())));
            }
            if !a.quiet {
                println!("skip {}: {why:#}", v.id());
            }
            continue;
        }
        items.push((v.clone(), bench_target(v, cc)));
    }
    let start = Instant::now();
    let prepared = prepare_all(&items, tc.as_ref(), &s.chains, s.unroll, jobs(&a));
    eprintln!(
        "assembled and checked the kernels of {} variant(s) in {:.1} s",
        prepared.len(),
        start.elapsed().as_secs_f64()
    );
    let mut failed = 0;
    let mut s = s;
    for p in &prepared {
        let measured = bench::measure(&backend, p, &s);
        // Pre-heat once, before the first variant.
        s.preheat_ms = 0.0;
        let report = match measured {
            Ok(r) => r,
            Err(e) => {
                failed += 1;
                eprintln!("error: {}: {e:#}", p.variant.id());
                if single {
                    return Err(e);
                }
                continue;
            }
        };
        let json = report.write_json(&out_dir, &outputs)?;
        let (csv, replaced) = bench::merge_csv(&out_dir, std::slice::from_ref(&report), &outputs)?;
        if replaced {
            eprintln!("warning: {} had another header; replaced it", csv.display());
        }
        if a.quiet {
            println!("{}", one_line(&report));
        } else {
            print_report(&report);
            println!("  wrote {} and {}", json.display(), csv.display());
        }
    }
    println!(
        "benchmarked {} of {} variant(s) in {:.1} s on {}; results in {}",
        prepared.len() - failed,
        prepared.len(),
        start.elapsed().as_secs_f64(),
        info.name,
        out_dir.display()
    );
    Ok(if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `--wgmma` and `--wgmma-sweep`: every refusal comes before the device is opened.
mod wgmma {
    use super::{Args, dedup, jobs};
    use crate::device::Backend;
    use crate::isa::Target;
    use crate::probe::bench::Toolchain;
    use crate::probe::bench::wgmma::{
        WG_CSV_HEADER, WgBenchReport, WgSettings, merge_wg_csv, prepared_text, sweep_table,
    };
    use crate::probe::bench::wgmma_measure::measure_wgmma;
    use crate::probe::bench::wgmma_prepare::{WgPlan, prepare_wgmma};
    use crate::wgmma::WgVariant;
    use crate::wgmma::bench::select;
    use anyhow::{Result, anyhow, bail};
    use std::path::PathBuf;
    use std::process::ExitCode;
    use std::time::Instant;

    /// The variants asked for, or why not.
    fn selection(a: &Args) -> Result<Vec<WgVariant>> {
        select(a.wgmma.as_deref(), a.wgmma_sweep.as_deref(), &a.wgmma_n).map_err(|e| anyhow!(e))
    }

    fn plan(a: &Args) -> WgPlan {
        WgPlan {
            warpgroups: dedup(&a.warpgroups),
            chains: dedup(&a.accumulators),
            per_group: a.wgmma_group,
            in_flight: a.in_flight,
            latency_steps: a.unroll,
            layout: a.wgmma_layout,
        }
    }

    fn settings(a: &Args) -> WgSettings {
        WgSettings {
            plan: plan(a),
            ctas_per_sm: a.blocks_per_sm,
            warmup: a.warmup,
            runs: a.runs,
            target_ms: a.target_ms,
            seed: a.seed,
            preheat_ms: a.preheat_ms.max(0.0),
        }
    }

    /// wgmma exists on sm_90a only: `sm_90` is taken to mean it, anything else is refused.
    fn target(t: Target) -> Result<Target> {
        if (t.major, t.minor) == (9, 0) {
            Ok(Target::sm_a(9, 0))
        } else {
            bail!("wgmma.mma_async exists on sm_90a only; --sass-only {t} has none")
        }
    }

    pub(super) fn run(a: &Args) -> Result<ExitCode> {
        let variants = selection(a)?;
        if let Some(t) = a.sass_only {
            return sass_only(a, &variants, target(t)?);
        }
        on_device(a, &variants)
    }

    fn sass_only(a: &Args, variants: &[WgVariant], target: Target) -> Result<ExitCode> {
        let tc = Toolchain::offline().ok_or_else(|| {
            anyhow!(
                "ptxas not found (set {}, put it on PATH, or run .ci/install-cuda-tools)",
                crate::tools::CUDA_BIN_ENV
            )
        })?;
        println!("assembling with {}", tc.describe());
        let start = Instant::now();
        let prepared = prepare_wgmma(variants, target, Some(&tc), &plan(a), jobs(a));
        let bad = prepared.iter().filter(|p| !p.all_verified()).count();
        for p in &prepared {
            if a.quiet {
                let ok = p.all_verified();
                println!("{} {}", if ok { "OK  " } else { "FAIL" }, p.variant.id());
            } else {
                print!("{}", prepared_text(p));
            }
        }
        println!(
            "{} of {} variants have every kernel that was built verified for {target} ({:.1} s)",
            prepared.len() - bad,
            prepared.len(),
            start.elapsed().as_secs_f64()
        );
        Ok(if bad == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        })
    }

    fn on_device(a: &Args, variants: &[WgVariant]) -> Result<ExitCode> {
        let mut s = settings(a);
        let backend = super::open_gpu("--wgmma ... --sass-only sm_90a")?;
        let cc = backend.compute_capability();
        if cc != (9, 0) {
            bail!(
                "wgmma.mma_async runs on sm_90a (Hopper, compute capability 9.0) only; this \
                 device is {}.{}",
                cc.0,
                cc.1
            );
        }
        let out_dir = a
            .output
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("results/sm_{}{}", cc.0, cc.1)));
        let outputs = crate::outfile::Outputs::new(a.force);
        // A foreign wgmma-bench.csv is refused before anything is timed.
        outputs.check(
            &out_dir.join("wgmma-bench.csv"),
            crate::outfile::Ours::marked(&WG_CSV_HEADER.join(",")),
        )?;
        let tc = super::device_toolchain(backend.driver_version());
        let start = Instant::now();
        let target = Target::sm_a(9, 0);
        let prepared = prepare_wgmma(variants, target, tc.as_ref(), &s.plan, jobs(a));
        eprintln!(
            "assembled and checked the wgmma kernels of {} variant(s) in {:.1} s",
            prepared.len(),
            start.elapsed().as_secs_f64()
        );
        let mut reports: Vec<WgBenchReport> = Vec::new();
        let mut failed = 0;
        for p in &prepared {
            let measured = measure_wgmma(&backend, p, &s);
            // Pre-heat once, before the first variant.
            s.preheat_ms = 0.0;
            let r = match measured {
                Ok(r) => r,
                Err(e) if prepared.len() > 1 => {
                    failed += 1;
                    eprintln!("error: {}: {e:#}", p.variant.id());
                    continue;
                }
                Err(e) => return Err(e),
            };
            let json = r.write_json(&out_dir, &outputs)?;
            let (csv, replaced) = merge_wg_csv(&out_dir, std::slice::from_ref(&r), &outputs)?;
            if replaced {
                eprintln!("warning: {} had another header; replaced it", csv.display());
            }
            if a.quiet {
                println!("{}", r.one_line());
            } else {
                print!("{}", r.text());
                println!("  wrote {} and {}", json.display(), csv.display());
            }
            reports.push(r);
        }
        if reports.len() > 1 {
            println!("latency and best throughput per N:");
            print!("{}", sweep_table(&reports));
        }
        println!(
            "benchmarked {} of {} wgmma variant(s) in {:.1} s on {}; results in {}",
            reports.len(),
            prepared.len(),
            start.elapsed().as_secs_f64(),
            backend.info().name,
            out_dir.display()
        );
        Ok(if failed > 0 {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        })
    }
}
