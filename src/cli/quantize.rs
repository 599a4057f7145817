//! `fp4probe quantize`: MXFP4 / NVFP4 tensors from `.npy` / `.safetensors` files, on the CPU
//! reference or the CUDA kernels, and the output rules `fp4probe dequantize` (`super::dequantize`)
//! shares.
//!
//! Neither command destroys a file or loses data silently. Every option, file name and output
//! is checked before a device is opened or the input is read; outputs go through
//! [`crate::outfile`] (never the input, no link, FIFO, device or read-only file and no file
//! fp4probe did not write unless `--force`; safetensors outputs carry [`PRODUCER_MARKER`],
//! `.npy` has no room for a mark, so an existing `.npy` needs `--force`). What a quantization
//! loses beyond rounding (NaN/Inf blocks, blocks flushed to zero, saturation) is counted from
//! the input and the produced bytes (`quant::health`) and said on stderr; a result that keeps
//! nothing of the input is an error unless `--force`.

use super::quant_input::{Input, read_input};
use crate::attention::files::vt_metadata;
use crate::device::cuda::CudaBackend;
use crate::outfile::{Ours, Outputs};
use crate::quant::cuda::QuantKernels;
use crate::quant::health::{Health, health};
use crate::quant::{
    self, Format, NonFinite, NvLevels, Quantized, ScaleGrid, ScaleLayout, ScaleMode, SearchStats,
    Spec, container_bytes,
};
use crate::tensorio::{self, DType, Tensor};
use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where the quantization (or `attention --q`'s attention) runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum QuantBackend {
    /// The CUDA kernels when a GPU is present, else the CPU reference (with a loud notice).
    Auto,
    /// The CPU reference implementation.
    Cpu,
    /// The CUDA kernels (an error without a GPU).
    Cuda,
}

