//! The FP4 operands the fused kernel reads, built from f32 Q, K, V with the crate's FP4
//! quantizer (so kernel inputs and CPU reference inputs are the same bytes).

use super::shape::AttnShape;
use crate::quant::{self, Format, NvLevels, Quantized, ScaleMode, Spec};
use anyhow::{Result, bail};

/// Q, K and V^T in MXFP4 (floor, E8M0 scales per 32) or NVFP4 (two-level: E4M3 scales per
/// 16 and one f32 tensor scale per tensor), laid out for the kernel (BLK = the block size;
/// Hkv = H unless grouped-query attention):
/// - `q_data` [B,H,Sq,D/2], `q_scale` [B,H,Sq,D/BLK] (blocks along D);
/// - `k_data` [B,Hkv,Sk,D/2], `k_scale` [B,Hkv,Sk,D/BLK] (K smoothed first if asked);
/// - `v_data` [B,Hkv,D,Skp/2], `v_scale` [B,Hkv,D,Skp/BLK]: V transposed and zero-padded to
///   Skp = seq_k rounded up to 32, blocked along the key axis, which is P·V's reduction axis.
///
/// Packing is the crate's: two E2M1 codes a byte, the even index in the low nibble.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizedQkv {
    pub shape: AttnShape,
    pub format: Format,
    /// NVFP4 tensor scales of Q, K, V (1.0 for MXFP4).
    pub q_tensor_scale: f32,
    pub k_tensor_scale: f32,
    pub v_tensor_scale: f32,
    pub q_data: Vec<u8>,
    pub q_scale: Vec<u8>,
    pub k_data: Vec<u8>,
    pub k_scale: Vec<u8>,
    pub v_data: Vec<u8>,
    pub v_scale: Vec<u8>,
}

/// The spec of Q, K and V: MXFP4 with the OCP floor scale, or two-level NVFP4.
pub fn qkv_spec(format: Format) -> Spec {
    match format {
        Format::Mxfp4 => Spec::mxfp4(ScaleMode::Floor),
        Format::Nvfp4 => Spec::nvfp4(NvLevels::TwoLevel),
    }
}

/// Quantize Q, K, V for the kernel. `q` is [B,H,Sq,D], `k` and `v` [B,Hkv,Sk,D], row-major.
/// With `smooth_k`, K's per-(b,h,channel) mean over the keys is subtracted first (see
/// `smooth_k`). Inputs must be finite: a NaN would only turn into a NaN block scale.
pub fn prequantize(
    shape: &AttnShape,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    smooth_k: bool,
    format: Format,
) -> Result<QuantizedQkv> {
    shape.validate()?;
    shape.check_len("q", q.len(), shape.q_len())?;
    shape.check_len("k", k.len(), shape.kv_len())?;
    shape.check_len("v", v.len(), shape.kv_len())?;
    for (name, x) in [("q", q), ("k", k), ("v", v)] {
        check_finite(name, x)?;
    }
    let d = shape.head_dim;
    let spec = qkv_spec(format);
    let (qq, _) = quant::quantize(&spec, &[shape.bh() * shape.seq_q, d], q)?;
    let k_smoothed;
    let k_in = if smooth_k {
        k_smoothed = self::smooth_k(shape, k).0;
        &k_smoothed
    } else {
        k
    };
    let (kq, _) = quant::quantize(&spec, &[shape.kv_bh() * shape.seq_k, d], k_in)?;
    let vt = transpose_pad_v(shape, v);
    let (vq, _) = quant::quantize(&spec, &[shape.kv_bh() * d, shape.seq_k_padded()], &vt)?;
    let ts = |q: &Quantized| q.tensor_scale.unwrap_or(1.0);
    Ok(QuantizedQkv {
        shape: *shape,
        format,
        q_tensor_scale: ts(&qq),
        k_tensor_scale: ts(&kq),
        v_tensor_scale: ts(&vq),
        q_data: qq.data,
        q_scale: qq.scale,
        k_data: kq.data,
        k_scale: kq.scale,
        v_data: vq.data,
        v_scale: vq.scale,
    })
}

