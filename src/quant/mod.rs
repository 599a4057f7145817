//! MXFP4 and NVFP4 quantization: the CPU reference (this module), the CUDA kernels
//! (`kernels/quant/`, driven by `cuda`), and the optimal-scale search.
//!
//! Semantics, matched bit for bit (see `tests/vectors/quant/` for independent vectors):
//! - MXFP4: blocks of 32 along the last axis, E8M0 scale chosen by one of torchao `to_mx`'s
//!   modes (`scale::ScaleMode`), elements x·(1/scale) in f32, then E2M1 round-to-nearest-even
//!   saturating at ±6. A block with NaN or ±Inf gets scale 0xFF and all-zero codes.
//! - NVFP4: blocks of 16, E4M3 block scale amax/6 (divided by the f32 tensor scale
//!   amax/(448·6) in the two-level form) clamped to [2^-6, 448]; elements x / (tensor scale ·
//!   block scale) in f32, then E2M1. A block with NaN or ±Inf gets scale 0x7F and all-zero
//!   codes; the tensor scale is taken over the finite elements.
//! - Packing: two codes a byte, the element with the even index in the low nibble.
//! - Scales: one byte per block, row-major or in the tiles of block-scaled GEMMs (`layout`).

pub mod codes;
pub mod cuda;
pub mod health;
pub mod layout;
#[cfg(test)]
mod pair_codes;
pub mod scale;

use anyhow::{Result, bail};
use clap::ValueEnum;
use codes::{
    E4M3_NAN, E8M0_NAN, e2m1_decode, e2m1_encode, e4m3_to_f32, e8m0_reciprocal, e8m0_to_f32,
};
pub use layout::{ScaleGrid, ScaleLayout};
use scale::{F32_INF_BITS, mx_scale, nv_scale, nv_tensor_scale};
pub use scale::{NvLevels, ScaleMode};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// Elements one GPU thread handles, and the chunk the block error is summed over before the
/// chunks are combined pairwise (same tree as the kernels' butterfly shuffles).
pub const CHUNK: usize = 8;

/// The FP4 tensor format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// OCP MX: 32-element blocks, E8M0 (power-of-two) scales.
    Mxfp4,
    /// NVIDIA: 16-element blocks, E4M3 scales (and an f32 tensor scale in the two-level form).
    Nvfp4,
}

impl Format {
    pub fn block(self) -> usize {
        match self {
            Format::Mxfp4 => 32,
            Format::Nvfp4 => 16,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Format::Mxfp4 => "mxfp4",
            Format::Nvfp4 => "nvfp4",
        }
    }
}

/// What to do with NaN and ±Inf inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NonFinite {
    /// The block's scale becomes the format's NaN, its codes zero (torchao's behaviour).
    Propagate,
    /// Refuse the tensor and name the first non-finite element.
    Error,
}

/// Everything that decides the output bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    pub format: Format,
    /// Used by MXFP4 only.
    pub scale_mode: ScaleMode,
    /// Used by NVFP4 only.
    pub levels: NvLevels,
    /// Replace each block's scale by the MSE-best of a small window around it (see `search`).
    pub search: bool,
    pub non_finite: NonFinite,
    /// Where each block's scale byte is stored.
    #[serde(default)]
    pub scale_layout: ScaleLayout,
}

impl Spec {
    pub fn mxfp4(scale_mode: ScaleMode) -> Spec {
        Spec {
            format: Format::Mxfp4,
            scale_mode,
            levels: NvLevels::TwoLevel,
            search: false,
            non_finite: NonFinite::Propagate,
            scale_layout: ScaleLayout::Linear,
        }
    }
    pub fn nvfp4(levels: NvLevels) -> Spec {
        Spec {
            format: Format::Nvfp4,
            scale_mode: ScaleMode::Floor,
            levels,
            search: false,
            non_finite: NonFinite::Propagate,
            scale_layout: ScaleLayout::Linear,
        }
    }
    pub fn block(&self) -> usize {
        self.format.block()
    }
    pub fn two_level(&self) -> bool {
        self.format == Format::Nvfp4 && self.levels == NvLevels::TwoLevel
    }
    /// "mxfp4 floor", "nvfp4 two-level", with " + search" and ", 128x4 scales".
    pub fn describe(&self) -> String {
        let mut s = match self.format {
            Format::Mxfp4 => format!("mxfp4 {}", self.scale_mode.name()),
            Format::Nvfp4 if self.two_level() => "nvfp4 two-level".to_string(),
            Format::Nvfp4 => "nvfp4 one-level".to_string(),
        };
        if self.search {
            s += " + search";
        }
        if self.scale_layout != ScaleLayout::Linear {
            s += &format!(", {} scales", self.scale_layout.name());
        }
        s
    }
    /// The scale grid of a tensor of `shape`.
    pub fn grid(&self, shape: &[usize]) -> ScaleGrid {
        ScaleGrid::new(self.scale_layout, shape, self.block())
    }
}

