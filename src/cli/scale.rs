//! `fp4probe scale`: measure which lane and byte of the scale registers scale which row of A
//! (column of B) and which k-block, for every selector ptxas accepts; write JSON and CSV.

use super::select::VariantArgs;
use crate::device::{self, BackendChoice, BackendKind};
use crate::isa::Variant;
use crate::layout::LaneMap;
use crate::layout::documented::documented;
use crate::layout::lanemap::Status;
use crate::outfile::Outputs;
use crate::probe::ptx::fragment_kernel;
use crate::probe::scale::{
    AcceptedSelectors, LayoutSource, ScaleMap, ScaleOperand, ScaleStatus, SelectorSource, probe,
};
use crate::provenance::Provenance;
use anyhow::{Context, Result, bail};
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
    /// Place A, B and D with this measured lane map (`fp4probe fragment` output) of the same
    /// variant instead of the documented layout; names the variant if no other option does.
    #[arg(long, conflicts_with = "all")]
    pub map: Option<PathBuf>,
    /// Do not ask ptxas which selector values exist; sweep the ranges ptxas 13.5.37 reported
    /// (the output records which source was used).
    #[arg(long)]
    pub no_ptxas: bool,
    /// Print only one line per variant.
    #[arg(short, long)]
    pub quiet: bool,
    /// Write through a symbolic link, FIFO or device given as output and replace read-only or
    /// foreign files. A hardware-measured result is never replaced by an emulator one.
    #[arg(long)]
    pub force: bool,
}

fn names_nothing(s: &VariantArgs) -> bool {
    s.variant.is_none()
        && !s.all
        && s.shape.is_none()
        && s.kind.is_none()
        && s.a.is_none()
        && s.b.is_none()
        && s.c.is_none()
        && s.d.is_none()
        && s.scale_vec.is_none()
        && s.stype.is_none()
        && s.op.is_none()
        && s.satfinite.is_none()
}

