//! `fp4probe matrix`: measure `ldmatrix`, `stmatrix` and `movmatrix` (`probe`), show what their
//! probe kernels lower to in SASS (`sass`), and rewrite the pages of a folder of maps
//! (`report`).

use crate::device::cuda::CudaBackend;
use crate::device::{BackendChoice, BackendKind, fallback_notice};
use crate::isa::Target;
use crate::isa::matrix::{self, MatrixVariant};
use crate::movement::backend::MoveBackend;
use crate::movement::emulator::MoveEmulator;
use crate::movement::kernel::probe_kernel;
use crate::movement::map::{CSV_HEADER, MatrixMap, SCHEMA, Status};
use crate::movement::probe::probe;
use crate::movement::{not_probed, probed_catalog};
use crate::outfile::{JSON_MARKER, Ours, Outputs};
use crate::provenance::Provenance;
use crate::report::matrix::{PAGE_MARKER, SVG_MARKER, documented_word, index, page, svg};
use crate::sass::{SassReport, Toolchain, ToolchainKind};
use anyhow::{Result, bail};
use clap::Subcommand;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

/// Which variants: `--variant` (repeatable) or `--all`.
#[derive(clap::Args, Debug, Clone)]
pub struct Pick {
    /// Catalog id (`ldmatrix.m8n8.x4.trans.b16`) or the instruction as written in a kernel.
    #[arg(long = "variant")]
    pub variants: Vec<String>,
    /// Every variant the probes run (the 16-bit m8n8 forms).
    #[arg(long)]
    pub all: bool,
}

