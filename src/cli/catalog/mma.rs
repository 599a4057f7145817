//! The `mma.sync` and `mma.sp` rows of `fp4probe catalog`.

use crate::device::Backend;
use crate::device::cuda::CudaBackend;
use crate::isa::{self, Operand, Variant, rejected_spellings};
use serde::Serialize;

#[derive(Serialize)]
pub(super) struct Row {
    id: String,
    ptx: String,
    /// `mma.sync` or `mma.sp`.
    family: &'static str,
    regs: [u32; 4],
    container_bits: [u32; 2],
    min_target: String,
    ptx_isa: String,
    /// Whether `fragment` measures its lane maps; `not_probed` says why not.
    probed: bool,
    not_probed: Option<&'static str>,
    /// What else leaves it out (the sparse forms: every probe but `fragment`).
    note: Option<&'static str>,
    /// Sparse variants: how many sparsity selectors ptxas takes (0 up to this, exclusive).
    sparsity_selectors: Option<u32>,
    runs_here: Option<bool>,
    why_not: Option<String>,
}

fn row(v: &Variant, dev: Option<&CudaBackend>) -> Row {
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
        family: v.family(),
        regs: Operand::ALL.map(|op| v.fragment(op).regs),
        container_bits: [
            v.fragment(Operand::A).container_bits,
            v.fragment(Operand::B).container_bits,
        ],
        min_target: v.min_target.to_string(),
        ptx_isa: v.ptx_version(),
        probed: v.not_lane_mapped().is_none(),
        not_probed: v.not_lane_mapped(),
        note: v.sparse.map(|_| isa::SPARSE_NOTE),
        sparsity_selectors: v.sparse.map(|_| v.sparsity_selectors()),
        runs_here,
        why_not,
    }
}

/// The rows of the catalog variants whose id contains `filter`.
pub(super) fn rows(dev: Option<&CudaBackend>, filter: Option<&str>) -> Vec<Row> {
    isa::catalog()
        .iter()
        .filter(|v| filter.is_none_or(|f| v.id().contains(f)))
        .map(|v| row(v, dev))
        .collect()
}

/// One table per family, each ended by its count.
pub(super) fn print(rows: &[Row], rejected: bool) {
    let mut first = true;
    for family in ["mma.sync", "mma.sp"] {
        let of: Vec<&Row> = rows.iter().filter(|r| r.family == family).collect();
        if of.is_empty() {
            continue;
        }
        if !first {
            println!();
        }
        first = false;
        print_family(family, &of);
    }
    if rows.is_empty() {
        println!("no mma variant's id contains the filter");
    }
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

fn print_family(family: &str, rows: &[&Row]) {
    let sparse = family == "mma.sp";
    let width = rows.iter().map(|r| r.id.len()).max().unwrap_or(0).max(20);
    let sel_head = if sparse { "  sel" } else { "" };
    println!(
        "{:<width$} {:>12} {:>5} {:>8} {:>4} {:>6}{sel_head}  here",
        format!("{family} variant (catalog id)"),
        "regs A/B/C/D",
        "bits",
        "min",
        "PTX",
        "probed"
    );
    for r in rows {
        let here = match r.runs_here {
            Some(true) => "yes".to_string(),
            Some(false) => format!("no (needs {})", r.min_target),
            None => "?".to_string(),
        };
        let sel = match r.sparsity_selectors {
            Some(1) if sparse => format!("  {:>3}", 0),
            Some(n) if sparse => format!("  {:>3}", format!("0-{}", n - 1)),
            _ => String::new(),
        };
        println!(
            "{:<width$} {:>12} {:>5} {:>8} {:>4} {:>6}{sel}  {here}",
            r.id,
            format!("{}/{}/{}/{}", r.regs[0], r.regs[1], r.regs[2], r.regs[3]),
            format!("{}/{}", r.container_bits[0], r.container_bits[1]),
            r.min_target,
            r.ptx_isa,
            if r.probed { "yes" } else { "no" },
        );
    }
    let probed = rows.iter().filter(|r| r.probed).count();
    println!(
        "{} {family} variants ({probed} probed). Register counts are per lane; bits = A/B \
         element container width.",
        rows.len()
    );
    if sparse {
        println!(
            "A holds the kept half of the 2:4-sparse A; each lane adds one metadata register. \
             sel = the sparsity selectors ptxas takes."
        );
    }
    let reasons: std::collections::BTreeSet<&str> =
        rows.iter().filter_map(|r| r.not_probed).collect();
    for why in reasons {
        println!("probed no (catalogued, and assembled by ptxas): {why}.");
    }
    let notes: std::collections::BTreeSet<&str> = rows.iter().filter_map(|r| r.note).collect();
    for note in notes {
        println!("{note}.");
    }
}
