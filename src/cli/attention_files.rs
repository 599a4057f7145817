//! `fp4probe attention --q Q --k K --v V --output O`: attention on the user's tensors.
//!
//! Q [B, H, Sq, D], K and V [B, Hkv, Sk, D] (Hkv a divisor of H: grouped-query attention when
//! smaller), one tensor a file, either dense (BF16, F16 or F32, `.npy` or `.safetensors`),
//! quantized as `prequantize` quantizes them, or FP4 files `fp4probe quantize` wrote (V with
//! `--attention-v`, transposed: `files::qkv_from_quantized`). Every file is read and checked (shapes, dtypes,
//! one format, finite values) before a device is opened; then the kernel runs, or with
//! `--backend cpu` (or `auto` without a GPU) the CPU reference of the same quantized
//! arithmetic (with `--path wgmma-fp8`, the FP8 form's), and O [B, H, Sq, D] is written as BF16 or F32 under the output rules
//! `quantize` and `dequantize` share (`check_tensor_output`).

use super::attention::{Args, load_kernel};
use super::dequantize::{is_quantized, quantized_of};
use super::quantize::{
    FileKind, NPY_OURS, SAFETENSORS_OURS, check_tensor_output, file_kind, open_device, producer,
};
use crate::attention::files::{shape_of, v_shape_of};
use crate::attention::kernel::KernelPath;
use crate::attention::{AttnShape, QuantizedQkv, prequantize, qkv_from_quantized};
use crate::outfile::Outputs;
use crate::quant::{Format, Quantized};
use crate::tensorio::{self, DType, Tensor};
use anyhow::{Context, Result, bail, ensure};
use clap::ValueEnum;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

/// O's element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutDType {
    /// bfloat16, rounded to nearest even.
    Bf16,
    /// float32, as the kernel writes O.
    F32,
}

/// One of Q, K, V as read from its file.
pub enum Operand {
    /// A dense tensor, widened to f32 (exactly: every BF16 and F16 value is an f32 value).
    Dense {
        dtype: DType,
        shape: Vec<usize>,
        values: Vec<f32>,
    },
    /// An FP4 file of `fp4probe quantize`, with V's shape when it holds V^T (`--attention-v`).
    Fp4 {
        q: Quantized,
        v_shape: Option<Vec<usize>>,
    },
}

impl Operand {
    /// What the operand is, for messages: "a dense BF16 tensor", "an FP4 file (nvfp4)".
    fn describe(&self) -> String {
        match self {
            Operand::Dense { dtype, .. } => format!("a dense {dtype} tensor"),
            Operand::Fp4 { q, .. } => format!("an FP4 file ({})", q.spec.format.name()),
        }
    }
}

/// The input files as given: option name and path.
fn inputs(a: &Args) -> Result<[(&'static str, &Path); 3]> {
    let (Some(q), Some(k), Some(v)) = (&a.q, &a.k, &a.v) else {
        bail!("--q, --k and --v go together: name all three files");
    };
    Ok([("--q", q), ("--k", k), ("--v", v)])
}

/// An input must be an existing regular file with a tensor file's extension.
fn check_input(option: &str, path: &Path) -> Result<()> {
    if file_kind(path).is_none() {
        bail!(
            "{option} {}: attention reads .npy or .safetensors files",
            path.display()
        );
    }
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => bail!("{option} {}: not a regular file", path.display()),
        Err(e) => bail!("{option} {}: {e}", path.display()),
    }
}