pub fn print_summary(map: &ScaleMap) {
    let p = &map.provenance;
    println!(
        "{}  [{}]",
        map.variant,
        match map.status {
            ScaleStatus::Explained => "EXPLAINED",
            ScaleStatus::Unexplained => "UNEXPLAINED CHANGES",
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
        println!("  NOTE: {}", map.note);
    }
    println!("  layout: {} — {}", map.layout.source, map.layout.detail);
    let m = &map.method;
    println!(
        "  method: A's k-blocks ({} k each) hold {:?}, B = {}, every scale byte 1.0 ({:#04x}): D = \
         {} everywhere; one byte at 2.0 ({:#04x}) that scales k-block j raises its row/column by \
         {:?}[j]",
        m.k_per_block,
        m.a_kblock_values,
        m.b_value,
        m.scale_one,
        m.baseline,
        m.scale_two,
        m.kblock_increments
    );
    println!(
        "  selectors ({}): scale_a {}; scale_b {}",
        match map.selectors.source {
            SelectorSource::Ptxas => "asked ptxas",
            SelectorSource::Recorded => "recorded ptxas ranges",
        },
        map.selectors.describe(ScaleOperand::A),
        map.selectors.describe(ScaleOperand::B)
    );
    println!("    {}", map.selectors.detail);
    for line in &map.overall {
        println!("  {line}");
    }
    for s in &map.sweeps {
        for (i, line) in s.summary.lines().enumerate() {
            println!("  {}{line}", if i == 0 { "" } else { "    " });
        }
        if let Some(note) = &s.baseline_note {
            println!("      {note}");
        }
    }
    println!(
        "  timing: {:.3} s wall ({} experiments in {} launches)",
        map.timing.wall_s, map.timing.experiments, map.timing.launches
    );
}

/// A `--map` file and the lane map in it.
type Measured = (PathBuf, LaneMap);

/// The variants to probe, and the measured layout where `--map` names one.
fn choose(args: &Args) -> Result<(Vec<Variant>, Option<Measured>)> {
    let measured = match &args.map {
        Some(path) => {
            let map = LaneMap::load(path)?;
            if map.status != Status::Passed {
                bail!(
                    "{}: the lane map's status is {:?}; only a validated map can place elements",
                    path.display(),
                    map.status
                );
            }
            Some((path.clone(), map))
        }
        None => None,
    };
    let variants = match &measured {
        Some((_, map)) if names_nothing(&args.select) => vec![map.variant()?],
        _ => args.select.select()?,
    };
    if let Some((path, map)) = &measured
        && (variants.len() != 1 || variants[0].id() != map.variant)
    {
        bail!(
            "{} is a lane map of {}, not of {}",
            path.display(),
            map.variant,
            variants
                .iter()
                .map(|v| v.id())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let scaled: Vec<Variant> = variants
        .iter()
        .filter(|v| v.scale.is_some())
        .cloned()
        .collect();
    if scaled.is_empty() {
        let what = if variants.len() == 1 {
            format!("{} has no block scaling", variants[0].id())
        } else {
            "no block-scaled variant matches".to_string()
        };
        bail!(
            "{what}; the scale probe covers the 29 block-scaled variants (--kind mxf8f6f4, mxf4 \
             or mxf4nvf4; `fp4probe scale --all` runs them all)"
        );
    }
    Ok((scaled, measured))
}

pub fn run(args: Args) -> Result<ExitCode> {
    let (variants, measured) = choose(&args)?;
    let backend = device::open(args.backend)?;
    let info = backend.info().clone();
    let out_dir = args.output.clone().unwrap_or_else(|| info.results_dir());
    let single = variants.len() == 1;
    let out = Outputs::new(args.force);
    let emulator = info.backend == crate::device::BackendKind::Emulator;
    for v in variants
        .iter()
        .filter(|v| backend.check_supported(v).is_ok())
    {
        out.check_result(
            &out_dir,
            &format!("{}.scale", v.file_stem()),
            Some(crate::probe::scale::CSV_HEADER),
            emulator,
        )?;
    }
    let start = Instant::now();
    let (mut explained, mut unexplained, mut skipped) = (0, 0, 0);
    let mut last_refusal = None;
    for v in &variants {
        if let Err(why) = backend.check_supported(v) {
            if single {
                return Err(why.context(format!(
                    "cannot run the scale probe for {} on this backend; it needs hardware that \
                     has the instruction, or --backend emulator for the documented model \
                     (labelled emulator, not a hardware finding)",
                    v.id()
                )));
            }
            if !args.quiet {
                println!("skip {}: {why:#}", v.id());
            }
            last_refusal = Some(why);
            skipped += 1;
            continue;
        }
        let selectors = AcceptedSelectors::for_variant(v, !args.no_ptxas);
        let (layout, source) = match &measured {
            Some((path, map)) => (map.layout()?, LayoutSource::measured(path, map)),
            None => (documented(v), LayoutSource::documented()),
        };
        let outcome = probe(backend.as_ref(), v, &layout, &selectors)
            .with_context(|| format!("scale probe of {}", v.id()))?;
        let ptx = fragment_kernel(v, v.min_target, Default::default());
        let map = ScaleMap::new(v, outcome, Provenance::new(&info, ptx), source, selectors);
        let path = map.write(&out_dir, &out)?;
        match map.status {
            ScaleStatus::Explained => explained += 1,
            ScaleStatus::Unexplained => unexplained += 1,
        }
        if single && !args.quiet {
            print_summary(&map);
            println!("  wrote {} (+ .scale.csv)", path.display());
        } else {
            println!(
                "{} {} ({:.3} s, {} experiments in {} launches)",
                match map.status {
                    ScaleStatus::Explained => "OK  ",
                    ScaleStatus::Unexplained => "UNEXPLAINED",
                },
                v.id(),
                map.timing.wall_s,
                map.timing.experiments,
                map.timing.launches
            );
            if !args.quiet {
                for line in &map.overall {
                    println!("      {line}");
                }
            }
        }
    }
    if explained + unexplained == 0 {
        let why = last_refusal.map(|e| format!("{e:#}")).unwrap_or_default();
        bail!(
            "none of the {skipped} block-scaled variants runs on {} ({why}); the scale probe \
             answers hardware questions only on hardware that has the instruction (sm_120a). \
             --backend emulator runs the documented model (labelled emulator, not a hardware \
             finding)",
            info.name
        );
    }
    if !single {
        println!(
            "{explained} explained, {unexplained} with unexplained changes, {skipped} skipped in \
             {:.2} s on {} ({:?}); scale maps in {}",
            start.elapsed().as_secs_f64(),
            info.name,
            info.backend,
            out_dir.display()
        );
        if info.backend == BackendKind::Emulator {
            println!(
                "NOTE: emulator results are the documented scale model, not hardware findings."
            );
        }
    }
    Ok(if unexplained > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