/// Quantize a tensor to MXFP4 or NVFP4 and write it as safetensors.
///
/// Writes `data` as F4 (packed E2M1 codes, even index in the low nibble, shape [..., K]: PyTorch
/// reads it as float4_e2m1fn_x2 [..., K/2]), `scale` as F8_E8M0 (mxfp4) or F8_E4M3 (nvfp4),
/// shape [..., K/block], or with --scale-layout 128x4 or 8x4 one axis of zero-padded tiles,
/// for two-level nvfp4 an F32 `tensor_scale` of one element, and with --byte-container also
/// U8 `data_byte` (one byte per element, code in bits 5..2, the operand container of mma.sync
/// kind::mxf8f6f4). The file's metadata records format, scale mode, scale layout, search,
/// backend, input and each tensor's PyTorch dtype.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Output safety (refusals exit with status 2 and write nothing):
  --output must end in .safetensors. It is refused when it is the input file (never
  overridden), a symbolic link, FIFO, device node or read-only file, or an existing file
  fp4probe did not write (its safetensors metadata lacks producer \"fp4probe ...\"); --force
  writes anyway, through links, FIFOs and devices, never replacing them. Regular files are
  replaced atomically.
  A .safetensors input holding several tensors (a checkpoint) needs --input-name NAME
  (alias --tensor): one tensor is quantized a run, into its own file.
  Options that do not apply to the chosen format are refused, not ignored (--scale-layout 8x4
  with mxfp4; a tiled --scale-layout for a tensor with one axis).
  float64 input (numpy's default) is rounded to float32 first, with a note counting the
  values that changed.
  Warnings on stderr count blocks holding NaN/Inf, blocks flushed to zero, and elements and
  scales that saturate. A result in which every block holding nonzero values is flushed,
  saturated at the largest scale or NaN is an error unless --force.

Examples:
  fp4probe quantize --format mxfp4 --input w.npy --output w.mxfp4.safetensors
  fp4probe quantize --format mxfp4 --scale-mode rceil --backend cuda --input x.safetensors --output q.safetensors
  fp4probe quantize --format nvfp4 --nvfp4-levels 1 --search --input w.npy --output q.safetensors
  fp4probe quantize --format nvfp4 --tensor-amax 11.5 --input x.npy --output q.safetensors
  fp4probe quantize --format nvfp4 --scale-layout 128x4 --input x.npy --output q.safetensors
  fp4probe quantize --format nvfp4 --input model.safetensors --tensor layers.0.w --output w0.safetensors
  fp4probe quantize --format nvfp4 --attention-v --input v.npy --output v.safetensors   (then attention --v)
  fp4probe dequantize --input q.safetensors --output x.npy"
)]
pub struct QuantizeArgs {
    #[arg(long, value_enum)]
    pub format: Format,
    /// MXFP4 only: the E8M0 scale rule (torchao's ScaleCalculationMode); floor is the OCP MX
    /// v1.0 rule. [default: floor]
    #[arg(long, value_enum)]
    pub scale_mode: Option<ScaleMode>,
    /// NVFP4 only: 2 = E4M3 block scales under an f32 tensor scale, 1 = block scales only.
    /// [default: 2]
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub nvfp4_levels: Option<u8>,
    /// Two-level NVFP4 only: use this tensor amax (a calibrated value, or one measured where the
    /// input was produced) instead of measuring it, which skips a pass over the input. Blocks
    /// beyond it saturate.
    #[arg(long)]
    pub tensor_amax: Option<f32>,
    /// Replace each block's scale with the squared-error-best in a window around it (MXFP4: e
    /// and e+1; NVFP4: ±5 E4M3 steps) and report the error reduction.
    #[arg(long)]
    pub search: bool,
    /// Also write `data_byte`: one byte per element, the code in bits 5..2.
    #[arg(long)]
    pub byte_container: bool,
    /// Scale bytes row-major (linear), or in the tiles block-scaled GEMMs read: 128x4 (cuBLAS,
    /// CUTLASS, torchao to_blocked) or 8x4 (FlashInfer, NVFP4 only); rows (every axis but the
    /// last) padded to the tile, K/block to 4, padding 0. The offsets: README, quantize section.
    #[arg(long, value_enum, default_value_t = ScaleLayout::Linear)]
    pub scale_layout: ScaleLayout,
    /// Quantize V for `fp4probe attention --v`: V [..., Sk, D] (attention: [B, Hkv, Sk, D]) is
    /// stored transposed, V^T [..., D, Skp] with keys Sk..Skp zero (Skp = Sk rounded up to 32),
    /// so its blocks run along the keys, P·V's reduction axis; the metadata records V's shape
    /// (`v_shape`), which `dequantize` restores.
    #[arg(long)]
    pub attention_v: bool,
    /// NaN/Inf inputs: give the block the NaN scale (propagate) or refuse the tensor (error).
    #[arg(long, value_enum, default_value_t = NonFinite::Propagate)]
    pub non_finite: NonFinite,
    #[arg(long, value_enum, default_value_t = QuantBackend::Auto)]
    pub backend: QuantBackend,
    /// After a CUDA run, also run the CPU reference and fail unless the bytes are identical
    /// (not with --backend cpu).
    #[arg(long)]
    pub check_cpu: bool,
    /// Input tensor: .npy (f32, f16, bf16 as ml_dtypes saves it, or f64), or .safetensors.
    #[arg(long)]
    pub input: PathBuf,
    /// The tensor to quantize from a .safetensors input; required when it holds several.
    #[arg(long, visible_alias = "tensor", value_name = "NAME")]
    pub input_name: Option<String>,
    /// Output .safetensors file (written atomically: a failure leaves nothing half-written).
    #[arg(long)]
    pub output: PathBuf,
    /// Write an output that is a link, FIFO, device, read-only file or a file fp4probe did
    /// not write, and a result that kept nothing of the input (never over the input itself).
    #[arg(long)]
    pub force: bool,
}

/// Text every safetensors file these commands write holds in its metadata (which comes first in
/// the JSON header): the mark that lets them replace their own files and no one else's.
pub const PRODUCER_MARKER: &str = "\"producer\":\"fp4probe ";

/// Safetensors outputs: replaceable when they carry [`PRODUCER_MARKER`].
pub(super) const SAFETENSORS_OURS: Ours<'static> = Ours::marked(PRODUCER_MARKER);

/// `.npy` outputs carry no mark; `check_tensor_output` refuses every existing one unless
/// forced, so the marker check itself accepts any file.
pub(super) const NPY_OURS: Ours<'static> = Ours::any();

pub(super) fn producer() -> String {
    format!("fp4probe {}", env!("CARGO_PKG_VERSION"))
}

/// The tensor file kinds, by extension (any case, as the reader takes them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FileKind {
    Npy,
    Safetensors,
}

pub(super) fn file_kind(path: &Path) -> Option<FileKind> {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("npy") => Some(FileKind::Npy),
        Some("safetensors") => Some(FileKind::Safetensors),
        _ => None,
    }
}

