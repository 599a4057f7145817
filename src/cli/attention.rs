//! `fp4probe attention`: run the fused FP4 attention kernel, validate it against the CPU
//! references, and benchmark it (CUDA only).

use super::attention_files::OutDType;
use super::limits::{check_output_file, check_run_bytes};
use super::quantize::QuantBackend;
use crate::outfile::{Ours, Outputs};

/// The header of `--csv`, by which an existing file of this kind is recognised.
const CSV_HEADER: &str = "impl,batch,heads,seq,head_dim,causal,ms,tflops";
use crate::attention::kernel::{AttentionKernel, DeviceQkv, KernelPath, OnTheFly};
use crate::attention::shape::SUPPORTED_HEAD_DIMS;
use crate::attention::{
    AttnShape, Comparison, QuantizedQkv, exact_qkv, gaussian, identity_qkv, outlier_k, prequantize,
    reference_f64, reference_fp8, reference_quantized,
};
use crate::device::Backend;
use crate::device::cuda::CudaBackend;
use crate::quant::Format;
use crate::quant::cuda::{InType, QuantKernels, encode_input};
use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use clap::builder::RangedU64ValueParser;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Inputs for a validation run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Inputs {
    /// Gaussian Q, K, V.
    Gaussian,
    /// Gaussian, with K channels 3, 17 and 50 offset by +8 (outlier channels).
    Outliers,
    /// Q = K = one-hot rows, V from {-2,-1,-0.5,0,0.5,1,2}: exact in FP4.
    Identity,
    /// Values exactly representable in MXFP4.
    Exact,
}

/// Fused FP4 attention (NVFP4 or MXFP4 Q, K, V; P requantized in V's format): run it on your
/// tensors, validate it, or benchmark it.
///
/// With --q, --k, --v and --output: attention on tensors from files (Q [B, H, Sq, D], K and V
/// [B, Hkv, Sk, D] with Hkv dividing H: grouped-query attention when smaller), dense BF16, F16
/// or F32 `.npy`/`.safetensors` quantized with --format, or FP4 files of `fp4probe quantize`
/// (V transposed); O [B, H, Sq, D] is written as BF16 or F32 (docs/file-formats.md).
///
/// Without them, --suite or --bench: one validation run of the given shape and inputs, printing the
/// kernel's agreement with the CPU reference of the same quantized arithmetic and with f64
/// attention on the unquantized inputs. --suite runs the whole validation set and fails on any
/// miss; --bench times the kernel (median of --repeats CUDA-event-timed launches after warm-up)
/// over --seqs × --head-dims × causal, writing CSV rows `fp4-prequant-nvfp4` and
/// `fp4-prequant-mxfp4` (with `-<path>` appended when --path is not the device's default).
///
/// The shape options belong to the single validation run, the sweep options to --bench; a
/// run's memory is bounded (64 GiB, host and device), and every value (and every file) is
/// checked before a GPU is opened.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  fp4probe attention --q q.safetensors --k k.safetensors --v v.safetensors --causal --output o.safetensors
  fp4probe attention --q q.npy --k k.npy --v v.npy --format mxfp4 --out-dtype f32 --output o.npy
  fp4probe attention --seq-q 77 --seq-k 133 --head-dim 128 --causal --inputs gaussian
  fp4probe attention --heads 32 --kv-heads 8 --seq-q 1000
  fp4probe attention --inputs outliers --smooth-k
  fp4probe attention --suite
  fp4probe attention --bench --csv fp4.csv
  fp4probe attention --bench --bench-heads 32 --kv-heads 8 --csv gqa.csv")]
