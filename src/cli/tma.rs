//! `fp4probe tma`: measure where bulk tensor copies (`cp.async.bulk.tensor`, 2D tiled tensor
//! maps) put each element under each swizzle mode (`probe`), show the UTMALDG/UTMASTG their
//! probe kernels lower to (`sass`), and rewrite the pages of a folder of maps with the table
//! of which TMA swizzle feeds which wgmma descriptor swizzle (`report`).

use crate::device::cuda::CudaBackend;
use crate::device::{BackendChoice, BackendKind, fallback_notice};
use crate::isa::Target;
use crate::outfile::{Ours, Outputs};
use crate::provenance::Provenance;
use crate::report::tma::{FEED_CSV_HEADER, PAGE_MARKER, SVG_MARKER, feed_csv, index, page, svg};
use crate::tma::backend::TmaBackend;
use crate::tma::feed::{Pairing, pairings};
use crate::tma::kernel::probe_kernel;
use crate::tma::map::{CSV_HEADER, SCHEMA, TmaMap};
use crate::tma::model::TmaEmulator;
use crate::tma::probe::probe;
use crate::tma::{Case, Swizzle, catalog, stsm};
use crate::wgmma::map::{SMEM_SCHEMA, WgSmemMap};
use anyhow::{Context, Result, bail};
use clap::Subcommand;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

