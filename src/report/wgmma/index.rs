//! The wgmma part of the index `reports/README.md`: every lane map and shared-memory study in
//! `reports/<folder>/wgmma/`, with its status, a link to its page and the pictures it has.

use super::super::WGMMA_DIR;
use super::super::index::{folders, status_word};
use super::WgDoc;
use crate::device::BackendKind;
use crate::layout::lanemap::Status;
use anyhow::Result;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// One wgmma record found under `reports/<folder>/wgmma/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WgIndexEntry {
    /// The device folder: `sm_90`, `emulator`, ...
    pub folder: String,
    /// `<folder>/wgmma/<stem>.json` is the record, `<stem>.md` its page.
    pub stem: String,
    pub backend: BackendKind,
    pub status: Status,
    pub device: String,
    pub has_page: bool,
    /// What the pictures next to the page show: `A`, `D`, `B tile`, ... (from the SVG names).
    pub pictures: Vec<String>,
    pub what: What,
}

/// What the record is, with the columns its table shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum What {
    Lanes {
        variant: String,
        /// Catalog position, for the order of the rows.
        order: usize,
        /// `registers` or `shared memory`.
        a_from: String,
        /// Slots the documented layout places elsewhere (None: no layout).
        documented: Option<usize>,
    },
    Study {
        bits: u32,
        major: String,
        swizzle: String,
        /// The fitted forms of A and B (None: no form fits).
        a_form: Option<String>,
        b_form: Option<String>,
    },
}

/// The pictures of `stem` in `dir`: `<stem>.<part>.svg`, `.smem.svg` read as a tile.
fn pictures(dir: &Path, stem: &str) -> Vec<String> {
    let prefix = format!("{stem}.");
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let part = name
                .strip_prefix(&prefix)?
                .strip_suffix(".svg")?
                .to_string();
            Some(match part.strip_suffix(".smem") {
                Some(op) => format!("{op} tile"),
                None => part,
            })
        })
        .filter(|p| !p.contains('.'))
        .collect();
    out.sort();
    out
}

