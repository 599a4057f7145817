//! Tensors in and out of files: `.npy` (numpy) and `.safetensors`, the two formats model
//! weights and test vectors come in, for `fp4probe quantize` / `dequantize`.
//!
//! Only the element types those commands need are supported: F32, F16 and BF16 inputs (F64 too,
//! numpy's default, which a caller narrows explicitly: see [`Tensor::to_f64_vec`]); F4 (E2M1
//! codes, two a byte), F8_E4M3 and F8_E8M0 (block scales), U8 and F32 outputs; I32 for indices.
//! Everything is held in memory as little-endian, row-major bytes, so a tensor read from either
//! format can be written to the other unchanged (the 4- and 8-bit float types exist in
//! safetensors only: numpy has no dtype for them).
//!
//! `.safetensors` goes through the format's reference implementation, the `safetensors` crate
//! (see the `safetensors` module). Readers never trust the file: every length, offset and shape
//! is checked before it is used (no allocation is sized from a header before the file is known
//! to hold that many bytes), and errors name the file, the tensor and the field that is wrong.
//! Writers build the file's
//! bytes ([`npy_to_bytes`], [`safetensors_to_bytes`]) and hand them to [`crate::outfile`], the
//! one place that decides whether a path may be written: commands pass their own
//! [`Outputs`](crate::outfile::Outputs) (their inputs, `--force`, the marker their files carry);
//! [`write_npy`] and [`write_safetensors`] replace any regular file but still refuse links,
//! FIFOs, devices and read-only files. A regular file is replaced atomically, so a failed write
//! never leaves a half-written output behind.

mod npy;
mod safetensors;

pub use self::safetensors::{
    SafeTensors, read_safetensors, safetensors_from_bytes, safetensors_to_bytes, write_safetensors,
};
pub use npy::{npy_from_bytes, npy_to_bytes, read_npy, write_npy};

use crate::outfile::{Ours, Outputs};
use anyhow::{Context, Result, anyhow, bail, ensure};
use std::fmt;
use std::path::Path;

/// The element types a [`Tensor`] can hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    F32,
    F16,
    BF16,
    U8,
    I32,
    F64,
    /// OCP E2M1 (FP4), two elements a byte: element 2i in bits 3..0, element 2i+1 in bits 7..4.
    /// The shape counts elements, as safetensors' header does; PyTorch reads the tensor as
    /// `float4_e2m1fn_x2` with the last dimension halved.
    F4,
    /// OCP E4M3 (`torch.float8_e4m3fn`): NVFP4's block scales.
    F8E4M3,
    /// OCP E8M0 (`torch.float8_e8m0fnu`), a power of two, 0xFF = NaN: MXFP4's block scales.
    F8E8M0,
}

/// Every supported dtype, for listing in error messages and for tests.
pub const ALL_DTYPES: [DType; 9] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::U8,
    DType::I32,
    DType::F64,
    DType::F4,
    DType::F8E4M3,
    DType::F8E8M0,
];

impl DType {
    /// Bits per element.
    pub fn bits(self) -> usize {
        match self {
            DType::F64 => 64,
            DType::F32 | DType::I32 => 32,
            DType::F16 | DType::BF16 => 16,
            DType::U8 | DType::F8E4M3 | DType::F8E8M0 => 8,
            DType::F4 => 4,
        }
    }

    /// Bytes per element, rounded up to a whole byte: 1 for F4, whose elements share bytes in
    /// pairs (lengths come from [`byte_len`], which counts bits).
    pub fn size(self) -> usize {
        self.bits().div_ceil(8)
    }