pub struct Args {
    #[arg(long, default_value_t = 1, value_parser = at_least_one, conflicts_with_all = SHAPE_MODES)]
    pub batch: usize,
    #[arg(long, default_value_t = 2, value_parser = at_least_one, conflicts_with_all = SHAPE_MODES)]
    pub heads: usize,
    /// Key/value heads, a divisor of --heads (of --bench-heads with --bench): grouped-query
    /// attention when fewer. Default: as many as query heads.
    #[arg(long, value_parser = at_least_one, conflicts_with_all = ["suite", "q"])]
    pub kv_heads: Option<usize>,
    #[arg(long, default_value_t = 256, value_parser = at_least_one, conflicts_with_all = SHAPE_MODES)]
    pub seq_q: usize,
    /// Key/value length (default: seq-q).
    #[arg(long, value_parser = at_least_one, conflicts_with_all = SHAPE_MODES)]
    pub seq_k: Option<usize>,
    /// 64, 128 or 256.
    #[arg(long, default_value_t = 128, conflicts_with_all = SHAPE_MODES)]
    pub head_dim: usize,
    #[arg(long, conflicts_with_all = MODES)]
    pub causal: bool,
    #[arg(long, value_enum, default_value_t = Inputs::Gaussian, conflicts_with_all = SHAPE_MODES)]
    pub inputs: Inputs,
    /// FP4 format of Q, K, V: nvfp4 (two-level, blocks of 16) or mxfp4 (floor, blocks of 32).
    /// With FP4 files (--q) the files' format; given, it must agree. [default: nvfp4]
    #[arg(long, value_enum, conflicts_with_all = MODES)]
    pub format: Option<Format>,
    /// Subtract K's per-channel mean before quantizing (softmax is unchanged by it).
    #[arg(long, conflicts_with_all = MODES)]
    pub smooth_k: bool,
    #[arg(long, default_value_t = 1, conflicts_with_all = SHAPE_MODES)]
    pub seed: u64,
    /// Q [B, H, Sq, D]: .npy or .safetensors, BF16, F16 or F32 (one tensor a file), or an FP4
    /// file of `fp4probe quantize`. Runs attention on the files instead of validating.
    #[arg(long, value_name = "FILE", requires_all = ["k", "v", "output"], conflicts_with_all = MODES)]
    pub q: Option<PathBuf>,
    /// K [B, Hkv, Sk, D], Hkv dividing H; as --q (FP4: quantized along D).
    #[arg(long, value_name = "FILE", requires = "q")]
    pub k: Option<PathBuf>,
    /// V [B, Hkv, Sk, D] dense; as an FP4 file, Vᵀ [B, Hkv, D, Skp] (Skp = Sk rounded up to 32,
    /// zero padding: docs/file-formats.md, "Attention inputs").
    #[arg(long, value_name = "FILE", requires = "q")]
    pub v: Option<PathBuf>,
    /// O [B, H, Sq, D]: .safetensors (tensor `o`) or .npy, by the extension; the output rules
    /// of `quantize` and `dequantize`.
    #[arg(long, value_name = "FILE", requires = "q")]
    pub output: Option<PathBuf>,
    /// O's element type. Default: bf16 when Q is BF16, else f32.
    #[arg(long, value_enum, requires = "q")]
    pub out_dtype: Option<OutDType>,
    /// Where --q's attention runs: the kernel (cuda), the CPU reference of the same quantized
    /// arithmetic (cpu), or the kernel when a GPU is present (auto).
    #[arg(long, value_enum, default_value_t = QuantBackend::Auto, requires = "q")]
    pub backend: QuantBackend,
    /// Run the validation suite (exact inputs, the article's six configurations, odd lengths,
    /// grouped-query attention, Gaussian and outlier accuracy) and fail on any miss.
    #[arg(long, conflicts_with = "bench")]
    pub suite: bool,
    /// Benchmark instead of validating.
    #[arg(long)]
    pub bench: bool,
    /// Sequence lengths for --bench (S = seq-q = seq-k).
    #[arg(
        long,
        value_delimiter = ',',
        default_values_t = [1024usize, 4096, 16384],
        value_parser = at_least_one,
        requires = "bench",
        conflicts_with = "suite",
    )]
    pub seqs: Vec<usize>,
    /// Head dimensions for --bench: 64, 128, 256.
    #[arg(
        long,
        value_delimiter = ',',
        default_values_t = [64usize, 128],
        requires = "bench",
        conflicts_with = "suite",
    )]
    pub head_dims: Vec<usize>,
    /// Heads for --bench (batch 1).
    #[arg(
        long,
        default_value_t = 32,
        value_parser = at_least_one,
        requires = "bench",
        conflicts_with = "suite",
    )]
    pub bench_heads: usize,
    /// Timed launches per --bench point (1 to 10000).
    #[arg(
        long,
        default_value_t = 20,
        value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_LAUNCHES),
        requires = "bench",
        conflicts_with = "suite",
    )]
    pub repeats: usize,
    /// Untimed launches before them (0 to 10000).
    #[arg(
        long,
        default_value_t = 3,
        value_parser = RangedU64ValueParser::<usize>::new().range(0..=MAX_LAUNCHES),
        requires = "bench",
        conflicts_with = "suite",
    )]
    pub warmup: usize,
    /// CSV for --bench: impl,batch,heads,seq,head_dim,causal,ms,tflops.
    #[arg(long, requires = "bench", conflicts_with = "suite")]
    pub csv: Option<PathBuf>,
    /// Write through a symbolic link, FIFO or device given as output and replace read-only or
    /// foreign files there.
    #[arg(long)]
    pub force: bool,
    /// Which kernel (see the values below): bf16 on sm_90 and later, wgmma and wgmma-fp8 (the
    /// FP8 arithmetic of docs/attention-fp8.md) on sm_90a (head_dim 64 and 128), block-scale
    /// and block-scale-k32 on sm_120a, their -emulated
    /// forms on any sm_90+ GPU (validation only). Default: the fastest this device runs for
    /// --head-dim (for --suite and --bench, for head_dim 128).
    #[arg(long, value_enum)]
    pub path: Option<KernelPath>,
}

