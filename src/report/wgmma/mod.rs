//! Reports of the wgmma records: a page per register lane map (`fp4probe.wgmma-lanemap/1`,
//! from `fp4probe wgmma probe`) with a picture of every register operand and of the
//! shared-memory tiles the probe read, and a page per shared-memory study
//! (`fp4probe.wgmma-smem/1`, from `fp4probe wgmma smem`) with pictures of the packed tiles,
//! their closed forms and the descriptor sweep.
//!
//! - [`regs`] draws a 64 × N (or 64 × K) register operand, the four warps told apart;
//! - [`tile`] draws a tile as it lies in shared memory, 16-byte chunks in 128-byte lines;
//! - [`lanes`] and [`study`] write the pages.
//!
//! As for `mma.sync`, everything is a pure function of the record: the same file gives the same
//! bytes.

pub mod index;
mod lanes;
mod regs;
mod study;
mod tile;

pub use lanes::{PICTURE_MAX_N, pictured};
pub use regs::{LABEL_MAX_COLS, reg_svg};
pub use study::reference;
pub use tile::{TILE_SVG_MARKER, TileCaption, tile_svg};

use super::svg::who;
use super::{GENERATED, SVG_MARKER};
use crate::device::BackendKind;
use crate::layout::lanemap::Status;
use crate::outfile::{Ours, Outputs};
use crate::provenance::Provenance;
use crate::wgmma::WgVariant;
use crate::wgmma::desc::{Desc, Major};
use crate::wgmma::grid::{RegGrid, TileGrid, check_lane_map, check_study};
use crate::wgmma::map::{LANEMAP_SCHEMA, SMEM_SCHEMA, WgLaneMap, WgSmemMap};
use crate::wgmma::probe::SmemEntry;
use crate::wgmma::smem::{SmemFit, fit};
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

/// The index's wgmma section, as a page links it.
const INDEX_NAME: &str = "all maps and studies";
const INDEX_LINK: &str = "../../README.md#wgmma-warpgroup-mma-sm_90a";

/// What a page shows beyond its record: links to its data, and which pictures it has.
#[derive(Clone, Debug, Default)]
pub struct Pictures {
    /// The page sits next to its record: link the JSON, the CSV and the index.
    pub links: bool,
    /// Register operands pictured (`<stem>.<op>.svg`).
    pub regs: Vec<String>,
    /// Shared-memory tiles pictured (`<stem>.<op>.smem.svg` for lane maps, `<stem>.<op>.svg`
    /// for studies).
    pub tiles: Vec<String>,
}

/// A wgmma record read for reporting, checked against its variant.
#[derive(Clone, Debug)]
pub enum WgDoc {
    Lanes { map: WgLaneMap, v: WgVariant },
    Study { map: WgSmemMap, v: WgVariant },
}

/// The fitted form of shared-memory entries `[byte, bit, row, col]` read through a descriptor
/// whose start lies `start` bytes past a 1024-byte boundary.
pub fn smem_fit(entries: &[[i64; 4]], start: u32) -> Option<SmemFit> {
    let e: Vec<SmemEntry> = entries
        .iter()
        .map(|&[byte, bit, row, col]| SmemEntry {
            byte,
            bit: bit.clamp(0, 7) as u32,
            row: row.max(0) as u32,
            col: col.max(0) as u32,
        })
        .collect();
    fit(&e, start)
}

impl WgDoc {
    /// Parse and check a record whose schema is one of the two wgmma ones.
    pub fn from_value(path: &Path, value: serde_json::Value) -> Result<WgDoc> {
        let schema = value.get("schema").and_then(|s| s.as_str()).unwrap_or("");
        if schema == LANEMAP_SCHEMA {
            let map: WgLaneMap = serde_json::from_value(value)
                .with_context(|| format!("{}: not a wgmma lane map", path.display()))?;
            let v = check_lane_map(&map)
                .with_context(|| format!("{}: invalid wgmma lane map", path.display()))?;
            Ok(WgDoc::Lanes { map, v })
        } else if schema == SMEM_SCHEMA {
            let map: WgSmemMap = serde_json::from_value(value)
                .with_context(|| format!("{}: not a wgmma shared-memory study", path.display()))?;
            let v = check_study(&map).with_context(|| {
                format!("{}: invalid wgmma shared-memory study", path.display())
            })?;
            Ok(WgDoc::Study { map, v })
        } else {
            bail!(
                "{}: schema '{schema}' is neither '{LANEMAP_SCHEMA}' nor '{SMEM_SCHEMA}'",
                path.display()
            )
        }
    }

