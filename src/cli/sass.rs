//! `fp4probe sass`: what a variant's probe kernel lowers to in SASS, for any target, offline
//! with the pinned tools or with the machine's own CUDA toolkit.

use super::select::{Family, FamilyArgs, VariantArgs};
use crate::isa::{Rejected, Target, Variant};
use crate::outfile::{JSON_MARKER, Ours, Outputs};
use crate::sass::{self, SassError, SassReport, Toolchain, ToolchainKind};
use anyhow::{Result, bail};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub select: VariantArgs,
    #[command(flatten)]
    pub family: FamilyArgs,
    /// wgmma with -o: write listings only for these N (comma-separated); DIR/README.md, the
    /// summary, still covers every selected variant.
    #[arg(long, value_delimiter = ',')]
    pub listing_n: Vec<u32>,
    /// Target to assemble for (sm_80, sm_90, sm_120a, ...; `device`: this machine's GPU, via
    /// the CUDA driver). Default: each variant's minimum target. A target ptxas refuses for a
    /// variant is reported with ptxas's log.
    #[arg(long)]
    pub target: Option<TargetArg>,
    /// pinned: $FP4PROBE_CUDA_BIN, then the pinned tools of .ci/install-cuda-tools, then PATH;
    /// system: the machine's CUDA toolkit (PATH, then /usr/local/cuda/bin).
    #[arg(long, value_enum, default_value = "pinned")]
    pub toolchain: ToolchainKind,
    /// Keep only variants whose minimum target is one of these (comma-separated), e.g.
    /// `--min-target sm_120a` or `--min-target sm_75,sm_80,sm_89,sm_90`.
    #[arg(long, value_delimiter = ',')]
    pub min_target: Vec<Target>,
    /// Write <DIR>/<variant>.<target>.sass.txt and .sass.json; with --all also <DIR>/README.md,
    /// an index of every .sass.json in DIR.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Print the full listing and the mma region, not only the verdict and histogram.
    #[arg(long)]
    pub listing: bool,
    /// Only rewrite <DIR>/README.md (-o DIR) from the .sass.json files in DIR; assemble
    /// nothing. (--all with -o rewrites it too.)
    #[arg(long, requires = "output")]
    pub index: bool,
    /// Write through a symbolic link, FIFO or device given as output and replace read-only or
    /// foreign files (a README.md that is not a SASS index, say).
    #[arg(long)]
    pub force: bool,
}

/// `--target`: a target, or `device`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetArg {
    Fixed(Target),
    Device,
}

impl std::str::FromStr for TargetArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "device" {
            Ok(TargetArg::Device)
        } else {
            s.parse().map(TargetArg::Fixed)
        }
    }
}

fn print_report(r: &SassReport, listing: bool) {
    println!("{}  at {}", r.variant, r.target);
    println!("  instruction: {}", r.instruction);
    if let Some(d) = &r.device {
        println!("  device: {d}");
    }
    println!("  verdict: {}", r.verdict);
    println!("  tensor instructions: {}", r.tensor_instructions.len());
    for t in &r.tensor_instructions {
        println!("    {t}");
    }
    println!(
        "  histogram ({} instructions; base opcode, then each full form):",
        r.listing.len()
    );
    for line in sass::histogram_lines(&r.histogram) {
        println!("    {line}");
    }
    if listing {
        println!("  listing:");
        for l in &r.listing {
            println!("    {l}");
        }
        println!(
            "  mma region (after the last LDG, up to the first STG; subroutines inlined; fillers left out):"
        );
        for l in &r.mma_region {
            println!("    {l}");
        }
    }
}

/// Whether `<dir>/<base>.txt` and `.json` may be written.
fn check_listing(out: &Outputs, dir: &std::path::Path, base: &str) -> Result<()> {
    out.check(
        &dir.join(format!("{base}.txt")),
        Ours::marked(sass::LISTING_MARKER),
    )?;
    out.check(&dir.join(format!("{base}.json")), Ours::marked(JSON_MARKER))
}

