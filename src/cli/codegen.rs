//! `fp4probe codegen`: write the lane tables as CUDA headers and a Rust module, check that the
//! committed ones are current, or run the tile round trip on the GPU.

use crate::codegen::wgmma::DEFAULT_WGMMA_DIRS;
use crate::codegen::{self, DEFAULT_MAP_DIRS, DEFAULT_OUT_DIR, DEFAULT_RUST_PATH, Options};
use crate::device::cuda::CudaBackend;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The fp4probe checkout whose lane maps are read and whose generated files are written or
    /// checked. Default: the checkout containing the current directory (the nearest folder
    /// above it whose Cargo.toml is fp4probe's).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Lane map folders. Per variant a hardware map wins over an emulator map; among maps of
    /// one backend, the earlier folder. [default: reports/sm_90 reports/emulator, in --root]
    #[arg(long, num_args = 1.., value_name = "DIR")]
    pub maps: Vec<PathBuf>,
    /// wgmma map folders: lane maps and shared-memory studies (hardware maps only).
    /// [default: reports/sm_90/wgmma, in --root]
    #[arg(long, num_args = 1.., value_name = "DIR")]
    pub wgmma_maps: Vec<PathBuf>,
    /// Header folder. [default: kernels/generated, in --root]
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// The generated Rust module. [default: src/generated/mod.rs, in --root]
    #[arg(long, value_name = "FILE")]
    pub rust: Option<PathBuf>,
    /// Write nothing: regenerate in memory and exit 1, naming every stale, missing or extra file,
    /// when anything committed differs.
    #[arg(long)]
    pub check: bool,
    /// Write through a symbolic link, FIFO or device named as an output and replace read-only
    /// or foreign files there. A lane map read is never overwritten, forced or not.
    #[arg(long, conflicts_with = "check")]
    pub force: bool,
    /// Compile kernels/tile_roundtrip.cu with NVRTC for this GPU, move random tiles through the
    /// generated tables and one mma.sync, and compare D with the CPU GEMM bit for bit; on an
    /// sm_90 GPU also kernels/wgmma_roundtrip.cu: tiles into shared memory through the
    /// generated offset functions and descriptor builder, one wgmma per swizzle mode and
    /// major-ness, D out through the generated tables. The sources are the ones built into this
    /// binary, or $FP4PROBE_KERNELS (a kernels/ folder). Without a GPU it says skipped and
    /// exits 2.
    #[arg(long)]
    pub verify: bool,
    /// Seed of the --verify inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Where `codegen` reads and writes: absolute paths, each either the default in the root or
/// a path from the command line (a relative one taken from the current directory).
struct Paths {
    root: PathBuf,
    maps: Vec<PathBuf>,
    wgmma_maps: Vec<PathBuf>,
    output: PathBuf,
    rust: PathBuf,
}

impl Paths {
    fn new(a: &Args) -> Result<Self> {
        let cwd = std::env::current_dir().context("cannot read the current directory")?;
        let root = match &a.root {
            Some(r) => std::fs::canonicalize(cwd.join(r))
                .with_context(|| format!("--root {}", r.display()))?,
            None => match crate::locate::checkout_containing(&cwd) {
                Some(r) => r,
                None => bail!(
                    "{} is not inside a fp4probe checkout: run inside a fp4probe checkout or \
                     pass --root DIR",
                    cwd.display()
                ),
            },
        };
        // Canonical where the path exists, as `root` is, so that a default's place given
        // another way (`-o ../kernels/generated` from `src/`) compares equal to it.
        let given = |p: &Path| {
            let p = cwd.join(p);
            std::fs::canonicalize(&p).unwrap_or(p)
        };
        let maps = if a.maps.is_empty() {
            DEFAULT_MAP_DIRS.iter().map(|d| root.join(d)).collect()
        } else {
            a.maps.iter().map(|p| given(p)).collect()
        };
        let wgmma_maps = if a.wgmma_maps.is_empty() {
            DEFAULT_WGMMA_DIRS.iter().map(|d| root.join(d)).collect()
        } else {
            a.wgmma_maps.iter().map(|p| given(p)).collect()
        };
        let output = a
            .output
            .as_deref()
            .map_or_else(|| root.join(DEFAULT_OUT_DIR), given);
        let rust = a
            .rust
            .as_deref()
            .map_or_else(|| root.join(DEFAULT_RUST_PATH), given);
        Ok(Paths {
            root,
            maps,
            wgmma_maps,
            output,
            rust,
        })
    }