/// The folder an output goes into must exist: found now rather than after the work.
pub(super) fn check_output_folder(path: &Path) -> Result<()> {
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
        && !dir.is_dir()
    {
        bail!(
            "--output {}: folder {} does not exist",
            path.display(),
            dir.display()
        );
    }
    Ok(())
}

/// Whether `command` may write `path` as a tensor file, and as what: the file rules of
/// `outputs`, the extension (.npy or .safetensors), and no existing `.npy` replaced unless
/// forced (a .npy file has no room for fp4probe's mark).
pub(super) fn check_tensor_output(
    command: &str,
    outputs: &Outputs,
    path: &Path,
) -> Result<FileKind> {
    let kind = file_kind(path);
    let ours = match kind {
        Some(FileKind::Npy) => NPY_OURS,
        _ => SAFETENSORS_OURS,
    };
    outputs.check(path, ours)?;
    let Some(kind) = kind else {
        bail!(
            "--output {}: {command} writes .npy or .safetensors, chosen by the extension; name \
             the output with one of those",
            path.display()
        );
    };
    if kind == FileKind::Npy
        && !outputs.force()
        && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
    {
        bail!(
            "{} exists, and a .npy file carries no mark of who wrote it; refusing to overwrite \
             it (--force overwrites it, or name another output; a .safetensors output carries \
             fp4probe's mark and is replaced on later runs)",
            path.display()
        );
    }
    check_output_folder(path)?;
    Ok(kind)
}

/// Whether quantize may write `path`: the file rules of `outputs`, then the extension.
fn check_quantize_output(outputs: &Outputs, path: &Path) -> Result<()> {
    outputs.check(path, SAFETENSORS_OURS)?;
    if file_kind(path) != Some(FileKind::Safetensors) {
        bail!(
            "--output {}: quantize writes a safetensors file (tensors data, scale, ...); name \
             the output with a .safetensors extension",
            path.display()
        );
    }
    check_output_folder(path)
}

impl QuantizeArgs {
    /// The spec the options describe, refusing every option that does not apply to the chosen
    /// format or backend (a silently ignored option gives a file the user did not ask for).
    fn spec(&self) -> Result<Spec> {
        if self.format == Format::Nvfp4
            && let Some(m) = self.scale_mode
        {
            bail!(
                "--scale-mode {} chooses MXFP4's E8M0 scale rule; it does not apply to --format \
                 nvfp4 (NVFP4 rounds its E4M3 block scales to nearest)",
                m.name()
            );
        }
        if self.format == Format::Mxfp4
            && let Some(l) = self.nvfp4_levels
        {
            bail!(
                "--nvfp4-levels {l} applies to --format nvfp4 only, not to --format mxfp4 \
                 (MXFP4 has one level of E8M0 block scales)"
            );
        }
        let mut spec = match (self.format, self.nvfp4_levels) {
            (Format::Mxfp4, _) => Spec::mxfp4(self.scale_mode.unwrap_or(ScaleMode::Floor)),
            (Format::Nvfp4, Some(1)) => Spec::nvfp4(NvLevels::OneLevel),
            (Format::Nvfp4, _) => Spec::nvfp4(NvLevels::TwoLevel),
        };
        spec.search = self.search;
        spec.non_finite = self.non_finite;
        spec.scale_layout = self.scale_layout;
        self.scale_layout.check_format(spec.format)?;
        if let Some(a) = self.tensor_amax
            && !spec.two_level()
        {
            let what = match spec.format {
                Format::Mxfp4 => "--format mxfp4",
                Format::Nvfp4 => "--format nvfp4 --nvfp4-levels 1 (one level has no tensor scale)",
            };
            bail!(
                "--tensor-amax {a} applies to two-level NVFP4 only (--format nvfp4, \
                 --nvfp4-levels 2), not to {what}"
            );
        }
        quant::check_tensor_amax(&spec, self.tensor_amax)?;
        if self.check_cpu && self.backend == QuantBackend::Cpu {
            bail!(
                "--check-cpu compares a CUDA run with the CPU reference; it does not apply to \
                 --backend cpu"
            );
        }
        match (file_kind(&self.input), &self.input_name) {
            (None, _) => bail!(
                "--input {}: quantize reads .npy or .safetensors files",
                self.input.display()
            ),
            (Some(FileKind::Npy), Some(name)) => bail!(
                "--input-name {name} selects a tensor of a .safetensors file; {} is a .npy \
                 file, which holds one unnamed tensor",
                self.input.display()
            ),
            _ => {}
        }
        Ok(spec)
    }
}