/// The options that pick a mode other than the single validation run or the run on files
/// (--q), whose options make no sense with them.
const MODES: [&str; 2] = ["suite", "bench"];

/// The modes the single validation run's shape and input options make no sense with: the
/// files give the shape and the values.
const SHAPE_MODES: [&str; 3] = ["suite", "bench", "q"];

/// Most timed or warm-up launches per point: each timed launch holds a pair of CUDA events
/// until the point is read back.
const MAX_LAUNCHES: u64 = 10_000;

/// A count or length of at least 1.
fn at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{e}")),
    }
}

/// Bytes a run of `shape` allocates, host and device, rounded up: per element of Q (and O)
/// the f32 input, its f64 copy for the reference, the kernel's and both references' outputs
/// (36 bytes); per element of K and of V (the key axis padded to 32) the f32 input, the
/// smoothed K or transposed V, the bf16 copies --bench quantizes on the GPU, the f64 copy and
/// the FP4 codes (40 bytes).
fn run_bytes(shape: &AttnShape) -> u128 {
    // Saturating: four usize factors can overflow even u128, and any saturated value is
    // refused anyway.
    let product = |first: u128, factors: [usize; 3]| {
        factors
            .iter()
            .fold(first, |acc, &n| acc.saturating_mul(n as u128))
    };
    let kv_padded = (shape.seq_k as u128).next_multiple_of(crate::attention::shape::BLOCK as u128);
    let q = product(
        36 * shape.seq_q as u128,
        [shape.batch, shape.heads, shape.head_dim],
    );
    let kv = product(
        2 * 40 * kv_padded,
        [shape.batch, shape.kv_heads, shape.head_dim],
    );
    q.saturating_add(kv)
}

fn check_head_dim(option: &str, d: usize, path: Option<KernelPath>) -> Result<()> {
    if !SUPPORTED_HEAD_DIMS.contains(&d) {
        bail!("{option} {d} is not supported: the kernels are built for head_dim 64, 128 and 256");
    }
    if let Some(p) = path {
        p.check_head_dim(d)?;
    }
    Ok(())
}

