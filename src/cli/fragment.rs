//! `fp4probe fragment`: measure lane maps and write them as JSON and CSV.

use super::select::VariantArgs;
use crate::device::{self, BackendChoice, BackendKind};
use crate::isa::Operand;
use crate::layout::diff::diff;
use crate::layout::documented::documented;
use crate::layout::lanemap::{CSV_HEADER, LaneMap, Status, Timing};
use crate::layout::meta::{MetaRecord, SelectorMap};
use crate::outfile::Outputs;
use crate::probe::fragment::{FragmentOutcome, probe};
use crate::probe::ptx::fragment_kernel;
use crate::provenance::Provenance;
use anyhow::{Result, bail};
use std::collections::BTreeMap;
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
    /// Output folder (default: results/sm_XY for hardware, results/emulator for the emulator;
    /// the committed reference maps live in reports/ and are never written by default).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Write through a symbolic link, FIFO or device given as output and replace read-only or
    /// foreign files. A hardware-measured map is never replaced by an emulator one.
    #[arg(long)]
    pub force: bool,
    /// Seed of the random validation inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print only one line per variant.
    #[arg(short, long)]
    pub quiet: bool,
    /// mma.sp: also probe the sparsity selectors ptxas takes beyond those the PTX ISA names
    /// (m16n8k32 f16 with f32 accumulators: 2 and 3). One variant only: a GPU that traps on
    /// one leaves the process's CUDA context unusable.
    #[arg(long)]
    pub undocumented_selectors: bool,
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
    if let Some(meta) = &map.metadata {
        for s in &meta.selectors {
            let what = match (&s.failure, &s.validation) {
                (Some(f), _) => format!("FAILED: {f}"),
                (None, Some(v)) if v.passed() => "validated bit-exact".to_string(),
                (None, _) => "FAILED validation".to_string(),
            };
            println!(
                "  metadata, sparsity selector {}{}: lanes {:?} read, {} fields, {} placed \
                 unlike the documented model; {what}",
                s.selector,
                if s.documented {
                    ""
                } else {
                    " (beyond the PTX ISA's)"
                },
                s.lanes,
                s.fields.len(),
                s.documented_differ
                    .map_or_else(|| "-".to_string(), |n| n.to_string()),
            );
        }
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

/// One finished probe, as the closing summary lists it.
struct Row {
    variant: String,
    backend: BackendKind,
    status: Status,
    /// CuTe layouts of A, B and D (C shares D's), or why there is none.
    forms: [String; 3],
}

impl Row {
    fn of(map: &LaneMap) -> Row {
        let form = |op: Operand| {
            map.operands
                .iter()
                .find(|o| o.operand == op)
                .map(|o| {
                    o.closed_form
                        .cute
                        .clone()
                        .unwrap_or_else(|| "not bit-linear".into())
                })
                .unwrap_or_else(|| "-".into())
        };
        Row {
            variant: map.variant.clone(),
            backend: map.backend,
            status: map.status,
            forms: [form(Operand::A), form(Operand::B), form(Operand::D)],
        }
    }
}

/// The closing table: one row per probed variant, columns aligned.
fn summary_table(rows: &[Row]) -> String {
    let head = [
        "variant".to_string(),
        "backend".into(),
        "result".into(),
        "A (m,k)".into(),
        "B (n,k)".into(),
        "C/D (m,n)".into(),
    ];
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            [
                r.variant.clone(),
                match r.backend {
                    BackendKind::Hardware => "hardware".into(),
                    BackendKind::Emulator => "emulator".into(),
                },
                match r.status {
                    Status::Passed => "passed".into(),
                    Status::Failed => "FAILED".into(),
                },
                r.forms[0].clone(),
                r.forms[1].clone(),
                r.forms[2].clone(),
            ]
        })
        .collect();
    let mut width = head.clone().map(|h| h.chars().count());
    for c in &cells {
        for (w, x) in width.iter_mut().zip(c) {
            *w = (*w).max(x.chars().count());
        }
    }
    let line = |c: &[String; 6]| {
        let parts: Vec<String> = c
            .iter()
            .zip(width)
            .map(|(x, w)| format!("{x:<w$}"))
            .collect();
        parts.join("  ").trim_end().to_string() + "\n"
    };
    let mut s = line(&head);
    for c in &cells {
        s += &line(c);
    }
    s
}

