//! One operand's matrix as an SVG grid, in the style of the PTX ISA's fragment figures: every
//! cell is labelled with the lane (`T5`) and register element (`r2.e1`) that holds it and
//! coloured by lane.
//!
//! Pure SVG 1.1, no script, no external font (`monospace`). To stay small for 16×256 matrices
//! each lane's coloured cell and `T<lane>` label is defined once (`<g id="L5">`) and placed with
//! `<use>`; a matrix row is one `<g>` line whose cells read `<use xlink:href="#L5" x=".."/>`
//! followed by `<text x="..">r2.e1</text>`, in column order.

use super::{axis_names, reg_label};
use crate::device::BackendKind;
use crate::isa::Operand;
use crate::layout::LaneMap;
use std::fmt::Write;

/// Height of a cell: two 10 px lines.
const CH: u32 = 26;
/// Baseline of the register label below the cell's top; `<use>` origins sit on it.
const BASE2: u32 = 21;
/// Baseline of the lane label below the cell's top.
const BASE1: u32 = 10;
/// Advance of one 10 px monospace character, rounded up.
const CHAR: f64 = 6.1;
/// Top of the grid: title, subtitle, axis name and column indices above it.
const GRID_TOP: u32 = 76;

/// Colour of a lane as `#rrggbb` (the palette is shared with the terminal viewer).
pub fn lane_colour(lane: u32) -> String {
    let (r, g, b) = crate::palette::lane_rgb(lane);
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// Where a picture's map came from, for its subtitle: the device, or the emulator's disclaimer.
pub(super) fn who(p: &crate::provenance::Provenance) -> String {
    match p.backend {
        BackendKind::Hardware => format!("measured on {}", p.device),
        BackendKind::Emulator => {
            "emulator: the documented layout through the CPU model, not a hardware finding".into()
        }
    }
}

/// What a failed map's subtitle starts with.
pub(super) fn failed_prefix(status: crate::layout::lanemap::Status) -> &'static str {
    match status {
        crate::layout::lanemap::Status::Passed => "",
        crate::layout::lanemap::Status::Failed => "FAILED · ",
    }
}

pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The opening of a one-grid picture: the SVG element, `<title>`, the style of 10 px cells,
/// a white ground, the heading and the subtitle; the caller adds the grid and `</svg>`.
pub(super) fn head(width: u32, height: u32, title: &str, heading: &str, subtitle: &str) -> String {
    format!(
        r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{width}" height="{height}" viewBox="0 0 {width} {height}">
<title>{}</title>
<style type="text/css"><![CDATA[text{{font-family:monospace;font-size:10px;text-anchor:middle;fill:#000}}.h{{font-size:14px;font-weight:bold;text-anchor:start}}.s{{font-size:11px;text-anchor:start}}rect{{stroke:#fff;stroke-width:1}}]]></style>
<rect width="{width}" height="{height}" fill="#fff"/>
<text class="h" x="12" y="22">{}</text>
<text class="s" x="12" y="40">{}</text>
"##,
        esc(title),
        esc(heading),
        esc(subtitle)
    )
}

pub(super) fn text_width(chars: usize, px_per_char: f64) -> u32 {
    (chars as f64 * px_per_char).ceil() as u32
}

/// The picture of operand `op` of `map`: an m×k (A), k×n (B) or m×n (C, D) grid.
pub fn svg(map: &LaneMap, op: Operand) -> String {
    let Some(om) = map.operands.iter().find(|o| o.operand == op) else {
        return no_layout(map, op);
    };
    let (rows, cols) = (om.rows, om.cols);
    // Which slot holds each cell (the first one, should a broken map hold a cell twice).
    let mut cell: Vec<Option<(u32, u32, u32)>> = vec![None; (rows * cols) as usize];
    for &[lane, reg, elem, r, c] in &om.slots {
        if r < rows && c < cols {
            let i = (r * cols + c) as usize;
            if cell[i].is_none() {
                cell[i] = Some((lane, reg, elem));
            }
        }
    }
    let longest = reg_label(
        om.regs.saturating_sub(1),
        om.elems_per_reg.saturating_sub(1),
        om.elems_per_reg,
    )
    .len()
    .max(3);
    let cw = (text_width(longest, CHAR) + 8).max(30) & !1;
    let (rn, cn) = axis_names(op);
    let digits = (rows.max(1) - 1).to_string().len();
    let x0 = 26 + text_width(digits, 5.5) + 6;
    let (gw, gh) = (cols * cw, rows * CH);

    let title = map.variant.clone();
    let who = who(&map.provenance);
    let status = failed_prefix(map.status);
    let subtitle = format!(
        "{status}{} ({rn}×{cn} = {rows}×{cols}, {}), {} reg{} × {} elem{} per lane · {who}",
        op.name(),
        om.elem,
        om.regs,
        if om.regs == 1 { "" } else { "s" },
        om.elems_per_reg,
        if om.elems_per_reg == 1 { "" } else { "s" },
    );
    // Legend: 32 swatches, 32, 16 or 8 to a row, whichever fits next to the grid's width.
    let content_w = (x0 + gw)
        .max(12 + text_width(title.chars().count(), 8.5))
        .max(12 + text_width(subtitle.chars().count(), 6.8));
    let per_row = [32u32, 16, 8]
        .into_iter()
        .find(|n| x0 + n * (cw + 2) <= content_w)
        .unwrap_or(8);
    let legend_top = GRID_TOP + gh + 30;
    let legend_rows = 32 / per_row;
    let width = content_w.max(x0 + per_row * (cw + 2)) + 12;
    let height = legend_top + legend_rows * (CH + 2) + 10;

    let mut s = String::with_capacity(80 * (rows * cols) as usize + 4096);
    let _ = writeln!(
        s,
        r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" version="1.1" width="{width}" height="{height}" viewBox="0 0 {width} {height}">
<title>{} — {} lane map</title>
<style type="text/css"><![CDATA[text{{font-family:monospace;font-size:10px;text-anchor:middle;fill:#000}}.h{{font-size:14px;font-weight:bold;text-anchor:start}}.s{{font-size:11px;text-anchor:start}}.a{{font-size:11px;fill:#333}}.i text{{font-size:9px;fill:#555}}.r text{{text-anchor:end}}g rect{{stroke:#fff;stroke-width:1}}]]></style>
<rect width="{width}" height="{height}" fill="#fff"/>"##,
        esc(&title),
        op.name()
    );
    // One definition per lane: its coloured cell and `T<lane>`, origin on the second baseline.
    s.push_str("<defs>\n");
    for lane in 0..32 {
        let _ = writeln!(
            s,
            r#"<g id="L{lane}"><rect y="-{BASE2}" width="{cw}" height="{CH}" fill="{}"/><text x="{}" y="-{}">T{lane}</text></g>"#,
            lane_colour(lane),
            cw / 2,
            BASE2 - BASE1
        );
    }
    s.push_str("</defs>\n");
    let _ = writeln!(
        s,
        r#"<text class="h" x="12" y="20">{}</text>
<text class="s" x="12" y="37">{}</text>
<text class="a s" x="{x0}" y="56">{cn} (col) →</text>
<text class="a s" transform="translate(10,{GRID_TOP}) rotate(90)">{rn} (row) →</text>"#,
        esc(&title),
        esc(&subtitle),
    );
    // Column and row indices.
    s.push_str(r#"<g class="i">"#);
    for c in 0..cols {
        let _ = write!(
            s,
            r#"<text x="{}" y="{}">{c}</text>"#,
            x0 + c * cw + cw / 2,
            GRID_TOP - 6
        );
    }
    s.push_str("</g>\n<g class=\"i r\">");
    for r in 0..rows {
        let _ = write!(
            s,
            r#"<text x="{}" y="{}">{r}</text>"#,
            x0 - 5,
            GRID_TOP + r * CH + CH / 2 + 3
        );
    }
    s.push_str("</g>\n");
    // The cells, one matrix row per line.
    for r in 0..rows {
        let _ = write!(
            s,
            r#"<g transform="translate(0,{})">"#,
            GRID_TOP + r * CH + BASE2
        );
        for c in 0..cols {
            let x = x0 + c * cw;
            match cell[(r * cols + c) as usize] {
                Some((lane, reg, elem)) => {
                    let _ = write!(
                        s,
                        r##"<use xlink:href="#L{lane}" x="{x}"/><text x="{}">{}</text>"##,
                        x + cw / 2,
                        reg_label(reg, elem, om.elems_per_reg)
                    );
                }
                None => {
                    let _ = write!(
                        s,
                        r##"<rect x="{x}" y="-{BASE2}" width="{cw}" height="{CH}" fill="#ccc"/><text x="{}">?</text>"##,
                        x + cw / 2
                    );
                }
            }
        }
        s.push_str("</g>\n");
    }
    // Frame, and a darker line every 8 rows and columns to help count.
    let mut d = format!("M{x0} {GRID_TOP}h{gw}v{gh}h-{gw}z");
    for c in (8..cols).step_by(8) {
        let _ = write!(d, "M{} {GRID_TOP}v{gh}", x0 + c * cw);
    }
    for r in (8..rows).step_by(8) {
        let _ = write!(d, "M{x0} {}h{gw}", GRID_TOP + r * CH);
    }
    let _ = writeln!(s, r##"<path d="{d}" fill="none" stroke="#333"/>"##);
    // Legend: every lane's colour.
    let _ = writeln!(
        s,
        r#"<text class="s" x="12" y="{}">lane colours (cell: T&lt;lane&gt; over r&lt;reg&gt;{}):</text>"#,
        legend_top - 8,
        if om.elems_per_reg > 1 {
            ".e&lt;element&gt;"
        } else {
            ""
        }
    );
    s.push_str("<g>");
    for lane in 0..32 {
        let _ = write!(
            s,
            r##"<use xlink:href="#L{lane}" x="{}" y="{}"/>"##,
            12 + (lane % per_row) * (cw + 2),
            legend_top + (lane / per_row) * (CH + 2) + BASE2
        );
    }
    s.push_str("</g>\n</svg>\n");
    s
}

/// A small picture that says there is no layout to draw (a failed probe without a map).
fn no_layout(map: &LaneMap, op: Operand) -> String {
    let msg = format!(
        "{} — {}: no layout (status {:?})",
        map.variant,
        op.name(),
        map.status
    );
    let w = 24 + text_width(msg.chars().count(), 6.8);
    format!(
        r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{w}" height="40" viewBox="0 0 {w} 40">
<rect width="{w}" height="40" fill="#fff"/>
<text x="12" y="24" font-family="monospace" font-size="11px">{}</text>
</svg>
"##,
        esc(&msg)
    )
}
