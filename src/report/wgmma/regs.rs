//! One register operand of a wgmma lane map as an SVG grid: D and C are 64 × N, A (from
//! registers) 64 × K. A cell is coloured by the lane (thread % 32) that holds it, in the lane
//! palette of the `mma.sync` pictures; the warpgroup's four warps are told apart by a band in
//! the warp's colour beside the rows it holds and a thick line wherever the owning warp changes
//! between neighbouring cells (both read from the map, not assumed).
//!
//! To stay small, the cells one thread holds in consecutive registers along a row (a [`Run`])
//! are one rectangle, and a thread's runs on one row are one `<path>`. Small operands (at most
//! 16 columns) print the thread (`T37`) and the run's registers (`r2–3`) in the cells; larger
//! ones carry them in the path's `<title>` (shown on hover) instead.

use super::super::md::span;
use super::super::svg::{esc, failed_prefix, text_width, who};
use crate::formats::ElemType;
use crate::palette::{lane_rgb, warp_rgb};
use crate::wgmma::grid::{RegGrid, Run, axis_names};
use crate::wgmma::map::WgLaneMap;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Operands with at most this many columns print their labels in the cells.
pub const LABEL_MAX_COLS: u32 = 16;
/// Top of the grid: title, subtitle, axis name and column indices above it.
const GRID_TOP: u32 = 76;
/// Left edge of the warp band.
const BAND_X: u32 = 12;
const BAND_W: u32 = 16;
/// Left edge of the grid: band, gap, row indices.
const X0: u32 = BAND_X + BAND_W + 22;
/// Advance of one 10 px monospace character, rounded up.
const CHAR: f64 = 6.1;

