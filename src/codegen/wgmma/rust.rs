//! `src/generated/wgmma.rs`: the wgmma register tables and shared-memory forms as statics of
//! the types in [`super::tables`], identical arrays stored once.

use super::super::MARKER;
use super::super::rust::numbers;
use super::Sources;
use anyhow::{Result, bail};
use std::collections::HashMap;
use std::fmt::Write;

fn major(m: crate::wgmma::desc::Major) -> &'static str {
    match m {
        crate::wgmma::desc::Major::K => "Major::K",
        crate::wgmma::desc::Major::MN => "Major::MN",
    }
}

fn swizzle(s: crate::wgmma::desc::Swizzle) -> &'static str {
    use crate::wgmma::desc::Swizzle as S;
    match s {
        S::None => "Swizzle::None",
        S::B32 => "Swizzle::B32",
        S::B64 => "Swizzle::B64",
        S::B128 => "Swizzle::B128",
    }
}

/// Render the module.
pub fn module(s: &Sources, command: &str) -> Result<String> {
    let mut out = format!("//! {MARKER} from the wgmma maps each entry names. Do not edit.\n");
    let _ = writeln!(
        out,
        "//! Regenerate with `{command}`; `fp4probe codegen --check` fails while this file is stale.\n//!\n//! The wgmma D and A-from-registers tables of every measured map, and the shared-memory form of\n//! every study: the same as `kernels/generated/wgmma/*.cuh`. Identical arrays are stored once.\n"
    );
    out += "use crate::codegen::tables::OperandTable;\nuse crate::codegen::wgmma::tables::{Axis, SmemForm, SmemTerm, WgTable};\nuse crate::isa::Operand;\nuse crate::wgmma::desc::{Major, Swizzle};\nuse std::borrow::Cow;\n\n";
    let mut arrays: Vec<Vec<u32>> = Vec::new();
    let mut index: HashMap<Vec<u32>, usize> = HashMap::new();
    let mut intern = |v: &[u32]| -> String {
        let next = arrays.len();
        let i = *index.entry(v.to_vec()).or_insert_with(|| {
            arrays.push(v.to_vec());
            next
        });
        format!("&T{i}")
    };
    for (name, tables) in [("D_TABLES", &s.d_tables), ("A_TABLES", &s.a_tables)] {
        let _ = writeln!(
            out,
            "/// {} tables, sorted by key.\npub static {name}: [WgTable; {}] = [",
            &name[..1],
            tables.len()
        );
        for t in tables.iter() {
            let od = &t.data;
            let f = &od.frag;
            let sources: Vec<String> = t.sources.iter().map(|p| format!("{p:?}")).collect();
            let variants: Vec<String> = t.variants.iter().map(|p| format!("{p:?}")).collect();
            let (row, col, slot) = (intern(&od.row), intern(&od.col), intern(&od.slot));
            let _ = writeln!(
                out,
                "    WgTable {{\n        key: {:?},\n        sources: &[{}],\n        variants: &[{}],\n        lanes: {},\n        table: OperandTable {{ operand: Operand::{}, rows: {}, cols: {}, regs: {}, reg_bits: {}, elems_per_reg: {}, container_bits: {}, value_bits: {}, value_shift: {}, row: {row}, col: {col}, slot: {slot} }},\n    }},",
                t.key,
                sources.join(", "),
                variants.join(", "),
                od.lanes,
                od.name(),
                f.rows,
                f.cols,
                f.regs,
                f.reg_bits,
                od.elems_per_reg,
                f.container_bits,
                od.value_bits,
                od.value_shift
            );
        }
        out += "];\n\n";
    }
    let _ = writeln!(
        out,
        "/// Shared-memory forms, by element size, major-ness and swizzle mode.\npub static SMEM_FORMS: [SmemForm; {}] = [",
        s.smem.len()
    );
    for d in &s.smem {
        let f = &d.form;
        let terms: Vec<String> = f
            .terms
            .iter()
            .map(|t| {
                format!(
                    "SmemTerm {{ axis: Axis::{:?}, lo: {}, len: {}, c: {}, lbo: {}, sbo: {} }}",
                    t.axis, t.lo, t.len, t.c, t.lbo, t.sbo
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "    SmemForm {{\n        elem_bits: {},\n        major: {},\n        swizzle: {},\n        xor: {},\n        terms: Cow::Borrowed(&[\n            {},\n        ]),\n        measured_mn: {},\n        measured_k: {},\n        pinned_lbo: {:?},\n        pinned_sbo: {:?},\n        base_offsets: Cow::Borrowed(&{:?}),\n        source: Cow::Borrowed({:?}),\n    }},",
            f.elem_bits,
            major(f.major),
            swizzle(f.swizzle),
            swizzle(f.xor),
            terms.join(",\n            "),
            f.measured_mn,
            f.measured_k,
            f.pinned_lbo,
            f.pinned_sbo,
            f.base_offsets,
            f.source
        );
    }
    out += "];\n";
    for (i, a) in arrays.iter().enumerate() {
        if a.iter().any(|&x| x > u16::MAX as u32) {
            bail!("table value above u16::MAX");
        }
        let _ = write!(
            out,
            "\nstatic T{i}: [u16; {}] = [\n{}];\n",
            a.len(),
            numbers(a)
        );
    }
    Ok(out)
}
