//! `fp4probe quant-bench`: GB/s of the quantization kernels against the device's own
//! device-to-device copy, measured in the same run; every output checked byte for byte
//! against the CPU reference; and the optimal-scale search's error reduction and speed on a
//! weights-like tensor.

use super::limits::{check_output_file, check_run_bytes};
use crate::outfile::{Ours, Outputs};

/// The headers of `--csv` and `--search-csv`, by which existing files of each kind are
/// recognised.
const CSV_HEADER: &str =
    "impl,format,input_dtype,rows,cols,ms_median,ms_min,ms_max,bytes,gb_per_s,l2_resident";
const SEARCH_CSV_HEADER: &str = "format,input_dtype,rows,cols,sse_naive,sse_search,reduction_pct,blocks_changed_pct,ms_naive,ms_search,gb_per_s_search";
use super::quantize::{compare_bytes, squared_error};
use crate::device::Backend;
use crate::device::cuda::{CudaBackend, DeviceBuffer, Timed, Timing};
use crate::quant::cuda::{DeviceQuant, InType, QuantKernels, encode_input};
use crate::quant::{self, NvLevels, Quantized, ScaleLayout, ScaleMode, Spec};
use anyhow::{Context, Result, bail};
use clap::builder::RangedU64ValueParser;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// H100 L2 size; rows whose bytes (read plus written, as counted for GB/s) fit are marked,
/// since repeats may then run from L2 (tests/gpu/quant_bench_torch.py applies the same rule).
const L2_BYTES: usize = 50 << 20;

/// Quantization throughput on the GPU (CUDA only).
///
/// For each input type and size: the median of --repeats individually timed runs (CUDA
/// events around each run, the runs queued back to back after --warmup untimed runs; no
/// cache flush between runs) of each format, and of a device-to-device copy of the input
/// (cuMemcpyDtoD) as the bandwidth yardstick. GB/s counts bytes read plus bytes written once
/// (copy: twice the input). Two-level NVFP4 includes its amax pass, which reads the input a
/// second time; `nvfp4-two-level-given-amax` times the quantization pass alone and
/// `nvfp4-tensor-amax` the amax pass alone (bytes: the input). Then the windowed scale search
/// on a heavy-tailed weights-like tensor: squared-error reduction and time.
///
/// Every value is checked before a GPU is opened; a size whose run would allocate more than
/// 64 GiB (host and device) is refused.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Sizes ROWSxCOLS (COLS a multiple of 32, the MXFP4 block).
    #[arg(
        long,
        value_delimiter = ',',
        default_values_t = ["1024x1024".to_string(), "4096x8192".to_string(), "8192x8192".to_string()],
    )]
    pub sizes: Vec<String>,
    /// Input types: f32, bf16, f16.
    #[arg(long, value_delimiter = ',', default_values_t = ["f32".to_string(), "bf16".to_string()])]
    pub dtypes: Vec<String>,
    /// Scale layouts each format is timed in, side by side (rows of a tiled layout are named
    /// `<format>-<layout>`; 8x4 applies to NVFP4 only).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [ScaleLayout::Linear])]
    pub scale_layouts: Vec<ScaleLayout>,
    /// Timed runs per row (1 to 10000).
    #[arg(
        long,
        default_value_t = 50,
        value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_RUNS),
    )]
    pub repeats: usize,
    /// Untimed runs before them (0 to 10000).
    #[arg(
        long,
        default_value_t = 5,
        value_parser = RangedU64ValueParser::<usize>::new().range(0..=MAX_RUNS),
    )]
    pub warmup: usize,
    /// Throughput rows (impl,format,input_dtype,rows,cols,ms_median,ms_min,ms_max,bytes,gb_per_s,l2_resident).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Search rows (format,input_dtype,rows,cols,sse_naive,sse_search,reduction_pct,...).
    #[arg(long)]
    pub search_csv: Option<PathBuf>,
    /// Write through a symbolic link, FIFO or device given as output and replace read-only or
    /// foreign files there.
    #[arg(long)]
    pub force: bool,
    /// Size of the weights-like tensor for the search.
    #[arg(long, default_value = "4096x4096")]
    pub search_size: String,
    /// Skip the byte-for-byte check against the CPU reference.
    #[arg(long)]
    pub no_check: bool,
    /// queued: runs back to back, each between its own events (the GPU's time); synced: a
    /// wait after every run, which adds the host's launch latency to each (for comparison).
    #[arg(long, value_enum, default_value_t = Timed::Queued)]
    pub timing: Timed,
}