/// Every argument checked, before any device is opened (clap has checked ranges and which
/// options go together).
fn check_args(a: &Args) -> Result<()> {
    if a.bench {
        if let Some(p) = a.path.filter(|p| p.emulated()) {
            bail!(
                "--bench times real kernels; --path {} runs a software model of the MMA (use it \
                 with --suite or a validation run)",
                p.name()
            );
        }
        for &d in &a.head_dims {
            check_head_dim("--head-dims", d, a.path)?;
        }
        for &seq in &a.seqs {
            for &d in &a.head_dims {
                let shape = bench_shape(a, seq, d)?;
                check_run_bytes(
                    &format!(
                        "--bench at --seqs {seq} --head-dims {d} --bench-heads {}",
                        a.bench_heads
                    ),
                    run_bytes(&shape),
                    "--seqs or --bench-heads",
                )?;
            }
        }
        if let Some(p) = &a.csv {
            check_output_file("--csv", p, &Outputs::new(a.force), CSV_HEADER)?;
        }
    } else if !a.suite {
        check_head_dim("--head-dim", a.head_dim, a.path)?;
        if let Some(p) = a.path {
            p.check_format(a.format())?;
        }
        let shape = AttnShape {
            batch: a.batch,
            heads: a.heads,
            kv_heads: a.kv_heads.unwrap_or(a.heads),
            seq_q: a.seq_q,
            seq_k: a.seq_k.unwrap_or(a.seq_q),
            head_dim: a.head_dim,
            causal: a.causal,
        };
        check_run_bytes(
            &format!("the validation run of {shape}"),
            run_bytes(&shape),
            "--seq-q, --seq-k, --heads, --kv-heads or --batch",
        )?;
        shape_of(a)?;
    }
    Ok(())
}

/// Q, K, V for a shape and input kind.
pub fn make_inputs(shape: &AttnShape, inputs: Inputs, seed: u64) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    match inputs {
        Inputs::Identity => identity_qkv(shape),
        Inputs::Exact => exact_qkv(shape, seed),
        Inputs::Gaussian | Inputs::Outliers => {
            let q = gaussian(shape.q_len(), seed);
            let mut k = gaussian(shape.kv_len(), seed + 1);
            let v = gaussian(shape.kv_len(), seed + 2);
            if inputs == Inputs::Outliers {
                outlier_k(&mut k, shape, &[3, 17, 50], 8.0);
            }
            (q, k, v)
        }
    }
}

/// One validation: the kernel's O against both references.
pub struct Validation {
    pub vs_quantized: Comparison,
    pub vs_f64: Comparison,
}

pub fn validate(
    kernel: &AttentionKernel,
    shape: &AttnShape,
    inputs: Inputs,
    smooth_k: bool,
    seed: u64,
    format: Format,
) -> Result<Validation> {
    let (q, k, v) = make_inputs(shape, inputs, seed);
    let qkv = prequantize(shape, &q, &k, &v, smooth_k, format)?;
    let out = kernel.run(&qkv)?;
    // The FP8 body computes the FP8 form of the scheme, held to its reference at 1e-3.
    let want_q = if kernel.path().is_fp8() {
        reference_fp8(&qkv)
    } else {
        reference_quantized(&qkv)
    };
    let want_f64 = reference_f64(shape, &q, &k, &v);
    Ok(Validation {
        vs_quantized: Comparison::new(&out, &want_q),
        vs_f64: Comparison::new(&out, &want_f64),
    })
}

fn shape_of(a: &Args) -> Result<AttnShape> {
    let shape = AttnShape::new(
        a.batch,
        a.heads,
        a.seq_q,
        a.seq_k.unwrap_or(a.seq_q),
        a.head_dim,
        a.causal,
    )?;
    shape
        .with_kv_heads(a.kv_heads.unwrap_or(a.heads))
        .context("--heads and --kv-heads")
}

/// A --bench shape: batch 1, --bench-heads query heads, --kv-heads K/V heads (default as many),
/// Sq = Sk = `seq`.
fn bench_shape(a: &Args, seq: usize, head_dim: usize) -> Result<AttnShape> {
    let shape = AttnShape::new(1, a.bench_heads, seq, seq, head_dim, false)?;
    shape
        .with_kv_heads(a.kv_heads.unwrap_or(a.bench_heads))
        .context("--bench-heads and --kv-heads")
}

