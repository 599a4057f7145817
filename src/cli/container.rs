//! `fp4probe container`: sweep every container code of an input type through A (B = 1), write
//! the decode table and the bit-role summary.

use super::select::VariantArgs;
use crate::device::{self, BackendChoice, BackendKind};
use crate::isa::Variant;
use crate::layout::LaneMap;
use crate::layout::documented::documented;
use crate::outfile::Outputs;
use crate::probe::container::{
    ContainerReport, Coverage, Summary, analyse, check_sweepable, fmt_value, representatives, sweep,
};
use crate::probe::ptx::fragment_kernel;
use crate::provenance::Provenance;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which input type: a catalog id (--variant), or qualifiers (--a e4m3 --kind plain ...)
    /// that pick one representative variant; --all sweeps one representative per distinct
    /// (kind, A type, A container width), preferring f32/s32 D and the smallest k.
    #[command(flatten)]
    pub select: VariantArgs,
    /// auto: CUDA if a driver and device exist, else the emulator (with a loud notice).
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendChoice,
    /// Output folder (default: reports/sm_XY for hardware, reports/emulator for the emulator).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Place elements through this measured lane map instead of the documented layout.
    #[arg(long, conflicts_with = "maps")]
    pub map: Option<PathBuf>,
    /// Folder of measured lane maps (`<stem>.json`, as `fragment` writes them); variants
    /// without one use the documented layout.
    #[arg(long)]
    pub maps: Option<PathBuf>,
    /// Slots each code visits (default: full up to 8-bit containers, every-k for 16-bit).
    #[arg(long, value_enum)]
    pub coverage: Option<Coverage>,
    /// Print only one line per variant.
    #[arg(short, long)]
    pub quiet: bool,
    /// Write through a symbolic link, FIFO or device given as output and replace read-only or
    /// foreign files. A hardware-measured result is never replaced by an emulator one.
    #[arg(long)]
    pub force: bool,
}

/// The variants asked for: the exact id, or representatives of what the qualifiers match.
fn chosen(select: &VariantArgs) -> Result<Vec<Variant>> {
    if select.variant.is_some() {
        return select.select();
    }
    let mut all = select.clone();
    all.all = true;
    let reps = representatives(&all.select()?);
    if !select.all && reps.len() > 1 {
        let list: Vec<String> = reps
            .iter()
            .map(|v| format!("  {:<10} {}", v.a.to_string(), v.id()))
            .collect();
        bail!(
            "{} input types match; name one (--a, --kind, or --variant ID) or pass --all:\n{}",
            reps.len(),
            list.join("\n")
        );
    }
    Ok(reps)
}

fn layout_for(v: &Variant, args: &Args, single: bool) -> Result<(crate::layout::Layout, String)> {
    let load = |path: &Path| -> Result<(crate::layout::Layout, String)> {
        let map = LaneMap::load(path)?;
        if map.variant != v.id() {
            bail!(
                "{} is the lane map of {}, not of {}",
                path.display(),
                map.variant,
                v.id()
            );
        }
        Ok((
            map.layout()?,
            format!(
                "measured ({}): {}",
                format!("{:?}", map.backend).to_lowercase(),
                path.display()
            ),
        ))
    };
    if let Some(path) = &args.map {
        if !single {
            bail!("--map names one lane map; with several variants use --maps DIR");
        }
        return load(path);
    }
    if let Some(dir) = &args.maps {
        let path = dir.join(format!("{}.json", v.file_stem()));
        if path.exists() {
            return load(&path);
        }
    }
    Ok((documented(v), "documented (PTX ISA)".into()))
}