/// Read one operand: a safetensors file with tensors `data` and `scale` is an FP4 file of
/// `fp4probe quantize`; any other file holds one dense tensor.
pub fn read_operand(option: &str, path: &Path) -> Result<Operand> {
    let t = match file_kind(path) {
        Some(FileKind::Safetensors) => {
            let st = tensorio::read_safetensors(path).with_context(|| option.to_string())?;
            if is_quantized(&st) {
                let q = quantized_of(path, &st).with_context(|| option.to_string())?;
                let v_shape = v_shape_of(&st.metadata, &q.shape)
                    .with_context(|| format!("{option} {}", path.display()))?;
                return Ok(Operand::Fp4 { q, v_shape });
            }
            tensorio::pick_tensor(path, st, None).with_context(|| {
                format!(
                    "{option}: attention reads one tensor a file (or an FP4 file of fp4probe \
                     quantize)"
                )
            })?
        }
        _ => tensorio::read_tensor(path, None).with_context(|| option.to_string())?,
    };
    match t.dtype {
        DType::BF16 | DType::F16 | DType::F32 => Ok(Operand::Dense {
            dtype: t.dtype,
            values: t.to_f32_vec().with_context(|| option.to_string())?,
            shape: t.shape,
        }),
        other => bail!(
            "{option} {}: dtype {other} is not supported: attention reads BF16, F16 or F32 \
             tensors{} (or FP4 files of fp4probe quantize)",
            path.display(),
            if other == DType::F64 {
                " (numpy: save x.astype(numpy.float32))"
            } else {
                ""
            }
        ),
    }
}

/// The kernel's operands from the three files, all checked: all dense (quantized here in
/// `format`, K smoothed if asked) or all FP4 files (of `format`, when one is given).
pub fn quantized_qkv(
    ops: [Operand; 3],
    causal: bool,
    format: Option<Format>,
    smooth_k: bool,
) -> Result<QuantizedQkv> {
    match ops {
        [
            Operand::Dense {
                shape: qs,
                values: q,
                ..
            },
            Operand::Dense {
                shape: ks,
                values: k,
                ..
            },
            Operand::Dense {
                shape: vs,
                values: v,
                ..
            },
        ] => {
            let shape = shape_of(&qs, &ks, causal)?;
            ensure!(
                vs == ks,
                "V is {vs:?}, K is {ks:?}: V must have K's shape [B, Hkv, Sk, D]"
            );
            let format = format.unwrap_or(Format::Nvfp4);
            Ok(prequantize(&shape, &q, &k, &v, smooth_k, format)?)
        }
        [
            Operand::Fp4 { q, v_shape: qv },
            Operand::Fp4 { q: k, v_shape: kv },
            Operand::Fp4 { q: vt, v_shape },
        ] => {
            for (option, v) in [("--q", qv), ("--k", kv)] {
                if let Some(v) = v {
                    bail!(
                        "{option} is a V^T file (quantize --attention-v of {v:?}): Q and K are \
                         quantized as they are, only V transposed"
                    );
                }
            }
            if let Some(v) = v_shape.filter(|v| *v != k.shape) {
                bail!(
                    "--v holds V {v:?} (quantize --attention-v), K is {:?}: V must have K's \
                     shape [B, Hkv, Sk, D]",
                    k.shape
                );
            }
            if smooth_k {
                bail!(
                    "--smooth-k subtracts K's channel means before quantizing; FP4 files are \
                     quantized already (smooth K before quantizing it, or give dense inputs)"
                );
            }
            if let Some(f) = format.filter(|&f| f != q.spec.format) {
                bail!(
                    "--format {} but the FP4 files are {}: FP4 inputs keep their format (leave \
                     --format out)",
                    f.name(),
                    q.spec.format.name()
                );
            }
            qkv_from_quantized(&q, &k, &vt, causal)
        }
        [q, k, v] => bail!(
            "--q is {}, --k {}, --v {}: Q, K and V must all be dense tensors (BF16, F16, F32) \
             or all FP4 files of fp4probe quantize",
            q.describe(),
            k.describe(),
            v.describe()
        ),
    }
}

/// O's element type: --out-dtype, else BF16 for a BF16 Q and F32 otherwise.
fn out_dtype(a: &Args, q: &Operand) -> OutDType {
    a.out_dtype.unwrap_or(match q {
        Operand::Dense {
            dtype: DType::BF16, ..
        } => OutDType::Bf16,
        _ => OutDType::F32,
    })
}

/// O as a tensor of `dtype`, [B, H, Sq, D].
pub fn output_tensor(shape: &AttnShape, o: &[f32], dtype: OutDType) -> Tensor {
    let dims = vec![shape.batch, shape.heads, shape.seq_q, shape.head_dim];
    match dtype {
        OutDType::F32 => Tensor::from_f32(dims, o),
        OutDType::Bf16 => {
            let bits: Vec<u16> = o
                .iter()
                .map(|&x| crate::formats::f32_to_bf16_bits(x))
                .collect();
            Tensor::from_bf16_bits(dims, &bits)
        }
    }
}