impl Args {
    /// --format, or NVFP4.
    pub fn format(&self) -> Format {
        self.format.unwrap_or(Format::Nvfp4)
    }
}

/// Compile and load `path` on `backend` (NVRTC, the first time a source is seen), saying on
/// stderr which kernel runs where.
pub fn load_kernel(backend: &CudaBackend, path: KernelPath) -> Result<AttentionKernel<'_>> {
    let kernel = AttentionKernel::load_path(backend, path)?;
    eprintln!(
        "fp4probe attention: kernel path {} (kernels/{}, {}) on {}",
        path.name(),
        crate::attention::kernel::SOURCE,
        path.body(),
        backend.info().name
    );
    Ok(kernel)
}

pub fn run(a: Args) -> Result<ExitCode> {
    if a.q.is_some() {
        return super::attention_files::run(&a);
    }
    check_args(&a)?;
    let backend =
        CudaBackend::open().context("fp4probe attention runs the kernel on a CUDA device")?;
    let default_d = if a.suite || a.bench { 128 } else { a.head_dim };
    let path = a
        .path
        .unwrap_or_else(|| KernelPath::for_device(backend.compute_capability().0, default_d));
    let kernel = load_kernel(&backend, path)?;
    if a.bench {
        return bench(&a, &kernel);
    }
    if a.suite {
        return suite(&kernel);
    }
    let shape = shape_of(&a)?;
    let v = validate(&kernel, &shape, a.inputs, a.smooth_k, a.seed, a.format())?;
    println!(
        "{shape} {} inputs {:?}{}",
        a.format().name(),
        a.inputs,
        if a.smooth_k { ", K smoothed" } else { "" }
    );
    println!(
        "  vs CPU reference of the same quantized arithmetic: {}",
        v.vs_quantized
    );
    println!(
        "  vs f64 attention on the unquantized inputs:        {}",
        v.vs_f64
    );
    Ok(ExitCode::SUCCESS)
}

/// One suite case: shape, inputs, smoothing, and the bounds it must meet. Case i runs with
/// seed 100 + i.
pub struct Case {
    pub shape: AttnShape,
    pub format: Format,
    pub inputs: Inputs,
    pub smooth_k: bool,
    /// Minimum cosine and maximum relative error against the quantized reference.
    pub min_cos_q: f64,
    pub max_rel_q: f64,
    /// Minimum cosine against f64 attention (0 = not checked).
    pub min_cos_f64: f64,
}

