//! `fp4probe quantize` and `fp4probe dequantize`: MXFP4 / NVFP4 tensors in and out of
//! `.npy` / `.safetensors` files, on the CPU reference or the CUDA kernels.

use crate::device::cuda::CudaBackend;
use crate::quant::cuda::{InType, QuantKernels};
use crate::quant::{
    self, Format, NonFinite, NvLevels, Quantized, ScaleMode, SearchStats, Spec, container_bytes,
    data_shape, scale_shape,
};
use crate::tensorio::{self, DType, Tensor};
use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where the quantization runs.
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
/// Writes uint8 `data` (packed codes, even index in the low nibble, shape [..., K/2]), uint8
/// `scale` (E8M0 for mxfp4, E4M3 for nvfp4, shape [..., K/block]), for two-level nvfp4 an f32
/// `tensor_scale` of one element, and with --byte-container also `data_byte` (one byte per
/// element, code in bits 5..2, the operand container of mma.sync kind::mxf8f6f4). The
/// file's metadata records format, scale mode, search, backend and input.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  fp4probe quantize --format mxfp4 --input w.npy --output w.mxfp4.safetensors
  fp4probe quantize --format mxfp4 --scale-mode rceil --backend cuda --input x.safetensors --output q.safetensors
  fp4probe quantize --format nvfp4 --nvfp4-levels 1 --search --input w.npy --output q.safetensors
  fp4probe quantize --format nvfp4 --tensor-amax 11.5 --input x.npy --output q.safetensors
  fp4probe dequantize --input q.safetensors --output x.npy")]
pub struct QuantizeArgs {
    #[arg(long, value_enum)]
    pub format: Format,
    /// MXFP4 scale rule (torchao's ScaleCalculationMode); floor is the OCP MX v1.0 rule.
    #[arg(long, value_enum, default_value_t = ScaleMode::Floor)]
    pub scale_mode: ScaleMode,
    /// NVFP4 scale levels: 2 = E4M3 block scales under an f32 tensor scale, 1 = block scales only.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub nvfp4_levels: u8,
    /// Two-level NVFP4: use this tensor amax (a calibrated value, or one measured where the
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
    /// NaN/Inf inputs: give the block the NaN scale (propagate) or refuse the tensor (error).
    #[arg(long, value_enum, default_value_t = NonFinite::Propagate)]
    pub non_finite: NonFinite,
    #[arg(long, value_enum, default_value_t = QuantBackend::Auto)]
    pub backend: QuantBackend,
    /// After a CUDA run, also run the CPU reference and fail unless the bytes are identical.
    #[arg(long)]
    pub check_cpu: bool,
    /// Input tensor: .npy, or .safetensors (with --input-name when it holds several).
    #[arg(long)]
    pub input: PathBuf,
    #[arg(long)]
    pub input_name: Option<String>,
    /// Output .safetensors file (written atomically: a failure leaves nothing half-written).
    #[arg(long)]
    pub output: PathBuf,
}

/// Read a quantized safetensors file back to f32 and write it as .npy (or .safetensors).
#[derive(clap::Args, Debug)]
pub struct DequantizeArgs {
    /// A file written by `fp4probe quantize` (or any file with the same tensors; the format is
    /// then inferred from the block size: 32 → mxfp4, 16 → nvfp4).
    #[arg(long)]
    pub input: PathBuf,
    /// Output: .npy, or .safetensors (tensor `x`).
    #[arg(long)]
    pub output: PathBuf,
}

impl QuantizeArgs {
    fn spec(&self) -> Spec {
        let mut spec = match self.format {
            Format::Mxfp4 => Spec::mxfp4(self.scale_mode),
            Format::Nvfp4 if self.nvfp4_levels == 1 => Spec::nvfp4(NvLevels::OneLevel),
            Format::Nvfp4 => Spec::nvfp4(NvLevels::TwoLevel),
        };
        spec.search = self.search;
        spec.non_finite = self.non_finite;
        spec
    }
}