/// The dense probe, or for `mma.sp` the sparse one with its metadata maps.
fn run_probe(
    backend: &dyn device::Backend,
    v: &crate::isa::Variant,
    seed: u64,
    undocumented: bool,
) -> Result<(FragmentOutcome, Option<MetaRecord>)> {
    if v.sparse.is_none() {
        return Ok((probe(backend, v, seed)?, None));
    }
    let out = crate::probe::sparse::probe(backend, v, seed, undocumented)?;
    let selectors = out
        .selectors
        .iter()
        .map(|s| {
            SelectorMap::new(
                v,
                s.selector,
                s.documented,
                s.fields.as_deref().map_err(String::as_str),
                s.validation.clone(),
            )
        })
        .collect();
    Ok((out.lanes, Some(MetaRecord::new(v, selectors))))
}

pub fn run(args: Args) -> Result<ExitCode> {
    let variants = args.select.select_lane_mapped()?;
    if args.undocumented_selectors && (variants.len() != 1 || variants[0].sparse.is_none()) {
        bail!(
            "--undocumented-selectors probes one sparse variant (--variant sp....): a GPU that \
             traps on such a selector leaves the process unable to run another; {} selected",
            variants.len()
        );
    }
    let out = Outputs::new(args.force);
    let backend = device::open(args.backend)?;
    let info = backend.info().clone();
    let emulator = info.backend == BackendKind::Emulator;
    let out_dir = args.output.clone().unwrap_or_else(|| info.results_dir());
    let single = variants.len() == 1;

    // What this backend cannot run is refused before anything runs: alone, as an error; in a
    // selection, as a line of the summary.
    let mut runnable = Vec::new();
    let mut refused: BTreeMap<String, usize> = BTreeMap::new();
    for v in &variants {
        match backend.check_supported(v) {
            Ok(()) => runnable.push(v.clone()),
            Err(why) if single => {
                return Err(why.context(format!(
                    "cannot run {} on this backend (try --backend emulator)",
                    v.id()
                )));
            }
            Err(why) => {
                if !args.quiet {
                    println!("skip {}: {why:#}", v.id());
                }
                // Grouped by the target the variants need, not by the variant named in `why`.
                *refused.entry(v.min_target.to_string()).or_default() += 1;
            }
        }
    }
    if runnable.is_empty() {
        bail!(
            "none of the {} selected variants runs on {} ({:?}); try --backend emulator",
            variants.len(),
            info.name,
            info.backend
        );
    }
    // Every output is checked before the first experiment, so a refusal costs no work.
    for v in &runnable {
        out.check_result(
            &out_dir,
            &LaneMap::stem_of(&v.id()),
            Some(CSV_HEADER),
            emulator,
        )?;
    }

    let start = Instant::now();
    let mut rows = Vec::new();
    for v in &runnable {
        let (outcome, metadata) =
            run_probe(backend.as_ref(), v, args.seed, args.undocumented_selectors)?;
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
        let mut map = LaneMap::new(
            v,
            layout,
            Provenance::new(&info, ptx),
            outcome.validation.clone(),
            doc_diff,
            failure,
            keep_raw.then(|| outcome.raw.clone()),
            timing,
        );
        if let Some(record) = metadata {
            map = map.with_metadata(record);
        }
        let path = map.write(&out_dir, &out)?;
        if single && !args.quiet {
            print_summary(&map);
            println!("  wrote {} (+ .csv)", path.display());
        } else if !args.quiet {
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
        rows.push(Row::of(&map));
    }
    let failed = rows.iter().filter(|r| r.status == Status::Failed).count();
    if !single {
        println!();
        print!("{}", summary_table(&rows));
        let skipped: usize = refused.values().sum();
        let why: Vec<String> = refused
            .iter()
            .map(|(t, n)| format!("{n} need {t}"))
            .collect();
        println!(
            "\n{} passed, {failed} failed, {skipped} skipped{} in {:.2} s on {} ({:?}); maps in {}",
            rows.len() - failed,
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({})", why.join(", "))
            },
            start.elapsed().as_secs_f64(),
            info.name,
            info.backend,
            out_dir.display()
        );
        if emulator {
            println!(
                "NOTE: emulator results: the PTX ISA's documented layouts run through a CPU \
                 model, not hardware findings."
            );
        }
        let narrow = VariantArgs::narrowing(&variants);
        if !narrow.is_empty() {
            println!(
                "narrow the selection with: {} (or --variant ID)",
                narrow.join(", ")
            );
        }
    }
    Ok(if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