pub fn suite_cases() -> Result<Vec<Case>> {
    let s = |b, h, sq, sk, d, c| AttnShape::new(b, h, sq, sk, d, c);
    let exact = |shape, format, inputs| Case {
        shape,
        format,
        inputs,
        smooth_k: false,
        min_cos_q: 0.99999,
        max_rel_q: 1e-5,
        min_cos_f64: 0.0,
    };
    let mut cases = Vec::new();
    for format in [Format::Nvfp4, Format::Mxfp4] {
        // The article's six configurations (seq_q 64), identity and exactly representable inputs.
        for (b, h, sk, d) in [
            (1, 1, 64, 128),
            (1, 1, 128, 128),
            (1, 1, 64, 64),
            (1, 1, 128, 64),
            (1, 4, 128, 128),
            (2, 4, 128, 128),
        ] {
            cases.push(exact(s(b, h, 64, sk, d, false)?, format, Inputs::Identity));
            cases.push(exact(s(b, h, 64, sk, d, false)?, format, Inputs::Exact));
        }
        // Odd lengths, causal and not, every head dimension.
        for (sq, sk, d, c) in [
            (77, 133, 128, false),
            (77, 133, 128, true),
            (1, 1000, 64, false),
            (200, 31, 256, false),
            (129, 129, 256, true),
        ] {
            cases.push(exact(s(1, 2, sq, sk, d, c)?, format, Inputs::Exact));
        }
    }
    // Accuracy on Gaussian inputs, d = 128: NVFP4 is held to cosine 0.98 against f64 (0.97 with
    // outlier channels and K smoothing); MXFP4's accuracy is reported, not held to it (its
    // 32-element power-of-two blocks lose more; see the README).
    let gauss = |shape, format, inputs, smooth_k, min_cos_f64| Case {
        shape,
        format,
        inputs,
        smooth_k,
        min_cos_q: 0.9999,
        max_rel_q: 1e-3,
        min_cos_f64,
    };
    for (format, floor, outlier_floor) in [(Format::Nvfp4, 0.98, 0.97), (Format::Mxfp4, 0.0, 0.0)] {
        cases.push(gauss(
            s(1, 4, 512, 512, 128, false)?,
            format,
            Inputs::Gaussian,
            false,
            floor,
        ));
        cases.push(gauss(
            s(1, 4, 512, 512, 128, true)?,
            format,
            Inputs::Gaussian,
            false,
            floor,
        ));
        cases.push(gauss(
            s(1, 4, 333, 1000, 128, false)?,
            format,
            Inputs::Gaussian,
            false,
            floor,
        ));
        cases.push(gauss(
            s(1, 4, 512, 512, 128, false)?,
            format,
            Inputs::Outliers,
            true,
            outlier_floor,
        ));
        cases.push(gauss(
            s(1, 4, 512, 512, 128, false)?,
            format,
            Inputs::Outliers,
            false,
            0.0,
        ));
    }
    // Grouped-query attention (K/V heads a divisor of the Q heads; one K/V head for all, the
    // multi-query form), exact inputs at every head dimension, causal and not, Sq != Sk; and
    // its accuracy at H_q = 32, H_kv = 8 (appended, so the cases above keep their seeds).
    let gqa = |b, h, kv, sq, sk, d, c| s(b, h, sq, sk, d, c).and_then(|x| x.with_kv_heads(kv));
    for format in [Format::Nvfp4, Format::Mxfp4] {
        for (h, kv, sq, sk, d, c) in [
            (8, 2, 77, 133, 128, false),
            (8, 2, 77, 133, 128, true),
            (6, 3, 200, 64, 64, true),
            (4, 1, 129, 300, 64, false),
            (4, 2, 100, 70, 256, true),
        ] {
            cases.push(exact(gqa(2, h, kv, sq, sk, d, c)?, format, Inputs::Exact));
        }
    }
    for (format, floor) in [(Format::Nvfp4, 0.98), (Format::Mxfp4, 0.0)] {
        for causal in [false, true] {
            cases.push(gauss(
                gqa(1, 32, 8, 256, 384, 128, causal)?,
                format,
                Inputs::Gaussian,
                false,
                floor,
            ));
        }
    }
    Ok(cases)
}

/// Q, K, V as bytes of `in_type`, and the values those bytes hold, widened to f32.
fn typed_inputs(shape: &AttnShape, seed: u64, in_type: InType) -> ([Vec<u8>; 3], [Vec<f32>; 3]) {
    let (q, k, v) = make_inputs(shape, Inputs::Gaussian, seed);
    let ((qb, qf), (kb, kf), (vb, vf)) = (
        encode_input(&q, in_type),
        encode_input(&k, in_type),
        encode_input(&v, in_type),
    );
    ([qb, kb, vb], [qf, kf, vf])
}

/// The on-the-fly path (quantized on the GPU, K smoothed there if asked) against the
/// pre-quantized path on the same values: the same bytes reach the kernel, so O must be
/// identical.
fn onthefly_matches_prequant(
    kernel: &AttentionKernel,
    quant: &QuantKernels,
    shape: &AttnShape,
    format: Format,
    in_type: InType,
    smooth_k: bool,
) -> Result<Comparison> {
    let (bytes, wide) = typed_inputs(shape, 9, in_type);
    let qkv = prequantize(shape, &wide[0], &wide[1], &wide[2], smooth_k, format)?;
    let pre = kernel.run(&qkv)?;
    let fly = OnTheFly::upload(
        kernel.backend(),
        shape,
        format,
        in_type,
        smooth_k,
        &bytes[0],
        &bytes[1],
        &bytes[2],
    )?;
    fly.enqueue(quant, kernel)?;
    kernel.backend().synchronize()?;
    let out: Vec<f32> = fly
        .out
        .read_u32(shape.q_len())?
        .into_iter()
        .map(f32::from_bits)
        .collect();
    Ok(Comparison::new(&out, &pre))
}

