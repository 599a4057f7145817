//! The index page `reports/README.md`: every variant × every folder of maps, with its status
//! and a link to its page.

use super::wgmma::index::WgIndexEntry;
use super::{GENERATED, load};
use crate::device::BackendKind;
use crate::isa::catalog;
use crate::layout::lanemap::{SCHEMA, Status};
use crate::outfile::{Ours, Outputs};
use anyhow::{Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// One map found under `reports/<folder>/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// The folder's name: `sm_90`, `emulator`, ...
    pub folder: String,
    /// File-name stem: `<folder>/<stem>.json` is the map, `<folder>/<stem>.md` its page.
    pub stem: String,
    pub variant: String,
    pub min_target: String,
    pub backend: BackendKind,
    pub status: Status,
    pub device: String,
    /// `<folder>/<stem>.md` exists.
    pub has_page: bool,
}

impl IndexEntry {
    /// `hardware-measured`, `emulated` or `failed`.
    pub fn status_word(&self) -> &'static str {
        status_word(self.status, self.backend)
    }
}

/// `hardware-measured`, `emulated` or `failed`.
pub(crate) fn status_word(status: Status, backend: BackendKind) -> &'static str {
    match (status, backend) {
        (Status::Failed, _) => "failed",
        (Status::Passed, BackendKind::Hardware) => "hardware-measured",
        (Status::Passed, BackendKind::Emulator) => "emulated",
    }
}

/// The subfolders of `root` in name order.
pub(crate) fn folders(root: &Path) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root)
        .with_context(|| format!("cannot read {}", root.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    Ok(out)
}

/// Whether a JSON file is a lane map (other records, such as `.numerics.json`, share folders).
pub fn is_lane_map(path: &Path) -> bool {
    #[derive(serde::Deserialize)]
    struct Head {
        schema: Option<String>,
    }
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<Head>(&t).ok())
        .is_some_and(|h| h.schema.as_deref() == Some(SCHEMA))
}

/// Every lane map in `root/<folder>/*.json`, folders and files in name order.
pub fn scan(root: &Path) -> Result<Vec<IndexEntry>> {
    let mut out = Vec::new();
    for dir in folders(root)? {
        let folder = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .with_context(|| format!("cannot read {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json") && is_lane_map(p))
            .collect();
        files.sort();
        for f in files {
            let src = load(&f)?;
            let stem = f
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.push(IndexEntry {
                has_page: dir.join(format!("{stem}.md")).is_file(),
                folder: folder.clone(),
                stem,
                variant: src.map.variant.clone(),
                min_target: src.map.min_target.to_string(),
                backend: src.map.backend,
                status: src.map.status,
                device: src.map.provenance.device.clone(),
            });
        }
    }
    Ok(out)
}

/// The index of `root` (`reports/`), as `root/README.md` holds it.
pub fn index(root: &Path) -> Result<String> {
    let entries = scan(root)?;
    let wg = super::wgmma::index::scan(root)?;
    let moves = super::movement_index::scan(root)?;
    let mut others = BTreeMap::new();
    for e in &entries {
        others.entry(e.folder.clone()).or_insert_with(|| {
            root.join(&e.folder)
                .join("numerics.md")
                .is_file()
                .then(|| format!("{}/numerics.md", e.folder))
        });
    }
    let mut s = render_with(&entries, &others, &wg);
    if !moves.is_empty() {
        s.push('\n');
        s += &super::movement_index::render(&moves, |f, sub| {
            root.join(f).join(sub).join("README.md").is_file()
        });
    }
    Ok(s)
}

/// Write `root/README.md`, unless a README there is not an index fp4probe wrote (it starts
/// with [`GENERATED`]); returns its path.
pub fn write_index(root: &Path, out: &Outputs) -> Result<PathBuf> {
    let path = root.join("README.md");
    out.check(&path, Ours::marked(GENERATED))?;
    out.write(&path, index(root)?, Ours::marked(GENERATED))?;
    Ok(path)
}

/// The index text. `extra` maps a folder to another page of it worth linking (its numerics
/// summary), if any.
pub fn render_index(entries: &[IndexEntry], extra: &BTreeMap<String, Option<String>>) -> String {
    render_with(entries, extra, &[])
}

