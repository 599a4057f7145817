//! A shared-memory tile as it lies in memory: lines of 128 bytes from the descriptor's start,
//! eight 16-byte chunks a line, each chunk that holds elements coloured by which 16-byte block of
//! its row (or column) it holds and labelled with that row (or column). A swizzle mode then
//! shows as its XOR pattern: the blocks of consecutive lines trade places in a staircase that
//! repeats every 2, 4 or 8 lines (32B, 64B, 128B), and stay put without one.
//!
//! Lines no element reaches are left out, a gap band saying how many; a thicker rule marks every
//! 1024 bytes (the span of the widest XOR pattern).

use super::super::svg::{esc, text_width};
use crate::palette::lane_rgb;
use crate::wgmma::desc::{Desc, Major};
use crate::wgmma::grid::{ChunkHolds, TileGrid, axis_names};
use std::collections::BTreeSet;
use std::fmt::Write;

/// What every shared-memory picture carries in its `<title>`.
pub const TILE_SVG_MARKER: &str = " shared-memory map</title>";

const LINE: i64 = 128;
const CW: u32 = 44;
const CH: u32 = 18;
const GAP: u32 = 16;
const X0: u32 = 70;
const TOP: u32 = 82;

/// Colour of the `b`-th 16-byte block of a row or column: eight light hues, then again shifted.
fn block_colour(b: u32) -> String {
    // Hue steps of 135°: neighbouring blocks (the only two of a 32-byte row) far apart.
    let (r, g, bl) = lane_rgb((b * 12 + (b / 8) * 2) % 32);
    format!("#{r:02x}{g:02x}{bl:02x}")
}

/// What the picture says around the tile.
pub struct TileCaption<'a> {
    /// The map's name: its variant or study stem.
    pub title: &'a str,
    /// Element type, e.g. `bf16`.
    pub elem: String,
    pub major: Major,
    pub desc: Desc,
    /// `measured on NVIDIA H200` or the emulator's disclaimer.
    pub who: String,
    pub failed: bool,
}

/// The label and block of one chunk: its text, and (whether it holds part of a row, which
/// block of it) for its colour.
fn chunk_label(t: &TileGrid, h: &ChunkHolds) -> (String, Option<(bool, u32)>) {
    let (rn, cn) = axis_names(&t.operand);
    let per = t.per_chunk();
    match *h {
        ChunkHolds::Row { row, first, .. } => (format!("{rn}{row}"), Some((true, first / per))),
        ChunkHolds::Col { col, first, .. } => (format!("{cn}{col}"), Some((false, first / per))),
        ChunkHolds::Mixed { .. } => ("mix".into(), None),
    }
}