/// A quantized tensor: packed codes, one scale byte per block, and NVFP4's tensor scale.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantized {
    pub spec: Spec,
    /// Shape of the unquantized tensor; `data` is [..., K/2], `scale` [..., K/block] or, in a
    /// tiled `spec.scale_layout`, the padded tiles (`ScaleGrid`).
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
    pub scale: Vec<u8>,
    pub tensor_scale: Option<f32>,
}

impl Quantized {
    pub fn grid(&self) -> ScaleGrid {
        self.spec.grid(&self.shape)
    }
    /// The scales row-major, one per block, whatever the layout they are stored in.
    pub fn linear_scales(&self) -> Cow<'_, [u8]> {
        match self.spec.scale_layout {
            ScaleLayout::Linear => Cow::Borrowed(&self.scale),
            _ => Cow::Owned(self.grid().linear(&self.scale)),
        }
    }
    /// The shape the `scale` tensor is written with.
    pub fn scale_shape(&self) -> Vec<usize> {
        self.grid().stored_shape(&self.shape)
    }
}

/// Squared error of the naive and the chosen scales, summed over the tensor (for the search's
/// report; both are zero when no search ran).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SearchStats {
    pub sse_naive: f64,
    pub sse_chosen: f64,
    pub blocks: usize,
    pub blocks_changed: usize,
}

impl SearchStats {
    /// Relative reduction of the squared error, 0..1.
    pub fn reduction(&self) -> f64 {
        if self.sse_naive > 0.0 {
            1.0 - self.sse_chosen / self.sse_naive
        } else {
            0.0
        }
    }
    fn add(&mut self, o: &SearchStats) {
        self.sse_naive += o.sse_naive;
        self.sse_chosen += o.sse_chosen;
        self.blocks += o.blocks;
        self.blocks_changed += o.blocks_changed;
    }
}

/// Refuse shapes the format cannot block: scalars and a last axis not divisible by the block.
pub fn check_shape(shape: &[usize], block: usize) -> Result<()> {
    let Some(&k) = shape.last() else {
        bail!("a scalar cannot be quantized: the last axis is blocked in runs of {block}");
    };
    if k % block != 0 {
        bail!(
            "last axis of shape {shape:?} has {k} elements, not a multiple of the block size {block}; pad it to {}",
            k.div_ceil(block) * block
        );
    }
    Ok(())
}

/// "[2, 17]" for flat index 81 of shape [4, 32].
pub fn index_of(shape: &[usize], mut flat: usize) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for (i, &d) in shape.iter().enumerate().rev() {
        if d > 0 {
            idx[i] = flat % d;
            flat /= d;
        }
    }
    idx
}

/// Error if `non_finite` is `Error` and x holds NaN or ±Inf, naming the first one.
pub fn check_non_finite(spec: &Spec, shape: &[usize], x: &[f32]) -> Result<()> {
    if spec.non_finite == NonFinite::Error
        && let Some(i) = x.iter().position(|v| !v.is_finite())
    {
        bail!(
            "element {:?} is {} (--non-finite error); use --non-finite propagate to give its block the NaN scale",
            index_of(shape, i),
            x[i]
        );
    }
    Ok(())
}

/// |x| as bits, NaN-propagating (see `scale`'s module comment).
fn abs_bits(v: f32) -> u32 {
    v.to_bits() & 0x7FFF_FFFF
}

fn amax_bits(block: &[f32]) -> u32 {
    block.iter().map(|&v| abs_bits(v)).max().unwrap_or(0)
}

/// The f32 maximum of |x| over the finite elements (NVFP4's tensor amax).
pub fn finite_amax(x: &[f32]) -> f32 {
    let m = x
        .iter()
        .map(|&v| abs_bits(v))
        .filter(|&b| b < F32_INF_BITS)
        .max()
        .unwrap_or(0);
    f32::from_bits(m)
}

/// How one block's elements are brought into E2M1 range, and what one code is worth after.
#[derive(Clone, Copy, Debug)]
enum BlockScale {
    /// MXFP4: multiply by the exact reciprocal of a power of two; `value` is the scale.
    Mul { rcp: f32, value: f32 },
    /// NVFP4: divide by the f32 total scale (correctly rounded, as torch's `/`).
    Div { total: f32 },
}

