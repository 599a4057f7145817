//! `fp4probe wgmma`: measure wgmma register lane maps (`probe`) and shared-memory layouts under
//! every swizzle mode and descriptor setting (`smem`).

use crate::device::cuda::CudaBackend;
use crate::device::{BackendChoice, BackendKind, fallback_notice};
use crate::outfile::Outputs;
use crate::provenance::Provenance;
use crate::threads::try_on_threads;
use crate::wgmma::WgVariant;
use crate::wgmma::backend::{WgBackend, WgCuda};
use crate::wgmma::desc::{Major, Swizzle};
use crate::wgmma::emulator::WgEmulator;
use crate::wgmma::kernel::probe_kernel;
use crate::wgmma::map::{Status, WgLaneMap, WgSmemMap, smem_csv_header, smem_stem};
use crate::wgmma::probe::{Setting, Work, probe};
use crate::wgmma::smem::{point, study_variant, sweep_settings};
use anyhow::{Result, bail};
use clap::Subcommand;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(clap::Args, Debug, Clone)]
pub struct Common {
    /// auto: CUDA on an sm_90 device, else the emulator (with a loud notice).
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendChoice,
    /// Output folder (default: results/sm_XY/wgmma, or results/emulator/wgmma).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Write through links, FIFOs or devices and replace read-only or foreign files; a
    /// hardware result is never replaced by an emulator one.
    #[arg(long)]
    pub force: bool,
    /// Seed of the random validation inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Variants (or studies) probed side by side; default: one per CPU core. The kernels are
    /// built first, side by side; then variants run side by side, sharing the device, and each
    /// one's own parallel host work (filling batches, decoding D) uses every core.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub jobs: Option<u32>,
}

impl Common {
    /// Variants (or studies) run side by side.
    fn jobs(&self) -> usize {
        self.jobs.map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| n.get()),
            |j| j as usize,
        )
    }
}

#[derive(Subcommand, Debug)]
pub enum Sub {
    /// Register lane maps (D, C, and A from registers) with the shared-memory maps of the
    /// probe's setting, validated bit-exact.
    Probe {
        /// Catalog ids (`m64n256k16.f32.bf16.bf16.ss`) or PTX opcodes with `.ss`/`.rs`.
        #[arg(long = "variant")]
        variants: Vec<String>,
        /// Every dense variant whose id contains this text.
        #[arg(long)]
        filter: Option<String>,
        /// Every dense variant of the catalog.
        #[arg(long)]
        all: bool,
        /// Swizzle mode of both tiles.
        #[arg(long, default_value = "none")]
        swizzle: Swizzle,
        /// Major-ness of both tiles (MN: the transpose immediates, f16/bf16 only).
        #[arg(long, default_value = "K")]
        major: Major,
        #[command(flatten)]
        common: Common,
    },
    /// Shared-memory layouts: for each element size, major-ness and swizzle mode, which byte
    /// feeds which element, fitted to a closed form, with LBO, SBO, start and base-offset
    /// sweeps.
    Smem {
        /// Element sizes in bits (16, 32, 8, 1); default all.
        #[arg(long = "bits", value_parser = ["1", "8", "16", "32"])]
        bits: Vec<String>,
        /// Swizzle modes; default all.
        #[arg(long = "swizzle")]
        swizzles: Vec<Swizzle>,
        /// Major-ness; default K, and MN for 16-bit elements.
        #[arg(long = "major")]
        majors: Vec<Major>,
        #[command(flatten)]
        common: Common,
    },
}

/// The wgmma backend a command runs on.
pub(super) enum Dev {
    Cuda(CudaBackend),
    Emu(WgEmulator),
}

/// Open the backend `choice` names: CUDA only on an sm_90 device; `auto` falls back to the
/// emulator with a notice.
pub(super) fn open(choice: BackendChoice) -> Result<Dev> {
    let cuda = || -> Result<CudaBackend> {
        let d = CudaBackend::open()?;
        let cc = d.compute_capability();
        if cc != (9, 0) {
            bail!("wgmma needs sm_90a; this device is sm_{}{}", cc.0, cc.1);
        }
        Ok(d)
    };
    Ok(match choice {
        BackendChoice::Emulator => Dev::Emu(WgEmulator::new()),
        BackendChoice::Cuda => Dev::Cuda(cuda()?),
        BackendChoice::Auto => match cuda() {
            Ok(d) => Dev::Cuda(d),
            Err(why) => {
                eprintln!("{}", fallback_notice(&why));
                Dev::Emu(WgEmulator::new())
            }
        },
    })
}