/// The relative error a path may show against its reference: 0 (bit-exact) but for the FP8
/// body, which docs/attention-fp8.md holds to 1e-3 (its f32 scores and ex2, stream-K pieces).
fn fp8_tolerance(path: KernelPath) -> f64 {
    if path.is_fp8() { 1e-3 } else { 0.0 }
}

fn suite(kernel: &AttentionKernel) -> Result<ExitCode> {
    let mut failed = 0;
    println!(
        "| shape | format | inputs | vs quantized reference (cos, rel err, max abs) | vs f64 (cos) | result |\n|---|---|---|---|---|---|"
    );
    let formats = kernel.path().formats();
    let cases = suite_cases()?;
    for (i, c) in cases.iter().enumerate() {
        if !formats.contains(&c.format) {
            continue;
        }
        if let Err(e) = kernel.path().check_head_dim(c.shape.head_dim) {
            println!(
                "| {} | {} | {:?} | — | — | skipped: {e} |",
                c.shape,
                c.format.name(),
                c.inputs
            );
            continue;
        }
        let v = validate(
            kernel,
            &c.shape,
            c.inputs,
            c.smooth_k,
            100 + i as u64,
            c.format,
        )?;
        let ok = v.vs_quantized.cosine >= c.min_cos_q
            && v.vs_quantized.relative_error <= c.max_rel_q.max(fp8_tolerance(kernel.path()))
            && v.vs_f64.cosine >= c.min_cos_f64
            && v.vs_quantized.cosine.is_finite();
        failed += !ok as usize;
        println!(
            "| {} | {} | {:?}{} | {:.6}, {:.2e}, {:.2e} | {:.4} | {} |",
            c.shape,
            c.format.name(),
            c.inputs,
            if c.smooth_k { " + smooth K" } else { "" },
            v.vs_quantized.cosine,
            v.vs_quantized.relative_error,
            v.vs_quantized.max_abs_error,
            v.vs_f64.cosine,
            if ok { "pass" } else { "FAIL" }
        );
    }
    let quant = QuantKernels::load(kernel.backend())?;
    let fly_cases = [
        (InType::Bf16, false),
        (InType::F32, false),
        (InType::F16, false),
        (InType::Bf16, true),
        (InType::F16, true),
        (InType::F32, true),
    ];
    for &format in kernel.path().formats() {
        for shape in [
            AttnShape::new(1, 3, 77, 133, 128, true)?,
            AttnShape::new(2, 2, 256, 300, 64, false)?,
            AttnShape::new(2, 4, 100, 150, 128, false)?.with_kv_heads(2)?,
        ] {
            for (in_type, smooth) in fly_cases {
                let c = onthefly_matches_prequant(kernel, &quant, &shape, format, in_type, smooth)?;
                let ok = c.relative_error == 0.0;
                failed += !ok as usize;
                println!(
                    "| {shape} | {} | on-the-fly ({} in{}) vs pre-quantized | {:.6}, {:.2e}, {:.2e} | — | {} |",
                    format.name(),
                    in_type.name(),
                    if smooth {
                        ", K smoothed on the GPU"
                    } else {
                        ""
                    },
                    c.cosine,
                    c.relative_error,
                    c.max_abs_error,
                    if ok { "pass" } else { "FAIL" }
                );
            }
        }
    }
    if failed > 0 {
        bail!("{failed} attention validation case(s) failed");
    }
    println!("all cases passed");
    Ok(ExitCode::SUCCESS)
}

/// Median CUDA-event time of `work` (which enqueues) over `repeats` runs after `warmup`.
fn time_work(
    kernel: &AttentionKernel,
    warmup: usize,
    repeats: usize,
    work: impl FnMut() -> Result<()>,
) -> Result<f64> {
    Ok(kernel.backend().median_ms(warmup, repeats, work)?.median)
}