    /// The name as safetensors spells it (`"F32"`, `"BF16"`, `"F8_E4M3"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "F32",
            DType::F16 => "F16",
            DType::BF16 => "BF16",
            DType::U8 => "U8",
            DType::I32 => "I32",
            DType::F64 => "F64",
            DType::F4 => "F4",
            DType::F8E4M3 => "F8_E4M3",
            DType::F8E8M0 => "F8_E8M0",
        }
    }

    /// The `torch` dtype PyTorch gives a tensor of this type read from safetensors.
    pub fn torch_name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::U8 => "uint8",
            DType::I32 => "int32",
            DType::F64 => "float64",
            DType::F4 => "float4_e2m1fn_x2",
            DType::F8E4M3 => "float8_e4m3fn",
            DType::F8E8M0 => "float8_e8m0fnu",
        }
    }

    /// The inverse of [`DType::name`]; `None` for names this crate does not support.
    pub fn from_name(name: &str) -> Option<DType> {
        ALL_DTYPES.into_iter().find(|d| d.name() == name)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A dense tensor: `bytes` holds [`byte_len`]`(dtype, shape)` bytes, row-major (C order, last
/// index fastest), each element little-endian (F4: two elements a byte, see [`DType::F4`]).
///
/// The fields are public so callers can build and take apart tensors freely; the writers check
/// that `bytes` has the length `shape` and `dtype` call for and refuse to write otherwise.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
}

impl Tensor {
    /// A tensor from raw bytes, checking that their length matches `shape` and `dtype`.
    pub fn new(dtype: DType, shape: Vec<usize>, bytes: Vec<u8>) -> Result<Tensor> {
        let t = Tensor {
            dtype,
            shape,
            bytes,
        };
        t.check()?;
        Ok(t)
    }

    /// # Panics
    /// If `values.len()` is not the product of `shape` (a caller bug, not bad input data).
    pub fn from_f32(shape: Vec<usize>, values: &[f32]) -> Tensor {
        assert_numel(&shape, values.len());
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Tensor {
            dtype: DType::F32,
            shape,
            bytes,
        }
    }

    /// # Panics
    /// If `values.len()` is not the product of `shape`.
    pub fn from_u8(shape: Vec<usize>, values: Vec<u8>) -> Tensor {
        assert_numel(&shape, values.len());
        Tensor {
            dtype: DType::U8,
            shape,
            bytes: values,
        }
    }

    /// # Panics
    /// If `values.len()` is not the product of `shape`.
    pub fn from_i32(shape: Vec<usize>, values: &[i32]) -> Tensor {
        assert_numel(&shape, values.len());
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Tensor {
            dtype: DType::I32,
            shape,
            bytes,
        }
    }

    /// A BF16 tensor from raw bit patterns (no rounding happens here).
    ///
    /// # Panics
    /// If `bits.len()` is not the product of `shape`.
    pub fn from_bf16_bits(shape: Vec<usize>, bits: &[u16]) -> Tensor {
        Self::from_u16_bits(DType::BF16, shape, bits)
    }

    /// An F16 tensor from raw bit patterns (no rounding happens here).
    ///
    /// # Panics
    /// If `bits.len()` is not the product of `shape`.
    pub fn from_f16_bits(shape: Vec<usize>, bits: &[u16]) -> Tensor {
        Self::from_u16_bits(DType::F16, shape, bits)
    }

    fn from_u16_bits(dtype: DType, shape: Vec<usize>, bits: &[u16]) -> Tensor {
        assert_numel(&shape, bits.len());
        let bytes = bits.iter().flat_map(|v| v.to_le_bytes()).collect();
        Tensor {
            dtype,
            shape,
            bytes,
        }
    }

    /// Number of elements: the product of the shape, 1 for a scalar (empty shape). Saturates
    /// at `usize::MAX` for a shape no memory could hold (only possible by setting the public
    /// field by hand; [`Tensor::check`] reports it).
    pub fn numel(&self) -> usize {
        self.shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .unwrap_or(usize::MAX)
    }

    /// The values widened to f32. Exact for all three float types: every F16 and BF16 value,
    /// subnormals and infinities included, is an f32 value, and NaNs keep sign and payload
    /// (shifted into the top of the f32 fraction, so quiet stays quiet). F64 is refused: going
    /// to f32 rounds, and the caller says whether that is acceptable ([`Tensor::to_f64_vec`]).
    pub fn to_f32_vec(&self) -> Result<Vec<f32>> {
        self.check()?;
        let out = match self.dtype {
            DType::F32 => self
                .bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            DType::F16 => self.u16_iter().map(f16_bits_to_f32).collect(),
            DType::BF16 => self.u16_iter().map(bf16_bits_to_f32).collect(),
            DType::U8 | DType::I32 | DType::F4 | DType::F8E4M3 | DType::F8E8M0 => {
                bail!(
                    "{} tensor cannot be read as floats (need F32, F16 or BF16)",
                    self.dtype
                )
            }
            DType::F64 => bail!(
                "F64 tensor cannot be read as f32 without rounding; read it with to_f64_vec and \
                 narrow it where the rounding is reported"
            ),
        };
        Ok(out)
    }

    /// The values of an F64 tensor.
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        ensure!(
            self.dtype == DType::F64,
            "expected an F64 tensor, found {}",
            self.dtype
        );
        self.check()?;
        Ok(self
            .bytes
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("chunks of 8")))
            .collect())
    }

    /// The bytes of a U8 tensor.
    pub fn as_u8(&self) -> Result<&[u8]> {
        self.bytes_of(&[DType::U8])
    }

    /// The raw bytes of a tensor whose dtype is one of `dtypes` (for the 4- and 8-bit types,
    /// which are held and written as their bit patterns).
    pub fn bytes_of(&self, dtypes: &[DType]) -> Result<&[u8]> {
        if !dtypes.contains(&self.dtype) {
            let names: Vec<&str> = dtypes.iter().map(|d| d.name()).collect();
            bail!(
                "expected a {} tensor, found {}",
                names.join(" or "),
                self.dtype
            );
        }
        self.check()?;
        Ok(&self.bytes)
    }

    /// The raw bit patterns of an F16 or BF16 tensor.
    pub fn u16_bits(&self) -> Result<Vec<u16>> {
        ensure!(
            matches!(self.dtype, DType::F16 | DType::BF16),
            "expected an F16 or BF16 tensor, found {}",
            self.dtype
        );
        self.check()?;
        Ok(self.u16_iter().collect())
    }

    /// The values of an I32 tensor.
    pub fn to_i32_vec(&self) -> Result<Vec<i32>> {
        ensure!(
            self.dtype == DType::I32,
            "expected an I32 tensor, found {}",
            self.dtype
        );
        self.check()?;
        Ok(self
            .bytes
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    fn u16_iter(&self) -> impl Iterator<Item = u16> + '_ {
        self.bytes
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
    }

    /// Checks that `bytes` holds exactly what `shape` and `dtype` call for. The fields are
    /// public, so every consumer of raw bytes (converters, writers) checks first.
    pub fn check(&self) -> Result<()> {
        let need = byte_len(self.dtype, &self.shape)?;
        ensure!(
            self.bytes.len() == need,
            "{} {:?} needs {} bytes but the tensor holds {}",
            self.dtype,
            self.shape,
            need,
            self.bytes.len()
        );
        Ok(())
    }
}

