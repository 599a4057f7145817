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

fn who(p: &Provenance) -> String {
    match p.backend {
        BackendKind::Hardware => format!("measured on {}", p.device),
        BackendKind::Emulator => {
            "emulator: the documented layout through the CPU model, not a hardware finding".into()
        }
    }
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