fn out_dir(common: &Common, backend: &dyn WgBackend) -> PathBuf {
    common
        .output
        .clone()
        .unwrap_or_else(|| backend.info().results_dir().join("wgmma"))
}

pub fn run(args: Args) -> Result<ExitCode> {
    match args.command {
        Sub::Probe {
            variants,
            filter,
            all,
            swizzle,
            major,
            common,
        } => {
            let picked = super::select::pick_wgmma(&variants, filter.as_deref(), all)?;
            for v in &picked {
                Setting::packed(v, swizzle, major, major).check(v)?;
            }
            let dev = open(common.backend)?;
            match &dev {
                Dev::Cuda(d) => {
                    let c = WgCuda::new(d);
                    run_probe(&c, Some(&c), &picked, swizzle, major, &common)
                }
                Dev::Emu(e) => run_probe(e, None, &picked, swizzle, major, &common),
            }
        }
        Sub::Smem {
            bits,
            swizzles,
            majors,
            common,
        } => {
            let bits: Vec<u32> = if bits.is_empty() {
                vec![16, 32, 8, 1]
            } else {
                bits.iter()
                    .map(|b| b.parse().expect("clap checked"))
                    .collect()
            };
            let swizzles = if swizzles.is_empty() {
                Swizzle::ALL.to_vec()
            } else {
                swizzles
            };
            let mut studies = Vec::new();
            for &b in &bits {
                let v = study_variant(b);
                let ms: Vec<Major> = if majors.is_empty() {
                    if v.transposable() {
                        vec![Major::K, Major::MN]
                    } else {
                        vec![Major::K]
                    }
                } else {
                    majors.clone()
                };
                for &m in &ms {
                    if m == Major::MN && !v.transposable() {
                        bail!(
                            "{b}-bit elements are K-major only (the transpose is for f16 and bf16)"
                        );
                    }
                    for &s in &swizzles {
                        // A study named twice runs once: its files are written by one thread.
                        if !studies
                            .iter()
                            .any(|(w, t, n)| w == &v && *t == s && *n == m)
                        {
                            studies.push((v.clone(), s, m));
                        }
                    }
                }
            }
            let dev = open(common.backend)?;
            match &dev {
                Dev::Cuda(d) => {
                    let c = WgCuda::new(d);
                    run_smem(&c, Some(&c), &studies, &common)
                }
                Dev::Emu(e) => run_smem(e, None, &studies, &common),
            }
        }
    }
}

/// The variants a selection names; sparse forms are refused (catalogued, not probed).
fn run_probe(
    backend: &dyn WgBackend,
    jit: Option<&WgCuda>,
    picked: &[WgVariant],
    swizzle: Swizzle,
    major: Major,
    common: &Common,
) -> Result<ExitCode> {
    let dir = out_dir(common, backend);
    let outputs = Outputs::new(common.force);
    let emulator = backend.info().backend == BackendKind::Emulator;
    for v in picked {
        outputs.check_result(
            &dir,
            &v.id(),
            Some(crate::wgmma::map::LANEMAP_CSV_HEADER),
            emulator,
        )?;
    }
    let start = Instant::now();
    let jobs = common.jobs();
    if let Some(c) = jit {
        let kernels: Vec<_> = picked
            .iter()
            .map(|v| {
                (
                    v.clone(),
                    Setting::packed(v, swizzle, major, major)
                        .launch(v)
                        .transpose(),
                )
            })
            .collect();
        c.prefetch(&kernels)?;
    }
    let jit_wall = start.elapsed().as_secs_f64();
    let failed = AtomicUsize::new(0);
    // Lines print as variants finish, so their order follows the threads; the files do not
    // depend on it.
    try_on_threads(picked, jobs, |v| -> Result<()> {
        let setting = Setting::packed(v, swizzle, major, major);
        let out = probe(backend, v, &setting, common.seed)?;
        let prov = Provenance::new(
            backend.info(),
            probe_kernel(v, setting.launch(v).transpose()),
        );
        let map = WgLaneMap::new(v, &setting, &out, prov);
        let path = map.write(&dir, &outputs)?;
        let ok = map.status == Status::Passed;
        if !ok {
            failed.fetch_add(1, Ordering::Relaxed);
        }
        let mut line = format!(
            "{:<40} {:<6} {:>8.3} s  {:>6} experiments  vs documented: {}  -> {}",
            v.id(),
            if ok { "passed" } else { "FAILED" },
            out.wall_s,
            out.work.experiments,
            map.documented_mismatches
                .map_or("-".to_string(), |n| if n == 0 {
                    "identical".into()
                } else {
                    format!("{n} slots differ")
                }),
            path.display()
        );
        if let Some(f) = &map.failure {
            line += &format!("\n    failure: {f}");
        }
        println!("{line}");
        Ok(())
    })?;
    let failed = failed.into_inner();
    println!(
        "{} passed, {failed} failed, {:.2} s wall ({}){}",
        picked.len() - failed,
        start.elapsed().as_secs_f64(),
        backend.info().name,
        jit_note(jit, jobs.min(picked.len()), jit_wall)
    );
    Ok(finish(emulator, failed))
}

