//! `fp4probe catalog`: every catalogued instruction variant with its register geometry and
//! targets, grouped by family (`mma.sync` and `mma.sp`, `ldmatrix`, `stmatrix`, `movmatrix`,
//! `wgmma.mma_async`), with each family's count.

mod matrix;
mod mma;
mod wgmma;

use crate::device::Backend;
use crate::device::cuda::{CudaBackend, max_ptx_for_driver};
use crate::isa::{self, matrix::MatrixOp};
use anyhow::Result;
use serde::Serialize;
use std::process::ExitCode;

/// Which instruction family to list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Family {
    /// `mma.sync` and `mma.sp`, one warp (sm_75 to sm_120a).
    Mma,
    /// `ldmatrix`: shared memory to registers, one warp.
    Ldmatrix,
    /// `stmatrix`: registers to shared memory, one warp.
    Stmatrix,
    /// `movmatrix`: a transpose from registers to registers, one warp.
    Movmatrix,
    /// `wgmma.mma_async`, one warpgroup (sm_90a).
    Wgmma,
    /// Every family, in the order above.
    All,
}

impl Family {
    fn matrix_op(self) -> Option<MatrixOp> {
        match self {
            Family::Ldmatrix => Some(MatrixOp::Ldmatrix),
            Family::Stmatrix => Some(MatrixOp::Stmatrix),
            Family::Movmatrix => Some(MatrixOp::Movmatrix),
            _ => None,
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Instruction family: mma (mma.sync and mma.sp), ldmatrix, stmatrix, movmatrix, wgmma
    /// (wgmma.mma_async) or all. Every listing ends with the count of each family.
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

/// One family's size: every variant, and those the probes run.
#[derive(Serialize)]
struct FamilyCount {
    family: &'static str,
    variants: usize,
    probed: usize,
}

/// Every family's count, in catalog order.
fn family_counts() -> Vec<FamilyCount> {
    let mma = isa::catalog();
    let count = |family| {
        let of: Vec<_> = mma.iter().filter(|v| v.family() == family).collect();
        FamilyCount {
            family,
            variants: of.len(),
            probed: of.iter().filter(|v| v.not_lane_mapped().is_none()).count(),
        }
    };
    let mut out = vec![count("mma.sync"), count("mma.sp")];
    let moves = isa::matrix::catalog();
    for op in MatrixOp::ALL {
        out.push(FamilyCount {
            family: op.name(),
            variants: moves.iter().filter(|v| v.op == op).count(),
            probed: moves
                .iter()
                .filter(|v| v.op == op && crate::movement::not_probed(v).is_none())
                .count(),
        });
    }
    let wg = crate::wgmma::catalog();
    out.push(FamilyCount {
        family: "wgmma.mma_async",
        variants: wg.len(),
        probed: wg.iter().filter(|v| !v.sparse).count(),
    });
    out
}

fn print_family_counts() {
    println!("\nfamilies (`--family mma|ldmatrix|stmatrix|movmatrix|wgmma|all` lists each):");
    for c in family_counts() {
        let probed = match c.probed {
            0 => "catalogued and assembled, not probed".to_string(),
            n if n == c.variants => "all probed".to_string(),
            n => format!("{n} probed, the rest catalogued and assembled"),
        };
        println!("  {:<16} {:>5}  ({probed})", c.family, c.variants);
    }
}

/// The `here` cell and the whole reason for an entry of minimum target `target` and PTX ISA
/// version `need` (None when it runs): the device must be one of `runs_on`'s and its driver
/// must read the PTX.
fn why_not_here(
    id: &str,
    runs_on: bool,
    target: &str,
    need: (u32, u32),
    dev: &CudaBackend,
) -> Option<(String, String)> {
    let (maj, min) = dev.compute_capability();
    if !runs_on {
        return Some((
            format!("no (needs {target})"),
            format!(
                "{id} requires {target}; this device is {} (sm_{maj}{min})",
                dev.info().name
            ),
        ));
    }
    let have = max_ptx_for_driver(dev.driver_version());
    if need <= have {
        return None;
    }
    Some((
        format!("no (driver reads PTX {}.{})", have.0, have.1),
        format!(
            "{id} needs PTX ISA {}.{}, but the CUDA driver {} JITs up to PTX ISA {}.{}",
            need.0,
            need.1,
            dev.info().driver.as_deref().unwrap_or("?"),
            have.0,
            have.1
        ),
    ))
}

/// `here` and `why_not` of a row: `None` for both without a device.
fn here_cells(
    dev: Option<&CudaBackend>,
    why: impl FnOnce(&CudaBackend) -> Option<(String, String)>,
) -> (String, Option<bool>, Option<String>) {
    match dev {
        None => ("?".to_string(), None, None),
        Some(d) => match why(d) {
            None => ("yes".to_string(), Some(true), None),
            Some((cell, long)) => (cell, Some(false), Some(long)),
        },
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
    let filter = args.filter.as_deref();
    let mma = || mma::rows(dev, filter);
    let wg = || wgmma::rows(dev, filter);
    let moves = |op| matrix::rows(op, dev, filter);
    if args.json {
        let rejected = args.rejected;
        let out = match args.family {
            Family::Mma => serde_json::json!({
                "device": here,
                "variants": mma(),
                "rejected": rejected.then(isa::rejected_spellings),
                "families": family_counts(),
            }),
            Family::Wgmma => serde_json::json!({
                "device": here,
                "family": "wgmma",
                "variants": wg(),
                "rejected": rejected.then(crate::wgmma::rejected::rejected_spellings),
                "families": family_counts(),
            }),
            Family::Ldmatrix | Family::Stmatrix | Family::Movmatrix => {
                let op = args.family.matrix_op().expect("a data movement family");
                serde_json::json!({
                    "device": here,
                    "family": op.name(),
                    "variants": moves(op),
                    "rejected": rejected.then(|| matrix::rejected(op)),
                    "families": family_counts(),
                })
            }
            Family::All => {
                let mut all = serde_json::json!({
                    "device": here,
                    "family": "all",
                    "mma": {
                        "variants": mma(),
                        "rejected": rejected.then(isa::rejected_spellings),
                    },
                    "wgmma": {
                        "variants": wg(),
                        "rejected": rejected.then(crate::wgmma::rejected::rejected_spellings),
                    },
                    "families": family_counts(),
                });
                for op in MatrixOp::ALL {
                    all[op.name()] = serde_json::json!({
                        "variants": moves(op),
                        "rejected": rejected.then(|| matrix::rejected(op)),
                    });
                }
                all
            }
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("device: {here}");
    let all = args.family == Family::All;
    // A blank line between tables.
    let mut tables = 0;
    let mut gap = || {
        if tables > 0 {
            println!();
        }
        tables += 1;
    };
    if matches!(args.family, Family::Mma | Family::All) {
        gap();
        mma::print(&mma(), args.rejected);
    }
    for op in MatrixOp::ALL {
        if all || args.family.matrix_op() == Some(op) {
            gap();
            matrix::print(op, &moves(op), args.rejected);
        }
    }
    if matches!(args.family, Family::Wgmma | Family::All) {
        gap();
        wgmma::print(&wg(), args.rejected);
    }
    print_family_counts();
    Ok(ExitCode::SUCCESS)
}
