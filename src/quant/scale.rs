//! How a block's scale byte is chosen: the four MXFP4 (E8M0) modes of torchao's `to_mx` and the
//! NVFP4 (E4M3) rule. Inputs are block maxima as f32 bit patterns of |x|: for non-negative
//! floats the integer order is the float order and every NaN sorts above +inf, so the maximum
//! of `bits & 0x7FFF_FFFF` is a NaN-propagating amax with integer operations only (the CUDA
//! kernels do the same).

use super::codes::{E4M3_NAN, E8M0_NAN, e4m3_clamp_round};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// Bit pattern of +inf; block maxima at or above it are Inf or NaN.
pub const F32_INF_BITS: u32 = 0x7F80_0000;

/// log2 of the largest power of two in E2M1 (4 = 2^2): floor/ceil/even subtract it.
const E2M1_MAX_POW2: i32 = 2;

/// The f32 nearest 1/6, the constant torchao multiplies by in RCEIL (`1.0 / 6.0` as f32).
pub const ONE_SIXTH_F32_BITS: u32 = 0x3E2A_AAAB;

/// torchao's `ScaleCalculationMode` for MX formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScaleMode {
    /// floor(log2 amax) - 2: the OCP MX v1.0 rule and torchao's default; may saturate.
    Floor,
    /// ceil(log2 amax) - 2: never saturates, wastes range on exact powers of two.
    Ceil,
    /// amax rounded to 2 significant bits first, then floor.
    Even,
    /// amax/6 rounded up to a power of two (cuBLAS / `cvt.rp.ue8m0x2`).
    Rceil,
}

impl ScaleMode {
    pub fn name(self) -> &'static str {
        match self {
            ScaleMode::Floor => "floor",
            ScaleMode::Ceil => "ceil",
            ScaleMode::Even => "even",
            ScaleMode::Rceil => "rceil",
        }
    }
}

/// The E8M0 scale byte of a block whose |x| maximum has bit pattern `amax_bits`.
pub fn mx_scale(mode: ScaleMode, amax_bits: u32) -> u8 {
    if amax_bits >= F32_INF_BITS {
        return E8M0_NAN;
    }
    match mode {
        ScaleMode::Floor => mx_from_exponent(exponent_field(amax_bits) - 127 - E2M1_MAX_POW2),
        ScaleMode::Ceil => {
            let round_up = (amax_bits & 0x7F_FFFF != 0) as i32;
            mx_from_exponent(exponent_field(amax_bits) - 127 - E2M1_MAX_POW2 + round_up)
        }
        ScaleMode::Even => {
            // Add half of the mantissa's second bit and keep only the exponent: amax rounded
            // to two significant bits. The largest finite values round to +inf, which torchao
            // then treats as non-finite.
            let rounded = amax_bits.wrapping_add(1 << 21) & 0xFF80_0000;
            if rounded >= F32_INF_BITS {
                return E8M0_NAN;
            }
            mx_from_exponent(exponent_field(rounded) - 127 - E2M1_MAX_POW2)
        }
        ScaleMode::Rceil => {
            let descale = f32::from_bits(amax_bits) * f32::from_bits(ONE_SIXTH_F32_BITS);
            rceil_e8m0(descale.to_bits())
        }
    }
}

fn exponent_field(bits: u32) -> i32 {
    ((bits >> 23) & 0xFF) as i32
}

/// Clamp an unbiased exponent to [-127, 128] and bias it; 128 lands on 0xFF (NaN) as in torchao.
fn mx_from_exponent(unbiased: i32) -> u8 {
    (unbiased.clamp(-127, 128) + 127) as u8
}

/// A non-negative f32 rounded up to E8M0. Normal values round up when any mantissa bit is set;
/// f32 subnormals lie between 0 (byte 0 = 2^-127 is itself subnormal, 0x0040_0000) and 2^-126,
/// so only those above 2^-127 round up to byte 1.
fn rceil_e8m0(bits: u32) -> u8 {
    if bits >= F32_INF_BITS {
        return E8M0_NAN;
    }
    let exponent = (bits >> 23) & 0xFF;
    let mantissa = bits & 0x7F_FFFF;
    let round_up = if exponent == 0 {
        mantissa > 0x40_0000
    } else {
        mantissa != 0
    };
    (exponent + round_up as u32) as u8
}