fn check_finite(name: &str, x: &[f32]) -> Result<()> {
    if let Some(i) = x.iter().position(|v| !v.is_finite()) {
        bail!("{name}[{i}] is {}: attention inputs must be finite", x[i]);
    }
    Ok(())
}

/// K minus its mean over the keys, per (b, K/V head, channel), and the means ([B,Hkv,D]). Subtracting a
/// vector m from every key adds the constant −q·m to all of query q's scores, which softmax
/// ignores; it removes the per-channel offsets that otherwise set the scale of every block
/// holding an outlier channel and flush the other channels to zero. The mean is summed in f64
/// and stored as f32; K' = k − mean is computed in f32 (what a GPU pre-pass would do).
pub fn smooth_k(shape: &AttnShape, k: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let (sk, d) = (shape.seq_k, shape.head_dim);
    let mut out = k.to_vec();
    let mut means = Vec::with_capacity(shape.kv_bh() * d);
    for head in out.chunks_mut(sk * d) {
        let mut sum = vec![0.0f64; d];
        for row in head.chunks(d) {
            for (s, &x) in sum.iter_mut().zip(row) {
                *s += x as f64;
            }
        }
        let mean: Vec<f32> = sum.iter().map(|&s| (s / sk as f64) as f32).collect();
        for row in head.chunks_mut(d) {
            for (x, &m) in row.iter_mut().zip(&mean) {
                *x -= m;
            }
        }
        means.extend(mean);
    }
    (out, means)
}

/// V [B,Hkv,Sk,D] → V^T [B,Hkv,D,Skp], zeros in keys seq_k..Skp.
pub fn transpose_pad_v(shape: &AttnShape, v: &[f32]) -> Vec<f32> {
    transpose_pad_keys(v, shape.seq_k, shape.head_dim, 0.0)
}

/// [..., Sk, D] → [..., D, Skp] with Skp = Sk rounded up to 32 and `zero` in keys Sk..Skp: V
/// as the kernel reads it, for any element type (f32 values, or a file's raw bf16/f16/f32
/// elements as `[u8; N]`).
pub fn transpose_pad_keys<T: Copy>(v: &[T], sk: usize, d: usize, zero: T) -> Vec<T> {
    let skp = sk.next_multiple_of(super::shape::BLOCK);
    let mut vt = vec![zero; v.len() / (sk * d) * d * skp];
    for (src, dst) in v.chunks(sk * d).zip(vt.chunks_mut(d * skp)) {
        for (j, row) in src.chunks(d).enumerate() {
            for (c, &x) in row.iter().enumerate() {
                dst[c * skp + j] = x;
            }
        }
    }
    vt
}

/// The inverse of [`transpose_pad_keys`]: [..., D, Skp] → [..., Sk, D], the padding dropped.
pub fn untranspose_keys<T: Copy + Default>(vt: &[T], sk: usize, d: usize) -> Vec<T> {
    let skp = sk.next_multiple_of(super::shape::BLOCK);
    let mut v = vec![T::default(); vt.len() / (d * skp) * sk * d];
    for (src, dst) in vt.chunks(d * skp).zip(v.chunks_mut(sk * d)) {
        for (j, row) in dst.chunks_mut(d).enumerate() {
            for (c, x) in row.iter_mut().enumerate() {
                *x = src[c * skp + j];
            }
        }
    }
    v
}

impl QuantizedQkv {
    /// The operand without its tensor scale (NVFP4: code × block scale, exactly what the
    /// kernel's bf16 registers hold; the tensor scales are applied to S and O).
    fn quantized(&self, data: &[u8], scale: &[u8], shape: Vec<usize>) -> Quantized {
        let spec = qkv_spec(self.format);
        Quantized {
            spec,
            shape,
            data: data.to_vec(),
            scale: scale.to_vec(),
            tensor_scale: spec.two_level().then_some(1.0),
        }
    }

