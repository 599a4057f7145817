//! Deterministic test inputs, no crates: splitmix64 for bits, Box–Muller for normals, and
//! constructions whose MXFP4 quantization is lossless (so the quantized references can be
//! checked against exact arithmetic).

use super::shape::{AttnShape, BLOCK};
use crate::quant::codes::E2M1_VALUES;

pub use crate::rng::SplitMix64;

/// n standard normals as f32.
pub fn gaussian(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| rng.normal() as f32).collect()
}

/// Q, K, V (each row-major, Q [B,H,Sq,D], K and V [B,Hkv,Sk,D]).
pub type Qkv = (Vec<f32>, Vec<f32>, Vec<f32>);

/// Values of V in `identity_qkv`: exact in MXFP4 whatever the block's maximum (each is a
/// power of two or zero, so its ratio to the block maximum is too).
const V_PATTERN: [f32; 7] = [-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0];

/// Q = K = identity-like (row i has a single 1.0 at column i mod D), V a fixed pattern of
/// {-2,-1,-0.5,0,0.5,1,2}. Every value is exact in MXFP4 floor, and the scores are 0 or 1, so
/// the expected output is easy to reason about.
pub fn identity_qkv(shape: &AttnShape) -> Qkv {
    let d = shape.head_dim;
    let one_hot = |heads: usize, rows: usize| -> Vec<f32> {
        let mut x = vec![0.0f32; heads * rows * d];
        for (r, row) in x.chunks_mut(d).enumerate() {
            row[(r % rows) % d] = 1.0;
        }
        x
    };
    let v = (0..shape.kv_len())
        .map(|n| {
            let (j, c) = ((n / d) % shape.seq_k, n % d);
            V_PATTERN[(3 * j + c) % V_PATTERN.len()]
        })
        .collect();
    (
        one_hot(shape.bh(), shape.seq_q),
        one_hot(shape.kv_bh(), shape.seq_k),
        v,
    )
}

/// One block of `len` values that MXFP4 floor reproduces exactly: one element is ±6·2^e (so
/// the block's scale is exactly 2^e) and the rest are random signed E2M1 values times 2^e.
fn exact_block(rng: &mut SplitMix64, len: usize, exponents: &[i32]) -> Vec<f32> {
    let scale = 2f32.powi(exponents[rng.below(exponents.len())]);
    let signed = |rng: &mut SplitMix64, m: f32| if rng.below(2) == 0 { m } else { -m };
    let mut b: Vec<f32> = (0..len)
        .map(|_| {
            let m = E2M1_VALUES[rng.below(8)] * scale;
            signed(rng, m)
        })
        .collect();
    let top = rng.below(len);
    b[top] = signed(rng, 6.0 * scale);
    b
}

/// Rows of length `row` made of exact blocks (the tail block may be short).
fn exact_rows(rng: &mut SplitMix64, rows: usize, row: usize, exponents: &[i32]) -> Vec<f32> {
    let mut x = Vec::with_capacity(rows * row);
    for _ in 0..rows {
        for start in (0..row).step_by(BLOCK) {
            x.extend(exact_block(rng, BLOCK.min(row - start), exponents));
        }
    }
    x
}

/// Inputs MXFP4 floor quantizes losslessly along the axes `prequantize` blocks them on: Q and
/// K per 32 along D, V per 32 keys along the key axis (V is built as V^T and transposed).
/// (Under two-level NVFP4 the tensor scale makes block scales non-powers of two, so there they
/// are merely structured inputs; the kernel is still compared with the quantized reference.)
/// Exponents keep the scores moderate (|Q|,|K| ≤ 1.5) so softmax is neither flat nor one-hot.
pub fn exact_qkv(shape: &AttnShape, seed: u64) -> Qkv {
    let mut rng = SplitMix64::new(seed);
    let d = shape.head_dim;
    let q = exact_rows(&mut rng, shape.bh() * shape.seq_q, d, &[-4, -3, -2]);
    let k = exact_rows(&mut rng, shape.kv_bh() * shape.seq_k, d, &[-4, -3, -2]);
    let vt = exact_rows(&mut rng, shape.kv_bh() * d, shape.seq_k, &[-2, -1, 0]);
    let mut v = vec![0.0f32; shape.kv_len()];
    for (vp, vtp) in v
        .chunks_mut(shape.seq_k * d)
        .zip(vt.chunks(d * shape.seq_k))
    {
        for (j, row) in vp.chunks_mut(d).enumerate() {
            for (c, x) in row.iter_mut().enumerate() {
                *x = vtp[c * shape.seq_k + j];
            }
        }
    }
    (q, k, v)
}

/// Add `offset` to the given channels of K in every row: the per-channel outliers real K
/// activations have, which MXFP4 blocks along D cannot represent next to the small channels
/// (and which smoothing K removes).
///
/// Panics if a channel is not below head_dim or k's length does not match the shape.
pub fn outlier_k(k: &mut [f32], shape: &AttnShape, channels: &[usize], offset: f32) {
    let d = shape.head_dim;
    assert_eq!(k.len(), shape.kv_len(), "k does not match {shape}");
    assert!(
        channels.iter().all(|&c| c < d),
        "outlier channels {channels:?} must be below head_dim {d}"
    );
    for row in k.chunks_mut(d) {
        for &c in channels {
            row[c] += offset;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaussian_is_deterministic_and_roughly_standard() {
        let a = gaussian(100_000, 7);
        assert_eq!(a, gaussian(100_000, 7));
        assert_ne!(a[..10], gaussian(10, 8)[..]);
        let mean = a.iter().map(|&x| x as f64).sum::<f64>() / a.len() as f64;
        let var = a.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / a.len() as f64;
        assert!(
            mean.abs() < 0.02 && (var - 1.0).abs() < 0.02,
            "{mean} {var}"
        );
    }

    #[test]
    fn identity_rows_are_one_hot() {
        let s = AttnShape::new(1, 2, 70, 5, 64, false).unwrap();
        let (q, k, v) = identity_qkv(&s);
        assert_eq!(q.len(), s.q_len());
        assert_eq!(k.len(), s.kv_len());
        assert_eq!(v.len(), s.kv_len());
        // Row 66 of head 0 has its 1.0 at column 2; head 1 starts again at row 0.
        assert_eq!(q[66 * 64 + 2], 1.0);
        assert_eq!(q[70 * 64], 1.0);
        assert_eq!(q.iter().filter(|&&x| x == 1.0).count(), 140);
    }

    #[test]
    fn outliers_land_on_their_channels() {
        let s = AttnShape::new(1, 1, 1, 3, 64, false).unwrap();
        let mut k = vec![0.0f32; s.kv_len()];
        outlier_k(&mut k, &s, &[3, 17], 8.0);
        assert_eq!(k.iter().filter(|&&x| x == 8.0).count(), 6);
        assert_eq!(k[64 + 17], 8.0);
    }
}
