//! A configurable accumulation for the wgmma emulator: D as a unit would form it that aligns its
//! addends (C and the products) to the largest one, keeps a fixed number of fraction bits below
//! that one's leading bit, sums, and rounds to D's type. The emulator's own arithmetic is exact
//! with one rounding to nearest; tests configure this model with a width and roundings the
//! default does not have and check that `fp4probe numerics` recovers them from D alone.
//! `Accumulation::FP8_F32` is the model of FP8 into f32 that random dot products on the H200
//! match bit for bit (`tests/vectors/wgmma/`).

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

/// Which bit of a product the alignment takes as its leading one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProductExponent {
    /// The exact product's own leading bit.
    Value,
    /// 2^(ea + eb), the sum of its factors' exponents: the product of two significands in
    /// [1, 2) is not renormalised, so one whose significands multiply to 2 or more keeps one
    /// bit more below its leading bit (the products the numerics probe uses are powers of
    /// two, for which both agree).
    FactorSum,
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
    /// Where a product's leading bit is taken to be.
    pub product_exponent: ProductExponent,
    /// The sum of one alignment cut, as `output` says, to this many fraction bits below its
    /// own leading bit before it is rounded to D's type (`None`: D's type alone limits it).
    pub sum_fraction_bits: Option<u32>,
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

/// `x` cut to a multiple of `grid` (a power of two), as `r` says.
fn cut(x: f64, grid: f64, r: Rounding) -> f64 {
    let q = x / grid;
    let q = match r {
        Rounding::Nearest => q.round_ties_even(),
        Rounding::TowardZero => q.trunc(),
    };
    q * grid
}

impl Accumulation {
    /// FP8 (e4m3, e5m2) into an f32 D on the H200. `fp4probe numerics --family wgmma`
    /// (`reports/sm_90/wgmma/numerics.md`) measured 13 fraction bits, every addend cut toward
    /// zero, the 32 k of one instruction and C in one alignment, and a sum cut toward zero;
    /// random E4M3 dot products (`tests/vectors/wgmma/`) add that the alignment counts a
    /// product at its factors' exponent sum and that the sum keeps 13 fraction bits below its
    /// own leading bit (14 significant bits). Subnormal factors were not in those products: a
    /// subnormal factor counts here at its own leading bit, which is not measured.
    pub const FP8_F32: Accumulation = Accumulation {
        fraction_bits: 13,
        align: Rounding::TowardZero,
        output: Rounding::TowardZero,
        terms: 32,
        product_exponent: ProductExponent::FactorSum,
        sum_fraction_bits: Some(13),
    };

    /// A configured width and roundings, products aligned at their own leading bit and the
    /// sum limited by D's type alone.
    pub const fn new(fraction_bits: u32, align: Rounding, output: Rounding, terms: usize) -> Self {
        Accumulation {
            fraction_bits,
            align,
            output,
            terms,
            product_exponent: ProductExponent::Value,
            sum_fraction_bits: None,
        }
    }

    /// The product a·b as an addend: its value and the exponent the alignment reads.
    pub fn product(&self, a: f64, b: f64) -> (f64, i32) {
        let p = a * b;
        let e = match self.product_exponent {
            _ if p == 0.0 || !p.is_finite() => 0,
            ProductExponent::Value => exponent(p),
            ProductExponent::FactorSum => exponent(a) + exponent(b),
        };
        (p, e)
    }

    /// C (or a running sum) as an addend.
    fn sum_addend(c: f64) -> (f64, i32) {
        (
            c,
            if c == 0.0 || !c.is_finite() {
                0
            } else {
                exponent(c)
            },
        )
    }