fn bench(a: &Args, kernel: &AttentionKernel) -> Result<ExitCode> {
    let mut csv = format!("{CSV_HEADER}\n");
    let major = kernel.backend().compute_capability().0;
    for &d in &a.head_dims {
        kernel.path().check_head_dim(d)?;
        // Rows of the device's default kernel are `fp4-prequant-nvfp4`; another path's rows say
        // which (`fp4-prequant-nvfp4-bf16`), so one CSV can hold both; the FP8 path's rows are
        // `fp4-fp8-nvfp4` (and `fp4-fp8-onthefly-nvfp4`), its arithmetic being another one.
        // Grouped-query rows add their K/V heads (`fp4-prequant-nvfp4-kv8`): the columns are
        // fixed.
        let (prefix, mut label) = if kernel.path().is_fp8() {
            ("fp4-fp8-", String::new())
        } else if kernel.path() == KernelPath::for_device(major, d) {
            ("fp4-", String::new())
        } else {
            ("fp4-", format!("-{}", kernel.path().name()))
        };
        if let Some(kv) = a.kv_heads.filter(|&kv| kv != a.bench_heads) {
            write!(label, "-kv{kv}")?;
        }
        for variant in kernel.variants() {
            for &format in kernel.path().formats() {
                eprintln!(
                    "{}{}: {}",
                    crate::attention::kernel::entry(format, d),
                    variant.describe(),
                    kernel.resources(variant, format, d)?
                );
            }
        }
        for &seq in &a.seqs {
            let shape = bench_shape(a, seq, d)?;
            for &format in kernel.path().formats() {
                let v = kernel.variant_for(&shape, format);
                if v.consumers > 0 {
                    eprintln!(
                        "S = {seq}, {}:{}, {} query rows per CTA",
                        format.name(),
                        v.describe(),
                        v.rows_per_cta()
                    );
                }
            }
            let (q, k, v) = make_inputs(&shape, Inputs::Gaussian, 7);
            // On the fly: bf16 Q, K, V quantized on the GPU inside the timed region.
            let (bytes, _) = typed_inputs(&shape, 7, InType::Bf16);
            let quant = QuantKernels::load(kernel.backend())?;
            let mut fly = OnTheFly::upload(
                kernel.backend(),
                &shape,
                Format::Nvfp4,
                InType::Bf16,
                false,
                &bytes[0],
                &bytes[1],
                &bytes[2],
            )?;
            drop(bytes);
            for causal in [false, true] {
                fly.shape.causal = causal;
                let ms = time_work(kernel, a.warmup, a.repeats, || fly.enqueue(&quant, kernel))?;
                let tflops = fly.shape.flops() / ms / 1e9;
                let row = format!(
                    "{prefix}onthefly-nvfp4{label},1,{},{seq},{d},{causal},{ms:.4},{tflops:.1}",
                    a.bench_heads
                );
                eprintln!("{row}");
                writeln!(csv, "{row}")?;
            }
            drop(fly);
            for &format in kernel.path().formats() {
                let qkv: QuantizedQkv = prequantize(&shape, &q, &k, &v, false, format)?;
                let mut dev = DeviceQkv::upload(kernel.backend(), &qkv)?;
                for causal in [false, true] {
                    dev.shape.causal = causal;
                    let ms = time_work(kernel, a.warmup, a.repeats, || kernel.enqueue(&dev))?;
                    kernel.print_timeline(&dev.shape, format)?;
                    let tflops = dev.shape.flops() / ms / 1e9;
                    let row = format!(
                        "{prefix}{}{}{label},1,{},{seq},{d},{causal},{ms:.4},{tflops:.1}",
                        if kernel.path().is_fp8() {
                            ""
                        } else {
                            "prequant-"
                        },
                        format.name(),
                        a.bench_heads
                    );
                    eprintln!("{row}");
                    writeln!(csv, "{row}")?;
                }
            }
        }
    }
    print!("{csv}");
    if let Some(p) = &a.csv {
        Outputs::new(a.force).write(p, &csv, Ours::marked(CSV_HEADER))?;
    }
    Ok(ExitCode::SUCCESS)
}