    /// Q as the kernel's registers hold it (without the tensor scale), [B,H,Sq,D].
    pub fn dequantized_q(&self) -> Vec<f32> {
        let s = &self.shape;
        let shape = vec![s.bh() * s.seq_q, s.head_dim];
        quant::dequantize(&self.quantized(&self.q_data, &self.q_scale, shape))
    }

    /// K (smoothed, if it was) as the kernel sees it, [B,Hkv,Sk,D].
    pub fn dequantized_k(&self) -> Vec<f32> {
        let s = &self.shape;
        let shape = vec![s.kv_bh() * s.seq_k, s.head_dim];
        quant::dequantize(&self.quantized(&self.k_data, &self.k_scale, shape))
    }

    /// V^T as stored, [B,Hkv,D,Skp] with the padding.
    pub fn dequantized_vt(&self) -> Vec<f32> {
        let s = &self.shape;
        let shape = vec![s.kv_bh() * s.head_dim, s.seq_k_padded()];
        quant::dequantize(&self.quantized(&self.v_data, &self.v_scale, shape))
    }

    /// V as the kernel sees it, back in the natural [B,Hkv,Sk,D] layout (padding dropped).
    pub fn dequantized_v(&self) -> Vec<f32> {
        untranspose_keys(
            &self.dequantized_vt(),
            self.shape.seq_k,
            self.shape.head_dim,
        )
    }

    /// Block scales per row of V^T: Skp / block.
    pub fn v_blocks_per_row(&self) -> usize {
        self.shape.seq_k_padded() / self.format.block()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_pads_with_zeros() {
        let s = AttnShape::new(1, 2, 1, 3, 64, false).unwrap();
        let v: Vec<f32> = (0..s.kv_len()).map(|n| n as f32).collect();
        let vt = transpose_pad_v(&s, &v);
        assert_eq!(vt.len(), 2 * 64 * 32);
        // Head 1, channel 5: keys 0..3 then zeros.
        let row = &vt[(64 + 5) * 32..(64 + 6) * 32];
        assert_eq!(&row[..3], &[197.0, 261.0, 325.0]);
        assert!(row[3..].iter().all(|&x| x == 0.0));
    }

    #[test]
    fn untranspose_inverts_the_padded_transpose() {
        let v: Vec<u32> = (0..3 * 40 * 8).collect();
        let vt = transpose_pad_keys(&v, 40, 8, u32::MAX);
        assert_eq!(vt.len(), 3 * 8 * 64);
        assert_eq!(vt[64 + 1], 8 + 1); // head 0, channel 1, key 1
        assert_eq!(vt[64 + 40], u32::MAX); // head 0, channel 1, padding key 40
        assert_eq!(untranspose_keys(&vt, 40, 8), v);
    }

    #[test]
    fn smoothing_removes_the_channel_mean() {
        let s = AttnShape::new(1, 1, 1, 4, 64, false).unwrap();
        let mut k = vec![0.0f32; s.kv_len()];
        for (j, row) in k.chunks_mut(64).enumerate() {
            row[3] = 8.0 + j as f32;
        }
        let (ks, mean) = smooth_k(&s, &k);
        assert_eq!(mean[3], 9.5);
        assert_eq!(ks[3], -1.5);
        assert_eq!(ks[3 * 64 + 3], 1.5);
    }

    #[test]
    fn non_finite_and_wrong_lengths_are_refused() {
        let s = AttnShape::new(1, 1, 2, 2, 64, false).unwrap();
        let mut x = vec![0.0f32; 128];
        assert!(prequantize(&s, &x, &x, &x[..64], false, Format::Mxfp4).is_err());
        x[70] = f32::NAN;
        let e = prequantize(&s, &x, &x, &x, false, Format::Mxfp4).unwrap_err();
        assert_eq!(
            e.to_string(),
            "q[70] is NaN: attention inputs must be finite"
        );
    }
}