impl BlockScale {
    fn mx(byte: u8) -> BlockScale {
        BlockScale::Mul {
            rcp: e8m0_reciprocal(byte),
            value: e8m0_to_f32(byte),
        }
    }
    fn nv(byte: u8, tensor_scale: Option<f32>) -> BlockScale {
        let block = e4m3_to_f32(byte);
        let total = match tensor_scale {
            Some(t) => t * block,
            None => block,
        };
        BlockScale::Div { total }
    }
    fn scaled(self, x: f32) -> f32 {
        match self {
            BlockScale::Mul { rcp, .. } => x * rcp,
            BlockScale::Div { total } => x / total,
        }
    }
    fn value(self) -> f32 {
        match self {
            BlockScale::Mul { value, .. } => value,
            BlockScale::Div { total } => total,
        }
    }
}

fn encode_block(x: &[f32], s: BlockScale, codes: &mut [u8]) {
    for (c, &v) in codes.iter_mut().zip(x) {
        *c = e2m1_encode(s.scaled(v));
    }
}

/// Squared error of a block's codes, summed in the kernels' order: sequentially (fused
/// multiply-add) within each chunk of 8, then chunks combined pairwise.
fn block_sse(x: &[f32], codes: &[u8], s: BlockScale) -> f32 {
    let value = s.value();
    let mut partial: Vec<f32> = x
        .chunks(CHUNK)
        .zip(codes.chunks(CHUNK))
        .map(|(xs, cs)| {
            xs.iter().zip(cs).fold(0.0f32, |acc, (&v, &c)| {
                let d = v - e2m1_decode(c) * value;
                d.mul_add(d, acc)
            })
        })
        .collect();
    while partial.len() > 1 {
        partial = partial.chunks(2).map(|p| p[0] + p[1]).collect();
    }
    partial[0]
}

/// Candidate scale bytes of the windowed search, naive first, then nearest outward:
/// MXFP4 e and e+1; NVFP4 the E4M3 bytes within ±5 steps, inside [2^-6, 448].
pub fn search_candidates(format: Format, naive: u8) -> Vec<u8> {
    match format {
        Format::Mxfp4 if naive == E8M0_NAN => vec![naive],
        Format::Mxfp4 if naive < 254 => vec![naive, naive + 1],
        Format::Mxfp4 => vec![naive],
        Format::Nvfp4 if naive == E4M3_NAN => vec![naive],
        Format::Nvfp4 => {
            let mut c = vec![naive];
            for step in 1..=5i32 {
                for cand in [naive as i32 - step, naive as i32 + step] {
                    if (0x08..=0x7E).contains(&cand) {
                        c.push(cand as u8);
                    }
                }
            }
            c
        }
    }
}

/// Quantize one block: choose its scale byte (searching if asked), write its codes.
fn quantize_block(
    spec: &Spec,
    tensor_scale: Option<f32>,
    x: &[f32],
    codes: &mut [u8],
    stats: &mut SearchStats,
) -> u8 {
    let amax = amax_bits(x);
    let naive = match spec.format {
        Format::Mxfp4 => mx_scale(spec.scale_mode, amax),
        Format::Nvfp4 => nv_scale(amax, tensor_scale),
    };
    let scale_of = |byte: u8| match spec.format {
        Format::Mxfp4 => BlockScale::mx(byte),
        Format::Nvfp4 => BlockScale::nv(byte, tensor_scale),
    };
    if naive == E8M0_NAN && spec.format == Format::Mxfp4
        || naive == E4M3_NAN && spec.format == Format::Nvfp4
    {
        codes.fill(0);
        return naive;
    }
    encode_block(x, scale_of(naive), codes);
    if !spec.search {
        return naive;
    }
    let naive_sse = block_sse(x, codes, scale_of(naive));
    let (mut best, mut best_sse) = (naive, naive_sse);
    let mut trial = vec![0u8; x.len()];
    for cand in search_candidates(spec.format, naive).into_iter().skip(1) {
        encode_block(x, scale_of(cand), &mut trial);
        let sse = block_sse(x, &trial, scale_of(cand));
        if sse < best_sse {
            best = cand;
            best_sse = sse;
        }
    }
    if best != naive {
        encode_block(x, scale_of(best), codes);
    }
    stats.add(&SearchStats {
        sse_naive: naive_sse as f64,
        sse_chosen: best_sse as f64,
        blocks: 1,
        blocks_changed: (best != naive) as usize,
    });
    best
}

/// Two codes a byte, the even-indexed element in the low nibble.
pub fn pack(codes: &[u8]) -> Vec<u8> {
    codes
        .chunks(2)
        .map(|p| (p[0] & 0xF) | (p[1] & 0xF) << 4)
        .collect()
}

/// The codes of packed bytes, one per element.
pub fn unpack(data: &[u8]) -> Vec<u8> {
    data.iter().flat_map(|&b| [b & 0xF, b >> 4]).collect()
}

