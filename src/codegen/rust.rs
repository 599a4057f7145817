//! The generated Rust module (`src/generated/mod.rs`): every variant's tables as statics of the
//! types in [`super::tables`]. Identical arrays (most variants of a shape share a layout) are
//! stored once; `lib.rs` declares the module `#[rustfmt::skip]`, so this text is final.

use super::{MARKER, Source, operand_data};
use anyhow::Result;
use std::collections::HashMap;
use std::fmt::Write;

pub(super) fn numbers(values: &[u32]) -> String {
    let mut s = String::new();
    for chunk in values.chunks(24) {
        let line: Vec<String> = chunk.iter().map(|v| v.to_string()).collect();
        let _ = writeln!(s, "    {},", line.join(", "));
    }
    s
}

/// Render the module.
pub fn module(sources: &[Source], command: &str) -> Result<String> {
    let hw = sources.iter().filter(|s| s.hardware()).count();
    let mut s = format!("//! {MARKER} from the lane maps each entry names. Do not edit.\n");
    let _ = writeln!(
        s,
        "//! Regenerate with `{command}`; `fp4probe codegen --check` fails while this file is stale."
    );
    let _ = writeln!(
        s,
        "//!\n//! {} variants, sorted by id: {hw} from hardware-measured maps, {} from emulator maps (documented\n//! layout, not hardware-measured). The same tables as `kernels/generated/*.cuh`; look one up with\n//! `crate::codegen::tables::lookup`. Identical arrays are stored once.\n",
        sources.len(),
        sources.len() - hw
    );
    s += "#[rustfmt::skip]\npub mod wgmma;\n\n";
    s += "use crate::codegen::tables::{OperandTable, VariantTables};\nuse crate::isa::Operand;\n\n";
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
    let mut entries = String::new();
    for src in sources {
        let ods = operand_data(src)?;
        let _ = writeln!(
            entries,
            "    VariantTables {{\n        id: \"{}\",\n        cpp_name: \"{}\",\n        source: \"{}\",\n        hardware: {},\n        operands: [",
            src.variant.id(),
            src.cpp_name(),
            src.path,
            src.hardware()
        );
        for od in &ods {
            let f = &od.frag;
            let (row, col, slot) = (intern(&od.row), intern(&od.col), intern(&od.slot));
            let _ = writeln!(
                entries,
                "            OperandTable {{ operand: Operand::{}, rows: {}, cols: {}, regs: {}, reg_bits: {}, elems_per_reg: {}, container_bits: {}, value_bits: {}, value_shift: {}, row: {row}, col: {col}, slot: {slot} }},",
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
        entries += "        ],\n    },\n";
    }
    let _ = writeln!(
        s,
        "/// Every variant's tables, sorted by id.\npub static VARIANTS: [VariantTables; {}] = [\n{entries}];",
        sources.len()
    );
    for (i, a) in arrays.iter().enumerate() {
        if a.iter().any(|&x| x > u16::MAX as u32) {
            anyhow::bail!("table value above u16::MAX");
        }
        let _ = write!(
            s,
            "\nstatic T{i}: [u16; {}] = [\n{}];\n",
            a.len(),
            numbers(a)
        );
    }
    Ok(s)
}