/// The input as the kernels take it: element type, raw bytes, and widened to f32.
pub struct Input {
    pub in_type: InType,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
    pub f32: Vec<f32>,
}

pub fn read_input(path: &Path, name: Option<&str>) -> Result<Input> {
    let t = tensorio::read_tensor(path, name)?;
    let in_type = match t.dtype {
        DType::F32 => InType::F32,
        DType::BF16 => InType::Bf16,
        DType::F16 => InType::F16,
        other => bail!(
            "{}: dtype {} cannot be quantized; quantize reads F32, F16 or BF16",
            path.display(),
            other.name()
        ),
    };
    let f32 = t.to_f32_vec()?;
    Ok(Input {
        in_type,
        shape: t.shape,
        bytes: t.bytes,
        f32,
    })
}

/// Run on the chosen backend; `auto` without a GPU says so loudly and uses the CPU.
fn quantize_on(
    backend: QuantBackend,
    spec: &Spec,
    input: &Input,
    tensor_amax: Option<f32>,
    check_cpu: bool,
) -> Result<(Quantized, &'static str)> {
    let gpu = match backend {
        QuantBackend::Cpu => None,
        QuantBackend::Cuda => Some(CudaBackend::open()?),
        QuantBackend::Auto => match CudaBackend::open() {
            Ok(b) => Some(b),
            Err(why) => {
                let bar = "!".repeat(78);
                eprintln!(
                    "{bar}\n!! NO CUDA DEVICE: {why:#}\n!! Quantizing with the CPU reference instead (same bytes, slower).\n{bar}"
                );
                None
            }
        },
    };
    let Some(gpu) = gpu else {
        let (q, _) = quant::quantize_with_amax(spec, &input.shape, &input.f32, tensor_amax)?;
        return Ok((q, "cpu"));
    };
    let kernels = QuantKernels::load(&gpu)?;
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
    Ok((q, "cuda"))
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
    tensor_amax: Option<f32>,
    backend: &str,
    input: &Path,
    in_type: InType,
) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
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
    m.insert("input_dtype".into(), in_type.name().into());
    m.insert(
        "packing".into(),
        "two codes per byte, even index in the low nibble".into(),
    );
    m.insert(
        "producer".into(),
        format!("fp4probe {}", env!("CARGO_PKG_VERSION")),
    );
    m
}