/// Open the device the backend asks for; `auto` without a GPU says so loudly (`fallback`: what
/// runs instead, and what that changes) and uses the CPU.
pub(super) fn open_device(backend: QuantBackend, fallback: &str) -> Result<Option<CudaBackend>> {
    match backend {
        QuantBackend::Cpu => Ok(None),
        QuantBackend::Cuda => Ok(Some(CudaBackend::open()?)),
        QuantBackend::Auto => match CudaBackend::open() {
            Ok(b) => Ok(Some(b)),
            Err(why) => {
                let bar = "!".repeat(78);
                eprintln!("{bar}\n!! NO CUDA DEVICE: {why:#}\n!! {fallback}\n{bar}");
                Ok(None)
            }
        },
    }
}

/// Quantize on the kernels when there are any, else on the CPU reference.
fn quantize_on(
    kernels: Option<&QuantKernels>,
    spec: &Spec,
    input: &Input,
    tensor_amax: Option<f32>,
    check_cpu: bool,
) -> Result<Quantized> {
    let Some(kernels) = kernels else {
        let (q, _) = quant::quantize_with_amax(spec, &input.shape, &input.f32, tensor_amax)?;
        return Ok(q);
    };
    let q = kernels.quantize_with_amax(
        spec,
        &input.shape,
        input.in_type,
        &input.bytes,
        &input.f32,
        tensor_amax,
    )?;
    if check_cpu {
        let (cpu, _) = quant::quantize_with_amax(spec, &input.shape, &input.f32, tensor_amax)?;
        compare_bytes(&q, &cpu)?;
        eprintln!("check: CUDA output equals the CPU reference byte for byte");
    }
    Ok(q)
}

/// Error naming the first differing byte, for --check-cpu.
pub fn compare_bytes(gpu: &Quantized, cpu: &Quantized) -> Result<()> {
    for (what, a, b) in [
        ("data", &gpu.data, &cpu.data),
        ("scale", &gpu.scale, &cpu.scale),
    ] {
        if let Some(i) = a.iter().zip(b.iter()).position(|(x, y)| x != y) {
            bail!(
                "CUDA and CPU differ: {what}[{i}] is {:#04x} on the GPU, {:#04x} on the CPU",
                a[i],
                b[i]
            );
        }
    }
    if gpu.tensor_scale.map(f32::to_bits) != cpu.tensor_scale.map(f32::to_bits) {
        bail!(
            "CUDA and CPU differ: tensor_scale {:?} vs {:?}",
            gpu.tensor_scale,
            cpu.tensor_scale
        );
    }
    Ok(())
}

/// Sum of squared errors of a quantization, in f64 (NaN blocks skipped).
pub fn squared_error(x: &[f32], q: &Quantized) -> f64 {
    quant::dequantize(q)
        .iter()
        .zip(x)
        .filter(|(d, _)| d.is_finite())
        .map(|(&d, &v)| (d as f64 - v as f64).powi(2))
        .sum()
}

fn metadata(
    spec: &Spec,
    grid: &ScaleGrid,
    tensor_amax: Option<f32>,
    backend: &str,
    input: &Path,
    dtype_label: &str,
) -> BTreeMap<String, String> {
    let mut m = grid.metadata();
    m.insert("format".into(), spec.format.name().into());
    m.insert("block".into(), spec.block().to_string());
    match spec.format {
        Format::Mxfp4 => m.insert("scale_mode".into(), spec.scale_mode.name().into()),
        Format::Nvfp4 => m.insert(
            "scale_mode".into(),
            if spec.two_level() {
                "two_level"
            } else {
                "one_level"
            }
            .into(),
        ),
    };
    if spec.two_level() {
        let amax = tensor_amax.map_or("measured".to_string(), |a| format!("given {a:e}"));
        m.insert("tensor_amax".into(), amax);
    }
    m.insert("search".into(), spec.search.to_string());
    m.insert(
        "non_finite".into(),
        format!("{:?}", spec.non_finite).to_lowercase(),
    );
    m.insert("backend".into(), backend.into());
    m.insert("input".into(), input.display().to_string());
    m.insert("input_dtype".into(), dtype_label.into());
    m.insert(
        "packing".into(),
        "two codes per byte, even index in the low nibble".into(),
    );
    m.insert("producer".into(), producer());
    m
}

/// The dtype of a format's block scales: the 8-bit float type safetensors and PyTorch have for
/// them.
pub fn scale_dtype(format: Format) -> DType {
    match format {
        Format::Mxfp4 => DType::F8E8M0,
        Format::Nvfp4 => DType::F8E4M3,
    }
}