/// Which cases: `--case` (repeatable) or `--all`, optionally narrowed by `--swizzle`.
#[derive(clap::Args, Debug, Clone)]
pub struct Pick {
    /// Case id: direction, element type, swizzle, box rows x cols (elements), optional shared
    /// offset: `load.u16.128B.16x64`, `store.u8.none.16x16`, `load.u16.128B.16x64.at256`.
    #[arg(long = "case")]
    pub cases: Vec<String>,
    /// Every case of the catalog (`--list` prints them).
    #[arg(long)]
    pub all: bool,
    /// Only the cases under this swizzle mode (none, 32B, 64B, 128B).
    #[arg(long)]
    pub swizzle: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum Sub {
    /// Which box element lands at which shared byte (load) or comes from which (store),
    /// validated byte for byte; maps, pages and pictures.
    Probe {
        #[command(flatten)]
        pick: Pick,
        /// Print the catalog's case ids and exit.
        #[arg(long)]
        list: bool,
        /// auto: CUDA when a driver and a device exist, else the emulator (with a loud notice).
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendChoice,
        /// Output folder (default: results/sm_XY/tma, or results/emulator/tma).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Folder of wgmma shared-memory studies to pair the maps with in README.md
        /// (default: the output folder's sibling `wgmma`, where it exists).
        #[arg(long)]
        wgmma: Option<PathBuf>,
        /// Replace read-only or foreign files and write through links; a hardware result is
        /// never replaced by an emulator one.
        #[arg(long)]
        force: bool,
        /// Seed of the random validation experiments.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// The stmatrix + swizzled store path: stmatrix at addresses under each swizzle's XOR,
    /// then a bulk tensor store under each swizzle mode; which pairings give a row-major tile
    /// (`stmatrix-store.json` in the output folder).
    Stmatrix {
        /// auto: CUDA when a driver and a device exist, else the emulator (with a loud notice).
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendChoice,
        /// Output folder (default: results/sm_XY/tma, or results/emulator/tma).
        #[arg(short, long)]
        output: Option<PathBuf>,
        #[arg(long)]
        force: bool,
    },
    /// SASS of the probe kernels (offline, pinned ptxas + disassembler): the UTMALDG or
    /// UTMASTG each copy becomes.
    Sass {
        #[command(flatten)]
        pick: Pick,
        /// Target (default: sm_90a).
        #[arg(long)]
        target: Option<Target>,
        /// Write <DIR>/<case>.<target>.sass.txt and .json.
        #[arg(short, long)]
        output: Option<PathBuf>,
        #[arg(long)]
        force: bool,
    },
    /// Rewrite the pages, pictures, README.md and wgmma-feed.csv of a folder of maps from its
    /// JSON files.
    Report {
        /// The folder of maps (`reports/sm_90/tma`).
        dir: PathBuf,
        /// Folder of wgmma shared-memory studies (default: DIR's sibling `wgmma`).
        #[arg(long)]
        wgmma: Option<PathBuf>,
        #[arg(long)]
        force: bool,
    },
}

/// The cases `pick` names, each once; a malformed id, an unknown swizzle or a box the
/// tensor map cannot hold is an error naming it.
fn select(pick: &Pick) -> Result<Vec<Case>> {
    if pick.all && !pick.cases.is_empty() {
        bail!("give --case ID or --all, not both");
    }
    let swizzle: Option<Swizzle> = match &pick.swizzle {
        Some(s) => Some(s.parse().map_err(|e: String| anyhow::anyhow!(e))?),
        None => None,
    };
    let mut out: Vec<Case> = Vec::new();
    for text in &pick.cases {
        let c: Case = text.parse()?;
        if !out.contains(&c) {
            out.push(c);
        }
    }
    if pick.all {
        out = catalog();
    }
    if let Some(s) = swizzle {
        out.retain(|c| c.swizzle == s);
    }
    if out.is_empty() {
        bail!("nothing selected: give --case ID or --all (and a --swizzle some case has)");
    }
    Ok(out)
}

pub fn run(args: Args) -> Result<ExitCode> {
    match args.command {
        Sub::Probe {
            pick,
            list,
            backend,
            output,
            wgmma,
            force,
            seed,
        } => {
            if list {
                for c in catalog() {
                    println!("{c}");
                }
                return Ok(ExitCode::SUCCESS);
            }
            let picked = select(&pick)?;
            with_backend(backend, |b| {
                run_probe(b, &picked, output, wgmma, force, seed)
            })
        }
        Sub::Stmatrix {
            backend,
            output,
            force,
        } => with_backend(backend, |b| run_stsm(b, output, force)),
        Sub::Sass {
            pick,
            target,
            output,
            force,
        } => run_sass(&select(&pick)?, target, output, force),
        Sub::Report { dir, wgmma, force } => {
            let maps = read_maps(&dir)?;
            if maps.is_empty() {
                bail!("no TMA map ({SCHEMA}) in {}", dir.display());
            }
            let studies = read_studies(&wgmma_dir(&dir, wgmma))?;
            let out = Outputs::new(force)
                .inputs(maps.iter().map(|(p, _)| p.clone()))
                .inputs(studies.iter().map(|(p, _)| p.clone()));
            for (_, m) in &maps {
                write_pages(&dir, m, &out)?;
            }
            write_index(&dir, &maps, &studies, &out)?;
            println!("{} pages and README.md in {}", maps.len(), dir.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Run `go` on the backend `choice` names: `auto` falls back to the emulator with a loud
/// notice where no CUDA device opens.
fn with_backend(
    choice: BackendChoice,
    go: impl FnOnce(&dyn TmaBackend) -> Result<ExitCode>,
) -> Result<ExitCode> {
    match choice {
        BackendChoice::Emulator => go(&TmaEmulator::new()),
        BackendChoice::Cuda => go(&CudaBackend::open()?),
        BackendChoice::Auto => match CudaBackend::open() {
            Ok(d) => go(&d),
            Err(why) => {
                eprintln!("{}", fallback_notice(&why));
                go(&TmaEmulator::new())
            }
        },
    }
}

/// The wgmma studies' folder: the one given, else `dir`'s sibling `wgmma`.
fn wgmma_dir(dir: &Path, given: Option<PathBuf>) -> Option<PathBuf> {
    given.or_else(|| {
        let sibling = dir.parent()?.join("wgmma");
        sibling.is_dir().then_some(sibling)
    })
}

/// JSON files of `dir` carrying `schema`, sorted by name.
fn json_with(dir: &Path, schema: &str) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read folder {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter(|p| {
            std::fs::read_to_string(p)
                .is_ok_and(|t| t.contains(&format!("\"schema\": \"{schema}\"")))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Every TMA map in `dir`.
fn read_maps(dir: &Path) -> Result<Vec<(PathBuf, TmaMap)>> {
    json_with(dir, SCHEMA)?
        .into_iter()
        .map(|f| TmaMap::load(&f).map(|m| (f, m)))
        .collect()
}

/// Every wgmma shared-memory study in `dir` (none without a folder).
fn read_studies(dir: &Option<PathBuf>) -> Result<Vec<(PathBuf, WgSmemMap)>> {
    let Some(dir) = dir else {
        return Ok(Vec::new());
    };
    json_with(dir, SMEM_SCHEMA)?
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f)
                .with_context(|| format!("cannot read {}", f.display()))?;
            let m: WgSmemMap = serde_json::from_str(&text)
                .with_context(|| format!("{}: malformed wgmma shared-memory study", f.display()))?;
            Ok((f, m))
        })
        .collect()
}

/// `stmatrix-store.json` of `dir`, where there is one.
fn read_stsm(dir: &Path) -> Result<Option<stsm::StsmRecord>> {
    let path = dir.join(format!("{}.json", stsm::STEM));
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let rec: stsm::StsmRecord = serde_json::from_str(&text)
        .with_context(|| format!("{}: malformed stmatrix + store record", path.display()))?;
    if rec.schema != stsm::SCHEMA {
        bail!(
            "{}: schema '{}' is not '{}'",
            path.display(),
            rec.schema,
            stsm::SCHEMA
        );
    }
    Ok(Some(rec))
}

fn write_pages(dir: &Path, m: &TmaMap, out: &Outputs) -> Result<()> {
    out.write(
        &dir.join(format!("{}.md", m.case)),
        page(m),
        Ours::marked(PAGE_MARKER),
    )?;
    out.write(
        &dir.join(format!("{}.svg", m.case)),
        svg(m),
        Ours::marked(SVG_MARKER),
    )
}

fn write_index(
    dir: &Path,
    maps: &[(PathBuf, TmaMap)],
    studies: &[(PathBuf, WgSmemMap)],
    out: &Outputs,
) -> Result<Vec<Pairing>> {
    let ms: Vec<TmaMap> = maps.iter().map(|(_, m)| m.clone()).collect();
    let ws: Vec<WgSmemMap> = studies.iter().map(|(_, m)| m.clone()).collect();
    let pairs = pairings(&ms, &ws);
    let stsm = read_stsm(dir)?;
    out.write(
        &dir.join("README.md"),
        index(&ms, &ws, &pairs, stsm.as_ref()),
        Ours::marked(PAGE_MARKER),
    )?;
    if !pairs.is_empty() {
        out.write(
            &dir.join("wgmma-feed.csv"),
            feed_csv(&pairs)?,
            Ours::marked(FEED_CSV_HEADER),
        )?;
    }
    Ok(pairs)
}

fn run_probe(
    backend: &dyn TmaBackend,
    picked: &[Case],
    output: Option<PathBuf>,
    wgmma: Option<PathBuf>,
    force: bool,
    seed: u64,
) -> Result<ExitCode> {
    for c in picked {
        backend.check_supported(c)?;
    }
    let info = backend.info().clone();
    let dir = output.unwrap_or_else(|| info.results_dir().join("tma"));
    let studies = read_studies(&wgmma_dir(&dir, wgmma))?;
    let out = Outputs::new(force).inputs(studies.iter().map(|(p, _)| p.clone()));
    let emulator = info.backend == BackendKind::Emulator;
    // Every output is checked before the first experiment.
    for c in picked {
        out.check_result(&dir, &c.id(), Some(CSV_HEADER), emulator)?;
        out.check(&dir.join(format!("{c}.md")), Ours::marked(PAGE_MARKER))?;
        out.check(&dir.join(format!("{c}.svg")), Ours::marked(SVG_MARKER))?;
    }
    out.check(&dir.join("README.md"), Ours::marked(PAGE_MARKER))?;
    out.check(&dir.join("wgmma-feed.csv"), Ours::marked(FEED_CSV_HEADER))?;
    let t0 = std::time::Instant::now();
    let mut failed = 0;
    println!(
        "{:<28} {:<6} {:>8}  {:<52} vs documented",
        "case", "result", "wall", "fitted form"
    );
    for c in picked {
        let o = probe(backend, c, seed)?;
        let map = TmaMap::new(c, &o, Provenance::new(&info, probe_kernel(c)));
        map.write(&dir, &out)?;
        write_pages(&dir, &map, &out)?;
        let ok = map.status == crate::layout::lanemap::Status::Passed;
        failed += usize::from(!ok);
        println!(
            "{:<28} {:<6} {:>6.3} s  {:<52} {}",
            c.id(),
            if ok { "passed" } else { "FAILED" },
            o.wall_s,
            map.fit.as_ref().map_or("-", |f| f.formula.as_str()),
            map.documented_mismatches
                .map_or("-".into(), |n| format!("{n} differ"))
        );
        if let Some(why) = &map.failure {
            println!("    failure: {why}");
        }
    }
    let maps = read_maps(&dir)?;
    let pairs = write_index(&dir, &maps, &studies, &out)?;
    println!(
        "{} passed, {failed} failed, {:.2} s wall on {}; maps, pages and pictures in {}",
        picked.len() - failed,
        t0.elapsed().as_secs_f64(),
        info.name,
        dir.display()
    );
    if !pairs.is_empty() {
        println!(
            "{} wgmma tile pairings in {}",
            pairs.len(),
            dir.join("wgmma-feed.csv").display()
        );
    }
    if emulator {
        println!(
            "NOTE: emulator results: the documented behaviour run on the CPU, not hardware findings."
        );
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn run_stsm(backend: &dyn TmaBackend, output: Option<PathBuf>, force: bool) -> Result<ExitCode> {
    let info = backend.info().clone();
    let dir = output.unwrap_or_else(|| info.results_dir().join("tma"));
    let out = Outputs::new(force);
    let emulator = info.backend == BackendKind::Emulator;
    out.check_result(&dir, stsm::STEM, None, emulator)?;
    let rec = stsm::run(backend)?;
    out.write_result(
        &dir,
        stsm::STEM,
        &(crate::jsonfmt::to_compact_json(&rec) + "\n"),
        None,
        emulator,
    )?;
    let maps = read_maps(&dir)?;
    if !maps.is_empty() {
        let studies = read_studies(&wgmma_dir(&dir, None))?;
        let out = out.inputs(studies.iter().map(|(p, _)| p.clone()));
        write_index(&dir, &maps, &studies, &out)?;
    }
    println!(
        "{:<10} {:<16} misplaced elements of the box",
        "TMA", "address XOR"
    );
    for r in &rec.results {
        println!(
            "{:<10} {:<16} {} of {}",
            r.tma_swizzle.name(),
            r.address_swizzle.name(),
            r.mismatches,
            r.elements
        );
    }
    let diagonal_ok = rec
        .results
        .iter()
        .filter(|r| r.tma_swizzle == r.address_swizzle)
        .all(|r| r.mismatches == 0);
    println!(
        "{:.2} s wall on {}; {}",
        rec.wall_s,
        info.name,
        dir.join(format!("{}.json", stsm::STEM)).display()
    );
    if emulator {
        println!(
            "NOTE: emulator results: the documented behaviour run on the CPU, not hardware findings."
        );
    }
    Ok(if diagonal_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn run_sass(
    picked: &[Case],
    target: Option<Target>,
    output: Option<PathBuf>,
    force: bool,
) -> Result<ExitCode> {
    let target = match target {
        Some(t) => t,
        None => "sm_90a".parse().map_err(|e: String| anyhow::anyhow!(e))?,
    };
    super::matrix::write_listings(
        picked,
        |c| c.id(),
        |_| target,
        crate::tma::sass::report,
        output,
        force,
    )
}
