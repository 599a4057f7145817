//! The index's section on the records of a device folder's other subfolders (all but
//! `wgmma/`, which has its own): `ldmatrix`/`stmatrix`/`movmatrix` maps, TMA maps and `mma.sp`
//! lane maps, one row each, with the subfolder's README where there is one.

use super::index::{folders, status_word};
use crate::device::BackendKind;
use crate::layout::lanemap::Status;
use anyhow::{Context, Result};
use serde::Deserialize;
use std::fmt::Write;
use std::path::Path;

/// One record found under `reports/<folder>/<sub>/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordEntry {
    pub folder: String,
    pub sub: String,
    /// File-name stem: `<folder>/<sub>/<stem>.json`.
    pub stem: String,
    /// What the record maps: `ldmatrix`, `stmatrix`, `movmatrix`, `TMA load`, `mma.sp`, ...
    pub kind: String,
    /// Variant or case id.
    pub id: String,
    pub status: Status,
    pub backend: BackendKind,
    pub device: String,
    /// `<stem>.md` exists next to it.
    pub has_page: bool,
}

/// The fields of the three schemas the section reads.
#[derive(Deserialize)]
struct Head {
    schema: Option<String>,
    variant: Option<String>,
    case: Option<String>,
    op: Option<String>,
    direction: Option<String>,
    status: Status,
    backend: BackendKind,
    provenance: Device,
}

#[derive(Deserialize)]
struct Device {
    device: String,
}

/// What a record is, from its head; `None` for the records the section does not list.
fn kind(h: &Head) -> Option<(String, String)> {
    match h.schema.as_deref()? {
        crate::movement::map::SCHEMA => Some((h.op.clone()?, h.variant.clone()?)),
        crate::tma::map::SCHEMA => Some((format!("TMA {}", h.direction.clone()?), h.case.clone()?)),
        crate::layout::lanemap::SCHEMA => {
            let v = h.variant.clone()?;
            v.starts_with("sp").then(|| ("mma.sp".to_string(), v))
        }
        _ => None,
    }
}

/// Every such record in `root/<folder>/<sub>/*.json` (`sub` not `wgmma`), in name order.
pub fn scan(root: &Path) -> Result<Vec<RecordEntry>> {
    let mut out = Vec::new();
    for dir in folders(root)? {
        let folder = name(&dir);
        for sub_dir in folders(&dir)? {
            let sub = name(&sub_dir);
            if sub == super::WGMMA_DIR {
                continue;
            }
            let mut files: Vec<_> = std::fs::read_dir(&sub_dir)
                .with_context(|| format!("cannot read {}", sub_dir.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect();
            files.sort();
            for f in files {
                let Some(head) = std::fs::read_to_string(&f)
                    .ok()
                    .and_then(|t| serde_json::from_str::<Head>(&t).ok())
                else {
                    continue;
                };
                let Some((kind, id)) = kind(&head) else {
                    continue;
                };
                let stem = f
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                out.push(RecordEntry {
                    has_page: sub_dir.join(format!("{stem}.md")).is_file(),
                    folder: folder.clone(),
                    sub: sub.clone(),
                    stem,
                    kind,
                    id,
                    status: head.status,
                    backend: head.backend,
                    device: head.provenance.device,
                });
            }
        }
    }
    Ok(out)
}

fn name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The section: a table of subfolders, then one row per record. `readme` says whether
/// `<folder>/<sub>/README.md` exists.
pub fn render(entries: &[RecordEntry], readme: impl Fn(&str, &str) -> bool) -> String {
    let mut s = String::from(
        "## Data movement, bulk tensor copies and sparse mma\n\nRecords in the other subfolders of a device folder: **data-movement maps** (`fp4probe matrix probe`) say which lane's address names which shared row and which register slot holds which element for `ldmatrix`, `stmatrix` and `movmatrix`; **TMA maps** (`fp4probe tma probe`) at which shared byte each element of a bulk tensor copy's box lies, per element size and swizzle mode; **`mma.sp` lane maps** (`fp4probe fragment --sparse`) the sparse variants' operands and metadata. Their pages come from `fp4probe matrix report`, `fp4probe tma report` and `fp4probe report`; `fp4probe view` opens every record.\n\n| folder | records | hardware-measured | emulated | failed | pages |\n| --- | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let mut subs: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e.folder.as_str(), e.sub.as_str()))
        .collect();
    subs.dedup();
    for (f, sub) in &subs {
        let in_s: Vec<&RecordEntry> = entries
            .iter()
            .filter(|e| e.folder == *f && e.sub == *sub)
            .collect();
        let count = |w: &str| {
            in_s.iter()
                .filter(|e| status_word(e.status, e.backend) == w)
                .count()
        };
        let link = if readme(f, sub) {
            format!("[{f}/{sub}]({f}/{sub}/README.md)")
        } else {
            format!("[{f}/{sub}]({f}/{sub}/)")
        };
        let _ = writeln!(
            s,
            "| {link} | {} | {} | {} | {} | {} |",
            in_s.len(),
            count("hardware-measured"),
            count("emulated"),
            count("failed"),
            in_s.iter().filter(|e| e.has_page).count()
        );
    }
    s.push_str("\n| record | kind | folder | status | device |\n| --- | --- | --- | --- | --- |\n");
    for e in entries {
        let mut word = status_word(e.status, e.backend).to_string();
        if e.status == Status::Failed {
            word = format!("**{word}**");
        }
        let base = format!("{}/{}/{}", e.folder, e.sub, e.stem);
        let cell = if e.has_page {
            format!("[{word}]({base}.md)")
        } else {
            format!("{word} ([JSON]({base}.json))")
        };
        let _ = writeln!(
            s,
            "| `{}` | {} | {}/{} | {cell} | {} |",
            e.id, e.kind, e.folder, e.sub, e.device
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_records_are_found_and_listed() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports");
        let e = scan(&root).unwrap();
        let n = |k: &str| e.iter().filter(|x| x.kind == k).count();
        assert_eq!(n("ldmatrix"), 6);
        assert_eq!(n("stmatrix"), 6);
        assert_eq!(n("movmatrix"), 1);
        assert!(n("TMA load") >= 26 && n("TMA store") >= 13, "{e:?}");
        assert!(n("mma.sp") >= 10);
        // The stmatrix + bulk store record and the wgmma folder are not rows.
        assert!(
            e.iter()
                .all(|x| x.sub != "wgmma" && x.stem != "stmatrix-store")
        );
        let s = render(&e, |_, sub| sub != "mma-sp");
        assert!(s.contains("| [sm_90/tma](sm_90/tma/README.md) |"), "{s}");
        assert!(s.contains("| [sm_90/mma-sp](sm_90/mma-sp/) | "), "{s}");
        assert!(s.contains(
            "| `sp.m16n8k64.s32.s8.s8.s32` | mma.sp | sm_90/mma-sp | [hardware-measured](sm_90/mma-sp/sp.m16n8k64.s32.s8.s8.s32.md) | NVIDIA H200 |"
        ));
        assert!(s.contains(
            "| `sp.m16n8k16.f32.tf32.tf32.f32` | mma.sp | sm_90/mma-sp | hardware-measured ([JSON](sm_90/mma-sp/sp.m16n8k16.f32.tf32.tf32.f32.json)) |"
        ));
        assert!(s.contains("| `load.u16.128B.16x64.at256` | TMA load | sm_90/tma |"));
    }
}