/// Metadata naming the PyTorch dtype each tensor loads as (`torch_dtype.data` =
/// `float4_e2m1fn_x2`, ...): the safetensors names (F4, F8_E4M3) do not say it, and `data_byte`
/// has no float type of its own.
fn torch_dtypes(tensors: &[(&str, &Tensor)]) -> Vec<(String, String)> {
    tensors
        .iter()
        .map(|(name, t)| (format!("torch_dtype.{name}"), t.dtype.torch_name().into()))
        .collect()
}

pub fn run_quantize(a: QuantizeArgs) -> Result<ExitCode> {
    // Everything that can be refused is refused before a device is opened or a byte is read.
    let spec = a.spec()?;
    let outputs = Outputs::new(a.force).input(&a.input);
    check_quantize_output(&outputs, &a.output)?;
    let input = read_input(&a.input, a.input_name.as_deref())?;
    let v_shape = a.attention_v.then(|| input.shape.clone());
    let input = if a.attention_v {
        input
            .transposed_v()
            .with_context(|| a.input.display().to_string())?
    } else {
        input
    };
    quant::check_shape(&input.shape, spec.block())?;
    spec.scale_layout.check(spec.format, &input.shape)?;
    quant::check_non_finite(&spec, &input.shape, &input.f32)?;

    let gpu = open_device(
        a.backend,
        if a.check_cpu {
            "Quantizing with the CPU reference instead (same bytes, slower).\n!! --check-cpu \
             has no CUDA run to compare."
        } else {
            "Quantizing with the CPU reference instead (same bytes, slower)."
        },
    )?;
    let kernels = gpu
        .as_ref()
        .map(|b| QuantKernels::load_layout(b, spec.scale_layout))
        .transpose()?;
    let backend = if kernels.is_some() { "cuda" } else { "cpu" };
    let q = quantize_on(kernels.as_ref(), &spec, &input, a.tensor_amax, a.check_cpu)?;
    let search = if spec.search {
        let mut naive_spec = spec;
        naive_spec.search = false;
        let naive = quantize_on(kernels.as_ref(), &naive_spec, &input, a.tensor_amax, false)?;
        Some(SearchStats {
            sse_naive: squared_error(&input.f32, &naive),
            sse_chosen: squared_error(&input.f32, &q),
            blocks: q.grid().blocks(),
            blocks_changed: q
                .scale
                .iter()
                .zip(&naive.scale)
                .filter(|(a, b)| a != b)
                .count(),
        })
    } else {
        None
    };
    report_health(&health(&input.f32, &q), &spec, &a)?;

    let data = Tensor::new(DType::F4, q.shape.clone(), q.data.clone())?;
    let scale = Tensor::new(scale_dtype(spec.format), q.scale_shape(), q.scale.clone())?;
    let ts = q.tensor_scale.map(|t| Tensor::from_f32(vec![1], &[t]));
    let byte = a
        .byte_container
        .then(|| Tensor::from_u8(q.shape.clone(), container_bytes(&q.data)));
    let mut tensors: Vec<(&str, &Tensor)> = vec![("data", &data), ("scale", &scale)];
    if let Some(t) = &ts {
        tensors.push(("tensor_scale", t));
    }
    if let Some(b) = &byte {
        tensors.push(("data_byte", b));
    }
    let mut meta = metadata(
        &spec,
        &q.grid(),
        a.tensor_amax,
        backend,
        &a.input,
        &input.dtype_label,
    );
    meta.extend(torch_dtypes(&tensors));
    if let Some(v) = &v_shape {
        meta.extend(vt_metadata(v));
    }
    let bytes = tensorio::safetensors_to_bytes(&tensors, &meta)?;
    check_quantize_output(&outputs, &a.output)?;
    outputs.write(&a.output, bytes, SAFETENSORS_OURS)?;
    println!(
        "{}: {}{:?} {} → {} ({} on {backend}): {} code bytes, {} scales{}",
        a.input.display(),
        v_shape
            .map(|v| format!("V {v:?} stored as V^T "))
            .unwrap_or_default(),
        input.shape,
        input.dtype_label,
        a.output.display(),
        spec.describe(),
        q.data.len(),
        q.scale.len(),
        q.tensor_scale
            .map(|t| format!(", tensor scale {t:e}"))
            .unwrap_or_default()
    );
    if let Some(stats) = search {
        println!(
            "search: squared error {:.6e} → {:.6e} ({:.2}% lower); {} of {} blocks changed scale",
            stats.sse_naive,
            stats.sse_chosen,
            100.0 * stats.reduction(),
            stats.blocks_changed,
            stats.blocks
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Say on stderr what the quantization lost beyond rounding; refuse a result that kept nothing
/// of the input unless --force.
fn report_health(h: &Health, spec: &Spec, a: &QuantizeArgs) -> Result<()> {
    let live = h.live_blocks();
    let given = a.tensor_amax;
    if h.non_finite_blocks > 0 {
        eprintln!(
            "warning: {} of {} blocks hold NaN or Inf inputs ({} elements); each takes the NaN \
             scale, so all {} of their elements dequantize to NaN (--non-finite error refuses \
             such a tensor)",
            h.non_finite_blocks,
            h.blocks,
            h.non_finite_elements,
            h.non_finite_blocks * spec.block()
        );
    }
    if h.nan_scale_blocks > 0 {
        eprintln!(
            "warning: {} of {live} blocks holding nonzero values took the NaN scale although \
             they are finite: their maximum rounds up to infinity under --scale-mode {} (floor, \
             ceil and rceil keep it)",
            h.nan_scale_blocks,
            spec.scale_mode.name()
        );
    }
    if h.flushed_blocks > 0 {
        let why = match (spec.format, spec.two_level(), given) {
            (Format::Nvfp4, true, Some(g)) if g > h.finite_amax => format!(
                "--tensor-amax {g:e} is {:.3e} times the input's largest finite magnitude \
                 ({:e}), which pushes their block scales down to E4M3's smallest, 2^-6",
                g / h.finite_amax,
                h.finite_amax
            ),
            (Format::Nvfp4, true, _) => format!(
                "their largest magnitude is below 2^-8/2688 of the tensor's ({:e}), out of \
                 reach of E4M3 block scales",
                h.finite_amax
            ),
            (Format::Nvfp4, false, _) => "one-level NVFP4's smallest block scale is 2^-6, so a \
                 block with |x| <= 2^-8 becomes zero (--nvfp4-levels 2 scales the tensor first)"
                .to_string(),
            (Format::Mxfp4, _, _) => {
                "their values lie below a quarter of E8M0's smallest scale, 2^-127".to_string()
            }
        };
        eprintln!(
            "warning: {} of {live} blocks holding nonzero values quantized to all-zero codes: {why}",
            h.flushed_blocks
        );
    }
    if h.max_scale_blocks > 0 {
        let (largest, why) = match (spec.format, spec.two_level(), given) {
            (Format::Nvfp4, true, Some(g)) if g < h.finite_amax => (
                "448",
                format!(
                    "; --tensor-amax {g:e} is below the input's largest finite magnitude ({:e})",
                    h.finite_amax
                ),
            ),
            (Format::Nvfp4, false, _) => (
                "448",
                "; one-level NVFP4 block scales stop at 448, so |x| >= 7·448 = 3136 saturates \
                 (--nvfp4-levels 2 scales the tensor first)"
                    .to_string(),
            ),
            (Format::Nvfp4, true, _) => ("448", String::new()),
            (Format::Mxfp4, _, _) => ("2^127", String::new()),
        };
        eprintln!(
            "warning: {} of {live} blocks holding nonzero values saturate at the largest scale \
             ({largest}): {} elements with |x| >= 7·scale are stored as ±6·scale{why}",
            h.max_scale_blocks, h.max_scale_elements
        );
    }
    if h.saturated_elements > 0 {
        let why = if spec.search {
            " (--search chose scales that trade these for a lower squared error)"
        } else if spec.format == Format::Mxfp4 && spec.scale_mode == ScaleMode::Floor {
            " (--scale-mode floor, the OCP rule, leaves block maxima up to 8·scale; ceil and \
             rceil never saturate)"
        } else {
            ""
        };
        eprintln!(
            "note: {} of {} elements saturate: |x| >= 7·scale, stored as ±6·scale{why}",
            h.saturated_elements, h.elements
        );
    }
    if h.nothing_kept() {
        let what = format!(
            "every one of the {live} blocks holding nonzero values was lost ({} flushed to \
             zero, {} saturated at the largest scale, {} given the NaN scale): the result keeps \
             nothing of the input",
            h.flushed_blocks, h.max_scale_blocks, h.nan_scale_blocks
        );
        if !a.force {
            bail!(
                "{what}; {} was not written (--force writes it)",
                a.output.display()
            );
        }
        eprintln!("warning: {what}; writing it because of --force");
    }
    Ok(())
}
