//! `fp4probe catalog`: every variant with its register geometry and targets.

use crate::device::Backend;
use crate::device::cuda::CudaBackend;
use crate::isa::{Operand, Variant, catalog, rejected_spellings};
use anyhow::Result;
use serde::Serialize;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only variants whose id contains this text.
    #[arg(long)]
    pub filter: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also list near-miss spellings that ptxas rejects, with its message.
    #[arg(long)]
    pub rejected: bool,
}

#[derive(Serialize)]
struct Row {
    id: String,
    ptx: String,
    regs: [u32; 4],
    container_bits: [u32; 2],
    min_target: String,
    ptx_isa: String,
    runs_here: Option<bool>,
    why_not: Option<String>,
}

fn row(v: &Variant, dev: Option<&CudaBackend>) -> Row {
    let regs = Operand::ALL.map(|op| v.fragment(op).regs);
    let (runs_here, why_not) = match dev {
        None => (None, None),
        Some(d) => match d.check_supported(v) {
            Ok(()) => (Some(true), None),
            Err(e) => (Some(false), Some(format!("{e:#}"))),
        },
    };
    Row {
        id: v.id(),
        ptx: v.opcode(),
        regs,
        container_bits: [
            v.fragment(Operand::A).container_bits,
            v.fragment(Operand::B).container_bits,
        ],
        min_target: v.min_target.to_string(),
        ptx_isa: v.ptx_version(),
        runs_here,
        why_not,
    }
}

pub fn run(args: Args) -> Result<ExitCode> {
    let dev = CudaBackend::open();
    let here = match &dev {
        Ok(d) => {
            let i = d.info();
            let cc = i
                .compute_capability
                .map(|(a, b)| format!("sm_{a}{b}"))
                .unwrap_or_default();
            format!(
                "{} ({cc}, driver {})",
                i.name,
                i.driver.as_deref().unwrap_or("?")
            )
        }
        Err(e) => format!("no CUDA device ({e:#})"),
    };
    let rows: Vec<Row> = catalog()
        .iter()
        .filter(|v| {
            args.filter
                .as_ref()
                .is_none_or(|f| v.id().contains(f.as_str()))
        })
        .map(|v| row(v, dev.as_ref().ok()))
        .collect();
    if args.json {
        let rejected = if args.rejected {
            Some(rejected_spellings())
        } else {
            None
        };
        let out = serde_json::json!({ "device": here, "variants": rows, "rejected": rejected });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("device: {here}");
    println!(
        "{:<72} {:>11} {:>5} {:>8} {:>4}  here",
        "variant (catalog id)", "regs A/B/C/D", "bits", "min", "PTX"
    );
    for r in &rows {
        let here = match (r.runs_here, &r.why_not) {
            (Some(true), _) => "yes".to_string(),
            (Some(false), _) => format!("no (needs {})", r.min_target),
            (None, _) => "?".to_string(),
        };
        println!(
            "{:<72} {:>11} {:>5} {:>8} {:>4}  {here}",
            r.id,
            format!("{}/{}/{}/{}", r.regs[0], r.regs[1], r.regs[2], r.regs[3]),
            format!("{}/{}", r.container_bits[0], r.container_bits[1]),
            r.min_target,
            r.ptx_isa
        );
    }
    println!(
        "{} variants. Register counts are per lane; bits = A/B element container width.",
        rows.len()
    );
    if args.rejected {
        println!("\nRejected by ptxas (near misses people try):");
        for r in rejected_spellings() {
            println!(
                "  {}  [{}]\n    ptxas: {}\n    instead: {}",
                r.ptx, r.target, r.ptxas_says, r.instead
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
