//! The CPU reference of what one `mma.sync` computes on dense matrices, shared by the emulator
//! and by validation: D = C + Σ_k A·B (·scale_a·scale_b), exact in f64, or popcounts for b1.

use crate::formats::{ElemType, f64_to_f16_bits};
use crate::isa::{BitOp, Variant};

/// Dense row-major operands of one MMA: a is m×k, b is k×n, c is m×n; `scale_a` is m×kblocks
/// and `scale_b` kblocks×n (empty when the variant has no block scaling).
pub struct Operands<'a> {
    pub a: &'a [f64],
    pub b: &'a [f64],
    pub c: &'a [f64],
    pub scale_a: &'a [f64],
    pub scale_b: &'a [f64],
}

/// D = C + A·B in exact f64 (before rounding to the D type).
pub fn mma(v: &Variant, x: &Operands) -> Vec<f64> {
    let (m, n, k) = (v.shape.m as usize, v.shape.n as usize, v.shape.k as usize);
    let blocks = v.scale.map(|s| s.vec as usize).unwrap_or(1);
    let per_block = k / blocks;
    let mut d = x.c.to_vec();
    for i in 0..m {
        for kk in 0..k {
            let av = x.a[i * k + kk];
            // AND contributes nothing from a zero of A. Ordinary products are still added: a
            // product of zeros carries a sign (-0 + +0 = +0, IEEE), which the container probe's
            // negative-zero check observes.
            if av == 0.0 && v.bitop == Some(BitOp::And) {
                continue;
            }
            let kb = kk / per_block;
            for j in 0..n {
                let bv = x.b[kk * n + j];
                d[i * n + j] += match v.bitop {
                    Some(BitOp::And) => ((av != 0.0) && (bv != 0.0)) as u32 as f64,
                    Some(BitOp::Xor) => ((av != 0.0) != (bv != 0.0)) as u32 as f64,
                    None if v.scale.is_some() => {
                        av * bv * x.scale_a[i * blocks + kb] * x.scale_b[kb * n + j]
                    }
                    None => av * bv,
                };
            }
        }
    }
    d
}

/// Round an exact result to the bits of the D type: to nearest even for floats; integers wrap,
/// or saturate with `.satfinite`.
pub fn round_to(t: ElemType, x: f64, satfinite: bool) -> u64 {
    match t {
        ElemType::F32 => (x as f32).to_bits() as u64,
        ElemType::F64 => x.to_bits(),
        ElemType::F16 => f64_to_f16_bits(x) as u64,
        ElemType::S32 => {
            let i = x as i128;
            let v = if satfinite {
                i.clamp(i32::MIN as i128, i32::MAX as i128) as i32
            } else {
                i as i32
            };
            v as u32 as u64
        }
        other => panic!("no accumulator model for {other}"),
    }
}
