//! `fp4probe dequantize`: a file `fp4probe quantize` wrote (or any file with the same tensors)
//! back to f32, as `.npy` or `.safetensors`, under the same output rules as quantize.

use super::quantize::{
    FileKind, NPY_OURS, SAFETENSORS_OURS, check_tensor_output, producer, scale_dtype,
};
use crate::attention::files::v_shape_of;
use crate::attention::prequant::untranspose_keys;
use crate::outfile::Outputs;
use crate::quant::{self, Format, NvLevels, Quantized, ScaleGrid, ScaleMode, Spec};
use crate::tensorio::{self, DType, SafeTensors, Tensor};
use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Read a quantized safetensors file back to f32 and write it as .npy (or .safetensors).
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Output safety (refusals exit with status 2 and write nothing):
  --output is .npy or .safetensors, chosen by its extension; anything else is refused.
  It is refused when it is the input file (never overridden), a symbolic link, FIFO, device
  node or read-only file, an existing .safetensors fp4probe did not write (its metadata lacks
  producer \"fp4probe ...\"), or any existing .npy: a .npy file has no room for a mark of who
  wrote it, so only --force replaces one. --force writes anyway, through links, FIFOs and
  devices, never replacing them. Regular files are replaced atomically.

Examples:
  fp4probe dequantize --input q.safetensors --output x.npy
  fp4probe dequantize --input q.safetensors --output x.safetensors   (tensor x; replaced on reruns)"
)]
pub struct DequantizeArgs {
    /// A file written by `fp4probe quantize` (or any file with the same tensors; the format is
    /// then inferred from the block size: 32 → mxfp4, 16 → nvfp4).
    #[arg(long)]
    pub input: PathBuf,
    /// Output: .npy, or .safetensors (tensor `x`).
    #[arg(long)]
    pub output: PathBuf,
    /// Write an output that is a link, FIFO, device, read-only file, an existing .npy, or a
    /// .safetensors fp4probe did not write (never over the input itself).
    #[arg(long)]
    pub force: bool,
}

/// Whether a safetensors file holds what `quantized_of` reads (tensors `data` and `scale`).
pub fn is_quantized(st: &SafeTensors) -> bool {
    st.get("data").is_some() && st.get("scale").is_some()
}

/// A `Quantized` from the tensors and metadata of `st`, read from `path` (named in errors).
pub fn quantized_of(path: &Path, st: &SafeTensors) -> Result<Quantized> {
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
    let codes = data
        .bytes_of(&[DType::F4, DType::U8])
        .with_context(|| format!("{}: tensor 'data'", path.display()))?;
    let (Some(&last), Some(_)) = (data.shape.last(), scale.shape.last()) else {
        bail!(
            "{}: 'data' and 'scale' must have at least one axis",
            path.display()
        );
    };
    // F4 counts codes; U8 [..., K/2] (files without F4, as tests/vectors/quant) counts bytes.
    let k = match data.dtype {
        DType::F4 if last % 2 == 0 => last,
        DType::F4 => bail!(
            "{}: F4 'data' has rows of {last} codes, an odd number: rows must fill whole bytes",
            path.display()
        ),
        _ => last * 2,
    };
    // A tiled file's scales are checked against its data (in the packed [..., K/2] shape the
    // layouts are defined on) here; the checks below then see the row-major scale shape they
    // stand for.
    let mut packed_shape = data.shape.clone();
    *packed_shape.last_mut().expect("checked above") = k / 2;
    let (layout, scale_rows_shape) =
        ScaleGrid::of_metadata(&st.metadata, &packed_shape, &scale.shape)
            .with_context(|| path.display().to_string())?;
    let Some(&blocks) = scale_rows_shape.last() else {
        bail!("{}: 'scale' must have at least one axis", path.display());
    };
    if data.shape[..data.shape.len() - 1]
        != scale_rows_shape[..scale_rows_shape.len().saturating_sub(1)]
        || blocks == 0
    {
        bail!(
            "{}: 'data' {:?} and 'scale' {:?} do not describe the same rows",
            path.display(),
            data.shape,
            scale.shape
        );
    }
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
    spec.scale_layout = layout;
    let mut shape = data.shape.clone();
    *shape.last_mut().expect("checked above") = k;
    Ok(Quantized {
        spec,
        shape,
        data: codes.to_vec(),
        scale: scale
            .bytes_of(&[scale_dtype(format), DType::U8])
            .with_context(|| {
                format!(
                    "{}: tensor 'scale' of a {} file",
                    path.display(),
                    format.name()
                )
            })?
            .to_vec(),
        tensor_scale,
    })
}

pub fn run_dequantize(a: DequantizeArgs) -> Result<ExitCode> {
    let outputs = Outputs::new(a.force).input(&a.input);
    let kind = check_tensor_output("dequantize", &outputs, &a.output)?;
    let st = tensorio::read_safetensors(&a.input)?;
    let q = quantized_of(&a.input, &st)?;
    let v_shape =
        v_shape_of(&st.metadata, &q.shape).with_context(|| a.input.display().to_string())?;
    let x = quant::dequantize(&q);
    let nan_blocks = x
        .chunks(q.spec.block())
        .filter(|b| b.iter().any(|v| v.is_nan()))
        .count();
    if nan_blocks > 0 {
        eprintln!(
            "note: {nan_blocks} of {} blocks have the NaN scale (NaN or Inf where they were \
             quantized): their {} elements are NaN in {}",
            q.linear_scales().len(),
            nan_blocks * q.spec.block(),
            a.output.display()
        );
    }
    // A V^T file of `quantize --attention-v` comes back as the V it was quantized from.
    let t = match &v_shape {
        Some(v) => {
            let [.., sk, d] = v[..] else {
                unreachable!("v_shape_of checked two axes")
            };
            Tensor::from_f32(v.clone(), &untranspose_keys(&x, sk, d))
        }
        None => Tensor::from_f32(q.shape.clone(), &x),
    };
    let (bytes, ours) = match kind {
        FileKind::Npy => (tensorio::npy_to_bytes(&t)?, NPY_OURS),
        FileKind::Safetensors => {
            let meta = BTreeMap::from([
                ("producer".to_string(), producer()),
                (
                    "dequantized_from".to_string(),
                    a.input.display().to_string(),
                ),
                ("quantization".to_string(), q.spec.describe()),
            ]);
            (
                tensorio::safetensors_to_bytes(&[("x", &t)], &meta)?,
                SAFETENSORS_OURS,
            )
        }
    };
    check_tensor_output("dequantize", &outputs, &a.output)?;
    outputs.write(&a.output, bytes, ours)?;
    println!(
        "{} ({}{}) → {} f32 {:?}",
        a.input.display(),
        q.spec.describe(),
        if v_shape.is_some() {
            ", V^T transposed back"
        } else {
            ""
        },
        a.output.display(),
        t.shape
    );
    Ok(ExitCode::SUCCESS)
}
