//! `fp4probe catalog`: every variant with its register geometry and targets, for the
//! `mma.sync` family (the default), the `wgmma.mma_async` family, or both.

use crate::device::Backend;
use crate::device::cuda::{CudaBackend, max_ptx_for_driver};
use crate::isa::{Operand, Variant, catalog, rejected_spellings};
use crate::wgmma::{self, ASource, WgVariant};
use anyhow::Result;
use serde::Serialize;
use std::process::ExitCode;

/// Which instruction family to list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Family {
    /// `mma.sync`, one warp (sm_80 to sm_120a).
    Mma,
    /// `wgmma.mma_async`, one warpgroup (sm_90a).
    Wgmma,
    /// Both, `mma.sync` first.
    All,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Instruction family: mma (mma.sync), wgmma (wgmma.mma_async) or all.
    #[arg(long, value_enum, default_value_t = Family::Mma)]
    pub family: Family,
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

/// One `wgmma.mma_async` variant as `fp4probe catalog --family wgmma` lists it.
#[derive(Serialize)]
struct WgRow {
    id: String,
    ptx: String,
    a_source: ASource,
    sparse: bool,
    n: u32,
    k: u32,
    /// D (and C) registers per thread of the warpgroup.
    d_regs: u32,
    /// A registers per thread; `None` when A comes from shared memory (`ss`).
    a_regs: Option<u32>,
    transposable: bool,
    min_target: String,
    ptx_isa: String,
    runs_here: Option<bool>,
    why_not: Option<String>,
    /// The table's `here` cell.
    #[serde(skip)]
    here: String,
}

/// Why `v` does not run on `dev` (the `here` cell, then the whole reason), or `None` when it
/// does: the device must be exactly sm_90 (an arch-specific target) and its driver must read
/// the variant's PTX ISA version.
fn wg_why_not(v: &WgVariant, dev: &CudaBackend) -> Option<(String, String)> {
    let (maj, min) = dev.compute_capability();
    let target = v.min_target();
    if !target.runs_on((maj, min)) {
        return Some((
            format!("no (needs {target})"),
            format!(
                "{} requires {target}; this device is {} (sm_{maj}{min})",
                v.id(),
                dev.info().name
            ),
        ));
    }
    let have = max_ptx_for_driver(dev.driver_version());
    let need = v.ptx_version();
    let need_num = need
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)));
    if need_num.is_some_and(|n| n <= have) {
        return None;
    }
    Some((
        format!("no (driver reads PTX {}.{})", have.0, have.1),
        format!(
            "{} needs PTX ISA {need}, but the CUDA driver {} JITs up to PTX ISA {}.{}",
            v.id(),
            dev.info().driver.as_deref().unwrap_or("?"),
            have.0,
            have.1
        ),
    ))
}

