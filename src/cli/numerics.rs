//! `fp4probe numerics`: designed inputs that measure how a variant multiplies, aligns, rounds
//! and accumulates; one `<stem>.numerics.json` per variant and a summary table.

use super::select::VariantArgs;
use crate::device::{self, BackendChoice, BackendKind};
use crate::layout::LaneMap;
use crate::layout::documented::documented;
use crate::probe::numerics::{Numerics, SCHEMA, measure};
use crate::probe::ptx::fragment_kernel;
use crate::provenance::Provenance;
use anyhow::{Context, Result, bail};
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub select: VariantArgs,
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendChoice,
    /// Place elements with this measured lane map instead of the documented layout.
    #[arg(long)]
    pub map: Option<PathBuf>,
    /// Output folder (default: reports/sm_XY for hardware, reports/emulator for the emulator).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

#[derive(Serialize)]
struct Record<'a> {
    schema: &'static str,
    variant: String,
    backend: BackendKind,
    /// What the emulator assumes, where it ran; empty for hardware.
    model: Option<&'static str>,
    #[serde(flatten)]
    numerics: &'a Numerics,
    provenance: Provenance,
}

const EMULATOR_MODEL: &str = "emulator: products exact, summed in k order in f64 (so 52 fraction bits survive alignment), rounded once to \
the D type to nearest even";

fn cell(x: &Option<impl ToString>) -> String {
    x.as_ref()
        .map(|v| v.to_string())
        .unwrap_or_else(|| "-".into())
}

pub fn table_header() -> String {
    "| variant | products exact | fraction bits after alignment | accumulation rounding | terms per rounding | subnormal in / out | NaN out | integer overflow |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n".into()
}

pub fn table_row(id: &str, n: &Numerics) -> String {
    let frac = match n.fraction_bits_after_alignment {
        Some(f) if n.fraction_bits_is_lower_bound => format!("≥ {f}"),
        other => cell(&other),
    };
    format!(
        "| `{id}` | {} | {frac} | {} | {} | {} / {} | {} | {} |\n",
        cell(&n.products_exact),
        cell(&n.accumulation_rounding),
        cell(&n.terms_per_rounding),
        cell(&n.subnormal_inputs),
        cell(&n.subnormal_outputs),
        cell(&n.nan_output_bits),
        cell(&n.integer_overflow)
    )
}

pub fn run(args: Args) -> Result<ExitCode> {
    let variants = args.select.select()?;
    let backend = device::open(args.backend)?;
    let info = backend.info().clone();
    let out_dir =
        args.output
            .clone()
            .unwrap_or_else(|| match (info.backend, info.compute_capability) {
                (BackendKind::Hardware, Some((a, b))) => {
                    PathBuf::from(format!("reports/sm_{a}{b}"))
                }
                _ => PathBuf::from("reports/emulator"),
            });
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let measured = match &args.map {
        Some(p) => Some(LaneMap::load(p)?),
        None => None,
    };
    let single = variants.len() == 1;
    let mut table = table_header();
    for v in &variants {
        if let Err(why) = backend.check_supported(v) {
            if single {
                return Err(why.context(format!(
                    "cannot run {} on this backend (try --backend emulator)",
                    v.id()
                )));
            }
            println!("skip {}: {why:#}", v.id());
            continue;
        }
        let layout = match &measured {
            Some(m) if m.variant == v.id() => m.layout()?,
            Some(m) => bail!("--map is for {}, not {}", m.variant, v.id()),
            None => documented(v),
        };
        let n = measure(backend.as_ref(), v, &layout)
            .with_context(|| format!("numerics of {}", v.id()))?;
        let record = Record {
            schema: SCHEMA,
            variant: v.id(),
            backend: info.backend,
            model: (info.backend == BackendKind::Emulator).then_some(EMULATOR_MODEL),
            numerics: &n,
            provenance: Provenance::new(
                &info,
                fragment_kernel(v, v.min_target, Default::default()),
            ),
        };
        let path = out_dir.join(format!("{}.numerics.json", v.file_stem()));
        std::fs::write(&path, serde_json::to_string_pretty(&record)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
        table += &table_row(&v.id(), &n);
        if single {
            println!("{} on {} ({:?})", v.id(), info.name, info.backend);
            for f in &n.findings {
                println!(
                    "  {}: {}\n    experiment: {}\n    observed: {}",
                    f.name, f.result, f.experiment, f.observed
                );
            }
            println!("  wrote {}", path.display());
        }
    }
    if !single {
        let path = out_dir.join("numerics.md");
        let head = format!(
            "# Numeric behaviour of mma.sync on {} ({:?})\n\nGenerated by `fp4probe numerics --all`; every finding's experiment is in the variant's `.numerics.json`.\n\n",
            info.name, info.backend
        );
        std::fs::write(&path, head + &table)?;
        print!("{table}");
        println!("wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