/// How many kernels were built, by what, the wall time of that phase and its time summed
/// over threads.
fn jit_note(jit: Option<&WgCuda>, threads: usize, wall_s: f64) -> String {
    jit.map_or(String::new(), |c| {
        let (n, t) = c.jit_stats();
        format!(
            "; {threads} threads; {n} kernel(s) built first: {wall_s:.2} s wall, {:.2} s summed \
             over threads, by {}",
            t.as_secs_f64(),
            c.assembler()
        )
    })
}

fn run_smem(
    backend: &dyn WgBackend,
    jit: Option<&WgCuda>,
    studies: &[(WgVariant, Swizzle, Major)],
    common: &Common,
) -> Result<ExitCode> {
    let dir = out_dir(common, backend);
    let outputs = Outputs::new(common.force);
    let emulator = backend.info().backend == BackendKind::Emulator;
    let stem = |v: &WgVariant, s: Swizzle, m: Major| smem_stem(v.elem_bits(), m, s);
    for (v, s, m) in studies {
        let header = smem_csv_header(v.elem_bits());
        outputs.check_result(&dir, &stem(v, *s, *m), Some(header), emulator)?;
    }
    let start = Instant::now();
    let jobs = common.jobs();
    if let Some(c) = jit {
        let kernels: Vec<_> = studies
            .iter()
            .flat_map(|(v, s, m)| {
                sweep_settings(v, *s, *m)
                    .into_iter()
                    .map(|(_, setting)| (v.clone(), setting.launch(v).transpose()))
            })
            .collect();
        c.prefetch(&kernels)?;
    }
    let jit_wall = start.elapsed().as_secs_f64();
    let failed = AtomicUsize::new(0);
    try_on_threads(studies, jobs, |(v, s, m)| -> Result<()> {
        let t0 = Instant::now();
        let mut points = Vec::new();
        let mut work = Work::default();
        let mut packed = None;
        let mut text = String::new();
        for (label, setting) in sweep_settings(v, *s, *m) {
            if let Err(e) = setting.check(v) {
                text += &format!("  {} {label}: skipped: {e:#}\n", stem(v, *s, *m));
                continue;
            }
            let (p, out) = point(backend, v, &label, &setting, common.seed)?;
            work.experiments += out.work.experiments;
            work.launches += out.work.launches;
            let formula = |f: &Option<crate::wgmma::smem::SmemFit>| {
                f.as_ref()
                    .map_or("no closed form".into(), |f| f.formula.clone())
            };
            text += &format!(
                "  {:<24} {:<26} {:<6} A: {}\n  {:<24} {:<26} {:<6} B: {}\n",
                stem(v, *s, *m),
                label,
                if p.passed { "passed" } else { "FAILED" },
                formula(&p.a_fit),
                "",
                "",
                "",
                formula(&p.b_fit),
            );
            if packed.is_none() {
                packed = Some(out);
            }
            points.push(p);
        }
        let Some(packed) = packed else {
            print!("{text}");
            return Ok(());
        };
        let setting = Setting::packed(v, *s, *m, *m);
        let prov = Provenance::new(
            backend.info(),
            probe_kernel(v, setting.launch(v).transpose()),
        );
        let map = WgSmemMap::new(
            v,
            *s,
            *m,
            &packed,
            points,
            prov,
            t0.elapsed().as_secs_f64(),
            work,
        );
        if map.status != Status::Passed {
            failed.fetch_add(1, Ordering::Relaxed);
        }
        let path = map.write(&dir, &outputs)?;
        println!("{text}-> {}", path.display());
        Ok(())
    })?;
    let failed = failed.into_inner();
    println!(
        "{} studies, {failed} failed, {:.2} s wall ({}){}",
        studies.len(),
        start.elapsed().as_secs_f64(),
        backend.info().name,
        jit_note(jit, jobs.min(studies.len()), jit_wall)
    );
    Ok(finish(emulator, failed))
}

/// The closing lines both subcommands print, and their exit code.
fn finish(emulator: bool, failed: usize) -> ExitCode {
    if emulator {
        println!(
            "NOTE: emulator results: the documented layouts run on the CPU, not hardware findings."
        );
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