/// The index text with the wgmma records (`wg`) after the `mma.sync` table.
fn render_with(
    entries: &[IndexEntry],
    extra: &BTreeMap<String, Option<String>>,
    wg: &[WgIndexEntry],
) -> String {
    // Folders: those holding hardware maps first, then the rest, each by name.
    let mut folders: Vec<String> = entries
        .iter()
        .map(|e| e.folder.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let hw = |f: &str| {
        entries
            .iter()
            .any(|e| e.folder == f && e.backend == BackendKind::Hardware)
    };
    folders.sort_by_key(|f| (!hw(f), f.clone()));
    // Variants: catalog order, then any the catalog does not know by id.
    let order: BTreeMap<String, usize> = catalog()
        .iter()
        .enumerate()
        .map(|(i, v)| (v.id(), i))
        .collect();
    let mut variants: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e.variant.as_str(), e.min_target.as_str()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    variants.sort_by_key(|(v, _)| (order.get(*v).copied().unwrap_or(usize::MAX), v.to_string()));
    variants.dedup_by_key(|(v, _)| *v);

    let mut s = String::new();
    let _ = write!(
        s,
        "{GENERATED}\n\n# Lane maps: every variant on every device\n\nEach row is one `mma.sync` variant, each column a folder of `reports/`: maps measured on a GPU (`sm_XY`) or run on the emulator (`emulator`). A cell gives the map's status and links its page: provenance, labelling convention, closed forms, CuTe layout, a lane-coloured picture and the full table of every operand, and the diff against the PTX ISA's documented layout.\n\n- **hardware-measured**: probed on the GPU; identity and random validation matched the CPU reference bit for bit.\n- **emulated**: the PTX ISA's documented layout run through fp4probe's CPU model. Not a hardware finding.\n- **failed**: inference or validation failed; the page says why and the JSON keeps the raw observations.\n- —: no map of this variant in this folder (the device cannot run it, or it was not probed).\n"
    );
    if entries.iter().any(|e| !e.has_page) {
        s.push_str("\nA status that links `JSON` has no page: `--skip-measured` leaves out the emulator pages of variants that a hardware folder has measured, so the emulator's pages are those of variants no GPU here has run.\n");
    }
    s.push_str("\n| folder | device | maps | hardware-measured | emulated | failed | pages |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
    for f in &folders {
        let in_f: Vec<&IndexEntry> = entries.iter().filter(|e| &e.folder == f).collect();
        let count = |w: &str| in_f.iter().filter(|e| e.status_word() == w).count();
        let devices: Vec<String> = in_f
            .iter()
            .map(|e| e.device.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let more = extra
            .get(f)
            .and_then(|x| x.as_ref())
            .map(|p| format!(" ([numerics]({p}))"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "| [{f}]({f}/){more} | {} | {} | {} | {} | {} | {} |",
            devices.join(", "),
            in_f.len(),
            count("hardware-measured"),
            count("emulated"),
            count("failed"),
            in_f.iter().filter(|e| e.has_page).count()
        );
    }
    s.push_str(
        "\nRegenerate every page and this index from the maps: `fp4probe report reports/*/*.json reports/*/wgmma/*.json --skip-measured` (pages go next to their maps); this index alone: `fp4probe report --index reports`.",
    );
    if !wg.is_empty() {
        s.push_str(" The `wgmma` lane maps and shared-memory studies are listed [after this table](#wgmma-warpgroup-mma-sm_90a), the data-movement, TMA and `mma.sp` records [after those](#data-movement-bulk-tensor-copies-and-sparse-mma).");
    }
    s.push_str("\n\n");
    let _ = write!(s, "| variant | min target |");
    for f in &folders {
        let _ = write!(s, " {f} |");
    }
    s.push_str("\n| --- | --- |");
    for _ in &folders {
        s.push_str(" --- |");
    }
    s.push('\n');
    for (v, target) in &variants {
        let _ = write!(s, "| `{v}` | {target} |");
        for f in &folders {
            match entries.iter().find(|e| &e.folder == f && e.variant == *v) {
                None => s.push_str(" — |"),
                Some(e) => {
                    let word = e.status_word();
                    let word = if e.status == Status::Failed {
                        format!("**{word}**")
                    } else {
                        word.to_string()
                    };
                    if e.has_page {
                        let _ = write!(s, " [{word}]({}/{}.md) |", e.folder, e.stem);
                    } else {
                        let _ = write!(s, " {word} ([JSON]({}/{}.json)) |", e.folder, e.stem);
                    }
                }
            }
        }
        s.push('\n');
    }
    if !wg.is_empty() {
        s.push('\n');
        s.push_str(&super::wgmma::index::render(wg));
    }
    s
}