/// Container bits as a list, `7 6 1 0`, or `none`.
fn bits(list: &[u32]) -> String {
    if list.is_empty() {
        "none".into()
    } else {
        list.iter()
            .map(|b| b.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn codes_or_none(set: &crate::probe::container::CodeSet) -> String {
    if set.count == 0 {
        "none".into()
    } else {
        format!("{} ({})", set.count, set.ranges)
    }
}

fn extreme(e: &Option<crate::probe::container::Extreme>) -> String {
    e.as_ref()
        .map(|x| format!("{} ({})", fmt_value(x.value.0), x.codes.ranges))
        .unwrap_or_else(|| "-".into())
}

pub fn print_summary(r: &ContainerReport) {
    let s: &Summary = &r.summary;
    let c = &r.checks;
    let p = &r.provenance;
    println!(
        "{}  [A = {} in {}-bit containers, {} codes]",
        r.variant,
        r.a_type,
        r.container_bits,
        r.table.len()
    );
    println!(
        "  backend: {:?} — {} (cc {}, driver {}), fp4probe {} at {}",
        r.backend,
        p.device,
        p.compute_capability.as_deref().unwrap_or("-"),
        p.driver.as_deref().unwrap_or("-"),
        p.tool_version,
        p.date
    );
    if r.backend == BackendKind::Emulator {
        println!(
            "  NOTE: emulator result — formats.rs and the documented containers run through a CPU model, not a hardware finding."
        );
    }
    println!(
        "  layout: {}; coverage: {}",
        r.layout,
        c.coverage.describe()
    );
    println!(
        "  checks: columns agree: {}; consistent across slots: {} ({} placements); zero filler: {}",
        yes_no(c.columns_agree, c.column_disagreement_count),
        yes_no(c.consistent_across_slots, c.slot_mismatch_count),
        c.placements,
        if c.zero_filler_ok { "ok" } else { "NOT +0" }
    );
    for d in c.column_disagreements.iter().take(3) {
        println!(
            "    FINDING: code {} row {} k {}: columns give {}",
            d.code,
            d.row,
            d.k,
            d.d_bits.join(" ")
        );
    }
    for d in c.slot_mismatches.iter().take(3) {
        println!(
            "    FINDING: code {} at row {} k {} gives {}, at its reference slot {}",
            d.code, d.row, d.k, d.d_bits, d.reference
        );
    }
    println!(
        "  roles (bit {}..0): {}   [s sign, e exponent, m mantissa, v value, x ignored]",
        r.container_bits - 1,
        s.roles
    );
    println!(
        "  ignored bits: {}; documented padding: {} ({})",
        bits(&s.ignored_bits),
        bits(&s.documented_padding_bits),
        if s.documented_padding_bits.is_empty() {
            "no padding"
        } else if s.padding_ignored {
            "ignored"
        } else {
            "NOT all ignored"
        }
    );
    if !s.documented_value_bits_ignored.is_empty() {
        println!(
            "    FINDING: documented value bits {} are ignored",
            bits(&s.documented_value_bits_ignored)
        );
    }
    println!(
        "  sign bit: {}; exponent bits: {}; mantissa bits: {}",
        s.sign_bit.map_or("none".into(), |b| b.to_string()),
        bits(&s.exponent_bits),
        bits(&s.mantissa_bits)
    );
    println!("  format: {}", s.format.description);
    if let Some(cl) = &s.format.closest {
        for ex in cl.examples.iter().take(4) {
            println!(
                "    code {}: measured {}, {} says {}",
                ex[0], ex[1], cl.name, ex[2]
            );
        }
    }
    if r.summary.format.integer.is_none() && r.d_type.is_float() {
        println!(
            "  NaN: {}; Inf: {}; negative zero: {}",
            codes_or_none(&s.nan_codes),
            codes_or_none(&s.inf_codes),
            if s.negative_zero_observable {
                codes_or_none(&s.negative_zero_codes)
            } else {
                format!("not observed ({})", c.negative_zero.note)
            }
        );
        println!(
            "  max finite {}; min positive normal {}; min positive subnormal {}",
            extreme(&s.max_finite),
            extreme(&s.min_positive_normal),
            extreme(&s.min_positive_subnormal)
        );
    } else {
        println!(
            "  range: {} .. {}",
            extreme(&s.min_finite),
            extreme(&s.max_finite)
        );
    }
    println!("  saturation: {}", s.saturation.note);
    println!(
        "  timing: {:.3} s wall ({} experiments in {} launches)",
        r.timing.wall_s, r.timing.experiments, r.timing.launches
    );
}

fn yes_no(ok: bool, bad: usize) -> String {
    if ok {
        "yes".into()
    } else {
        format!("NO ({bad} placements differ)")
    }
}

fn one_line(r: &ContainerReport) -> String {
    let s = &r.summary;
    let c = &r.checks;
    let mut line = format!(
        "{:<6} {:<9} {}: {} | roles {} | NaN {} Inf {} -0 {} | max {}",
        r.a_type.to_string(),
        r.variant
            .split('.')
            .find(|q| q.starts_with("kind::"))
            .unwrap_or("plain"),
        r.variant,
        s.format.exact.as_deref().unwrap_or("NO MATCH"),
        s.roles,
        s.nan_codes.count,
        s.inf_codes.count,
        if s.negative_zero_observable {
            s.negative_zero_codes.ranges.clone()
        } else {
            "?".into()
        },
        s.max_finite
            .as_ref()
            .map_or("-".into(), |e| fmt_value(e.value.0)),
    );
    if !c.columns_agree || !c.consistent_across_slots {
        line += " | FINDING: results depend on the column or slot";
    }
    line + &format!(
        " [{} experiments, {:.3} s]",
        r.timing.experiments, r.timing.wall_s
    )
}

pub fn run(args: Args) -> Result<ExitCode> {
    let variants = chosen(&args.select)?;
    let backend = device::open(args.backend)?;
    let info = backend.info().clone();
    let out_dir = args.output.clone().unwrap_or_else(|| info.results_dir());
    let single = variants.len() == 1;
    let out = Outputs::new(args.force);
    let emulator = info.backend == crate::device::BackendKind::Emulator;
    for v in variants.iter().filter(|v| {
        check_sweepable(v)
            .and_then(|()| backend.check_supported(v))
            .is_ok()
    }) {
        out.check_result(
            &out_dir,
            &format!("{}.container", v.file_stem()),
            Some(crate::probe::container::CSV_HEADER),
            emulator,
        )?;
    }
    let start = Instant::now();
    let (mut done, mut skipped, mut findings) = (0, 0, 0);
    for v in &variants {
        if let Err(why) = check_sweepable(v).and_then(|()| backend.check_supported(v)) {
            if single {
                return Err(why.context(format!("cannot sweep {}", v.id())));
            }
            if !args.quiet {
                println!("skip {}: {why:#}", v.id());
            }
            skipped += 1;
            continue;
        }
        let (layout, layout_source) = layout_for(v, &args, single)?;
        let coverage = args.coverage.unwrap_or_else(|| Coverage::auto(v));
        let sw = sweep(backend.as_ref(), v, &layout, coverage)
            .with_context(|| format!("container sweep of {}", v.id()))?;
        let summary = analyse(&sw.table);
        let ptx = fragment_kernel(v, v.min_target, Default::default());
        let report =
            ContainerReport::new(v, &sw, summary, Provenance::new(&info, ptx), layout_source);
        let path = report.write(&out_dir, &out)?;
        done += 1;
        if !report.checks.columns_agree || !report.checks.consistent_across_slots {
            findings += 1;
        }
        if single && !args.quiet {
            print_summary(&report);
            println!("  wrote {} (+ .csv)", path.display());
        } else {
            println!("{}", one_line(&report));
        }
    }
    if !single {
        println!(
            "{done} swept ({findings} with column/slot findings), {skipped} skipped in {:.2} s on {} ({:?}); reports in {}",
            start.elapsed().as_secs_f64(),
            info.name,
            info.backend,
            out_dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