/// Most timed or warm-up runs per row: each queued timed run holds a pair of CUDA events until
/// the row is read back.
const MAX_RUNS: u64 = 10_000;

/// Every format the bench runs blocks the last axis in 32s (MXFP4; NVFP4's 16 divides it).
const COLS_MULTIPLE: usize = 32;

/// ROWSxCOLS, both at least 1 and COLS a multiple of 32; errors name `option`.
fn parse_size(option: &str, s: &str) -> Result<(usize, usize)> {
    let bad = || format!("{option} {s}: expected ROWSxCOLS, e.g. 4096x8192");
    let (r, c) = s.split_once('x').with_context(bad)?;
    let (r, c): (usize, usize) = (
        r.trim().parse().with_context(bad)?,
        c.trim().parse().with_context(bad)?,
    );
    if r == 0 || c == 0 {
        bail!("{option} {s}: rows and columns must be at least 1");
    }
    if c % COLS_MULTIPLE != 0 {
        bail!(
            "{option} {s}: {c} columns are not a multiple of {COLS_MULTIPLE} (the MXFP4 block \
             the quantizers run in); use {}",
            c.next_multiple_of(COLS_MULTIPLE)
        );
    }
    Ok((r, c))
}

fn parse_type(s: &str) -> Result<InType> {
    Ok(match s {
        "f32" => InType::F32,
        "bf16" => InType::Bf16,
        "f16" => InType::F16,
        _ => bail!("--dtypes {s:?}: expected f32, bf16 or f16"),
    })
}

/// Packed FP4 codes and scales per element, rounded up (half a byte of codes, a scale per 16).
const FP4_BYTES_PER_ELEM: f64 = 0.5 + 1.0 / 16.0;

/// Bytes one throughput row of `rows × cols` in `in_type` allocates, host and device: on the
/// host the generated f32 input, its encoding, the values widened back, the GPU's and the CPU
/// reference's FP4 output; on the device the input, the copy's destination and the output.
fn throughput_bytes(rows: usize, cols: usize, in_type: InType) -> u128 {
    let t = in_type.size() as f64;
    let per_elem = (4.0 + t + 4.0 + 2.0 * FP4_BYTES_PER_ELEM) + (2.0 * t + FP4_BYTES_PER_ELEM);
    (rows as u128 * cols as u128) * per_elem.ceil() as u128
}

/// Bytes the search rows of `rows × cols` allocate: the f32 weights, per input type their
/// encoding and widened values, three FP4 outputs (naive, searched, CPU reference), and on the
/// device the input and one output.
fn search_bytes(rows: usize, cols: usize) -> u128 {
    let per_elem = 4.0 + 4.0 + 4.0 + 3.0 * FP4_BYTES_PER_ELEM + 4.0 + FP4_BYTES_PER_ELEM;
    (rows as u128 * cols as u128) * per_elem.ceil() as u128
}

