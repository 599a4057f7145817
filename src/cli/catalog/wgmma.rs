//! The `wgmma.mma_async` rows of `fp4probe catalog`.

use super::{here_cells, why_not_here};
use crate::device::cuda::CudaBackend;
use crate::wgmma::{self, ASource, WgVariant};
use serde::Serialize;

/// One `wgmma.mma_async` variant as `fp4probe catalog --family wgmma` lists it.
#[derive(Serialize)]
pub(super) struct WgRow {
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

fn row(v: &WgVariant, dev: Option<&CudaBackend>) -> WgRow {
    // The device must be exactly sm_90 (an arch-specific target) and its driver must read the
    // variant's PTX ISA version.
    let (here, runs_here, why_not) = here_cells(dev, |d| {
        let target = v.min_target();
        let need = v.ptx_version();
        let need = need
            .split_once('.')
            .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
            .unwrap_or((u32::MAX, 0));
        why_not_here(
            &v.id(),
            target.runs_on(d.compute_capability()),
            &target.to_string(),
            need,
            d,
        )
    });
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
        runs_here,
        why_not,
        here,
    }
}

/// The rows of the catalog variants whose id contains `filter`.
pub(super) fn rows(dev: Option<&CudaBackend>, filter: Option<&str>) -> Vec<WgRow> {
    wgmma::catalog()
        .iter()
        .filter(|v| filter.is_none_or(|f| v.id().contains(f)))
        .map(|v| row(v, dev))
        .collect()
}

pub(super) fn print(rows: &[WgRow], rejected: bool) {
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
