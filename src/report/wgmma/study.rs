//! The markdown page of a shared-memory study (`fp4probe.wgmma-smem/1`): the packed tiles as
//! pictures, their fitted closed forms (XOR pattern and the byte weight of every coordinate
//! bit), and what each point of the LBO / SBO / start / base-offset sweep did, as a table and
//! in words. Every statement is derived from the study's JSON: a point's words compare its
//! fits with those of the point it varies.

use super::super::GENERATED;
use super::super::md::{
    cell, code, data_links, plural, provenance_section, ptx_section, status_section, work_line,
};
use super::{INDEX_LINK, INDEX_NAME, Pictures};
use crate::wgmma::WgVariant;
use crate::wgmma::desc::Desc;
use crate::wgmma::map::WgSmemMap;
use crate::wgmma::smem::{SmemFit, SweepPoint};
use std::fmt::Write;

fn num(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

fn desc_cell(d: &Desc) -> String {
    format!("{}, {}, {}, {}", d.start, d.lbo, d.sbo, d.base_offset)
}

/// The point `sweep[i]` varies: the one whose label is the longest proper prefix of its own
/// (`start+256, base offset 2` varies `start+256`), else the first (packed) point.
pub fn reference(sweep: &[SweepPoint], i: usize) -> Option<&SweepPoint> {
    if i == 0 {
        return None;
    }
    let parts: Vec<&str> = sweep[i].label.split(", ").collect();
    (1..parts.len())
        .rev()
        .find_map(|n| {
            let pre = parts[..n].join(", ");
            sweep[..i].iter().find(|p| p.label == pre)
        })
        .or(sweep.first())
}

/// Descriptor fields that differ: (name, before, after).
fn field_changes(a: &Desc, b: &Desc) -> Vec<(&'static str, u32, u32)> {
    [
        ("start", a.start, b.start),
        ("LBO", a.lbo, b.lbo),
        ("SBO", a.sbo, b.sbo),
        ("base offset", a.base_offset, b.base_offset),
    ]
    .into_iter()
    .filter(|(_, x, y)| x != y)
    .collect()
}

fn changes_text(c: &[(&str, u32, u32)]) -> String {
    if c.is_empty() {
        return "no field".into();
    }
    c.iter()
        .map(|(n, x, y)| format!("{n} {x} → {y}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `row bits 3–5` style groups of (coord, bit) pairs, contiguous bits together.
fn bit_groups(bits: &[(String, u32)]) -> Vec<(String, u32, u32)> {
    let mut out: Vec<(String, u32, u32)> = Vec::new();
    for (c, b) in bits {
        match out.last_mut() {
            Some((lc, _, hi)) if lc == c && *hi + 1 == *b => *hi = *b,
            _ => out.push((c.clone(), *b, *b)),
        }
    }
    out
}

/// The weights of a fit as `row: 128, 256 (bits 0–1); col: 2, 4 (bits 0–1)`.
fn weights_text(f: &SmemFit) -> String {
    let mut parts = Vec::new();
    for coord in ["row", "col"] {
        let w: Vec<_> = f.weights.iter().filter(|w| w.coord == coord).collect();
        if w.is_empty() {
            continue;
        }
        let vals: Vec<String> = w.iter().map(|w| num(w.bytes)).collect();
        parts.push(format!(
            "{coord} bit{} {}: {}",
            if w.len() == 1 { "" } else { "s" },
            super::super::md::span(w[0].bit, w[w.len() - 1].bit),
            vals.join(", ")
        ));
    }
    format!("origin {}; {}", num(f.origin), parts.join("; "))
}

fn under(f: &SmemFit) -> String {
    f.fits_under
        .iter()
        .map(|x| x.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// How operand `op`'s fit at a point differs from the reference point's, and which changed
/// descriptor field the changed weights follow.
fn fit_words(
    op: &str,
    old: Option<&SmemFit>,
    new: Option<&SmemFit>,
    changed: &[(&str, u32, u32)],
) -> String {
    let (o, n) = match (old, new) {
        (_, None) => return format!("{op}: no closed form fits"),
        (None, Some(n)) => return format!("{op}: {}", code(&n.formula)),
        (Some(o), Some(n)) => (o, n),
    };
    let mut diffs = Vec::new();
    if o.xor != n.xor {
        diffs.push(format!("XOR pattern {} → {}", o.xor, n.xor));
    }
    if o.origin != n.origin {
        diffs.push(format!("origin {} → {} B", num(o.origin), num(n.origin)));
    }
    let weight = |f: &SmemFit, c: &str, b: u32| {
        f.weights
            .iter()
            .find(|w| w.coord == c && w.bit == b)
            .map(|w| w.bytes)
    };
    let mut moved: Vec<(String, u32)> = Vec::new();
    for w in o.weights.iter().chain(&n.weights) {
        let k = (w.coord.clone(), w.bit);
        if weight(o, &w.coord, w.bit) != weight(n, &w.coord, w.bit) && !moved.contains(&k) {
            moved.push(k);
        }
    }
    moved.sort_by_key(|(c, b)| (c != "row", *b));
    for (c, lo, hi) in bit_groups(&moved) {
        let show = |f: &SmemFit| {
            (lo..=hi)
                .map(|b| weight(f, &c, b).map(num).unwrap_or_else(|| "—".into()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut text = format!(
            "{c} bit{} {}: {} → {} B",
            if lo == hi { "" } else { "s" },
            super::super::md::span(lo, hi),
            show(o),
            show(n)
        );
        // A field whose old and new values the group's lowest weights are, doubling above it.
        let follows = changed.iter().find(|(_, f0, f1)| {
            *f0 > 0
                && (lo..=hi).all(|b| {
                    let scale = f64::from(1u32 << (b - lo));
                    weight(o, &c, b) == Some(f64::from(*f0) * scale)
                        && weight(n, &c, b) == Some(f64::from(*f1) * scale)
                })
        });
        if let Some((name, _, _)) = follows {
            let var = if lo == 0 {
                c.clone()
            } else {
                format!("{c}/{}", 1u64 << lo)
            };
            let _ = write!(text, " ({name} is the byte step of {var})");
        }
        diffs.push(text);
    }
    // Anything else the form says (a pattern's phase, say) shows in its text.
    if diffs.is_empty() && o.formula != n.formula {
        diffs.push(format!("form {} → {}", code(&o.formula), code(&n.formula)));
    }
    if diffs.is_empty() {
        let mut t = format!("{op}: the same form");
        if o.fits_under != n.fits_under {
            let _ = write!(t, " (linear under {} → only {})", under(o), under(n));
        }
        t
    } else {
        format!("{op}: {}", diffs.join("; "))
    }
}

pub fn render(map: &WgSmemMap, v: &WgVariant, pictures: &Pictures) -> String {
    let mut s = String::new();
    let stem = map.stem();
    let p = &map.provenance;
    let _ = writeln!(
        s,
        "{GENERATED}\n\n# Shared memory: {}-bit elements, {}-major, swizzle {}\n",
        map.elem_bits, map.major, map.swizzle
    );
    let failure = map
        .sweep
        .iter()
        .find(|x| !x.passed)
        .map(|x| match &x.failure {
            Some(f) => format!("sweep point `{}`: {f}", x.label),
            None => format!("sweep point `{}` failed validation", x.label),
        });
    status_section(&mut s, map.status, p, failure.as_deref());
    let _ = writeln!(
        s,
        "Probed through {} (`{}`): A (m64 × k{}) and B (k{} × n{}) read from shared memory by one wgmma, {}-major, under the {} swizzle mode; each element's place found by one-hot values in shared memory, not from the documentation.\n",
        code(&v.id()),
        v.opcode(),
        v.a_k(),
        v.k,
        v.n,
        map.major,
        map.swizzle
    );
    if pictures.links {
        data_links(&mut s, &stem, true, INDEX_NAME, INDEX_LINK);
    }
    provenance_section(
        &mut s,
        p,
        work_line(
            map.timing.work.experiments,
            map.timing.work.launches,
            &format!(
                " over {}",
                plural(
                    map.sweep.len() as u64,
                    "descriptor setting",
                    "descriptor settings"
                )
            ),
            map.timing.wall_s,
        ),
    );
    let _ = writeln!(
        s,
        "\n## Reproduce\n\n```sh\nfp4probe wgmma smem --bits {} --major {} --swizzle {}\n```\n\nOn an sm_90a GPU (H100, H200) this measures the study again (`--backend cuda` refuses the emulator fallback); `-o DIR` names the folder. `fp4probe report` turns it into this page.\n",
        map.elem_bits, map.major, map.swizzle
    );

    // The packed tiles.
    let packed = map.sweep.first();
    s.push_str("## The tiles in shared memory\n\n");
    if let Some(pk) = packed {
        let _ = writeln!(
            s,
            "The packed setting (`{}`): A's descriptor start, LBO, SBO, base offset = {}; B's = {}. Each picture line is 128 bytes from the descriptor's start (1024-byte aligned here, so the XOR pattern reads the offsets as drawn); a 16-byte chunk's colour says which 16 bytes of its row or column it holds and its text which row or column. Under a swizzle mode the chunks of consecutive lines trade places in the XOR pattern; without one they stay in order.\n",
            pk.label,
            desc_cell(&pk.setting.a_desc),
            desc_cell(&pk.setting.b_desc)
        );
    }
    for op in ["A", "B"] {
        if pictures.tiles.iter().any(|t| t == op) {
            let _ = writeln!(s, "![{op}]({stem}.{op}.svg)\n");
        }
    }
    if map.a.is_empty() && map.b.is_empty() {
        s.push_str("No map was inferred under the packed setting.\n\n");
    }

    // Closed forms.
    s.push_str("## Closed forms\n\nFitted to the packed maps: `byte = X(start + origin + Σ weight · bit) − start` over the bits of row and col (A: row = m, col = k; B: row = k, col = n), X the XOR of address bits [4, 4+s) with [7, 7+s) that makes the map linear (none, 32B, 64B or 128B for s = 0…3); where several do, the one with the fewest weight bits is kept and the others are listed.\n\n| operand | XOR pattern | form | linear also under | weights (bytes) |\n| --- | --- | --- | --- | --- |\n");
    for (op, f) in [("A", &map.a_fit), ("B", &map.b_fit)] {
        match f {
            Some(f) => {
                let _ = writeln!(
                    s,
                    "| {op} | {} | {} | {} | {} |",
                    f.xor,
                    code(&f.formula),
                    under(f),
                    cell(&weights_text(f))
                );
            }
            None => {
                let _ = writeln!(s, "| {op} | — | no closed form fits | — | — |");
            }
        }
    }
    s.push('\n');

    // The sweep.
    s.push_str("## Descriptor sweep\n\nEach point changes descriptor fields of both tiles from the packed setting (or from the point it extends), probes again, validates, and fits again.\n\n| point | A: start, LBO, SBO, base offset | B: start, LBO, SBO, base offset | validated | A form | B form |\n| --- | --- | --- | --- | --- | --- |\n");
    for x in &map.sweep {
        let form = |f: &Option<SmemFit>| {
            f.as_ref()
                .map(|f| code(&f.formula))
                .unwrap_or_else(|| "—".into())
        };
        let result = match (x.passed, &x.failure) {
            (true, _) => "pass".to_string(),
            (false, Some(f)) => format!("**FAIL**: {}", cell(f)),
            (false, None) => "**FAIL**".to_string(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {result} | {} | {} |",
            cell(&x.label),
            desc_cell(&x.setting.a_desc),
            desc_cell(&x.setting.b_desc),
            form(&x.a_fit),
            form(&x.b_fit)
        );
    }
    s.push_str("\nWhat each point did, against the point it varies:\n\n");
    for (i, x) in map.sweep.iter().enumerate() {
        let Some(r) = reference(&map.sweep, i) else {
            let _ = writeln!(
                s,
                "- **{}**: the reference, the tiles pictured above.",
                x.label
            );
            continue;
        };
        let ca = field_changes(&r.setting.a_desc, &x.setting.a_desc);
        let cb = field_changes(&r.setting.b_desc, &x.setting.b_desc);
        let what = if ca == cb {
            format!("A and B: {}", changes_text(&ca))
        } else {
            format!("A: {}; B: {}", changes_text(&ca), changes_text(&cb))
        };
        let body = if !x.passed {
            format!(
                "failed{}",
                x.failure
                    .as_deref()
                    .map(|f| format!(": {f}"))
                    .unwrap_or_default()
            )
        } else {
            format!(
                "{}. {}.",
                fit_words("A", r.a_fit.as_ref(), x.a_fit.as_ref(), &ca),
                fit_words("B", r.b_fit.as_ref(), x.b_fit.as_ref(), &cb)
            )
        };
        let _ = writeln!(
            s,
            "- **{}** ({what}; against `{}`): {body}",
            x.label, r.label
        );
    }
    s.push('\n');
    ptx_section(&mut s, p);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wgmma::desc::Swizzle;
    use crate::wgmma::smem::Weight;

    /// A fit as a record holds it (fields a record may leave out take their defaults).
    fn fit(xor: Swizzle, origin: f64, rows: &[f64]) -> SmemFit {
        let weights: Vec<Weight> = rows
            .iter()
            .enumerate()
            .map(|(b, &w)| Weight {
                coord: "row".into(),
                bit: b as u32,
                bytes: w,
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "xor": xor,
            "origin": origin,
            "weights": weights,
            "formula": format!("{xor} {origin} {rows:?}"),
            "fits_under": [xor],
        }))
        .unwrap()
    }

    #[test]
    fn words_name_the_field_a_weight_follows() {
        let o = fit(Swizzle::None, 0.0, &[16.0, 32.0, 64.0, 256.0, 512.0]);
        let n = fit(Swizzle::None, 0.0, &[16.0, 32.0, 64.0, 512.0, 1024.0]);
        let w = fit_words("A", Some(&o), Some(&n), &[("SBO", 256, 512)]);
        assert_eq!(
            w,
            "A: row bits 3–4: 256, 512 → 512, 1024 B (SBO is the byte step of row/8)"
        );
        assert_eq!(
            fit_words("B", Some(&o), Some(&o), &[("LBO", 128, 256)]),
            "B: the same form"
        );
        let mut p = o.clone();
        p.formula =
            "byte = xor64B(start + 16·row) - start, XOR phase = address bits [7, 9) − 2".into();
        assert!(fit_words("A", Some(&o), Some(&p), &[]).starts_with("A: form `"));
        let m = fit(Swizzle::B64, 32.0, &[16.0, 32.0, 64.0, 256.0, 512.0]);
        assert_eq!(
            fit_words("A", Some(&o), Some(&m), &[]),
            "A: XOR pattern none → 64B; origin 0 → 32 B"
        );
        assert_eq!(
            fit_words("A", Some(&o), None, &[]),
            "A: no closed form fits"
        );
    }
}
