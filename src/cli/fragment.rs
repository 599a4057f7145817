//! `fp4probe fragment`: measure lane maps and write them as JSON and CSV.

use super::select::VariantArgs;
use crate::device::{self, BackendChoice, BackendKind};
use crate::layout::diff::diff;
use crate::layout::documented::documented;
use crate::layout::lanemap::{LaneMap, Status, Timing};
use crate::probe::fragment::probe;
use crate::probe::ptx::fragment_kernel;
use crate::provenance::Provenance;
use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub select: VariantArgs,
    /// auto: CUDA if a driver and device exist, else the emulator (with a loud notice).
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendChoice,
    /// Output folder (default: reports/sm_XY for hardware, reports/emulator for the emulator).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Seed of the random validation inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print only one line per variant.
    #[arg(short, long)]
    pub quiet: bool,
}

pub fn print_summary(map: &LaneMap) {
    let p = &map.provenance;
    println!(
        "{}  [{}]",
        map.variant,
        match map.status {
            Status::Passed => "PASSED",
            Status::Failed => "FAILED",
        }
    );
    println!("  instruction: {}", map.instruction);
    println!(
        "  backend: {:?} — {} (cc {}, driver {}), fp4probe {} at {}",
        map.backend,
        p.device,
        p.compute_capability.as_deref().unwrap_or("-"),
        p.driver.as_deref().unwrap_or("-"),
        p.tool_version,
        p.date
    );
    if map.backend == BackendKind::Emulator {
        println!(
            "  NOTE: emulator result — the documented layout run through a CPU model, not a hardware finding."
        );
    }
    if let Some(f) = &map.failure {
        println!("  failure: {f}");
    }
    if let Some(v) = &map.validation {
        let show = |c: &crate::probe::fragment::Check| {
            if c.passed {
                format!("pass ({} elements bit-exact)", c.compared)
            } else {
                format!(
                    "FAIL ({} of {} differ; first {:?})",
                    c.mismatch_count,
                    c.compared,
                    c.mismatches.first()
                )
            }
        };
        println!(
            "  validation: identity {}; random (seed {}) {}",
            show(&v.identity),
            v.seed,
            show(&v.random)
        );
    }
    if let Some(d) = &map.documented_diff {
        let parts: Vec<String> = d
            .counts
            .iter()
            .map(|(op, n, total)| format!("{} {n}/{total}", op.name()))
            .collect();
        println!(
            "  vs PTX ISA documented layout: {} ({})",
            if d.identical() {
                "identical"
            } else {
                "DIFFERENT"
            },
            parts.join(", ")
        );
    }
    println!("  convention: {}", map.convention);
    for om in &map.operands {
        println!(
            "  {}: {}x{} {}, {} regs x {} elems, {}-bit containers",
            om.operand.name(),
            om.rows,
            om.cols,
            om.elem,
            om.regs,
            om.elems_per_reg,
            om.container_bits
        );
        for line in om
            .closed_form
            .to_string()
            .lines()
            .filter(|l| !l.trim().is_empty())
        {
            println!("    {line}");
        }
    }
    println!(
        "  timing: {:.3} s wall ({} experiments in {} launches, JIT included)",
        map.timing.wall_s, map.timing.experiments, map.timing.launches
    );
}

pub fn run(args: Args) -> Result<ExitCode> {
    let variants = args.select.select()?;
    let backend = device::open(args.backend)?;
    let info = backend.info().clone();
    let out_dir = args.output.clone().unwrap_or_else(|| info.report_dir());
    let single = variants.len() == 1;
    let start = Instant::now();
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for v in &variants {
        if let Err(why) = backend.check_supported(v) {
            if single {
                return Err(why.context(format!(
                    "cannot run {} on this backend (try --backend emulator)",
                    v.id()
                )));
            }
            if !args.quiet {
                println!("skip {}: {why:#}", v.id());
            }
            skipped += 1;
            continue;
        }
        let outcome = probe(backend.as_ref(), v, args.seed)?;
        let ptx = fragment_kernel(v, v.min_target, Default::default());
        let timing = Timing {
            wall_s: outcome.wall_s,
            experiments: outcome.experiments,
            launches: outcome.launches,
        };
        let (layout, failure) = match &outcome.layout {
            Ok(l) => (Some(l), None),
            Err(e) => (None, Some(e.clone())),
        };
        let validation_failed = outcome.validation.as_ref().is_some_and(|x| !x.passed());
        let failure = failure.or_else(|| {
            validation_failed.then(|| "validation through the inferred maps failed".to_string())
        });
        let doc_diff = layout.map(|l| diff(v, l, &documented(v)));
        let keep_raw = failure.is_some();
        let map = LaneMap::new(
            v,
            layout,
            Provenance::new(&info, ptx),
            outcome.validation.clone(),
            doc_diff,
            failure,
            keep_raw.then(|| outcome.raw.clone()),
            timing,
        );
        let path = map.write(&out_dir)?;
        match map.status {
            Status::Passed => passed += 1,
            Status::Failed => failed += 1,
        }
        if single && !args.quiet {
            print_summary(&map);
            println!("  wrote {} (+ .csv)", path.display());
        } else {
            println!(
                "{} {} ({:.3} s, {} experiments){}",
                if map.status == Status::Passed {
                    "PASS"
                } else {
                    "FAIL"
                },
                v.id(),
                outcome.wall_s,
                outcome.experiments,
                map.failure
                    .as_ref()
                    .map(|f| format!(": {f}"))
                    .unwrap_or_default()
            );
        }
    }
    if !single {
        println!(
            "{passed} passed, {failed} failed, {skipped} skipped in {:.2} s on {} ({:?}); maps in {}",
            start.elapsed().as_secs_f64(),
            info.name,
            info.backend,
            out_dir.display()
        );
    }
    Ok(if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