/// Every wgmma record in `root/<folder>/wgmma/*.json`, folders and files in name order.
pub fn scan(root: &Path) -> Result<Vec<WgIndexEntry>> {
    let catalog = crate::wgmma::catalog();
    let mut out = Vec::new();
    for folder in folders(root)? {
        let dir = folder.join(WGMMA_DIR);
        if !dir.is_dir() {
            continue;
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json") && is_wgmma_record(p))
            .collect();
        files.sort();
        for f in files {
            let doc = WgDoc::load(&f)?;
            let stem = doc.stem();
            let what = match &doc {
                WgDoc::Lanes { map, v } => What::Lanes {
                    variant: map.variant.clone(),
                    order: catalog.iter().position(|c| c == v).unwrap_or(usize::MAX),
                    a_from: match v.a_src {
                        crate::wgmma::ASource::Rs => "registers".into(),
                        crate::wgmma::ASource::Ss => "shared memory".into(),
                    },
                    documented: map.documented_mismatches,
                },
                WgDoc::Study { map, .. } => What::Study {
                    bits: map.elem_bits,
                    major: map.major.to_string(),
                    swizzle: map.swizzle.to_string(),
                    a_form: map.a_fit.as_ref().map(|f| f.formula.clone()),
                    b_form: map.b_fit.as_ref().map(|f| f.formula.clone()),
                },
            };
            out.push(WgIndexEntry {
                folder: folder
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                has_page: dir.join(format!("{stem}.md")).is_file(),
                pictures: pictures(&dir, &stem),
                stem,
                backend: doc.backend(),
                status: doc.status(),
                device: doc.provenance().device.clone(),
                what,
            });
        }
    }
    Ok(out)
}

/// Whether a JSON file is a wgmma lane map or study (other records share the folder).
pub fn is_wgmma_record(path: &Path) -> bool {
    super::super::parse(path).is_ok_and(|v| {
        matches!(
            v.get("schema").and_then(|s| s.as_str()),
            Some(crate::wgmma::map::LANEMAP_SCHEMA | crate::wgmma::map::SMEM_SCHEMA)
        )
    })
}

/// The status cell: the word, bold when failed, linking the page (or the JSON without one).
fn status_cell(e: &WgIndexEntry) -> String {
    let word = status_word(e.status, e.backend);
    let word = if e.status == Status::Failed {
        format!("**{word}**")
    } else {
        word.to_string()
    };
    let base = format!("{}/{WGMMA_DIR}/{}", e.folder, e.stem);
    if e.has_page {
        format!("[{word}]({base}.md)")
    } else {
        format!("{word} ([JSON]({base}.json))")
    }
}

fn pictures_cell(e: &WgIndexEntry) -> String {
    if e.pictures.is_empty() {
        "—".into()
    } else {
        e.pictures.join(", ")
    }
}

/// The wgmma section of the index.
pub fn render(entries: &[WgIndexEntry]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## wgmma (warpgroup MMA, sm_90a)\n\n`wgmma.mma_async` records live in `<folder>/{WGMMA_DIR}/`: **lane maps** (`fp4probe wgmma probe`) say which thread 0–127 of the warpgroup, register and element hold each element of D, C and (A from registers) A, with the shared-memory tiles of the probe's descriptors; **shared-memory studies** (`fp4probe wgmma smem`) say which byte feeds each element of A and B for one element size, major-ness and swizzle mode, fitted to a closed form, and what LBO, SBO, the start and the base offset do. Regenerate their pages and this index: `fp4probe report reports/*/{WGMMA_DIR}/*.json`.\n\nPictures: every register operand of a lane map up to N = {} (A at any N; C only where it differs from D) and the shared-memory tiles of every map and study. The column *pictures* lists each page's; a page without pictures has the CSV and `fp4probe view`.\n",
        super::PICTURE_MAX_N
    );
    // Each record's table, sort key and row; hardware folders first within a record.
    type Key = (usize, String, usize, bool, String);
    let mut tables: [Vec<(Key, String)>; 2] = [Vec::new(), Vec::new()];
    let rank = |sw: &str| {
        ["none", "32B", "64B", "128B"]
            .iter()
            .position(|x| *x == sw)
            .unwrap_or(4)
    };
    for e in entries {
        let hw = e.backend != BackendKind::Hardware;
        let common = format!("{} | {} | {} |", e.folder, status_cell(e), e.device);
        let (table, key, row) = match &e.what {
            What::Lanes {
                variant,
                order,
                a_from,
                documented,
            } => {
                let doc = match documented {
                    None => "—".to_string(),
                    Some(0) => "identical".to_string(),
                    Some(n) => format!("**{n} slots differ**"),
                };
                (
                    0,
                    (*order, variant.clone(), 0, hw, e.folder.clone()),
                    format!("| `{variant}` | {a_from} | {common} {doc} |"),
                )
            }
            What::Study {
                bits,
                major,
                swizzle,
                a_form,
                b_form,
            } => {
                let form = |f: &Option<String>| {
                    f.as_ref()
                        .map(|f| format!("`{f}`"))
                        .unwrap_or_else(|| "no form fits".into())
                };
                (
                    1,
                    (
                        *bits as usize,
                        major.clone(),
                        rank(swizzle),
                        hw,
                        e.folder.clone(),
                    ),
                    format!(
                        "| {bits} | {major} | {swizzle} | {common} {} | {} |",
                        form(a_form),
                        form(b_form)
                    ),
                )
            }
        };
        tables[table].push((key, format!("{row} {} |", pictures_cell(e))));
    }
    let heads = [
        "### Register lane maps\n\n| variant | A from | folder | status | device | against the documented layout | pictures |\n| --- | --- | --- | --- | --- | --- | --- |\n",
        "### Shared-memory studies\n\n| element bits | major | swizzle | folder | status | device | A form | B form | pictures |\n| ---: | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    ];
    for (mut rows, head) in tables.into_iter().zip(heads) {
        if rows.is_empty() {
            continue;
        }
        rows.sort();
        s.push_str(head);
        for (_, row) in rows {
            s.push_str(&row);
            s.push('\n');
        }
        s.push('\n');
    }
    s.truncate(s.trim_end().len());
    s.push('\n');
    s
}
