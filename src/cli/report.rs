//! `fp4probe report`: markdown pages with SVG pictures from lane map files, and the index.

use crate::device::BackendKind;
use crate::layout::lanemap::Status;
use crate::outfile::{Ours, Outputs};
use crate::report::{self, GENERATED, Record, WGMMA_DIR};
use anyhow::{Result, bail};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Map JSON files: `mma.sync` lane maps (`fp4probe fragment`), wgmma lane maps (`fp4probe
    /// wgmma probe`) and shared-memory studies (`fp4probe wgmma smem`). Other fp4probe records
    /// (numerics, bench, ...) are skipped; any other file is an error.
    pub maps: Vec<PathBuf>,
    /// Write every page here (default: next to its map).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Rebuild the index `<DIR>/README.md` from every map in `<DIR>/*/` and `<DIR>/*/wgmma/`.
    /// Without it, the index of `reports/` is rebuilt whenever pages are written next to maps in
    /// `reports/<folder>/` or `reports/<folder>/wgmma/`.
    #[arg(long, value_name = "DIR")]
    pub index: Option<PathBuf>,
    /// Do not rebuild any index.
    #[arg(long, conflicts_with = "index")]
    pub no_index: bool,
    /// Skip emulator maps of variants that a sibling folder holds a passing hardware map of
    /// (their pages would repeat the documented layout the hardware page already shows).
    #[arg(long)]
    pub skip_measured: bool,
    /// Write through a symbolic link, FIFO or device given as output and replace read-only or
    /// foreign files (a README.md that is not an fp4probe index, say).
    #[arg(long)]
    pub force: bool,
}

/// The folder above `dir`, relative where `dir` is (`.` → `..`).
fn parent(dir: &Path) -> PathBuf {
    match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => dir.join(".."),
    }
}

/// The folder of `reports/` a map folder belongs to, and the subfolder the map lies in there:
/// `reports/sm_90` → (`reports/sm_90`, none), `reports/sm_90/wgmma` → (`reports/sm_90`, `wgmma`).
fn folder_of(map_dir: &Path) -> (PathBuf, Option<&'static str>) {
    if map_dir.file_name().is_some_and(|n| n == WGMMA_DIR) {
        (parent(map_dir), Some(WGMMA_DIR))
    } else {
        (map_dir.to_path_buf(), None)
    }
}

/// A passing hardware record of `stem` in the same place of a folder next to this one, if
/// there is one (`passed_hw` reads a candidate).
fn measured_elsewhere(
    map_dir: &Path,
    stem: &str,
    passed_hw: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    let (folder, sub) = folder_of(map_dir);
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(parent(&folder))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|d| match sub {
            Some(s) => d.join(s),
            None => d,
        })
        .map(|d| d.join(format!("{stem}.json")))
        .find(|p| p.is_file() && passed_hw(p))
}

/// The folder above a map's folder (absolute) gets an index when it is `reports/` or already
/// holds a generated one.
fn index_root(map_dir: &Path) -> Option<PathBuf> {
    let (folder, _) = folder_of(map_dir);
    let root = folder.parent()?;
    let named = root.file_name().is_some_and(|n| n == "reports");
    let generated =
        std::fs::read_to_string(root.join("README.md")).is_ok_and(|t| t.starts_with(GENERATED));
    (named || generated).then(|| root.to_path_buf())
}

pub fn run(args: Args) -> Result<ExitCode> {
    if args.maps.is_empty() && args.index.is_none() {
        bail!(
            "give map files (e.g. reports/sm_90/*.json reports/sm_90/wgmma/*.json), or --index <reports dir>"
        );
    }
    let out = Outputs::new(args.force).inputs(&args.maps);
    // A foreign README.md where an index would go is refused before any page is written.
    if let Some(root) = &args.index {
        out.check(&root.join("README.md"), Ours::marked(GENERATED))?;
    }
    // Every input is read and checked before the first page is written.
    let mut records = Vec::new();
    for path in &args.maps {
        if !path.exists() {
            bail!("{}: no such file", path.display());
        }
        if path.is_dir() {
            bail!("{}: a folder, not a map file", path.display());
        }
        records.push((path, report::read(path)?));
    }
    let (mut pages, mut svgs, mut skipped) = (0, 0, 0);
    let mut roots = BTreeSet::new();
    for (path, record) in records {
        let map_dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let (stem, backend) = match &record {
            Record::Other(schema) => {
                println!(
                    "skip {}: not a lane map or study ({schema})",
                    path.display()
                );
                continue;
            }
            Record::LaneMap(src) => (src.stem(), src.map.backend),
            Record::Wgmma(doc) => (doc.stem(), doc.backend()),
        };
        let passed_hw = |p: &Path| match report::read(p) {
            Ok(Record::LaneMap(s)) => {
                s.map.backend == BackendKind::Hardware && s.map.status == Status::Passed
            }
            Ok(Record::Wgmma(d)) => {
                d.backend() == BackendKind::Hardware && d.status() == Status::Passed
            }
            _ => false,
        };
        if args.skip_measured
            && backend == BackendKind::Emulator
            && let Some(hw) = measured_elsewhere(&map_dir, &stem, passed_hw)
        {
            println!(
                "skip {}: measured on hardware ({})",
                path.display(),
                hw.display()
            );
            skipped += 1;
            continue;
        }
        let dir = args.output.clone().unwrap_or_else(|| map_dir.clone());
        let written = match &record {
            Record::LaneMap(src) => report::write_page(src, &dir, &out)?,
            Record::Wgmma(doc) => report::wgmma::write_page(doc, &dir, &out)?,
            Record::Other(_) => continue,
        };
        pages += 1;
        svgs += written.len() - 1;
        if args.output.is_none()
            && !args.no_index
            && index_root(&std::path::absolute(&map_dir)?).is_some()
        {
            roots.insert(parent(&folder_of(&map_dir).0));
        }
    }
    if !args.maps.is_empty() {
        println!(
            "wrote {pages} page{} and {svgs} SVG{}{}",
            if pages == 1 { "" } else { "s" },
            if svgs == 1 { "" } else { "s" },
            if skipped > 0 {
                format!("; skipped {skipped} emulator maps measured on hardware")
            } else {
                String::new()
            }
        );
    }
    if let Some(root) = &args.index {
        roots.clear();
        roots.insert(root.clone());
    }
    for root in roots {
        let path = report::write_index(&root, &out)?;
        println!("wrote index {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