/// One byte per element with the E2M1 code in bits 5..2: the 8-bit container `mma.sync
/// .kind::mxf8f6f4` reads e2m1 operands from.
pub fn container_bytes(data: &[u8]) -> Vec<u8> {
    unpack(data).into_iter().map(|c| c << 2).collect()
}

/// Quantize `x` (row-major, `shape`) on the CPU. Blocks are independent once the tensor scale
/// is known, so rows are split across threads.
pub fn quantize(spec: &Spec, shape: &[usize], x: &[f32]) -> Result<(Quantized, SearchStats)> {
    quantize_with_amax(spec, shape, x, None)
}

/// A tensor amax given for two-level NVFP4 must be a finite number >= 0, and is refused for
/// every other format (nothing would use it).
pub fn check_tensor_amax(spec: &Spec, tensor_amax: Option<f32>) -> Result<()> {
    let Some(a) = tensor_amax else { return Ok(()) };
    if !spec.two_level() {
        bail!(
            "a tensor amax ({a}) applies to two-level NVFP4 only, not to {}",
            spec.describe()
        );
    }
    if !(a.is_finite() && a >= 0.0) {
        bail!("the tensor amax must be a finite number >= 0, not {a}");
    }
    Ok(())
}

/// `quantize`, with two-level NVFP4's tensor amax given (`Some`: calibrated, or measured where
/// x was produced) instead of measured here, so x is read once. The tensor scale is
/// amax / (448·6) as usual; blocks larger than a given amax allows saturate (block scale 448,
/// elements ±6).
pub fn quantize_with_amax(
    spec: &Spec,
    shape: &[usize],
    x: &[f32],
    tensor_amax: Option<f32>,
) -> Result<(Quantized, SearchStats)> {
    check_shape(shape, spec.block())?;
    spec.scale_layout.check(spec.format, shape)?;
    check_non_finite(spec, shape, x)?;
    check_tensor_amax(spec, tensor_amax)?;
    let block = spec.block();
    let tensor_scale = spec
        .two_level()
        .then(|| nv_tensor_scale(tensor_amax.unwrap_or_else(|| finite_amax(x))));
    let mut codes = vec![0u8; x.len()];
    let mut scale = vec![0u8; x.len() / block];
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let blocks_per_thread = scale.len().div_ceil(threads).max(1);
    let per = blocks_per_thread * block;
    let mut stats = SearchStats::default();
    std::thread::scope(|s| {
        let handles: Vec<_> = x
            .chunks(per)
            .zip(codes.chunks_mut(per))
            .zip(scale.chunks_mut(blocks_per_thread))
            .map(|((xs, cs), ss)| {
                s.spawn(move || {
                    let mut st = SearchStats::default();
                    for ((xb, cb), sb) in xs
                        .chunks(block)
                        .zip(cs.chunks_mut(block))
                        .zip(ss.iter_mut())
                    {
                        *sb = quantize_block(spec, tensor_scale, xb, cb, &mut st);
                    }
                    st
                })
            })
            .collect();
        for h in handles {
            stats.add(&h.join().expect("quantize worker panicked"));
        }
    });
    let q = Quantized {
        spec: *spec,
        shape: shape.to_vec(),
        data: pack(&codes),
        scale: match spec.scale_layout {
            ScaleLayout::Linear => scale,
            _ => spec.grid(shape).arrange(&scale),
        },
        tensor_scale,
    };
    Ok((q, stats))
}

/// Back to f32: code value × scale (MXFP4: × 2^(s-127); NVFP4: × (tensor scale · block
/// scale), the same total the quantizer divided by). NaN scales give NaN blocks.
pub fn dequantize(q: &Quantized) -> Vec<f32> {
    let block = q.spec.block();
    let codes = unpack(&q.data);
    let scales = q.linear_scales();
    codes
        .chunks(block)
        .zip(scales.iter())
        .flat_map(|(cs, &byte)| {
            let value = match q.spec.format {
                Format::Mxfp4 => e8m0_to_f32(byte),
                Format::Nvfp4 => BlockScale::nv(byte, q.tensor_scale).value(),
            };
            cs.iter().map(move |&c| e2m1_decode(c) * value)
        })
        .collect()
}

/// Shape helpers for writers: [..., K/2] and [..., K/block].
pub fn data_shape(shape: &[usize]) -> Vec<usize> {
    last_axis_divided(shape, 2)
}
pub fn scale_shape(shape: &[usize], block: usize) -> Vec<usize> {
    last_axis_divided(shape, block)
}
fn last_axis_divided(shape: &[usize], by: usize) -> Vec<usize> {
    let mut s = shape.to_vec();
    if let Some(k) = s.last_mut() {
        *k /= by;
    }
    s
}

#[cfg(test)]
mod tests;
