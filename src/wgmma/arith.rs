//! A configurable accumulation for the wgmma emulator: D as a unit would form it that aligns its
//! addends (C and the products) to the largest one, keeps a fixed number of fraction bits below
//! that one's leading bit, sums, and rounds to D's type. The emulator's own arithmetic is exact
//! with one rounding to nearest; tests configure this model with a width and roundings the
//! default does not have and check that `fp4probe numerics` recovers them from D alone.

use super::WgVariant;
use super::model::decode_d;
use crate::formats::ElemType;

/// How a value is cut to a coarser grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    /// To nearest, ties to even.
    Nearest,
    /// Toward zero (truncation of the magnitude).
    TowardZero,
}

/// The accumulation of a float variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Accumulation {
    /// Fraction bits each addend keeps below the leading bit of the largest addend of its
    /// alignment (C, or the running sum, included).
    pub fraction_bits: u32,
    /// How an addend is cut to that grid.
    pub align: Rounding,
    /// How a sum is rounded to D's type (after each group, and at the end).
    pub output: Rounding,
    /// k terms aligned and summed together; the running sum joins the next group.
    pub terms: usize,
}

/// The exponent of the leading bit of a finite non-zero `x`.
fn exponent(x: f64) -> i32 {
    let e = ((x.to_bits() >> 52) & 0x7ff) as i32;
    if e == 0 {
        // Subnormal f64: scale into the normal range first.
        exponent(x * 2f64.powi(64)) - 64
    } else {
        e - 1023
    }
}

impl Accumulation {
    /// FP8 (e4m3, e5m2) into an f32 D as `fp4probe numerics --family wgmma` measured it on the
    /// H200 (`reports/sm_90/wgmma/numerics.md`): 13 fraction bits below the largest addend's
    /// leading bit, every addend cut toward zero, the 32 k of one instruction and C in one
    /// alignment, the sum cut toward zero to f32.
    pub const FP8_F32: Accumulation = Accumulation {
        fraction_bits: 13,
        align: Rounding::TowardZero,
        output: Rounding::TowardZero,
        terms: 32,
    };

    /// The sum of `values` after cutting each to `fraction_bits` below the largest one's
    /// leading bit; a NaN or infinity makes it the plain sum (they propagate as IEEE says).
    /// (`values` is walked twice: for the largest exponent, then for the sum.)
    fn aligned_sum<I: Iterator<Item = f64> + Clone>(&self, values: I) -> f64 {
        if values.clone().any(|x| !x.is_finite()) {
            return values.sum();
        }
        let Some(top) = values.clone().filter(|x| *x != 0.0).map(exponent).max() else {
            return values.sum();
        };
        let grid = 2f64.powi(top - self.fraction_bits as i32);
        values
            .map(|x| {
                let q = x / grid;
                let q = match self.align {
                    Rounding::Nearest => q.round_ties_even(),
                    Rounding::TowardZero => q.trunc(),
                };
                q * grid
            })
            .sum()
    }

    /// `x` in `t`'s bits, rounded as `output` says (saturating for `.satfinite`).
    fn round(&self, t: ElemType, x: f64, satfinite: bool) -> u64 {
        let bits = crate::gemm::round_to(t, x, satfinite);
        let got = decode_d(t, bits);
        if self.output == Rounding::TowardZero && x.is_finite() && got.abs() > x.abs() {
            // Sign-magnitude codes: one step down in magnitude is one code down.
            bits - 1
        } else {
            bits
        }
    }

    /// D's bits for one element: C, then the products in k order.
    pub fn dot(&self, t: ElemType, satfinite: bool, c: f64, products: &[f64]) -> u64 {
        let mut bits = self.round(t, self.aligned_sum(std::iter::once(c)), satfinite);
        for group in products.chunks(self.terms.max(1)) {
            bits = self.step(t, satfinite, decode_d(t, bits), group);
        }
        bits
    }

    /// D's bits after one instruction that adds `group` (at most `terms` products, in k
    /// order) to an accumulator holding `acc` (a value of D's type).
    pub fn step(&self, t: ElemType, satfinite: bool, acc: f64, group: &[f64]) -> u64 {
        let values = std::iter::once(acc).chain(group.iter().copied());
        self.round(t, self.aligned_sum(values), satfinite)
    }

    /// `step` for an f32 accumulator: the f32 D of one instruction.
    pub fn step_f32(&self, acc: f32, group: &[f64]) -> f32 {
        f32::from_bits(self.step(ElemType::F32, false, acc as f64, group) as u32)
    }

    /// D's bits, row-major, for A (m64 × K), B (K × N) and C (m64 × N) given as values.
    pub fn gemm_bits(&self, v: &WgVariant, a: &[f64], b: &[f64], c: &[f64]) -> Vec<u64> {
        let (n, k) = (v.n as usize, v.k as usize);
        (0..c.len())
            .map(|i| {
                let (r, col) = (i / n, i % n);
                let products: Vec<f64> = (0..k).map(|kk| a[r * k + kk] * b[kk * n + col]).collect();
                self.dot(v.d, v.satfinite, c[i], &products)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addends_below_the_grid_are_cut() {
        let acc = Accumulation {
            fraction_bits: 4,
            align: Rounding::TowardZero,
            output: Rounding::Nearest,
            terms: 32,
        };
        // 2^-4 survives next to 1, 2^-5 does not; 1.5·2^-5 truncates to 0, or rounds to 2^-4.
        assert_eq!(acc.aligned_sum([1.0, 0.0625, -1.0].into_iter()), 0.0625);
        assert_eq!(acc.aligned_sum([1.0, 0.03125, -1.0].into_iter()), 0.0);
        assert_eq!(acc.aligned_sum([1.0, 0.046875, -1.0].into_iter()), 0.0);
        let near = Accumulation {
            align: Rounding::Nearest,
            ..acc
        };
        assert_eq!(near.aligned_sum([1.0, 0.046875, -1.0].into_iter()), 0.0625);
        assert_eq!(exponent(f64::from_bits(1)), -1074);
        assert_eq!(exponent(-3.0), 1);
    }

    #[test]
    fn toward_zero_output_truncates_the_magnitude() {
        let acc = Accumulation {
            fraction_bits: 40,
            align: Rounding::TowardZero,
            output: Rounding::TowardZero,
            terms: 32,
        };
        // 1 + 0.75·2^-10 in f16: nearest gives 1 + 2^-10, toward zero 1.
        let x = 1.0 + 0.75 * 2f64.powi(-10);
        assert_eq!(acc.round(ElemType::F16, x, false), 0x3c00);
        assert_eq!(acc.round(ElemType::F16, -x, false), 0xbc00);
        assert_eq!(acc.round(ElemType::F32, 1e39, false), 0x7f7f_ffff);
    }
}