fn wg_row(v: &WgVariant, dev: Option<&CudaBackend>) -> WgRow {
    let why = dev.and_then(|d| wg_why_not(v, d));
    let here = match (dev, &why) {
        (None, _) => "?".to_string(),
        (Some(_), None) => "yes".to_string(),
        (Some(_), Some((cell, _))) => cell.clone(),
    };
    WgRow {
        id: v.id(),
        ptx: v.opcode(),
        a_source: v.a_src,
        sparse: v.sparse,
        n: v.n,
        k: v.k,
        d_regs: v.d_frag().regs,
        a_regs: (v.a_src == ASource::Rs).then(|| v.a_frag().regs),
        transposable: v.transposable(),
        min_target: v.min_target().to_string(),
        ptx_isa: v.ptx_version().to_string(),
        runs_here: dev.map(|_| why.is_none()),
        why_not: why.map(|(_, long)| long),
        here,
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
    let dev = dev.as_ref().ok();
    let keep = |id: &str| args.filter.as_ref().is_none_or(|f| id.contains(f.as_str()));
    let mma = || -> Vec<Row> {
        catalog()
            .iter()
            .filter(|v| keep(&v.id()))
            .map(|v| row(v, dev))
            .collect()
    };
    let wg = || -> Vec<WgRow> {
        wgmma::catalog()
            .iter()
            .filter(|v| keep(&v.id()))
            .map(|v| wg_row(v, dev))
            .collect()
    };
    if args.json {
        let out = match args.family {
            Family::Mma => {
                let rejected = args.rejected.then(rejected_spellings);
                serde_json::json!({ "device": here, "variants": mma(), "rejected": rejected })
            }
            Family::Wgmma => {
                let rejected = args.rejected.then(wgmma::rejected::rejected_spellings);
                serde_json::json!({
                    "device": here,
                    "family": "wgmma",
                    "variants": wg(),
                    "rejected": rejected,
                })
            }
            Family::All => serde_json::json!({
                "device": here,
                "family": "all",
                "mma": {
                    "variants": mma(),
                    "rejected": args.rejected.then(rejected_spellings),
                },
                "wgmma": {
                    "variants": wg(),
                    "rejected": args.rejected.then(wgmma::rejected::rejected_spellings),
                },
            }),
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("device: {here}");
    if matches!(args.family, Family::Mma | Family::All) {
        print_mma(&mma(), args.rejected);
    }
    if args.family == Family::All {
        println!();
    }
    if matches!(args.family, Family::Wgmma | Family::All) {
        print_wgmma(&wg(), args.rejected);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_mma(rows: &[Row], rejected: bool) {
    println!(
        "{:<72} {:>11} {:>5} {:>8} {:>4}  here",
        "variant (catalog id)", "regs A/B/C/D", "bits", "min", "PTX"
    );
    for r in rows {
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
    if rejected {
        println!("\nRejected by ptxas (near misses people try):");
        for r in rejected_spellings() {
            println!(
                "  {}  [{}]\n    ptxas: {}\n    instead: {}",
                r.ptx, r.target, r.ptxas_says, r.instead
            );
        }
    }
}

fn print_wgmma(rows: &[WgRow], rejected: bool) {
    println!(
        "{:<37} {:<63} {:>3} {:>3} {:>6} {:>6} {:>5} {:>6} {:>4}  here",
        "wgmma variant (catalog id)",
        "PTX opcode",
        "A",
        "K",
        "D regs",
        "A regs",
        "trans",
        "min",
        "PTX"
    );
    for r in rows {
        let a_regs = r.a_regs.map_or("-".to_string(), |n| n.to_string());
        let trans = match (r.transposable, r.a_source) {
            (false, _) => "-",
            (true, ASource::Ss) => "A,B",
            (true, ASource::Rs) => "B",
        };
        println!(
            "{:<37} {:<63} {:>3} {:>3} {:>6} {:>6} {:>5} {:>6} {:>4}  {}",
            r.id,
            r.ptx,
            r.a_source.name(),
            r.k,
            r.d_regs,
            a_regs,
            trans,
            r.min_target,
            r.ptx_isa,
            r.here
        );
    }
    println!(
        "{} wgmma variants. Register counts are per thread of the 128-thread warpgroup; A regs \
         only when A comes from registers (rs); trans = operands the transpose immediates \
         apply to.",
        rows.len()
    );
    if rejected {
        println!("\nRejected by ptxas (wgmma near misses):");
        for r in wgmma::rejected::rejected_spellings() {
            println!(
                "  {}  [{}, PTX {}]\n    ptxas: {}\n    instead: {}",
                short_lists(&r.ptx),
                r.target,
                r.ptx_version,
                r.ptxas_says,
                r.instead
            );
        }
    }
}

/// `{%d0, %d1, ..., %d127}` for a register list of more than four: the table shows the
/// instruction's shape, the JSON its whole text.
fn short_lists(ptx: &str) -> String {
    let mut out = String::new();
    let mut rest = ptx;
    while let Some(open) = rest.find('{') {
        let Some(len) = rest[open..].find('}') else {
            break;
        };
        out += &rest[..open];
        let items: Vec<&str> = rest[open + 1..open + len].split(", ").collect();
        if items.len() > 4 {
            out += &format!(
                "{{{}, {}, ..., {}}}",
                items[0],
                items[1],
                items[items.len() - 1]
            );
        } else {
            out += &rest[open..=open + len];
        }
        rest = &rest[open + len + 1..];
    }
    out + rest
}

#[cfg(test)]
mod tests {
    use super::short_lists;

    #[test]
    fn long_register_lists_are_shortened() {
        assert_eq!(
            short_lists("op {%d0, %d1, %d2, %d3, %d4}, {%a0, %a1, %a2, %a3}, %bd, %p;"),
            "op {%d0, %d1, ..., %d4}, {%a0, %a1, %a2, %a3}, %bd, %p;"
        );
        assert_eq!(short_lists("no lists"), "no lists");
    }
}
