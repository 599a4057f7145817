//! The markdown page of one lane map.

use super::md::{
    cell, code, data_links, plural, provenance_section, ptx_section, status_section,
    validation_section, work_line,
};
use super::{GENERATED, axis_names, reg_label, stem};
use crate::device::BackendKind;

use crate::layout::diff::{DiffSummary, diff};
use crate::layout::documented::documented;
use crate::layout::lanemap::{LaneMap, OperandMap};
use serde::Deserialize;
use std::fmt::Write;

/// What a page links to and shows beyond the map itself.
#[derive(Clone, Debug)]
pub struct PageOptions<'a> {
    /// The page sits next to its map in `reports/<folder>/`: link the JSON, the CSV and the
    /// index `../README.md`.
    pub links: bool,
    /// The map's `scale` field (scale-factor layouts), if it has one.
    pub scale: Option<&'a serde_json::Value>,
}

impl Default for PageOptions<'_> {
    fn default() -> Self {
        PageOptions {
            links: true,
            scale: None,
        }
    }
}

/// The page of `map`, as written next to it: [`render_page_with`] with default options.
pub fn render_page(map: &LaneMap) -> String {
    render_page_with(map, &PageOptions::default())
}

/// The documented-layout diff: the map's own, else computed from its layout where it has one.
fn documented_diff(map: &LaneMap) -> Option<DiffSummary> {
    if let Some(d) = &map.documented_diff {
        return Some(d.clone());
    }
    let v = map.variant().ok()?;
    let l = map.layout().ok()?;
    Some(diff(&v, &l, &documented(&v)))
}