/// How NVFP4 scales a tensor: block scales relative to a per-tensor f32 scale, or alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NvLevels {
    /// E4M3 block scales times one f32 tensor scale (amax / (448·6)).
    TwoLevel,
    /// E4M3 block scales only (amax_block / 6), clamped to [2^-6, 448].
    OneLevel,
}

/// NVFP4's per-tensor scale: amax over the finite elements / 2688 (448·6), so the largest
/// block scale lands at the top of E4M3. A tensor with no nonzero finite element gets 1.0:
/// every code is zero then and 1.0 keeps dequantization free of 0·NaN.
pub fn nv_tensor_scale(finite_amax: f32) -> f32 {
    if finite_amax == 0.0 {
        1.0
    } else {
        finite_amax / 2688.0
    }
}

/// The E4M3 block scale byte of an NVFP4 block. `tensor_scale` is `None` for one-level.
pub fn nv_scale(amax_bits: u32, tensor_scale: Option<f32>) -> u8 {
    if amax_bits >= F32_INF_BITS {
        return E4M3_NAN;
    }
    let per_block = f32::from_bits(amax_bits) / 6.0;
    match tensor_scale {
        Some(t) => e4m3_clamp_round(per_block / t),
        None => e4m3_clamp_round(per_block),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(v: f32) -> u32 {
        v.to_bits()
    }

    #[test]
    fn floor_ceil_even_rceil_at_boundaries() {
        // amax = 6: floor 2^(2-2) = 1 (127); ceil 2^(3-2) = 2 (128); even: 6 = 1.5·2^2 stays
        // (only mantissas from 1.75 round up a binade), so 127; rceil: 6/6 = 1 exactly → 127.
        assert_eq!(mx_scale(ScaleMode::Floor, b(6.0)), 127);
        assert_eq!(mx_scale(ScaleMode::Ceil, b(6.0)), 128);
        assert_eq!(mx_scale(ScaleMode::Even, b(6.0)), 127);
        assert_eq!(mx_scale(ScaleMode::Rceil, b(6.0)), 127);
        // amax = 4 (power of two): all agree except rceil (4/6 rounds up to 1).
        assert_eq!(mx_scale(ScaleMode::Floor, b(4.0)), 127);
        assert_eq!(mx_scale(ScaleMode::Ceil, b(4.0)), 127);
        assert_eq!(mx_scale(ScaleMode::Even, b(4.0)), 127);
        assert_eq!(mx_scale(ScaleMode::Rceil, b(4.0)), 127);
        // 1.74·4 stays in the binade under even, 1.75·4 moves up.
        assert_eq!(mx_scale(ScaleMode::Even, b(6.96)), 127);
        assert_eq!(mx_scale(ScaleMode::Even, b(7.0)), 128);
    }

    #[test]
    fn non_finite_and_tiny_maxima() {
        for mode in [
            ScaleMode::Floor,
            ScaleMode::Ceil,
            ScaleMode::Even,
            ScaleMode::Rceil,
        ] {
            assert_eq!(mx_scale(mode, F32_INF_BITS), E8M0_NAN);
            assert_eq!(mx_scale(mode, 0x7FC0_0000), E8M0_NAN);
            assert_eq!(mx_scale(mode, 0), 0, "{mode:?} of zero");
        }
        // The largest finite f32 rounds to +inf under even.
        assert_eq!(mx_scale(ScaleMode::Even, f32::MAX.to_bits()), E8M0_NAN);
        assert_eq!(mx_scale(ScaleMode::Floor, f32::MAX.to_bits()), 252);
    }

    #[test]
    fn nv_scale_clamps_and_rounds() {
        assert_eq!(nv_scale(b(6.0), None), 0x38); // 1.0
        assert_eq!(nv_scale(b(0.0), None), 0x08); // clamped to 2^-6
        assert_eq!(nv_scale(b(1e6), None), 0x7E); // clamped to 448
        assert_eq!(nv_scale(F32_INF_BITS, None), E4M3_NAN);
        let t = nv_tensor_scale(2688.0);
        assert_eq!(t, 1.0);
        assert_eq!(nv_scale(b(2688.0), Some(t)), 0x7E);
        assert_eq!(nv_tensor_scale(0.0), 1.0);
    }
}