pub fn run(a: &Args) -> Result<ExitCode> {
    // Everything that can be refused is refused before a device is opened: the options, the
    // output, then every file read and checked against the others.
    let files = inputs(a)?;
    let Some(output) = &a.output else {
        bail!("--q needs --output: name the file O is written to");
    };
    for (option, path) in files {
        check_input(option, path)?;
    }
    let outputs = Outputs::new(a.force).inputs(files.map(|(_, p)| p));
    let kind = check_tensor_output("attention", &outputs, output)?;
    let [(qo, qp), (ko, kp), (vo, vp)] = files;
    let ops = [
        read_operand(qo, qp)?,
        read_operand(ko, kp)?,
        read_operand(vo, vp)?,
    ];
    let dtype = out_dtype(a, &ops[0]);
    let qkv = quantized_qkv(ops, a.causal, a.format, a.smooth_k)?;
    let shape = qkv.shape;
    if let Some(p) = a.path {
        p.check_head_dim(shape.head_dim)?;
        p.check_format(qkv.format)?;
    }

    // On the CPU, --path picks whose arithmetic the reference computes: wgmma-fp8's E4M3 form
    // (reference_fp8) or, for every other path, the bf16 form (reference_quantized).
    let fp8 = a.path.is_some_and(KernelPath::is_fp8);
    let gpu = open_device(
        a.backend,
        if fp8 {
            "Running the CPU reference of the FP8 path's arithmetic instead (slower)."
        } else {
            "Running the CPU reference of the kernel's quantized arithmetic instead (the bf16 \
             kernels' result, slower)."
        },
    )?;
    let (o, ran_on) = match &gpu {
        Some(backend) => {
            let path = a.path.unwrap_or_else(|| {
                KernelPath::for_device(backend.compute_capability().0, shape.head_dim)
            });
            let kernel = load_kernel(backend, path)?;
            let o = kernel.run(&qkv)?;
            (o, format!("cuda, kernel path {}", path.name()))
        }
        None if fp8 => (
            crate::attention::reference_fp8(&qkv),
            "cpu reference of the FP8 arithmetic (docs/attention-fp8.md)".to_string(),
        ),
        None => (
            crate::attention::reference_quantized(&qkv),
            "cpu reference".to_string(),
        ),
    };

    let t = output_tensor(&shape, &o, dtype);
    let (bytes, ours) = match kind {
        FileKind::Npy => (tensorio::npy_to_bytes(&t)?, NPY_OURS),
        FileKind::Safetensors => {
            let [q, k, v] = files.map(|(_, p)| p.display().to_string());
            let meta = BTreeMap::from([
                ("producer".to_string(), producer()),
                (
                    "attention".to_string(),
                    "o = softmax(q·kᵀ/√d)·v, fp4probe's FP4 scheme".to_string(),
                ),
                ("format".to_string(), qkv.format.name().to_string()),
                ("causal".to_string(), shape.causal.to_string()),
                ("smooth_k".to_string(), a.smooth_k.to_string()),
                ("kv_heads".to_string(), shape.kv_heads.to_string()),
                ("backend".to_string(), ran_on.clone()),
                ("q".to_string(), q),
                ("k".to_string(), k),
                ("v".to_string(), v),
                (
                    "torch_dtype.o".to_string(),
                    t.dtype.torch_name().to_string(),
                ),
            ]);
            (
                tensorio::safetensors_to_bytes(&[("o", &t)], &meta)?,
                SAFETENSORS_OURS,
            )
        }
    };
    check_tensor_output("attention", &outputs, output)?;
    outputs.write(output, bytes, ours)?;
    println!(
        "{shape} {}{} → {} {} {:?} ({ran_on})",
        qkv.format.name(),
        if a.smooth_k { ", K smoothed" } else { "" },
        output.display(),
        t.dtype,
        t.shape
    );
    Ok(ExitCode::SUCCESS)
}