pub fn render_page_with(map: &LaneMap, opts: &PageOptions) -> String {
    let mut s = String::new();
    let stem = stem(map);
    let p = &map.provenance;
    let _ = writeln!(s, "{GENERATED}\n");
    let _ = writeln!(s, "# {}\n", code(&map.variant));

    status_section(&mut s, map.status, p, map.failure.as_deref());
    let scale = map
        .types
        .scale
        .map(|sc| format!(", scale {} × scale_vec::{}X", sc.stype, sc.vec))
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "{} — shape {}, A {}, B {}, C {}, D {}{scale}; minimum target {}.\n",
        code(&map.instruction),
        map.shape,
        map.types.a,
        map.types.b,
        map.types.c,
        map.types.d,
        map.min_target
    );
    if opts.links {
        data_links(
            &mut s,
            &stem,
            !map.operands.is_empty(),
            "all variants and devices",
            "../README.md",
        );
    }

    provenance_section(
        &mut s,
        p,
        work_line(
            map.timing.experiments,
            map.timing.launches,
            "",
            map.timing.wall_s,
        ),
    );

    // Reproduce.
    let target = map.min_target.to_string();
    let gpu = if map.min_target.arch_specific {
        format!(
            "an {} GPU (compute capability {}.{}{})",
            target.trim_end_matches('a'),
            map.min_target.major,
            map.min_target.minor,
            if map.min_target.major == 12 {
                ", consumer Blackwell"
            } else {
                ""
            }
        )
    } else {
        format!(
            "any GPU that runs {target} (compute capability {}.{} or newer)",
            map.min_target.major, map.min_target.minor
        )
    };
    let _ = writeln!(
        s,
        "\n## Reproduce\n\n```sh\nfp4probe fragment --variant {}\n```\n",
        map.variant
    );
    match map.backend {
        BackendKind::Hardware => {
            let _ = writeln!(
                s,
                "On {gpu} this measures the layout again (add `--backend cuda` to refuse the emulator fallback). The map is written to `reports/sm_XY/`; `fp4probe report` turns it into this page.\n"
            );
        }
        BackendKind::Emulator => {
            let sm120 = if map.min_target.major == 12 {
                "On an sm_120 machine the same command measures it on hardware".to_string()
            } else {
                format!("On an sm_120 machine, or {gpu}, the same command measures it on hardware")
            };
            let _ = writeln!(
                s,
                "Without a GPU this runs the emulator, as it did for this page. {sm120} (`--backend cuda` refuses the emulator fallback).\n"
            );
        }
    }

    // Convention.
    let _ = writeln!(
        s,
        "## Labelling convention\n\n> {}\n\nIn the formulas below `lane` is the lane (thread) index 0–31, `g = lane/4` (groupID), `t = lane%4` (thread in group), `reg` the register index within the operand and `e` the element within the register (low bits first); `/` and `%` are integer division and remainder. A is m×k, B is k×n, C and D are m×n: row and col are those of the operand's own matrix.\n",
        cell(&map.convention)
    );

    validation_section(&mut s, map.validation.as_ref());

    // Documented layout.
    s.push_str("## Against the PTX ISA's documented layout\n\n");
    match documented_diff(map) {
        Some(d) if d.identical() => {
            let parts: Vec<String> = d
                .counts
                .iter()
                .map(|(op, _, total)| format!("{} {total}", op.name()))
                .collect();
            let _ = writeln!(
                s,
                "**Identical**, slot for slot, under the convention above (slots compared: {}).\n",
                parts.join(", ")
            );
        }
        Some(d) => {
            s.push_str("**Different.** Differing slots per operand:\n\n| operand | differing | slots |\n| --- | ---: | ---: |\n");
            for (op, n, total) in &d.counts {
                let _ = writeln!(s, "| {} | {n} | {total} |", op.name());
            }
            let _ = writeln!(
                s,
                "\nThe first {} (the JSON keeps the same list):\n\n| operand | lane | reg | elem | this map (row, col) | documented (row, col) |\n| --- | ---: | ---: | ---: | --- | --- |",
                d.first.len()
            );
            for x in &d.first {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {}, {} | {}, {} |",
                    x.operand.name(),
                    x.lane,
                    x.reg,
                    x.elem,
                    x.left.row,
                    x.left.col,
                    x.right.row,
                    x.right.col
                );
            }
            s.push('\n');
        }
        None => s.push_str("No layout to compare.\n\n"),
    }

    super::meta::metadata_section(&mut s, map);

    // Operands.
    if map.operands.is_empty() {
        s.push_str("## Operands\n\nNo layout was inferred, so there are no operand tables.");
        if let Some(raw) = &map.raw {
            let _ = write!(
                s,
                " The JSON keeps the raw observations: the D slots each one-hot A ({} slots), B ({}) and C ({}) experiment lit, and the pairing phase's answers ({} A slots).",
                raw.a_lit.len(),
                raw.b_lit.len(),
                raw.c_lit.len(),
                raw.pairing.len()
            );
        }
        s.push_str("\n\n");
    }
    for om in &map.operands {
        operand_section(&mut s, om, &stem);
    }

    // Scale factors.
    scale_section(&mut s, map, opts.scale);

    ptx_section(&mut s, p);
    s
}

fn operand_section(s: &mut String, om: &OperandMap, stem: &str) {
    let op = om.operand;
    let (rn, cn) = axis_names(op);
    let cf = &om.closed_form;
    let _ = writeln!(
        s,
        "## {} — {rn}×{cn} = {}×{}, {}\n",
        op.name(),
        om.rows,
        om.cols,
        om.elem
    );
    let _ = writeln!(
        s,
        "Per lane {} × {} ({}-bit containers in {}-bit registers): {} slots for {} elements.\n",
        plural(om.regs, "register", "registers"),
        plural(om.elems_per_reg, "element", "elements"),
        om.container_bits,
        (om.container_bits * om.elems_per_reg).max(32),
        om.slots.len(),
        om.rows * om.cols
    );
    let show = |x: &Option<String>| match x {
        Some(f) => code(f),
        None => "not bit-linear".to_string(),
    };
    let _ = writeln!(
        s,
        "- row ({rn}) = {}\n- col ({cn}) = {}",
        show(&cf.row),
        show(&cf.col)
    );
    match &cf.cute {
        Some(c) => {
            let _ = writeln!(
                s,
                "- CuTe thread–value layout, (lane, value = {}) → {}: {}",
                if om.elems_per_reg == 1 {
                    "reg".to_string()
                } else {
                    format!("reg·{} + e", om.elems_per_reg)
                },
                code(&cf.cute_index),
                code(c)
            );
        }
        None => s.push_str("- CuTe layout: none (see notes)\n"),
    }
    if let Some(bw) = &cf.bit_weights {
        let parts: Vec<String> = bw
            .bits
            .iter()
            .map(|b| format!("{} ({},{})", b.bit, b.row, b.col))
            .collect();
        let _ = writeln!(
            s,
            "- bit weights (Δrow, Δcol) of the slot index, origin ({},{}): {}",
            bw.origin.row,
            bw.origin.col,
            parts.join(" · ")
        );
    }
    for n in &cf.notes {
        let _ = writeln!(s, "- note: {n}");
    }
    let _ = writeln!(s, "\n![{}]({stem}.{}.svg)\n", op.name(), op.name());
    let _ = writeln!(
        s,
        "Every slot: lane (row) × register element (column) → `{rn},{cn}` of the element it holds.\n"
    );
    slot_table(s, om.regs, om.elems_per_reg, &om.slots);
}