    /// `fp4probe codegen` plus every option that differs from its default, as the headers say
    /// it: the paths as given on the command line, so the text does not depend on where the
    /// checkout is. An option given with its default's place is left out.
    fn command_line(&self, a: &Args) -> String {
        let mut s = String::from("fp4probe codegen");
        let default_maps: Vec<PathBuf> =
            DEFAULT_MAP_DIRS.iter().map(|d| self.root.join(d)).collect();
        if self.maps != default_maps {
            s += " --maps";
            for m in &a.maps {
                s += &format!(" {}", m.display());
            }
        }
        let default_wgmma: Vec<PathBuf> = DEFAULT_WGMMA_DIRS
            .iter()
            .map(|d| self.root.join(d))
            .collect();
        if self.wgmma_maps != default_wgmma {
            s += " --wgmma-maps";
            for m in &a.wgmma_maps {
                s += &format!(" {}", m.display());
            }
        }
        if let Some(o) = &a.output
            && self.output != self.root.join(DEFAULT_OUT_DIR)
        {
            s += &format!(" -o {}", o.display());
        }
        if let Some(r) = &a.rust
            && self.rust != self.root.join(DEFAULT_RUST_PATH)
        {
            s += &format!(" --rust {}", r.display());
        }
        s
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    if a.verify {
        let gpu = match CudaBackend::open() {
            Ok(g) => g,
            Err(e) => {
                eprintln!(
                    "codegen --verify: skipped: the tile round trips need an NVIDIA GPU: {e:#}"
                );
                return Ok(ExitCode::from(2));
            }
        };
        let tree = crate::kernels::tree()?;
        let report = codegen::verify::run_on_gpu(&gpu, tree.path(), a.seed)?;
        println!("{report}");
        let mut passed = report.passed();
        match codegen::wgmma::verify::run_on_gpu(&gpu, tree.path(), a.seed) {
            Ok(wg) => {
                println!("{wg}");
                passed &= wg.passed();
            }
            Err(e) => println!("wgmma round trip: skipped: {e:#}"),
        }
        if !passed {
            return Ok(ExitCode::from(1));
        }
        if !a.check {
            return Ok(ExitCode::SUCCESS);
        }
    }
    let paths = Paths::new(&a)?;
    let opts = Options {
        matrix_dirs: codegen::matrix::DEFAULT_MATRIX_DIRS
            .iter()
            .map(|d| paths.root.join(d))
            .collect(),
        tma_dirs: codegen::tma::DEFAULT_TMA_DIRS
            .iter()
            .map(|d| paths.root.join(d))
            .collect(),
        sparse_dirs: codegen::sparse::DEFAULT_SPARSE_DIRS
            .iter()
            .map(|d| paths.root.join(d))
            .collect(),
        command: paths.command_line(&a),
        root: paths.root,
        map_dirs: paths.maps,
        out_dir: paths.output,
        rust_path: paths.rust,
        wgmma_dirs: paths.wgmma_maps,
    };
    let g = codegen::generate(&opts)?;
    for n in &g.notes {
        eprintln!("note: {n}");
    }
    let hw = g.sources.iter().filter(|s| s.hardware()).count();
    let summary = format!(
        "{} variants ({hw} hardware maps, {} emulator maps); wgmma: {} lane maps, {} \
         shared-memory studies, {} families; {} files",
        g.sources.len(),
        g.sources.len() - hw,
        g.wgmma.lane_maps.len(),
        g.wgmma.smem.len(),
        g.wgmma.families.len(),
        g.files.len()
    );
    if a.check {
        let problems = codegen::check(&g, &opts);
        if problems.is_empty() {
            println!("codegen --check: up to date: {summary}");
            return Ok(ExitCode::SUCCESS);
        }
        for p in &problems {
            eprintln!("codegen --check: {p}");
        }
        eprintln!(
            "codegen --check: {} file(s) out of date; run `{}`",
            problems.len(),
            opts.command
        );
        return Ok(ExitCode::from(1));
    }
    let changed = codegen::write(&g, &opts, a.force)?;
    for c in &changed {
        println!("{c}");
    }
    println!(
        "codegen: {summary}; {} changed",
        if changed.is_empty() {
            "none".to_string()
        } else {
            changed.len().to_string()
        }
    );
    Ok(ExitCode::SUCCESS)
}