fn hex((r, g, b): (u8, u8, u8)) -> String {
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// Cell width and height of a grid's picture.
fn cell_size(g: &RegGrid, runs: &[Run]) -> (u32, u32) {
    if g.cols <= LABEL_MAX_COLS {
        // Wide enough that every run's two labels fit over it.
        let need = runs
            .iter()
            .map(|r| {
                let chars = format!("T{}", r.thread)
                    .len()
                    .max(r.regs(g.elems_per_reg).chars().count());
                (text_width(chars, CHAR) + 6).div_ceil(r.len)
            })
            .max()
            .unwrap_or(0);
        (need.clamp(26, 60), 26)
    } else if g.cols <= 64 {
        (10, 10)
    } else {
        (5, 10)
    }
}

/// The picture of one register operand of `map`; `elem` is its element type.
pub fn reg_svg(map: &WgLaneMap, g: &RegGrid, elem: ElemType) -> String {
    let runs = g.runs();
    let labelled = g.cols <= LABEL_MAX_COLS;
    let (cw, ch) = cell_size(g, &runs);
    let (rows, cols) = (g.rows, g.cols);
    let (gw, gh) = (cols * cw, rows * ch);
    let (rn, cn) = axis_names(&g.operand);
    let op = g.operand.as_str();

    let title = map.variant.clone();
    let who = who(&map.provenance);
    let status = failed_prefix(map.status);
    let subtitle = format!(
        "{status}{op} ({rn}×{cn} = {rows}×{cols}, {elem}), {} reg{} × {} elem{} per thread, 128 threads = 4 warps · {who}",
        g.regs,
        if g.regs == 1 { "" } else { "s" },
        g.elems_per_reg,
        if g.elems_per_reg == 1 { "" } else { "s" },
    );
    let how = if labelled {
        "cell: T<thread> over the registers its run of cells holds, left to right (r2–3: r2 then r3; r2: all of r2's elements)"
    } else {
        "hover a cell: its thread, warp, lane and registers"
    };
    let content_w = (X0 + gw)
        .max(12 + text_width(title.chars().count(), 8.5))
        .max(12 + text_width(subtitle.chars().count(), 6.8))
        .max(12 + text_width(how.chars().count(), 6.8));
    // Legend: the four warps, then 32 lane swatches, 32 or 16 to a row.
    let sw = 22;
    let per_row = if 12 + 32 * (sw + 2) <= content_w {
        32
    } else {
        16
    };
    let legend_top = GRID_TOP + gh + 24;
    let lanes_top = legend_top + 28;
    let width = content_w.max(12 + per_row * (sw + 2)).max(12 + 4 * 150) + 12;
    let height = lanes_top + (32 / per_row) * (sw + 2) + 30;

    let mut s = String::with_capacity(64 * runs.len() + 8192);
    let _ = writeln!(
        s,
        r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{width}" height="{height}" viewBox="0 0 {width} {height}">
<title>{} — {op} lane map</title>"##,
        esc(&title)
    );
    // Lane and warp colours as classes: a cell names its lane once, in `class`.
    s.push_str("<style type=\"text/css\"><![CDATA[text{font-family:monospace;font-size:10px;text-anchor:middle;fill:#000}.h{font-size:14px;font-weight:bold;text-anchor:start}.s{font-size:11px;text-anchor:start}.a{font-size:11px;fill:#333}.i text{font-size:9px;fill:#555}.r text{text-anchor:end}.b{fill:#fff;font-weight:bold}");
    s.push_str(".c path{fill:none}.e{fill:#ccc;stroke:#ccc}");
    for lane in 0..32 {
        let _ = write!(
            s,
            ".l{lane}{{fill:{c};stroke:{c}}}",
            c = hex(lane_rgb(lane))
        );
    }
    for w in 0..4 {
        let _ = write!(s, ".w{w}{{fill:{}}}", hex(warp_rgb(w)));
    }
    s.push_str("]]></style>\n");
    let _ = writeln!(
        s,
        r##"<rect width="{width}" height="{height}" fill="#fff"/>
<text class="h" x="12" y="20">{}</text>
<text class="s" x="12" y="37">{}</text>
<text class="a s" x="{X0}" y="56">{cn} (col) →</text>"##,
        esc(&title),
        esc(&subtitle),
    );
    // Column and row indices: all of them on labelled grids, every 8th otherwise.
    let step = if labelled { 1 } else { 8 };
    s.push_str(r#"<g class="i">"#);
    for c in (0..cols).step_by(step) {
        let x = if labelled {
            X0 + c * cw + cw / 2
        } else {
            X0 + c * cw + 4
        };
        let _ = write!(s, r#"<text x="{x}" y="{}">{c}</text>"#, GRID_TOP - 6);
    }
    s.push_str("</g>\n<g class=\"i r\">");
    for r in (0..rows).step_by(step) {
        let y = if labelled {
            GRID_TOP + r * ch + ch / 2 + 3
        } else {
            GRID_TOP + r * ch + 8
        };
        let _ = write!(s, r#"<text x="{}" y="{y}">{r}</text>"#, X0 - 4);
    }
    s.push_str("</g>\n");
    bands(&mut s, g, ch);
    cells(&mut s, g, &runs, cw, ch, labelled);
    lines(&mut s, g, cw, ch);
    legend(&mut s, how, legend_top, lanes_top, per_row, sw);
    s.push_str("</svg>\n");
    s
}

/// The warp band: for each stretch of rows one warp holds entirely, a bar in its colour.
fn bands(s: &mut String, g: &RegGrid, ch: u32) {
    s.push_str("<g>");
    let mut r = 0;
    while r < g.rows {
        let w = g.row_warp(r);
        let mut end = r + 1;
        while end < g.rows && g.row_warp(end) == w {
            end += 1;
        }
        let (y, h) = (GRID_TOP + r * ch, (end - r) * ch);
        let class = w.map(|w| format!("w{w}")).unwrap_or_else(|| "e".into());
        let _ = write!(
            s,
            r#"<rect class="{class}" x="{BAND_X}" y="{y}" width="{BAND_W}" height="{h}"/>"#
        );
        if let Some(w) = w
            && h >= 52
        {
            let _ = write!(
                s,
                r#"<text class="b" transform="translate({},{}) rotate(-90)">warp {w}</text>"#,
                BAND_X + BAND_W / 2 + 4,
                y + h / 2
            );
        }
        r = end;
    }
    s.push_str("</g>\n");
}

/// A run as a path segment: a horizontal stroke `ch − 1` wide through the middle of its cells,
/// 1 px short at each end so that neighbouring runs stay apart. `y` is the row's top.
fn segment(d: &mut String, r: &Run, cw: u32, ch: u32, y: u32) {
    let _ = write!(
        d,
        "M{} {}h{}",
        X0 + r.col * cw + 1,
        y + ch / 2,
        (r.len * cw).saturating_sub(2).max(1)
    );
}

/// The cells. Labelled grids: one path per lane over the whole grid, then per matrix row a
/// `<g>` of thread labels and one of register labels. Other grids: per matrix row, a path per
/// thread whose `<title>` names the thread and the registers of each of its runs.
fn cells(s: &mut String, g: &RegGrid, runs: &[Run], cw: u32, ch: u32, labelled: bool) {
    let _ = writeln!(s, r#"<g class="c" stroke-width="{}">"#, ch - 1);
    if labelled {
        let mut by_lane: BTreeMap<u32, String> = BTreeMap::new();
        for r in runs {
            segment(
                by_lane.entry(r.thread % 32).or_default(),
                r,
                cw,
                ch,
                GRID_TOP + r.row * ch,
            );
        }
        for (lane, d) in by_lane {
            let _ = writeln!(s, r#"<path class="l{lane}" d="{d}"/>"#);
        }
        for row in runs.chunk_by(|a, b| a.row == b.row) {
            let top = GRID_TOP + row[0].row * ch;
            for (dy, label) in [(10, true), (21, false)] {
                let _ = write!(s, r#"<g transform="translate(0,{})">"#, top + dy);
                for r in row {
                    let text = if label {
                        format!("T{}", r.thread)
                    } else {
                        r.regs(g.elems_per_reg)
                    };
                    let _ = write!(
                        s,
                        r#"<text x="{}">{text}</text>"#,
                        X0 + r.col * cw + r.len * cw / 2
                    );
                }
                s.push_str("</g>");
            }
            s.push('\n');
        }
    } else {
        for row in runs.chunk_by(|a, b| a.row == b.row) {
            let r0 = row[0].row;
            let _ = write!(s, r#"<g transform="translate(0,{})">"#, GRID_TOP + r0 * ch);
            // Threads in order of their first cell.
            let mut threads: Vec<u32> = Vec::new();
            for r in row {
                if !threads.contains(&r.thread) {
                    threads.push(r.thread);
                }
            }
            for t in threads {
                let mine: Vec<&Run> = row.iter().filter(|r| r.thread == t).collect();
                let mut d = String::new();
                for r in &mine {
                    segment(&mut d, r, cw, ch, 0);
                }
                let what: Vec<String> = mine
                    .iter()
                    .map(|r| {
                        format!(
                            "{} in col {}",
                            r.regs(g.elems_per_reg),
                            span(r.col, r.col + r.len - 1)
                        )
                    })
                    .collect();
                let _ = write!(
                    s,
                    r#"<path class="l{}" d="{d}"><title>T{t} (warp {} lane {}) row {r0}: {}</title></path>"#,
                    t % 32,
                    t / 32,
                    t % 32,
                    what.join(", ")
                );
            }
            s.push_str("</g>\n");
        }
    }
    // Cells no slot holds, grey.
    let mut d = String::new();
    for row in 0..g.rows {
        for c in 0..g.cols {
            if g.at(row, c).is_none() {
                let _ = write!(
                    d,
                    "M{} {}h{}",
                    X0 + c * cw + 1,
                    GRID_TOP + row * ch + ch / 2,
                    cw.saturating_sub(2).max(1)
                );
            }
        }
    }
    if !d.is_empty() {
        let _ = writeln!(
            s,
            r#"<path class="e" d="{d}"><title>held by no slot</title></path>"#
        );
    }
    s.push_str("</g>\n");
}

/// The maximal runs of `0..inner` along which `edge(outer, inner)` holds, for each `outer`:
/// (outer, first inner, length).
fn stretches(
    outer: std::ops::Range<u32>,
    inner: u32,
    edge: impl Fn(u32, u32) -> bool,
) -> Vec<(u32, u32, u32)> {
    let mut out = Vec::new();
    for o in outer {
        let mut i = 0;
        while i < inner {
            let start = i;
            while i < inner && edge(o, i) {
                i += 1;
            }
            if i > start {
                out.push((o, start, i - start));
            } else {
                i += 1;
            }
        }
    }
    out
}

/// The frame, a thin line every 8 rows and columns, and a thick one between cells of
/// different warps.
fn lines(s: &mut String, g: &RegGrid, cw: u32, ch: u32) {
    let (gw, gh) = (g.cols * cw, g.rows * ch);
    let mut d = format!("M{X0} {GRID_TOP}h{gw}v{gh}h-{gw}z");
    for c in (8..g.cols).step_by(8) {
        let _ = write!(d, "M{} {GRID_TOP}v{gh}", X0 + c * cw);
    }
    for r in (8..g.rows).step_by(8) {
        let _ = write!(d, "M{X0} {}h{gw}", GRID_TOP + r * ch);
    }
    let _ = writeln!(s, r##"<path d="{d}" fill="none" stroke="#333"/>"##);
    let warp = |r: u32, c: u32| g.at(r, c).map(|o| o.warp());
    let mut d = String::new();
    // Horizontal edges between row r-1 and r, merged along the row; then vertical ones
    // between column c-1 and c, merged down the column.
    for (r, c, n) in stretches(1..g.rows, g.cols, |r, c| warp(r - 1, c) != warp(r, c)) {
        let _ = write!(d, "M{} {}h{}", X0 + c * cw, GRID_TOP + r * ch, n * cw);
    }
    for (c, r, n) in stretches(1..g.cols, g.rows, |c, r| warp(r, c - 1) != warp(r, c)) {
        let _ = write!(d, "M{} {}v{}", X0 + c * cw, GRID_TOP + r * ch, n * ch);
    }
    if !d.is_empty() {
        let _ = writeln!(
            s,
            r##"<path d="{d}" fill="none" stroke="#000" stroke-width="3"/>"##
        );
    }
}

fn legend(s: &mut String, how: &str, top: u32, lanes_top: u32, per_row: u32, sw: u32) {
    let _ = write!(
        s,
        r#"<g><text class="s" x="12" y="{}">{}</text>"#,
        top - 6,
        esc(how)
    );
    for w in 0..4 {
        let x = 12 + w * 150;
        let _ = write!(
            s,
            r#"<rect class="w{w}" x="{x}" y="{}" width="14" height="12"/><text class="s" x="{}" y="{}">warp {w}: T{}–T{}</text>"#,
            top + 2,
            x + 18,
            top + 12,
            32 * w,
            32 * w + 31
        );
    }
    let _ = write!(
        s,
        r#"<text class="s" x="12" y="{}">cell colour = lane = thread % 32:</text>"#,
        lanes_top - 4
    );
    for lane in 0..32 {
        let (x, y) = (
            12 + (lane % per_row) * (sw + 2),
            lanes_top + 4 + (lane / per_row) * (sw + 2),
        );
        let _ = write!(
            s,
            r#"<rect class="l{lane}" x="{x}" y="{y}" width="{sw}" height="{sw}"/><text x="{}" y="{}">{lane}</text>"#,
            x + sw / 2,
            y + 15
        );
    }
    s.push_str("</g>\n");
}