    /// Read a wgmma record from a file.
    pub fn load(path: &Path) -> Result<WgDoc> {
        WgDoc::from_value(path, super::parse(path)?)
    }

    /// File-name stem of the record and its page.
    pub fn stem(&self) -> String {
        match self {
            WgDoc::Lanes { map, .. } => map.variant.clone(),
            WgDoc::Study { map, .. } => map.stem(),
        }
    }

    pub fn provenance(&self) -> &Provenance {
        match self {
            WgDoc::Lanes { map, .. } => &map.provenance,
            WgDoc::Study { map, .. } => &map.provenance,
        }
    }

    pub fn backend(&self) -> BackendKind {
        self.provenance().backend
    }

    pub fn status(&self) -> Status {
        match self {
            WgDoc::Lanes { map, .. } => map.status,
            WgDoc::Study { map, .. } => map.status,
        }
    }

    /// Every file of the page: (name, content, the marker that makes it ours), page first.
    pub fn files(&self) -> Vec<(String, String, &'static str)> {
        let stem = self.stem();
        let mut pics = Pictures {
            links: true,
            ..Pictures::default()
        };
        let mut svgs = Vec::new();
        let caption =
            |title: &str, t: &TileGrid, major: Major, desc: Desc, failed: bool, v: &WgVariant| {
                tile_svg(
                    t,
                    &TileCaption {
                        title,
                        elem: v.a.to_string(),
                        major,
                        desc,
                        who: who(self.provenance()),
                        failed,
                    },
                )
            };
        let failed = self.status() == Status::Failed;
        let page = match self {
            WgDoc::Lanes { map, v } => {
                let grids = RegGrid::all(map, v);
                let d = grids.iter().find(|g| g.operand == "D");
                for g in &grids {
                    let repeats_d = g.operand == "C" && d.is_some_and(|d| g.same_cells(d));
                    if pictured(v, &g.operand) && !repeats_d {
                        let elem = if g.operand == "A" { v.a } else { v.d };
                        svgs.push((
                            format!("{stem}.{}.svg", g.operand),
                            reg_svg(map, g, elem),
                            SVG_MARKER,
                        ));
                        pics.regs.push(g.operand.clone());
                    }
                }
                if !map.registers.is_empty() {
                    for t in TileGrid::of_lane_map(map, v) {
                        let (major, desc) = if t.operand == "A" {
                            (map.setting.a_major, map.setting.a_desc)
                        } else {
                            (map.setting.b_major, map.setting.b_desc)
                        };
                        svgs.push((
                            format!("{stem}.{}.smem.svg", t.operand),
                            caption(&map.variant, &t, major, desc, failed, v),
                            TILE_SVG_MARKER,
                        ));
                        pics.tiles.push(t.operand.clone());
                    }
                }
                lanes::render(map, v, &pics)
            }
            WgDoc::Study { map, v } => {
                if let Some(pk) = map.sweep.first() {
                    for t in TileGrid::of_study(map, v) {
                        if t.empty_cells() == (t.rows * t.cols) as usize {
                            continue;
                        }
                        let desc = if t.operand == "A" {
                            pk.setting.a_desc
                        } else {
                            pk.setting.b_desc
                        };
                        svgs.push((
                            format!("{stem}.{}.svg", t.operand),
                            caption(&stem, &t, map.major, desc, failed, v),
                            TILE_SVG_MARKER,
                        ));
                        pics.tiles.push(t.operand.clone());
                    }
                }
                study::render(map, v, &pics)
            }
        };
        let mut out = vec![(format!("{stem}.md"), page, GENERATED)];
        out.extend(svgs);
        out
    }
}