pub fn run_quantize(a: QuantizeArgs) -> Result<ExitCode> {
    let spec = a.spec();
    quant::check_tensor_amax(&spec, a.tensor_amax)?;
    let input = read_input(&a.input, a.input_name.as_deref())?;
    let (q, backend) = quantize_on(a.backend, &spec, &input, a.tensor_amax, a.check_cpu)?;
    let data = Tensor::from_u8(data_shape(&q.shape), q.data.clone());
    let scale = Tensor::from_u8(scale_shape(&q.shape, spec.block()), q.scale.clone());
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
    let meta = metadata(&spec, a.tensor_amax, backend, &a.input, input.in_type);
    tensorio::write_safetensors(&a.output, &tensors, &meta)?;
    println!(
        "{}: {:?} {} → {} ({} on {backend}): {} code bytes, {} scales{}",
        a.input.display(),
        input.shape,
        input.in_type.name(),
        a.output.display(),
        spec.describe(),
        q.data.len(),
        q.scale.len(),
        q.tensor_scale
            .map(|t| format!(", tensor scale {t:e}"))
            .unwrap_or_default()
    );
    if spec.search {
        let mut naive_spec = spec;
        naive_spec.search = false;
        let (naive, _) = quantize_on(a.backend, &naive_spec, &input, a.tensor_amax, false)?;
        let stats = SearchStats {
            sse_naive: squared_error(&input.f32, &naive),
            sse_chosen: squared_error(&input.f32, &q),
            blocks: q.scale.len(),
            blocks_changed: q
                .scale
                .iter()
                .zip(&naive.scale)
                .filter(|(a, b)| a != b)
                .count(),
        };
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

/// Rebuild a `Quantized` from a file's tensors and metadata.
pub fn read_quantized(path: &Path) -> Result<Quantized> {
    let st = tensorio::read_safetensors(path)?;
    let get = |name: &str| {
        st.get(name).with_context(|| {
            let names: Vec<&str> = st.tensors.iter().map(|(n, _)| n.as_str()).collect();
            format!(
                "{}: no tensor '{name}' (has {names:?}); is it a file from fp4probe quantize?",
                path.display()
            )
        })
    };
    let data = get("data")?;
    let scale = get("scale")?;
    let (Some(&half_k), Some(&blocks)) = (data.shape.last(), scale.shape.last()) else {
        bail!(
            "{}: 'data' and 'scale' must have at least one axis",
            path.display()
        );
    };
    if data.shape[..data.shape.len() - 1] != scale.shape[..scale.shape.len().saturating_sub(1)]
        || blocks == 0
    {
        bail!(
            "{}: 'data' {:?} and 'scale' {:?} do not describe the same rows",
            path.display(),
            data.shape,
            scale.shape
        );
    }
    let k = half_k * 2;
    let block = k / blocks;
    if block * blocks != k {
        bail!(
            "{}: {k} elements a row do not split into {blocks} blocks",
            path.display()
        );
    }
    let format = match (st.metadata.get("format").map(String::as_str), block) {
        (Some("mxfp4"), 32) | (None, 32) => Format::Mxfp4,
        (Some("nvfp4"), 16) | (None, 16) => Format::Nvfp4,
        (f, b) => bail!(
            "{}: format {f:?} with block size {b} is not mxfp4 (32) or nvfp4 (16)",
            path.display()
        ),
    };
    let tensor_scale = match st.get("tensor_scale") {
        Some(t) if format == Format::Nvfp4 => {
            let v = t
                .to_f32_vec()
                .with_context(|| format!("{}: tensor 'tensor_scale'", path.display()))?;
            let [s] = v[..] else {
                bail!(
                    "{}: 'tensor_scale' must hold one value, has {}",
                    path.display(),
                    v.len()
                )
            };
            Some(s)
        }
        Some(_) => bail!("{}: an mxfp4 file has no 'tensor_scale'", path.display()),
        None => None,
    };
    let mut spec = match format {
        Format::Mxfp4 => Spec::mxfp4(ScaleMode::Floor),
        Format::Nvfp4 if tensor_scale.is_some() => Spec::nvfp4(NvLevels::TwoLevel),
        Format::Nvfp4 => Spec::nvfp4(NvLevels::OneLevel),
    };
    if let Some(m) = st
        .metadata
        .get("scale_mode")
        .and_then(|m| ScaleMode::from_str(m, true).ok())
    {
        spec.scale_mode = m;
    }
    let mut shape = data.shape.clone();
    *shape.last_mut().expect("checked above") = k;
    Ok(Quantized {
        spec,
        shape,
        data: data
            .as_u8()
            .with_context(|| format!("{}: tensor 'data'", path.display()))?
            .to_vec(),
        scale: scale
            .as_u8()
            .with_context(|| format!("{}: tensor 'scale'", path.display()))?
            .to_vec(),
        tensor_scale,
    })
}

pub fn run_dequantize(a: DequantizeArgs) -> Result<ExitCode> {
    let q = read_quantized(&a.input)?;
    let x = quant::dequantize(&q);
    let t = Tensor::from_f32(q.shape.clone(), &x);
    match a.output.extension().and_then(|e| e.to_str()) {
        Some("npy") => tensorio::write_npy(&a.output, &t)?,
        Some("safetensors") => {
            tensorio::write_safetensors(&a.output, &[("x", &t)], &BTreeMap::new())?
        }
        _ => bail!(
            "{}: output must end in .npy or .safetensors",
            a.output.display()
        ),
    }
    println!(
        "{} ({}) → {} f32 {:?}",
        a.input.display(),
        q.spec.describe(),
        a.output.display(),
        q.shape
    );
    Ok(ExitCode::SUCCESS)
}