/// Every argument checked, before any device is opened.
fn check_args(a: &Args) -> Result<()> {
    if a.sizes.is_empty() || a.dtypes.is_empty() || a.scale_layouts.is_empty() {
        bail!("--sizes, --dtypes and --scale-layouts need at least one value each");
    }
    let types = a
        .dtypes
        .iter()
        .map(|d| parse_type(d))
        .collect::<Result<Vec<_>>>()?;
    for size in &a.sizes {
        let (r, c) = parse_size("--sizes", size)?;
        for &t in &types {
            check_run_bytes(
                &format!("--sizes {size} with {} input", t.name()),
                throughput_bytes(r, c, t),
                "--sizes",
            )?;
        }
    }
    let (r, c) = parse_size("--search-size", &a.search_size)?;
    check_run_bytes(
        &format!("--search-size {}", a.search_size),
        search_bytes(r, c),
        "--search-size",
    )?;
    let out = Outputs::new(a.force);
    for (option, path, header) in [
        ("--csv", &a.csv, CSV_HEADER),
        ("--search-csv", &a.search_csv, SEARCH_CSV_HEADER),
    ] {
        if let Some(p) = path {
            check_output_file(option, p, &out, header)?;
        }
    }
    if let (Some(p), Some(q)) = (&a.csv, &a.search_csv)
        && p == q
    {
        bail!(
            "--csv and --search-csv name the same file ({}); each needs its own",
            p.display()
        );
    }
    Ok(())
}

/// Gaussian rows scaled by 2^k, k in -8..8: many different block scales.
fn bench_input(rows: usize, cols: usize, seed: u64) -> Vec<f32> {
    let mut rng = crate::rng::SplitMix64::new(seed);
    let mut x = Vec::with_capacity(rows * cols);
    for _ in 0..rows {
        let scale = 2f64.powi(rng.below(17) as i32 - 8);
        x.extend((0..cols).map(|_| (rng.normal() * scale) as f32));
    }
    x
}

/// Weights-like: Student-t (ν = 5) entries, per-row log-normal scale around 0.02, and 0.5% of
/// the columns ×8 (the outlier channels of real transformer weights).
pub fn weights_like(rows: usize, cols: usize, seed: u64) -> Vec<f32> {
    let mut rng = crate::rng::SplitMix64::new(seed);
    let outlier: Vec<bool> = (0..cols).map(|_| rng.uniform() < 0.005).collect();
    let mut x = Vec::with_capacity(rows * cols);
    for _ in 0..rows {
        let sigma = 0.02 * (0.3 * rng.normal()).exp();
        for &o in &outlier {
            let chi2: f64 = (0..5).map(|_| rng.normal().powi(2)).sum();
            let t = rng.normal() / (chi2 / 5.0).sqrt();
            x.push((t * sigma * if o { 8.0 } else { 1.0 }) as f32);
        }
    }
    x
}

struct Row {
    imp: &'static str,
    format: String,
    in_type: InType,
    rows: usize,
    cols: usize,
    t: Timing,
    bytes: usize,
}

impl Row {
    fn gbps(&self) -> f64 {
        self.bytes as f64 / self.t.median / 1e6
    }
    fn csv(&self) -> String {
        format!(
            "{},{},{},{},{},{:.5},{:.5},{:.5},{},{:.1},{}",
            self.imp,
            self.format,
            self.in_type.name(),
            self.rows,
            self.cols,
            self.t.median,
            self.t.min,
            self.t.max,
            self.bytes,
            self.gbps(),
            if self.bytes < L2_BYTES { "yes" } else { "no" }
        )
    }
}

fn format_name(spec: &Spec) -> String {
    let mut name = match spec.format {
        quant::Format::Mxfp4 => format!("mxfp4-{}", spec.scale_mode.name()),
        quant::Format::Nvfp4 if spec.two_level() => "nvfp4-two-level".into(),
        quant::Format::Nvfp4 => "nvfp4-one-level".into(),
    };
    if spec.search {
        name += "-search";
    }
    name + &layout_suffix(spec.scale_layout)
}

/// "" for linear scales, "-128x4" and "-8x4" for the tiled layouts.
fn layout_suffix(layout: ScaleLayout) -> String {
    match layout {
        ScaleLayout::Linear => String::new(),
        l => format!("-{}", l.name()),
    }
}

fn specs() -> Vec<Spec> {
    vec![
        Spec::mxfp4(ScaleMode::Floor),
        Spec::mxfp4(ScaleMode::Rceil),
        Spec::nvfp4(NvLevels::TwoLevel),
        Spec::nvfp4(NvLevels::OneLevel),
    ]
}

