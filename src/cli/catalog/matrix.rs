//! The `ldmatrix`, `stmatrix` and `movmatrix` rows of `fp4probe catalog`.

use super::{here_cells, why_not_here};
use crate::device::cuda::CudaBackend;
use crate::isa::matrix::{self, MatrixElem, MatrixOp, MatrixVariant};
use crate::isa::{DEFAULT_PTX, Rejected};
use serde::Serialize;

#[derive(Serialize)]
pub(super) struct Row {
    id: String,
    ptx: String,
    shape: String,
    /// Matrices per instruction (`.x1`, `.x2`, `.x4`).
    num: u32,
    trans: bool,
    elem: MatrixElem,
    /// 32-bit registers per lane.
    regs: u32,
    min_target: String,
    /// Every arch-specific target that takes it besides the minimum.
    also: Vec<String>,
    ptx_isa: String,
    /// `fp4probe matrix probe` measures it (`movement::not_probed`).
    probed: bool,
    runs_here: Option<bool>,
    why_not: Option<String>,
    #[serde(skip)]
    here: String,
}

fn row(v: &MatrixVariant, dev: Option<&CudaBackend>) -> Row {
    let target = v.min_target.to_string();
    let (here, runs_here, why_not) = here_cells(dev, |d| {
        let runs = v.runs_on(d.compute_capability());
        why_not_here(&v.id(), runs, &target, DEFAULT_PTX, d)
    });
    Row {
        id: v.id(),
        ptx: v.opcode(),
        shape: v.shape.to_string(),
        num: v.num,
        trans: v.trans,
        elem: v.elem,
        regs: v.regs(),
        also: v
            .targets()
            .iter()
            .filter(|t| **t != v.min_target)
            .map(|t| t.to_string())
            .collect(),
        min_target: target,
        ptx_isa: format!("{}.{}", DEFAULT_PTX.0, DEFAULT_PTX.1),
        probed: crate::movement::not_probed(v).is_none(),
        runs_here,
        why_not,
        here,
    }
}

/// The rows of `op`'s variants whose id contains `filter`.
pub(super) fn rows(op: MatrixOp, dev: Option<&CudaBackend>, filter: Option<&str>) -> Vec<Row> {
    matrix::catalog()
        .iter()
        .filter(|v| v.op == op && filter.is_none_or(|f| v.id().contains(f)))
        .map(|v| row(v, dev))
        .collect()
}

/// The near misses of `op`.
pub(super) fn rejected(op: MatrixOp) -> Vec<Rejected> {
    matrix::rejected_spellings()
        .into_iter()
        .filter(|r| r.ptx.starts_with(&format!("{}.", op.name())))
        .collect()
}

pub(super) fn print(op: MatrixOp, rows: &[Row], rejected_too: bool) {
    let width = rows.iter().map(|r| r.id.len()).max().unwrap_or(0).max(30);
    let ptx_width = rows.iter().map(|r| r.ptx.len()).max().unwrap_or(0).max(10);
    println!(
        "{:<width$} {:<ptx_width$} {:>4} {:>8} {:>4}  here",
        format!("{} variant (catalog id)", op.name()),
        "PTX opcode",
        "regs",
        "min",
        "PTX"
    );
    for r in rows {
        println!(
            "{:<width$} {:<ptx_width$} {:>4} {:>8} {:>4}  {}",
            r.id, r.ptx, r.regs, r.min_target, r.ptx_isa, r.here
        );
    }
    println!(
        "{} {} variants ({} probed by `fp4probe matrix probe`, the rest catalogued and \
         assembled). regs = 32-bit registers per lane.",
        rows.len(),
        op.name(),
        rows.iter().filter(|r| r.probed).count()
    );
    let also: std::collections::BTreeSet<String> = rows
        .iter()
        .filter(|r| !r.also.is_empty())
        .map(|r| format!("{} also assemble for {}", r.min_target, r.also.join(", ")))
        .collect();
    for line in also {
        println!("The forms of {line}.");
    }
    if rejected_too {
        println!("\nRejected by ptxas ({} near misses):", op.name());
        for r in rejected(op) {
            println!(
                "  {}  [{}]\n    ptxas: {}\n    instead: {}",
                r.ptx, r.target, r.ptxas_says, r.instead
            );
        }
    }
}