/// Write the page of `doc` and its pictures into `dir`; returns the paths, page first. Every
/// file is checked before the first is written.
pub fn write_page(doc: &WgDoc, dir: &Path, out: &Outputs) -> Result<Vec<PathBuf>> {
    let files = doc.files();
    for (name, _, marker) in &files {
        out.check(&dir.join(name), Ours::marked(marker))?;
    }
    out.create_dir(dir)?;
    let mut written = Vec::new();
    for (name, text, marker) in files {
        let p = dir.join(name);
        out.write(&p, text, Ours::marked(marker))?;
        written.push(p);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wgmma::desc::Swizzle;
    use crate::wgmma::testing;

    fn lanes(id: &str) -> WgDoc {
        let map = testing::lane_map(id);
        let v = crate::wgmma::find(id).unwrap();
        WgDoc::Lanes { map, v }
    }

    fn file<'a>(files: &'a [(String, String, &str)], name: &str) -> &'a str {
        &files
            .iter()
            .find(|f| f.0 == name)
            .unwrap_or_else(|| {
                panic!(
                    "no {name} among {:?}",
                    files.iter().map(|f| &f.0).collect::<Vec<_>>()
                )
            })
            .1
    }

    #[test]
    fn a_lane_map_page_names_the_four_warps_and_pictures_each_operand() {
        let id = "m64n8k16.f32.bf16.bf16.rs";
        let doc = lanes(id);
        let files = doc.files();
        let names: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
        // C is D's registers: no picture of its own.
        assert_eq!(
            names,
            [
                format!("{id}.md"),
                format!("{id}.A.svg"),
                format!("{id}.D.svg"),
                format!("{id}.B.smem.svg")
            ]
        );
        let page = file(&files, &format!("{id}.md"));
        assert!(page.starts_with(GENERATED));
        assert!(page.contains("**Status: EMULATED (not a hardware finding)**"));
        assert!(
            page.contains(
                "| warp | threads | A rows | A cols | D rows | D cols | C rows | C cols |"
            )
        );
        for (w, rows) in ["0–15", "16–31", "32–47", "48–63"].iter().enumerate() {
            let line = format!(
                "| {w} | {}–{} | {rows} | all 16 | {rows} | all 8 |",
                32 * w,
                32 * w + 31
            );
            assert!(page.contains(&line), "{line} missing:\n{page}");
        }
        assert!(page.contains("**Identical**, slot for slot"));
        assert!(page.contains(&format!("![D]({id}.D.svg)")));
        assert!(
            page.contains("C holds every element in the same thread, register and element as D")
        );
        assert!(page.contains("`byte = 2·(row%8) + 128·(row/8) + 16·col`"));

        let d = file(&files, &format!("{id}.D.svg"));
        assert!(d.contains(&format!("<title>{id} — D{}", SVG_MARKER)));
        for w in 0..4 {
            assert!(d.contains(&format!(">warp {w}</text>")), "warp {w} band");
            assert!(d.contains(&format!(">warp {w}: T{}–T{}</text>", 32 * w, 32 * w + 31)));
        }
        // Labelled (8 columns): thread 37 = warp 1 (rows 16–31), g 1, q 1 holds r0–1 on row 17
        // and r2–3 on row 25, at columns 2–3.
        assert_eq!(d.matches(">T37</text>").count(), 2);
        assert!(d.contains(">r0–1</text>") && d.contains(">r2–3</text>"));
        // The thick warp rules: three horizontal ones, across all 8 columns, none vertical.
        let thick = d
            .lines()
            .find(|l| l.contains(r#"stroke-width="3""#))
            .expect("warp rules");
        let thick = thick.split('"').nth(1).unwrap();
        assert_eq!(thick.matches('h').count(), 3, "{thick}");
        assert!(!thick.contains('v'), "{thick}");
        // Deterministic.
        assert_eq!(files, doc.files());
    }

    #[test]
    fn wide_operands_carry_their_labels_in_titles() {
        let doc = lanes("m64n64k16.f32.bf16.bf16.rs");
        let files = doc.files();
        let d = file(&files, "m64n64k16.f32.bf16.bf16.rs.D.svg");
        assert!(!d.contains(">T37</text>"));
        // Thread 37 on row 17: r0–1 at columns 2–3, then every 8 columns.
        assert!(
            d.contains("<title>T37 (warp 1 lane 5) row 17: r0–1 in col 2–3, r4–5 in col 10–11,"),
            "{}",
            &d[..2000]
        );
        // Past N = 64 D is not pictured; A still is.
        let doc = lanes("m64n72k16.f32.bf16.bf16.rs");
        let names: Vec<String> = doc.files().into_iter().map(|f| f.0).collect();
        assert!(names.contains(&"m64n72k16.f32.bf16.bf16.rs.A.svg".to_string()));
        assert!(!names.iter().any(|n| n.ends_with(".D.svg")));
        let page = &doc.files()[0].1;
        assert!(page.contains("No picture: D and C are pictured up to N = 64"));
    }

    #[test]
    fn a_moved_slot_is_listed_against_the_documented_layout() {
        let WgDoc::Lanes { mut map, v } = lanes("m64n8k16.f32.bf16.bf16.rs") else {
            unreachable!()
        };
        // Swap where two D slots of thread 0 land.
        let d = map.registers.iter_mut().find(|r| r.operand == "D").unwrap();
        let (a, b) = (d.slots[0], d.slots[1]);
        d.slots[0][3..].copy_from_slice(&b[3..]);
        d.slots[1][3..].copy_from_slice(&a[3..]);
        map.documented_mismatches = Some(2);
        let page = &WgDoc::Lanes { map, v }.files()[0].1;
        assert!(
            page.contains("**Different.** The map records 2 slots"),
            "{page}"
        );
        assert!(page.contains("| D | 0 | 0 | 0 | 0, 1 | 0, 0 |"));
        assert!(page.contains("| D | 0 | 1 | 0 | 0, 0 | 0, 1 |"));
    }

    #[test]
    fn a_failed_map_says_why_and_draws_no_grid() {
        let WgDoc::Lanes { mut map, v } = lanes("m64n8k16.f32.bf16.bf16.rs") else {
            unreachable!()
        };
        map.status = Status::Failed;
        map.failure = Some("A position 3 lit no D slot".into());
        map.registers.clear();
        map.smem_b.clear();
        map.documented_mismatches = None;
        map.validation = None;
        map.raw = Some(Default::default());
        let files = WgDoc::Lanes { map, v }.files();
        assert_eq!(files.len(), 1, "the page alone");
        let page = &files[0].1;
        assert!(page.contains("**Status: FAILED (on the emulator)**"));
        assert!(page.contains("> **Failure:** A position 3 lit no D slot"));
        assert!(page.contains("No layout was inferred"));
        assert!(page.contains("Not compared: there is no layout."));
    }

    #[test]
    fn a_study_page_pictures_the_xor_and_says_what_each_field_did() {
        let map = testing::study(16, Major::K, Swizzle::B128);
        let v = crate::wgmma::find(&map.variant).unwrap();
        let doc = WgDoc::Study { map, v };
        let files = doc.files();
        let names: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
        assert_eq!(
            names,
            [
                "smem.16bit.K.128B.md",
                "smem.16bit.K.128B.A.svg",
                "smem.16bit.K.128B.B.svg"
            ]
        );
        let page = files[0].1.as_str();
        assert!(page.contains("# Shared memory: 16-bit elements, K-major, swizzle 128B"));
        assert!(page.contains("| A | 128B | `byte = xor128B(start + 128·row + 2·col) - start` |"));
        assert!(page.contains("(SBO is the byte step of row/8)"), "{page}");
        assert!(page.contains("- **LBO×2** (A: LBO 8192 → 16384; B: LBO 16384 → 32768; against `packed`): A: the same form. B: the same form."));
        assert!(page.contains("against `start+256`"));
        // A's line 1 holds row m1; under the 128B XOR its k 0–7 chunk sits at +16, k 8–15 at +0.
        let a = files[1].1.as_str();
        assert!(a.contains(&format!("<title>smem.16bit.K.128B — A{TILE_SVG_MARKER}")));
        let line1 = 82 + 18 + 13;
        assert!(a.contains(&format!(r#"<text x="{}" y="{line1}">m1</text>"#, 70 + 22)));
        assert!(a.contains(&format!(
            r#"<text x="{}" y="{line1}">m1</text>"#,
            70 + 44 + 22
        )));
        assert!(!a.contains(&format!(
            r#"<text x="{}" y="{line1}">m1</text>"#,
            70 + 88 + 22
        )));
        assert!(a.contains(">k 0–7</text>") && a.contains(">k 8–15</text>"));
        assert_eq!(files, doc.files());
    }
}
