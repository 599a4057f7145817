//! `fp4probe codegen`: write the lane tables as CUDA headers and a Rust module, check that the
//! committed ones are current, or run the tile round trip on the GPU.

use crate::codegen::{self, DEFAULT_MAP_DIRS, DEFAULT_OUT_DIR, DEFAULT_RUST_PATH, Options};
use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Lane map folders. Per variant a hardware map wins over an emulator map; among maps of
    /// one backend, the earlier folder.
    #[arg(long, num_args = 1.., value_name = "DIR", default_values = DEFAULT_MAP_DIRS)]
    pub maps: Vec<PathBuf>,
    /// Header folder.
    #[arg(short, long, value_name = "DIR", default_value = DEFAULT_OUT_DIR)]
    pub output: PathBuf,
    /// The generated Rust module.
    #[arg(long, value_name = "FILE", default_value = DEFAULT_RUST_PATH)]
    pub rust: PathBuf,
    /// Write nothing: regenerate in memory and exit 1, naming every stale, missing or extra file,
    /// when anything committed differs.
    #[arg(long)]
    pub check: bool,
    /// Compile kernels/tile_roundtrip.cu with NVRTC for this GPU, move random tiles through the
    /// generated tables and one mma.sync, and compare D with the CPU GEMM bit for bit.
    #[arg(long)]
    pub verify: bool,
    /// Seed of the --verify inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// `fp4probe codegen` plus every option that differs from its default, as the headers say it.
fn command_line(a: &Args) -> String {
    let mut s = String::from("fp4probe codegen");
    let default_maps: Vec<PathBuf> = DEFAULT_MAP_DIRS.iter().map(PathBuf::from).collect();
    if a.maps != default_maps {
        s += " --maps";
        for m in &a.maps {
            s += &format!(" {}", m.display());
        }
    }
    if a.output.as_path() != std::path::Path::new(DEFAULT_OUT_DIR) {
        s += &format!(" -o {}", a.output.display());
    }
    if a.rust.as_path() != std::path::Path::new(DEFAULT_RUST_PATH) {
        s += &format!(" --rust {}", a.rust.display());
    }
    s
}

pub fn run(a: Args) -> Result<ExitCode> {
    if a.verify {
        let report = codegen::verify::run_on_gpu(&codegen::verify::kernels_dir(), a.seed)?;
        println!("{report}");
        if !report.passed() {
            return Ok(ExitCode::from(1));
        }
        if !a.check {
            return Ok(ExitCode::SUCCESS);
        }
    }
    let opts = Options {
        root: std::env::current_dir()?,
        map_dirs: a.maps.clone(),
        out_dir: a.output.clone(),
        rust_path: a.rust.clone(),
        command: command_line(&a),
    };
    let g = codegen::generate(&opts)?;
    for n in &g.notes {
        eprintln!("note: {n}");
    }
    let hw = g.sources.iter().filter(|s| s.hardware()).count();
    let summary = format!(
        "{} variants ({hw} hardware maps, {} emulator maps), {} files",
        g.sources.len(),
        g.sources.len() - hw,
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
    let changed = codegen::write(&g, &opts)?;
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