pub fn tile_svg(t: &TileGrid, cap: &TileCaption) -> String {
    let chunks = t.chunks();
    let (rn, cn) = axis_names(&t.operand);
    let per = t.per_chunk();
    // Lines to draw: each occupied one; a run of empty lines between them becomes a gap band.
    let lines: BTreeSet<i64> = chunks.iter().map(|(i, _)| i.div_euclid(8)).collect();
    let mut ys: Vec<(i64, u32)> = Vec::new();
    let mut gaps: Vec<(u32, i64, i64)> = Vec::new();
    let mut y = TOP;
    let mut prev: Option<i64> = None;
    for &l in &lines {
        if let Some(p) = prev
            && l > p + 1
        {
            gaps.push((y, p + 1, l - 1));
            y += GAP;
        }
        ys.push((l, y));
        y += CH;
        prev = Some(l);
    }
    let grid_bottom = y;
    let d = &cap.desc;
    let title = format!("{} — {}", cap.title, t.operand);
    let subtitle = format!(
        "{}{} ({rn}×{cn} = {}×{}, {}), {}-major, swizzle {} · {}",
        if cap.failed { "FAILED · " } else { "" },
        t.operand,
        t.rows,
        t.cols,
        cap.elem,
        cap.major,
        d.swizzle,
        cap.who
    );
    let sub2 = format!(
        "descriptor start {}, LBO {}, SBO {}, base offset {}; lines of 128 bytes from the start",
        d.start, d.lbo, d.sbo, d.base_offset
    );
    let key = "a chunk's colour: which 16 bytes of its row (or column) it holds; its text: that row (or column)";
    // Legend: one swatch per (kind, block) present.
    let blocks: BTreeSet<(bool, u32)> = chunks
        .iter()
        .filter_map(|(_, h)| chunk_label(t, h).1)
        .collect();
    let legend_top = grid_bottom + 36;
    let content_w = (X0 + 8 * CW)
        .max(12 + text_width(title.chars().count(), 8.5))
        .max(12 + text_width(subtitle.chars().count(), 6.8))
        .max(12 + text_width(sub2.chars().count(), 6.8))
        .max(12 + text_width(key.chars().count(), 6.8));
    let per_line = (content_w.saturating_sub(12) / 130).max(1);
    let legend_rows = (blocks.len() as u32).div_ceil(per_line).max(1);
    let width = content_w + 12;
    let height = legend_top + legend_rows * 18 + 12;

    let mut s = String::with_capacity(120 * chunks.len() + 4096);
    let _ = writeln!(
        s,
        r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{width}" height="{height}" viewBox="0 0 {width} {height}">
<title>{} — {}{TILE_SVG_MARKER}
<style type="text/css"><![CDATA[text{{font-family:monospace;font-size:10px;text-anchor:middle;fill:#000}}.h{{font-size:14px;font-weight:bold;text-anchor:start}}.s{{font-size:11px;text-anchor:start}}.i text{{font-size:9px;fill:#555}}.r text{{text-anchor:end}}]]></style>
<rect width="{width}" height="{height}" fill="#fff"/>
<text class="h" x="12" y="20">{}</text>
<text class="s" x="12" y="37">{}</text>
<text class="s" x="12" y="53">{}</text>"##,
        esc(cap.title),
        t.operand,
        esc(&title),
        esc(&subtitle),
        esc(&sub2)
    );
    // Chunk offsets within a line, and each line's first byte.
    s.push_str(r#"<g class="i">"#);
    for c in 0..8 {
        let _ = write!(
            s,
            r#"<text x="{}" y="{}">+{}</text>"#,
            X0 + c * CW + CW / 2,
            TOP - 6,
            c * 16
        );
    }
    s.push_str("</g>\n<g class=\"i r\">");
    for &(l, y) in &ys {
        let _ = write!(
            s,
            r#"<text x="{}" y="{}">{}</text>"#,
            X0 - 4,
            y + CH / 2 + 3,
            l * LINE
        );
    }
    s.push_str("</g>\n");
    // Every drawn line grey, then the chunks: one stroked path per colour, a label each.
    let mut d = String::new();
    for &(_, y) in &ys {
        let _ = write!(d, "M{X0} {}h{}", y + CH / 2, 8 * CW);
    }
    let _ = writeln!(
        s,
        r##"<g fill="none" stroke-width="{}"><path stroke="#eee" d="{d}"/>"##,
        CH - 1
    );
    let mut paths: std::collections::BTreeMap<Option<u32>, String> = Default::default();
    let mut labels = String::new();
    for (i, h) in &chunks {
        let l = i.div_euclid(8);
        let Some(&(_, y)) = ys.iter().find(|(x, _)| *x == l) else {
            continue;
        };
        let x = X0 + (i.rem_euclid(8) as u32) * CW;
        let (text, block) = chunk_label(t, h);
        let _ = write!(
            paths.entry(block.map(|b| b.1)).or_default(),
            "M{} {}h{}",
            x + 1,
            y + CH / 2,
            CW - 2
        );
        let _ = write!(
            labels,
            r#"<text x="{}" y="{}">{text}</text>"#,
            x + CW / 2,
            y + 13
        );
    }
    for (b, d) in &paths {
        let colour = b.map(block_colour).unwrap_or_else(|| "#999".into());
        let _ = writeln!(s, r#"<path stroke="{colour}" d="{d}"/>"#);
    }
    let _ = writeln!(s, "</g>\n<g>{labels}</g>");
    for &(y, a, b) in &gaps {
        let _ = writeln!(
            s,
            r#"<text class="s" x="{X0}" y="{}">⋯ {} empty line{} (bytes {}–{})</text>"#,
            y + 12,
            b - a + 1,
            if a == b { "" } else { "s" },
            a * LINE,
            (b + 1) * LINE - 1
        );
    }
    // Frame of each drawn stretch, a rule every 1024 bytes.
    let mut d = String::new();
    let mut k = 0;
    while k < ys.len() {
        let mut e = k;
        while e + 1 < ys.len() && ys[e + 1].0 == ys[e].0 + 1 {
            e += 1;
        }
        let (y0, y1) = (ys[k].1, ys[e].1 + CH);
        let _ = write!(d, "M{X0} {y0}h{}v{}h-{}z", 8 * CW, y1 - y0, 8 * CW);
        for &(l, y) in &ys[k..=e] {
            if l.rem_euclid(8) == 0 && y > y0 {
                let _ = write!(d, "M{X0} {y}h{}", 8 * CW);
            }
        }
        k = e + 1;
    }
    let _ = writeln!(
        s,
        r##"<path d="{d}" fill="none" stroke="#333" stroke-width="1.5"/>"##
    );
    // Legend.
    let _ = write!(
        s,
        r#"<g><text class="s" x="12" y="{}">{}</text>"#,
        legend_top - 8,
        esc(key)
    );
    for (n, &(row_kind, b)) in blocks.iter().enumerate() {
        let (x, y) = (
            12 + (n as u32 % per_line) * 130,
            legend_top + (n as u32 / per_line) * 18,
        );
        let what = if row_kind { cn } else { rn };
        let _ = write!(
            s,
            r#"<rect x="{x}" y="{y}" width="24" height="14" fill="{}"/><text class="s" x="{}" y="{}">{what} {}</text>"#,
            block_colour(b),
            x + 28,
            y + 11,
            crate::report::md::span(b * per, b * per + per - 1)
        );
    }
    s.push_str("</g>\n</svg>\n");
    s
}
