//! The metadata section of an `mma.sp` page: under each sparsity selector, which lane and bits
//! hold the indices of each chunk of each row of A, in the PTX ISA's own notation
//! (`T5:[7:4]`), and where that differs from the documented model.

use crate::layout::lanemap::LaneMap;
use crate::layout::meta::{MetaField, MetaRecord, SelectorMap, documented_meta};
use std::fmt::Write;

/// `T{lane}:[hi:lo]` for the fields of one chunk: one range where they are adjacent bits of
/// one lane, else one range per field.
fn place(fields: &[MetaField], width: u32) -> String {
    let mut f = fields.to_vec();
    f.sort_by_key(|x| x.index);
    let joined = f
        .windows(2)
        .all(|w| w[0].lane == w[1].lane && w[1].bit == w[0].bit + width);
    if joined && !f.is_empty() {
        let lo = f[0].bit;
        let hi = f[f.len() - 1].bit + width - 1;
        return format!("T{}:[{hi}:{lo}]", f[0].lane);
    }
    f.iter()
        .map(|x| format!("T{}:[{}:{}]", x.lane, x.bit + width - 1, x.bit))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The row × chunk table of one selector's map.
fn table(s: &mut String, fields: &[MetaField], rows: u32, chunks: u32, width: u32) {
    s.push_str("| row |");
    for c in 0..chunks {
        let _ = write!(s, " chunk {c} |");
    }
    s.push_str("\n| ---: |");
    for _ in 0..chunks {
        s.push_str(" --- |");
    }
    s.push('\n');
    for r in 0..rows {
        let _ = write!(s, "| {r} |");
        for c in 0..chunks {
            let of: Vec<MetaField> = fields
                .iter()
                .filter(|f| f.row == r && f.chunk == c)
                .copied()
                .collect();
            let _ = write!(s, " {} |", place(&of, width));
        }
        s.push('\n');
    }
    s.push('\n');
}

fn selector_section(s: &mut String, map: &LaneMap, meta: &MetaRecord, sel: &SelectorMap) {
    let _ = writeln!(s, "### Sparsity selector {}\n", sel.selector);
    if let Some(f) = &sel.failure {
        let _ = writeln!(s, "**No map**: {f}\n");
        return;
    }
    let lanes: Vec<String> = sel.lanes.iter().map(|l| l.to_string()).collect();
    let _ = write!(
        s,
        "Reads the metadata register of lanes {}.",
        lanes.join(", ")
    );
    let fields = sel.meta_fields();
    let documented = map
        .variant()
        .map(|v| documented_meta(&v, sel.selector))
        .unwrap_or_default();
    match sel.documented_differ {
        Some(0) => s.push_str(" Every field sits where the documented model puts it.\n\n"),
        Some(n) => {
            let _ = writeln!(
                s,
                " **{n} of {} fields sit elsewhere than the documented model puts them**; its \
                 table follows the measured one.\n",
                fields.len()
            );
        }
        None if !sel.documented => s.push_str(
            " The PTX ISA names no such selector (ptxas takes it), so there is no documented \
             model to compare with.\n\n",
        ),
        None => s.push('\n'),
    }
    let check = |c: &crate::probe::fragment::Check| {
        if c.passed {
            format!("pass ({} elements bit-exact)", c.compared)
        } else {
            format!("FAIL ({} of {} differ)", c.mismatch_count, c.compared)
        }
    };
    if let Some(v) = &sel.validation {
        let _ = writeln!(
            s,
            "Validation through these maps: identity {}; random 2:4 patterns and values (seed {}) \
             {}.\n",
            check(&v.identity),
            v.seed,
            check(&v.random)
        );
    }
    table(s, &fields, map.shape.m, meta.chunks, meta.field_bits);
    if sel.documented_differ.is_some_and(|n| n > 0) {
        s.push_str("Documented model:\n\n");
        table(s, &documented, map.shape.m, meta.chunks, meta.field_bits);
    }
}

/// The whole metadata section of `map`, if it is sparse.
pub fn metadata_section(s: &mut String, map: &LaneMap) {
    let Some(meta) = &map.metadata else {
        return;
    };
    let per = if meta.elem_positions == 2 {
        "a tf32 element spans two positions, so a chunk is two elements of which one is kept \
         (nibble 0b0100 keeps the first, 0b1110 the second)"
            .to_string()
    } else if meta.pos_elems == 2 {
        "a position is two consecutive elements".to_string()
    } else {
        "a position is one element".to_string()
    };
    let _ = writeln!(
        s,
        "## Metadata\n\nA row of the dense A is {} chunks of four positions ({per}); each chunk \
         keeps two, and its 4-bit nibble names them (bits 1..0 the first kept position, bits \
         3..2 the second). `T5:[7:4]` in row r, chunk c means: bits 7..4 of lane 5's metadata \
         register hold the nibble of chunk c of row r. Measured one {}-bit field at a time \
         (`fp4probe fragment`'s sparse probe); the compressed A above holds {} elements of each \
         chunk, in order.\n",
        meta.chunks, meta.field_bits, meta.kept
    );
    for sel in &meta.selectors {
        selector_section(s, map, meta, sel);
    }
}