#[derive(Subcommand, Debug)]
pub enum Sub {
    /// Which lane's address names which shared row and which (lane, register, element)
    /// receives or gives which element, validated bit-exact; maps, pages and pictures.
    Probe {
        #[command(flatten)]
        pick: Pick,
        /// auto: CUDA when a driver and a device exist, else the emulator (with a loud notice).
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendChoice,
        /// Output folder (default: results/sm_XY/matrix, or results/emulator/matrix).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Replace read-only or foreign files and write through links; a hardware result is
        /// never replaced by an emulator one.
        #[arg(long)]
        force: bool,
        /// Seed of the random validation experiments.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// SASS of the probe kernels (offline, pinned ptxas + disassembler): the LDSM, STSM or
    /// MOVM each instruction becomes.
    Sass {
        #[command(flatten)]
        pick: Pick,
        /// Target (default: each variant's minimum target).
        #[arg(long)]
        target: Option<Target>,
        /// Write <DIR>/<id>.<target>.sass.txt and .json.
        #[arg(short, long)]
        output: Option<PathBuf>,
        #[arg(long)]
        force: bool,
    },
    /// Rewrite the pages, pictures and README.md of a folder of maps from its JSON files.
    Report {
        /// The folder of maps (`reports/sm_90/ldmatrix`).
        dir: PathBuf,
        #[arg(long)]
        force: bool,
    },
}

/// The variants `pick` names, each once; an unknown id or a form the probes do not run is an
/// error naming it.
fn select(pick: &Pick) -> Result<Vec<MatrixVariant>> {
    if pick.all && !pick.variants.is_empty() {
        bail!("give --variant ID or --all, not both");
    }
    let mut out: Vec<MatrixVariant> = Vec::new();
    for text in &pick.variants {
        let Some(v) = matrix::find(text) else {
            bail!(
                "'{text}' is not an ldmatrix/stmatrix/movmatrix variant (see `fp4probe catalog \
                 --family ldmatrix`; ids look like ldmatrix.m8n8.x4.trans.b16)"
            );
        };
        if let Some(why) = not_probed(&v) {
            bail!("{}: {why}", v.id());
        }
        if !out.contains(&v) {
            out.push(v);
        }
    }
    if pick.all {
        out = probed_catalog();
    }
    if out.is_empty() {
        bail!("nothing selected: give --variant ID or --all");
    }
    Ok(out)
}

pub fn run(args: Args) -> Result<ExitCode> {
    match args.command {
        Sub::Probe {
            pick,
            backend,
            output,
            force,
            seed,
        } => {
            let picked = select(&pick)?;
            let cuda = || -> Result<CudaBackend> { CudaBackend::open() };
            match backend {
                BackendChoice::Emulator => {
                    run_probe(&MoveEmulator::new(), &picked, output, force, seed)
                }
                BackendChoice::Cuda => run_probe(&cuda()?, &picked, output, force, seed),
                BackendChoice::Auto => match cuda() {
                    Ok(d) => run_probe(&d, &picked, output, force, seed),
                    Err(why) => {
                        eprintln!("{}", fallback_notice(&why));
                        run_probe(&MoveEmulator::new(), &picked, output, force, seed)
                    }
                },
            }
        }
        Sub::Sass {
            pick,
            target,
            output,
            force,
        } => run_sass(&select(&pick)?, target, output, force),
        Sub::Report { dir, force } => {
            let out = Outputs::new(force);
            let maps = read_maps(&dir)?;
            if maps.is_empty() {
                bail!("no data-movement map ({SCHEMA}) in {}", dir.display());
            }
            let out = out.inputs(maps.iter().map(|(p, _)| p.clone()));
            for (_, m) in &maps {
                write_pages(&dir, m, &out)?;
            }
            write_index(&dir, &maps, &out)?;
            println!("{} pages and README.md in {}", maps.len(), dir.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Every data-movement map in `dir`, sorted by file name.
fn read_maps(dir: &Path) -> Result<Vec<(PathBuf, MatrixMap)>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("cannot read folder {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let is_map = std::fs::read_to_string(&f)
            .is_ok_and(|t| t.contains(&format!("\"schema\": \"{SCHEMA}\"")));
        if is_map {
            let m = MatrixMap::load(&f)?;
            out.push((f, m));
        }
    }
    Ok(out)
}

fn write_pages(dir: &Path, m: &MatrixMap, out: &Outputs) -> Result<()> {
    out.write(
        &dir.join(format!("{}.md", m.variant)),
        page(m),
        Ours::marked(PAGE_MARKER),
    )?;
    out.write(
        &dir.join(format!("{}.svg", m.variant)),
        svg(m),
        Ours::marked(SVG_MARKER),
    )
}

fn write_index(dir: &Path, maps: &[(PathBuf, MatrixMap)], out: &Outputs) -> Result<()> {
    let ms: Vec<MatrixMap> = maps.iter().map(|(_, m)| m.clone()).collect();
    out.write(
        &dir.join("README.md"),
        index(&ms),
        Ours::marked(PAGE_MARKER),
    )
}

fn run_probe(
    backend: &dyn MoveBackend,
    picked: &[MatrixVariant],
    output: Option<PathBuf>,
    force: bool,
    seed: u64,
) -> Result<ExitCode> {
    for v in picked {
        backend.check_supported(v)?;
    }
    let info = backend.info().clone();
    let dir = output.unwrap_or_else(|| info.results_dir().join("matrix"));
    let out = Outputs::new(force);
    let emulator = info.backend == BackendKind::Emulator;
    // Every output is checked before the first experiment.
    for v in picked {
        out.check_result(&dir, &v.id(), Some(CSV_HEADER), emulator)?;
        for ext in ["md", "svg"] {
            let marker = if ext == "md" { PAGE_MARKER } else { SVG_MARKER };
            out.check(&dir.join(format!("{}.{ext}", v.id())), Ours::marked(marker))?;
        }
    }
    out.check(&dir.join("README.md"), Ours::marked(PAGE_MARKER))?;
    let t0 = std::time::Instant::now();
    let mut failed = 0;
    println!(
        "{:<32} {:<6} {:>8}  {:<22} {:<12} {:<10} vs PTX ISA",
        "variant", "result", "wall", "stacked row", "col", "address"
    );
    for v in picked {
        let o = probe(backend, v, seed)?;
        let map = MatrixMap::new(v, &o, Provenance::new(&info, probe_kernel(v)));
        map.write(&dir, &out)?;
        write_pages(&dir, &map, &out)?;
        let ok = map.status == Status::Passed;
        failed += usize::from(!ok);
        let f = map.forms.as_ref();
        let get =
            |x: Option<&Option<String>>| x.and_then(|o| o.clone()).unwrap_or_else(|| "-".into());
        println!(
            "{:<32} {:<6} {:>6.3} s  {:<22} {:<12} {:<10} {}",
            v.id(),
            if ok { "passed" } else { "FAILED" },
            o.wall_s,
            get(f.map(|f| &f.row)),
            get(f.map(|f| &f.col)),
            get(f.map(|f| &f.address_row)),
            documented_word(&map)
        );
        if let Some(why) = &map.failure {
            println!("    failure: {why}");
        }
    }
    let maps = read_maps(&dir)?;
    write_index(&dir, &maps, &out)?;
    println!(
        "{} passed, {failed} failed, {:.2} s wall on {}; maps, pages and pictures in {}",
        picked.len() - failed,
        t0.elapsed().as_secs_f64(),
        info.name,
        dir.display()
    );
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

fn run_sass(
    picked: &[MatrixVariant],
    target: Option<Target>,
    output: Option<PathBuf>,
    force: bool,
) -> Result<ExitCode> {
    write_listings(
        picked,
        |v| v.id(),
        |v| target.unwrap_or(v.min_target),
        crate::movement::sass::report,
        output,
        force,
    )
}

/// The SASS listing of each of `items` (named by `id`, assembled for `target_of`, reported by
/// `report`), printed with its verdict and, with `output`, written as `<id>.<target>.sass.txt`
/// and `.json` there; every output is checked before the first listing.
pub(super) fn write_listings<T>(
    items: &[T],
    id: impl Fn(&T) -> String,
    target_of: impl Fn(&T) -> Target,
    report: impl Fn(&T, Target, &Toolchain) -> Result<SassReport, crate::sass::SassError>,
    output: Option<PathBuf>,
    force: bool,
) -> Result<ExitCode> {
    let out = Outputs::new(force);
    if let Some(dir) = &output {
        for x in items {
            let base = SassReport::file_base(&id(x), target_of(x));
            out.check(
                &dir.join(format!("{base}.txt")),
                Ours::marked(crate::sass::LISTING_MARKER),
            )?;
            out.check(&dir.join(format!("{base}.json")), Ours::marked(JSON_MARKER))?;
        }
    }
    let tc = Toolchain::find(ToolchainKind::Pinned)?;
    println!("toolchain {}", tc.describe());
    let mut failed = 0;
    for x in items {
        let t = target_of(x);
        match report(x, t, &tc) {
            Ok(r) => {
                println!("{:<32} {:<6} {}", id(x), t.to_string(), r.verdict);
                if let Some(dir) = &output {
                    r.write(dir, &out)?;
                }
            }
            Err(e) => {
                failed += 1;
                println!("{:<32} {:<6} {}", id(x), t.to_string(), e.summary());
            }
        }
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