/// Panics with a clear message when a constructor gets the wrong number of values: that is a bug
/// in the caller, never a property of input data.
fn assert_numel(shape: &[usize], len: usize) {
    let numel = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    assert!(
        numel == Some(len),
        "shape {shape:?} holds {numel:?} elements but {len} values were given"
    );
}

/// Bytes needed for `shape` elements of `dtype`, with overflow reported instead of wrapping
/// (a malicious header can claim any shape). F4 elements come in pairs: an odd count does not
/// fill whole bytes and is refused, as the reference implementation refuses it.
pub fn byte_len(dtype: DType, shape: &[usize]) -> Result<usize> {
    let bits = shape
        .iter()
        .try_fold(dtype.bits(), |a, &d| a.checked_mul(d))
        .ok_or_else(|| anyhow!("{dtype} {shape:?} overflows the address space"))?;
    ensure!(
        bits % 8 == 0,
        "{dtype} {shape:?} holds an odd number of 4-bit elements, which do not fill whole bytes"
    );
    Ok(bits / 8)
}

/// Widens IEEE binary16 bits to f32, exactly. Written out by hand (no `half` crate): normal
/// numbers re-bias the exponent, subnormals are normalised (every f16 subnormal is an f32
/// normal), and Inf/NaN keep sign and fraction bits.
pub fn f16_bits_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let frac = u32::from(h & 0x3ff);
    let bits = match (exp, frac) {
        (0, 0) => sign,
        (0, _) => {
            // frac * 2^-24: shift the leading 1 up to the implicit bit position (bit 10).
            let shift = frac.leading_zeros() - 21;
            let frac = (frac << shift) & 0x3ff;
            let exp32 = 127 - 14 - shift;
            sign | (exp32 << 23) | (frac << 13)
        }
        (0x1f, _) => sign | (0xff << 23) | (frac << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (frac << 13),
    };
    f32::from_bits(bits)
}