/// Lanes 0..31 down, `r<reg>.e<elem>` across, `row,col` in the cells.
fn slot_table(s: &mut String, regs: u32, epr: u32, slots: &[[u32; 5]]) {
    let per_lane = (regs * epr) as usize;
    let mut grid = vec![String::new(); 32 * per_lane];
    for &[lane, reg, elem, r, c] in slots {
        if lane < 32 && reg < regs && elem < epr {
            grid[lane as usize * per_lane + (reg * epr + elem) as usize] = format!("{r},{c}");
        }
    }
    s.push_str("| lane |");
    for reg in 0..regs {
        for e in 0..epr {
            let _ = write!(s, " {} |", reg_label(reg, e, epr));
        }
    }
    s.push_str("\n| ---: |");
    for _ in 0..per_lane {
        s.push_str(" --- |");
    }
    s.push('\n');
    for lane in 0..32 {
        let _ = write!(s, "| {lane} |");
        for j in 0..per_lane {
            let _ = write!(s, " {} |", grid[lane * per_lane + j]);
        }
        s.push('\n');
    }
    s.push('\n');
}

/// One table of a `scale` field: the form the scale probe is expected to write.
#[derive(Deserialize)]
struct ScaleTable {
    operand: String,
    rows: u32,
    cols: u32,
    regs: u32,
    #[serde(default = "one")]
    elems_per_reg: u32,
    slots: Vec<[u32; 5]>,
}

fn one() -> u32 {
    1
}

/// Scale-factor layouts. Lane maps written by `fp4probe fragment` hold no `scale` field (the scale
/// probe writes its own `.scale.json`); a map that carries one, as a list of `{operand, rows,
/// cols, regs, elems_per_reg, slots:
/// [[lane, reg, elem, row, col], ...]}` is rendered as slot tables; any other form is shown as
/// JSON.
fn scale_section(s: &mut String, map: &LaneMap, data: Option<&serde_json::Value>) {
    let block = map.types.scale;
    if block.is_none() && data.is_none() {
        return;
    }
    s.push_str("## Scale factors\n\n");
    if let Some(sc) = block {
        let _ = writeln!(
            s,
            "Block-scaled: `scale_vec::{}X`, {} scale factors for A and B.\n",
            sc.vec, sc.stype
        );
    }
    match data {
        None => s.push_str(
            "Which lane and byte of the scale registers scale which rows of A and columns of B is in the scale map `<variant>.scale.json` that `fp4probe scale` writes, not in this lane map. The emulator places scales as the PTX ISA describes them.\n\n",
        ),
        Some(v) => match serde_json::from_value::<Vec<ScaleTable>>(v.clone()) {
            Ok(tables) => {
                for t in tables {
                    let _ = writeln!(
                        s,
                        "### {} — {}×{}\n\nPer lane {} × {}: lane × register element → `row,col`.\n",
                        t.operand,
                        t.rows,
                        t.cols,
                        plural(t.regs, "register", "registers"),
                        plural(t.elems_per_reg, "element", "elements"),
                    );
                    slot_table(s, t.regs, t.elems_per_reg, &t.slots);
                }
            }
            Err(_) => {
                let _ = writeln!(
                    s,
                    "The map's `scale` field, as recorded:\n\n```json\n{}\n```\n",
                    serde_json::to_string_pretty(v).unwrap_or_default()
                );
            }
        },
    }
}
