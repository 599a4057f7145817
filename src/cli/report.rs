//! `fp4probe report`: markdown pages with SVG pictures from lane map files, and the index.

use crate::device::BackendKind;
use crate::layout::lanemap::Status;
use crate::outfile::{Ours, Outputs};
use crate::report::{self, GENERATED};
use anyhow::{Result, bail};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Lane map JSON files written by `fp4probe fragment` (other JSON files are skipped).
    pub maps: Vec<PathBuf>,
    /// Write every page here (default: next to its map).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Rebuild the index `<DIR>/README.md` from every map in `<DIR>/*/`. Without it, the index
    /// of `reports/` is rebuilt whenever pages are written next to maps in `reports/<folder>/`.
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

/// A passing hardware map of `stem` in a folder next to `dir`, if there is one.
fn measured_elsewhere(dir: &Path, stem: &str) -> Option<PathBuf> {
    let root = parent(dir);
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|d| d.join(format!("{stem}.json")))
        .filter(|p| p.is_file() && report::is_lane_map(p))
        .find(|p| {
            report::load(p).is_ok_and(|s| {
                s.map.backend == BackendKind::Hardware && s.map.status == Status::Passed
            })
        })
}

/// The folder above `dir` (absolute) gets an index when it is `reports/` or already holds a
/// generated one.
fn index_root(dir: &Path) -> Option<PathBuf> {
    let root = dir.parent()?;
    let named = root.file_name().is_some_and(|n| n == "reports");
    let generated =
        std::fs::read_to_string(root.join("README.md")).is_ok_and(|t| t.starts_with(GENERATED));
    (named || generated).then(|| root.to_path_buf())
}

pub fn run(args: Args) -> Result<ExitCode> {
    if args.maps.is_empty() && args.index.is_none() {
        bail!("give lane map files (e.g. reports/sm_90/*.json), or --index <reports dir>");
    }
    let out = Outputs::new(args.force).inputs(&args.maps);
    // A foreign README.md where an index would go is refused before any page is written.
    if let Some(root) = &args.index {
        out.check(&root.join("README.md"), Ours::marked(GENERATED))?;
    }
    let (mut pages, mut svgs, mut skipped) = (0, 0, 0);
    let mut roots = BTreeSet::new();
    for path in &args.maps {
        if !report::is_lane_map(path) {
            if path.is_file() {
                println!("skip {}: not a lane map", path.display());
                continue;
            }
            bail!("{}: no such file", path.display());
        }
        let src = report::load(path)?;
        let map_dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if args.skip_measured
            && src.map.backend == BackendKind::Emulator
            && let Some(hw) = measured_elsewhere(&map_dir, &src.stem())
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
        let written = report::write_page(&src, &dir, &out)?;
        pages += 1;
        svgs += written.len() - 1;
        if args.output.is_none()
            && !args.no_index
            && index_root(&std::path::absolute(&map_dir)?).is_some()
        {
            roots.insert(parent(&map_dir));
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