fn run_one(k: &QuantKernels, spec: &Spec, buf: &DeviceQuant, shape: &[usize]) -> Result<Quantized> {
    k.enqueue(spec, buf)?;
    k.read_back(spec, shape, buf)
}

pub fn run(a: Args) -> Result<ExitCode> {
    check_args(&a)?;
    let backend = CudaBackend::open().context("quant-bench needs a CUDA device")?;
    let kernels = QuantKernels::load_layout(&backend, a.scale_layouts[0])?;
    let (cc, drv) = (backend.compute_capability(), backend.driver_version());
    println!(
        "device: {} (sm_{}{}, driver {}.{})",
        backend.info().name,
        cc.0,
        cc.1,
        drv.0,
        drv.1
    );
    let mut rows: Vec<Row> = Vec::new();
    for dt in &a.dtypes {
        let in_type = parse_type(dt)?;
        for size in &a.sizes {
            let (r, c) = parse_size("--sizes", size)?;
            let (bytes, x) =
                encode_input(&bench_input(r, c, 1 + r as u64 * 31 + c as u64), in_type);
            let copy_dst = DeviceBuffer::zeroed(&backend, bytes.len(), "copy destination")?;
            let runs = specs().into_iter().flat_map(|s| {
                a.scale_layouts.iter().filter_map(move |&l| {
                    let spec = Spec {
                        scale_layout: l,
                        ..s
                    };
                    l.check_format(s.format).is_ok().then_some(spec)
                })
            });
            for (i, spec) in runs.enumerate() {
                // Compiled here, not between a timer's events.
                kernels.module(spec.scale_layout)?;
                let buf = DeviceQuant::upload(&backend, in_type, &bytes, spec.block())?
                    .with_scale_grid(&backend, spec.grid(&[r, c]))?;
                if !a.no_check {
                    let gpu = run_one(&kernels, &spec, &buf, &[r, c])?;
                    let (cpu, _) = quant::quantize(&spec, &[r, c], &x)?;
                    compare_bytes(&gpu, &cpu).with_context(|| {
                        format!("{} {} {r}x{c}", format_name(&spec), in_type.name())
                    })?;
                }
                let t = backend.median_ms_with(a.timing, a.warmup, a.repeats, || {
                    kernels.enqueue(&spec, &buf)
                })?;
                rows.push(Row {
                    imp: "fp4probe-cuda",
                    format: format_name(&spec),
                    in_type,
                    rows: r,
                    cols: c,
                    t,
                    bytes: buf.bytes_moved(&spec),
                });
                eprintln!("{}", rows.last().expect("pushed").csv());
                if spec.two_level() {
                    // The quantization pass alone, the tensor amax already known (calibrated
                    // scales, or an amax fused into the producer of x): one read of the input.
                    let t = backend.median_ms_with(a.timing, a.warmup, a.repeats, || {
                        kernels.enqueue_quant(&spec, &buf)
                    })?;
                    let format = format!(
                        "nvfp4-two-level-given-amax{}",
                        layout_suffix(spec.scale_layout)
                    );
                    rows.push(Row {
                        imp: "fp4probe-cuda",
                        format,
                        in_type,
                        rows: r,
                        cols: c,
                        t,
                        bytes: buf.bytes_moved(&spec),
                    });
                }
                if spec.two_level() && spec.scale_layout == a.scale_layouts[0] {
                    // The amax pass alone: what the second read costs.
                    let t = backend.median_ms_with(a.timing, a.warmup, a.repeats, || {
                        kernels.enqueue_amax(&buf)
                    })?;
                    rows.push(Row {
                        imp: "fp4probe-cuda",
                        format: "nvfp4-tensor-amax".into(),
                        in_type,
                        rows: r,
                        cols: c,
                        t,
                        bytes: bytes.len() + 4,
                    });
                }
                if i == 0 {
                    let t = backend.median_ms_with(a.timing, a.warmup, a.repeats, || {
                        copy_dst.copy_from_async(&buf.input)
                    })?;
                    rows.push(Row {
                        imp: "copy-driver",
                        format: "copy".into(),
                        in_type,
                        rows: r,
                        cols: c,
                        t,
                        bytes: 2 * bytes.len(),
                    });
                }
            }
        }
    }
    let mut out = format!("{CSV_HEADER}\n");
    for row in &rows {
        writeln!(out, "{}", row.csv())?;
    }
    print!("{}", table(&rows));
    if let Some(p) = &a.csv {
        Outputs::new(a.force).write(p, &out, Ours::marked(CSV_HEADER))?;
    }
    let search = search_rows(&a, &backend, &kernels)?;
    print!("{search}");
    if let Some(p) = &a.search_csv {
        Outputs::new(a.force).write(p, &search, Ours::marked(SEARCH_CSV_HEADER))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Markdown: per row GB/s and the fraction of the same-size copy.
fn table(rows: &[Row]) -> String {
    let mut s = String::from(
        "\n| input | size | format | ms | GB/s | % of copy |\n|---|---|---|---|---|---|\n",
    );
    for row in rows {
        let copy = rows.iter().find(|c| {
            c.imp == "copy-driver"
                && c.in_type == row.in_type
                && c.rows == row.rows
                && c.cols == row.cols
        });
        let pct = copy
            .map(|c| format!("{:.0}%", 100.0 * row.gbps() / c.gbps()))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "| {} | {}x{} | {} | {:.4} | {:.0} | {pct} |",
            row.in_type.name(),
            row.rows,
            row.cols,
            row.format,
            row.t.median,
            row.gbps()
        );
    }
    s
}

/// CSV of the search's gain and cost on a weights-like tensor, naive and searched kernels
/// timed side by side, the searched bytes checked against the CPU reference.
fn search_rows(a: &Args, backend: &CudaBackend, kernels: &QuantKernels) -> Result<String> {
    let (r, c) = parse_size("--search-size", &a.search_size)?;
    let x = weights_like(r, c, 2026);
    let mut out = format!("{SEARCH_CSV_HEADER}\n");
    for in_type in [InType::F32, InType::Bf16] {
        let (bytes, xw) = encode_input(&x, in_type);
        for naive in [
            Spec::mxfp4(ScaleMode::Floor),
            Spec::nvfp4(NvLevels::TwoLevel),
            Spec::nvfp4(NvLevels::OneLevel),
        ] {
            let mut searched = naive;
            searched.search = true;
            let buf = DeviceQuant::upload(backend, in_type, &bytes, naive.block())?;
            let qn = run_one(kernels, &naive, &buf, &[r, c])?;
            let qs = run_one(kernels, &searched, &buf, &[r, c])?;
            if !a.no_check {
                let (cpu, _) = quant::quantize(&searched, &[r, c], &xw)?;
                compare_bytes(&qs, &cpu)
                    .with_context(|| format!("{} {}", format_name(&searched), in_type.name()))?;
            }
            let tn = backend.median_ms_with(a.timing, a.warmup, a.repeats, || {
                kernels.enqueue(&naive, &buf)
            })?;
            let ts = backend.median_ms_with(a.timing, a.warmup, a.repeats, || {
                kernels.enqueue(&searched, &buf)
            })?;
            let (en, es) = (squared_error(&xw, &qn), squared_error(&xw, &qs));
            let changed = qn
                .scale
                .iter()
                .zip(&qs.scale)
                .filter(|(p, q)| p != q)
                .count();
            writeln!(
                out,
                "{},{},{r},{c},{en:.6e},{es:.6e},{:.2},{:.2},{:.5},{:.5},{:.1}",
                format_name(&naive),
                in_type.name(),
                100.0 * (1.0 - es / en),
                100.0 * changed as f64 / qn.scale.len() as f64,
                tn.median,
                ts.median,
                buf.bytes_moved(&searched) as f64 / ts.median / 1e6
            )?;
        }
    }
    Ok(out)
}