/// `f` over `items` on a few threads (ptxas and cuobjdump are subprocesses), results in order.
fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8);
    crate::threads::map_on_threads(items, threads, f)
}

pub fn run(args: Args) -> Result<ExitCode> {
    let out = Outputs::new(args.force);
    if args.family.family(&args.select) == Family::Wgmma {
        return run_wgmma(args, &out);
    }
    if !args.listing_n.is_empty() {
        bail!("--listing-n is for --family wgmma");
    }
    if args.index {
        let dir = args.output.as_ref().expect("clap requires -o with --index");
        println!("wrote {}", sass::write_index(dir, &out)?.display());
        return Ok(ExitCode::SUCCESS);
    }
    let mut variants: Vec<Variant> = args.family.lane_mapped_variants(&args.select)?;
    if !args.min_target.is_empty() {
        variants.retain(|v| args.min_target.contains(&v.min_target));
        if variants.is_empty() {
            bail!(
                "no selected variant has its minimum target in {:?}",
                args.min_target
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
            );
        }
    }
    let tc = Toolchain::find(args.toolchain)?;
    println!("toolchain {}", tc.describe());
    if args.toolchain == ToolchainKind::Pinned && tc.ptxas_version != Rejected::PTXAS_VERSION {
        println!(
            "note: this ptxas is {}, not the pinned {} (run .ci/install-cuda-tools)",
            tc.ptxas_version,
            Rejected::PTXAS_VERSION
        );
    }
    let (device, fixed_target) = match args.target {
        None => (None, None),
        Some(TargetArg::Fixed(t)) => (None, Some(t)),
        Some(TargetArg::Device) => {
            let (name, t) = sass::device_target()?;
            println!("device: {name} -> {t}");
            (Some(name), Some(t))
        }
    };
    let single = variants.len() == 1 && !args.select.all;
    // Every output is checked before anything is assembled.
    if let Some(dir) = &args.output {
        for v in &variants {
            let target = fixed_target.unwrap_or(v.min_target);
            check_listing(&out, dir, &SassReport::file_base(&v.file_stem(), target))?;
        }
        if !single {
            out.check(&dir.join("README.md"), Ours::marked(sass::INDEX_MARKER))?;
        }
    }
    let results = par_map(&variants, |v| {
        let target = fixed_target.unwrap_or(v.min_target);
        let r = sass::report(v, target, &tc).map(|mut r| {
            r.device = device.clone();
            r
        });
        (target, r)
    });
    if single {
        let (_, r) = results.into_iter().next().expect("one variant");
        let r = r?;
        print_report(&r, args.listing);
        if let Some(dir) = &args.output {
            let p = r.write(dir, &out)?;
            println!("  wrote {} (+ .json)", p.display());
        }
        return Ok(ExitCode::SUCCESS);
    }

    let (mut ok, mut rejected, mut failed) = (0, 0, 0);
    let mut rows: Vec<(String, Target, String)> = Vec::new();
    for (v, (target, r)) in variants.iter().zip(results) {
        match r {
            Ok(r) => {
                if args.listing {
                    print_report(&r, true);
                }
                if let Some(dir) = &args.output {
                    r.write(dir, &out)?;
                }
                ok += 1;
                rows.push((v.id(), target, r.verdict));
            }
            Err(e) => {
                match e {
                    SassError::Rejected { .. } => rejected += 1,
                    SassError::Other(_) => failed += 1,
                }
                rows.push((v.id(), target, e.summary()));
            }
        }
    }
    let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(7).max(7);
    println!("{:<w$}  {:<8}  verdict", "variant", "target");
    for (id, t, verdict) in &rows {
        println!("{id:<w$}  {:<8}  {verdict}", t.to_string());
    }
    print!("{ok} disassembled, {rejected} rejected by ptxas, {failed} failed");
    if let Some(dir) = &args.output {
        let index = sass::write_index(dir, &out)?;
        print!("; reports in {}, index {}", dir.display(), index.display());
    }
    println!();
    Ok(if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `--family wgmma`: the probe kernel of each selected dense wgmma variant for sm_90a; with
/// `-o DIR` the listings (those of `--listing-n` only, when given) and, for a selection of
/// several, DIR/README.md summarising every selected variant by type set.
fn run_wgmma(args: Args, out: &Outputs) -> Result<ExitCode> {
    use crate::wgmma::sass as wg;
    if args.index {
        bail!(
            "--index rebuilds the mma.sync index from its .sass.json files; the wgmma summary \
             covers variants without listings: rerun with --family wgmma --all -o DIR"
        );
    }
    if !args.min_target.is_empty() {
        bail!("--min-target selects mma.sync variants; every wgmma variant needs sm_90a");
    }
    let variants = args.family.wgmma_variants(&args.select)?;
    if let Some(n) = args
        .listing_n
        .iter()
        .find(|n| !variants.iter().any(|v| v.n == **n))
    {
        bail!("--listing-n {n}: no selected variant has N = {n}");
    }
    let tc = Toolchain::find(args.toolchain)?;
    println!("toolchain {}", tc.describe());
    let (device, target) = match args.target {
        None => (None, wg::target()),
        Some(TargetArg::Fixed(t)) => (None, t),
        Some(TargetArg::Device) => {
            let (name, t) = sass::device_target()?;
            println!("device: {name} -> {t}");
            (Some(name), t)
        }
    };
    let single = variants.len() == 1 && !args.select.all && args.family.filter.is_none();
    let listed =
        |v: &crate::wgmma::WgVariant| args.listing_n.is_empty() || args.listing_n.contains(&v.n);
    // Every output is checked before anything is assembled.
    if let Some(dir) = &args.output {
        for v in variants.iter().filter(|v| listed(v)) {
            check_listing(out, dir, &SassReport::file_base(&v.id(), target))?;
        }
        if !single {
            out.check(&dir.join("README.md"), Ours::marked(wg::SUMMARY_MARKER))?;
        }
    }
    let results = par_map(&variants, |v| {
        wg::report(v, target, &tc).map(|mut r| {
            r.device = device.clone();
            r
        })
    });
    if single {
        let r = results.into_iter().next().expect("one variant")?;
        print_report(&r, args.listing);
        if let Some(dir) = &args.output {
            let p = r.write(dir, out)?;
            println!("  wrote {} (+ .json)", p.display());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut rows = Vec::new();
    let mut written = Vec::new();
    let mut failed = 0;
    for (v, r) in variants.iter().zip(results) {
        let outcome = match r {
            Ok(r) => {
                if args.listing {
                    print_report(&r, true);
                }
                if let Some(dir) = &args.output
                    && listed(v)
                {
                    r.write(dir, out)?;
                    written.push(SassReport::file_base(&v.id(), target));
                }
                Ok(r)
            }
            Err(e) => {
                failed += usize::from(matches!(e, SassError::Other(_)));
                Err(e.summary())
            }
        };
        rows.push(wg::Row {
            variant: v.clone(),
            outcome,
        });
    }
    let tools = format!(
        "{}: ptxas {}, {} {}",
        tc.kind.name(),
        tc.ptxas_version,
        tc.disassembler_name(),
        tc.disassembler_version
    );
    let page = wg::summary(&rows, &tools, &wg::command_line(), &written);
    match &args.output {
        Some(dir) => {
            let path = dir.join("README.md");
            out.create_dir(dir)?;
            out.write(&path, &page, Ours::marked(wg::SUMMARY_MARKER))?;
            println!(
                "{} variants; {} listings and the summary {} in {}",
                rows.len(),
                written.len(),
                path.display(),
                dir.display()
            );
        }
        None => print!("{page}"),
    }
    Ok(if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