    /// The sum of `addends` (value, exponent the alignment reads) after cutting each to
    /// `fraction_bits` below the largest exponent, and the sum to `sum_fraction_bits` below
    /// its own; a NaN or infinity makes it the plain sum (they propagate as IEEE says).
    /// (`addends` is walked twice: for the largest exponent, then for the sum.)
    fn aligned_sum<I: Iterator<Item = (f64, i32)> + Clone>(&self, addends: I) -> f64 {
        let values = addends.clone().map(|(x, _)| x);
        if values.clone().any(|x| !x.is_finite()) {
            return values.sum();
        }
        let Some(top) = addends.filter(|(x, _)| *x != 0.0).map(|(_, e)| e).max() else {
            return values.sum();
        };
        let grid = 2f64.powi(top - self.fraction_bits as i32);
        let sum: f64 = values.map(|x| cut(x, grid, self.align)).sum();
        match self.sum_fraction_bits {
            Some(bits) if sum != 0.0 => {
                cut(sum, 2f64.powi(exponent(sum) - bits as i32), self.output)
            }
            _ => sum,
        }
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

    /// D's bits for one element: C, then the products (a, b) in k order.
    pub fn dot(&self, t: ElemType, satfinite: bool, c: f64, factors: &[(f64, f64)]) -> u64 {
        let start = std::iter::once(Self::sum_addend(c));
        let mut bits = self.round(t, self.aligned_sum(start), satfinite);
        let mut group = Vec::with_capacity(self.terms);
        for pairs in factors.chunks(self.terms.max(1)) {
            group.clear();
            group.extend(pairs.iter().map(|&(a, b)| self.product(a, b)));
            bits = self.step(t, satfinite, decode_d(t, bits), &group);
        }
        bits
    }

    /// D's bits after one instruction that adds `group` (at most `terms` products, in k
    /// order, as `product` forms them) to an accumulator holding `acc` (a value of D's type).
    pub fn step(&self, t: ElemType, satfinite: bool, acc: f64, group: &[(f64, i32)]) -> u64 {
        let addends = std::iter::once(Self::sum_addend(acc)).chain(group.iter().copied());
        self.round(t, self.aligned_sum(addends), satfinite)
    }

    /// `step` for an f32 accumulator: the f32 D of one instruction.
    pub fn step_f32(&self, acc: f32, group: &[(f64, i32)]) -> f32 {
        f32::from_bits(self.step(ElemType::F32, false, acc as f64, group) as u32)
    }

    /// D's bits, row-major, for A (m64 × K), B (K × N) and C (m64 × N) given as values.
    pub fn gemm_bits(&self, v: &WgVariant, a: &[f64], b: &[f64], c: &[f64]) -> Vec<u64> {
        let (n, k) = (v.n as usize, v.k as usize);
        (0..c.len())
            .map(|i| {
                let (r, col) = (i / n, i % n);
                let factors: Vec<(f64, f64)> =
                    (0..k).map(|kk| (a[r * k + kk], b[kk * n + col])).collect();
                self.dot(v.d, v.satfinite, c[i], &factors)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values as addends aligned at their own leading bits.
    fn values(x: &[f64]) -> impl Iterator<Item = (f64, i32)> + Clone + '_ {
        x.iter().map(|&v| Accumulation::sum_addend(v))
    }

    #[test]
    fn addends_below_the_grid_are_cut() {
        let acc = Accumulation::new(4, Rounding::TowardZero, Rounding::Nearest, 32);
        // 2^-4 survives next to 1, 2^-5 does not; 1.5·2^-5 truncates to 0, or rounds to 2^-4.
        assert_eq!(acc.aligned_sum(values(&[1.0, 0.0625, -1.0])), 0.0625);
        assert_eq!(acc.aligned_sum(values(&[1.0, 0.03125, -1.0])), 0.0);
        assert_eq!(acc.aligned_sum(values(&[1.0, 0.046875, -1.0])), 0.0);
        let near = Accumulation {
            align: Rounding::Nearest,
            ..acc
        };
        assert_eq!(near.aligned_sum(values(&[1.0, 0.046875, -1.0])), 0.0625);
        assert_eq!(exponent(f64::from_bits(1)), -1074);
        assert_eq!(exponent(-3.0), 1);
    }

    #[test]
    fn toward_zero_output_truncates_the_magnitude() {
        let acc = Accumulation::new(40, Rounding::TowardZero, Rounding::TowardZero, 32);
        // 1 + 0.75·2^-10 in f16: nearest gives 1 + 2^-10, toward zero 1.
        let x = 1.0 + 0.75 * 2f64.powi(-10);
        assert_eq!(acc.round(ElemType::F16, x, false), 0x3c00);
        assert_eq!(acc.round(ElemType::F16, -x, false), 0xbc00);
        assert_eq!(acc.round(ElemType::F32, 1e39, false), 0x7f7f_ffff);
    }

    /// Worked examples of what only the factor-sum alignment and the 14-bit sum give: the
    /// first is a dot product the H200 computed, the others have the products and exponent
    /// sums of two of its results (`tests/fp8_accumulation.rs` checks the model on all of
    /// `tests/vectors/wgmma/`).
    #[test]
    fn fp8_model_matches_the_h200_on_products_that_are_not_powers_of_two() {
        let m = Accumulation::FP8_F32;
        let dot =
            |pairs: &[(f64, f64)]| f32::from_bits(m.dot(ElemType::F32, false, 0.0, pairs) as u32);
        // 1.5·1.5 = 2.25 is aligned at 2^0 (13 fraction bits down to 2^-13), so 2^-13 survives
        // the alignment; the sum keeps 13 fraction bits below its own leading bit, 2^1, and
        // drops it: 2.25. (Aligned at the product's own leading bit, 2^-13 would be cut
        // first; the result is the same here, not in the next two.)
        assert_eq!(dot(&[(1.5, 1.5), (2f64.powi(-6), 2f64.powi(-7))]), 2.25);
        // 18 = 1.5·12, aligned at 2^3: −0.0146484375 = −15·2^-10 survives whole; the sum
        // 17.9853515625 = 9208.5·2^-9 is cut toward zero to 9208·2^-9. A cut of each addend
        // at 2^-9 (the product's own leading bit, 2^4) would give 17.986328125.
        assert_eq!(dot(&[(1.5, 12.0), (-0.1171875, 0.125)]), 17.984375);
        // −5.625 = −1.875·3 at 2^1 and 0.002197265625 = 9·2^-12: the exact sum −23031·2^-12
        // is cut to 14 significant bits, −11515·2^-11 (not −11516·2^-11).
        assert_eq!(
            dot(&[(-1.875, 3.0), (0.0703125, 0.03125)]),
            -11515.0 * 2f32.powi(-11)
        );
    }
}
