//! The tensor `fp4probe quantize` reads: one tensor of a `.npy` or `.safetensors` file as the
//! kernels take it (element type, raw bytes) and widened to f32, float64 rounded to float32 with
//! a note, and V transposed for `--attention-v`.

use super::quantize::{FileKind, file_kind};
use crate::attention::files::vt_shape;
use crate::attention::prequant::transpose_pad_keys;
use crate::quant::cuda::InType;
use crate::tensorio::{self, DType};
use anyhow::{Result, bail};
use std::path::Path;

/// The input as the kernels take it: element type, raw bytes, and widened to f32.
pub struct Input {
    pub in_type: InType,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
    pub f32: Vec<f32>,
    /// The file's element type as the metadata records it ("f32", "f64 rounded to f32").
    pub dtype_label: String,
}

impl Input {
    /// V [..., Sk, D] as `quantize --attention-v` stores it: V^T [..., D, Skp], padding keys
    /// zero (`attention::prequant::transpose_pad_keys`, on the raw elements and the f32 values).
    pub fn transposed_v(self) -> Result<Input> {
        let shape = vt_shape(&self.shape)?;
        let [.., sk, d] = self.shape[..] else {
            unreachable!("vt_shape checked two axes")
        };
        fn raw<const N: usize>(bytes: &[u8], sk: usize, d: usize) -> Vec<u8> {
            let elems: Vec<[u8; N]> = bytes
                .chunks_exact(N)
                .map(|c| c.try_into().expect("chunks of N"))
                .collect();
            transpose_pad_keys(&elems, sk, d, [0; N]).concat()
        }
        let bytes = match self.in_type.size() {
            2 => raw::<2>(&self.bytes, sk, d),
            _ => raw::<4>(&self.bytes, sk, d),
        };
        Ok(Input {
            f32: transpose_pad_keys(&self.f32, sk, d, 0.0),
            bytes,
            shape,
            ..self
        })
    }
}

/// How rounding f64 values to f32 changed them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Narrowed {
    /// Values whose f32 differs from the f64 (the two below included).
    pub changed: usize,
    /// Finite values beyond f32's range, now ±inf.
    pub overflowed: usize,
    /// Nonzero values below f32's smallest subnormal's half, now ±0.
    pub flushed: usize,
}

/// f64 values rounded to the nearest f32 (ties to even, overflow to ±inf: numpy's
/// `astype(float32)`), with what the rounding changed.
pub fn narrow_f64(v: &[f64]) -> (Vec<f32>, Narrowed) {
    let mut n = Narrowed::default();
    let out = v
        .iter()
        .map(|&d| {
            let f = d as f32;
            if d.is_finite() && f64::from(f) != d {
                n.changed += 1;
                n.overflowed += f.is_infinite() as usize;
                n.flushed += (f == 0.0) as usize;
            }
            f
        })
        .collect();
    (out, n)
}

/// Read the tensor to quantize. A multi-tensor file needs a name: quantizing one tensor of a
/// checkpoint chosen by file order would be a guess.
pub fn read_input(path: &Path, name: Option<&str>) -> Result<Input> {
    let t = match file_kind(path) {
        Some(FileKind::Safetensors) => {
            let st = tensorio::read_safetensors(path)?;
            if name.is_none() && st.tensors.len() > 1 {
                const SHOWN: usize = 8;
                let mut list: Vec<String> = st
                    .tensors
                    .iter()
                    .take(SHOWN)
                    .map(|(n, t)| format!("{n} ({} {:?})", t.dtype, t.shape))
                    .collect();
                if st.tensors.len() > SHOWN {
                    list.push(format!("and {} more", st.tensors.len() - SHOWN));
                }
                bail!(
                    "{} holds {} tensors: {}; quantize writes one tensor a run: name it with \
                     --input-name NAME (alias --tensor)",
                    path.display(),
                    st.tensors.len(),
                    list.join(", ")
                );
            }
            tensorio::pick_tensor(path, st, name)?
        }
        _ => tensorio::read_tensor(path, name)?,
    };
    let (in_type, bytes, f32, dtype_label) = match t.dtype {
        DType::F32 | DType::BF16 | DType::F16 => {
            let in_type = match t.dtype {
                DType::F32 => InType::F32,
                DType::BF16 => InType::Bf16,
                _ => InType::F16,
            };
            let f32 = t.to_f32_vec()?;
            (in_type, t.bytes, f32, in_type.name().to_string())
        }
        DType::F64 => {
            let (f32, n) = narrow_f64(&t.to_f64_vec()?);
            note_narrowed(path, f32.len(), &n);
            let bytes = f32.iter().flat_map(|v| v.to_le_bytes()).collect();
            (InType::F32, bytes, f32, "f64 rounded to f32".to_string())
        }
        other => bail!(
            "{}: dtype {} cannot be quantized; quantize reads F32, F16, BF16 or F64 (rounded \
             to F32)",
            path.display(),
            other.name()
        ),
    };
    Ok(Input {
        in_type,
        shape: t.shape,
        bytes,
        f32,
        dtype_label,
    })
}

fn note_narrowed(path: &Path, total: usize, n: &Narrowed) {
    let mut what = format!("{} of {total} values changed in rounding", n.changed);
    if n.overflowed > 0 {
        what += &format!(
            ", {} of them beyond float32's range (|x| > {:e}) became ±inf",
            n.overflowed,
            f32::MAX
        );
    }
    if n.flushed > 0 {
        what += &format!(", {} too small for float32 became 0", n.flushed);
    }
    eprintln!(
        "note: {} holds float64; quantizing it rounded to float32 (as numpy's \
         x.astype(numpy.float32)): {what}",
        path.display()
    );
}