/// Widens bfloat16 bits to f32, exactly: bf16 is the top half of an f32.
pub fn bf16_bits_to_f32(b: u16) -> f32 {
    f32::from_bits(u32::from(b) << 16)
}

/// Reads one tensor, picking the format by extension: `.npy` holds exactly one tensor (and no
/// name, so passing `name` is an error rather than silently ignored); `.safetensors` yields the
/// tensor called `name`, or the only tensor when `name` is `None`.
pub fn read_tensor(path: &Path, name: Option<&str>) -> Result<Tensor> {
    match extension(path).as_deref() {
        Some("npy") => {
            if let Some(name) = name {
                bail!(
                    "{}: a .npy file holds one unnamed tensor; cannot select tensor '{name}'",
                    path.display()
                );
            }
            read_npy(path)
        }
        Some("safetensors") => {
            let st = read_safetensors(path)?;
            pick_tensor(path, st, name)
        }
        _ => bail!(
            "{}: unknown tensor file type (expected a .npy or .safetensors extension)",
            path.display()
        ),
    }
}

fn extension(path: &Path) -> Option<String> {
    path.extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
}

/// Selects the tensor `read_tensor` returns from a safetensors file read from `path`.
pub fn pick_tensor(path: &Path, st: SafeTensors, name: Option<&str>) -> Result<Tensor> {
    let names = st
        .tensors
        .iter()
        .map(|(n, _)| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut tensors = st.tensors;
    match name {
        Some(name) => tensors
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t)
            .ok_or_else(|| {
                anyhow!(
                    "{}: no tensor named '{name}' (the file holds: {names})",
                    path.display()
                )
            }),
        None => match (tensors.len(), tensors.pop()) {
            (1, Some((_, t))) => Ok(t),
            (0, _) => bail!("{}: the file holds no tensors", path.display()),
            (n, _) => bail!(
                "{}: the file holds {n} tensors ({names}); say which one to read",
                path.display()
            ),
        },
    }
}

/// What [`write_npy`] and [`write_safetensors`] accept as an existing output: any regular file
/// (every text contains the empty marker). They serve callers that own their paths (tests,
/// fixtures); a command that must not replace foreign files passes its own [`Ours`].
const ANY_REGULAR_FILE: Ours<'static> = Ours::any();

/// Writes `bytes` to `path` through [`crate::outfile`] with no inputs and no `--force`.
fn write_plain(path: &Path, bytes: &[u8], what: &str) -> Result<()> {
    Outputs::new(false)
        .write(path, bytes, ANY_REGULAR_FILE)
        .with_context(|| format!("{}: writing {what}", path.display()))
}
