//! The small number formats of block-scaled FP4: E2M1 elements, E8M0 (MX) and E4M3 (NV)
//! scales. Every conversion here is written with integer and comparison operations only, in the
//! same order as the CUDA kernels (`kernels/quant/quant.cuh`), so both give the same bytes.

/// Magnitudes of the eight E2M1 codes (bit 3 is the sign).
pub const E2M1_VALUES: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

/// Largest E2M1 magnitude; scaled values beyond it saturate.
pub const E2M1_MAX: f32 = 6.0;

/// The E8M0 byte that means NaN (the only special value of E8M0).
pub const E8M0_NAN: u8 = 0xFF;

/// The E4M3 (OCP `float8_e4m3fn`) byte NVFP4 uses for a NaN block.
pub const E4M3_NAN: u8 = 0x7F;

/// Largest finite E4M3 value; NVFP4 block scales are clamped to it.
pub const E4M3_MAX: f32 = 448.0;

/// Smallest normal E4M3 value (2^-6); NVFP4 block scales are clamped up to it.
pub const E4M3_MIN_NORMAL: f32 = 0.015625;

/// Round a scaled f32 to the nearest E2M1 code, ties to even, saturating at ±6, keeping the
/// sign (so -0.1 gives 0x8, negative zero). NaN is never passed in: blocks containing NaN are
/// handled before elements are encoded.
///
/// The thresholds are the midpoints between neighbouring magnitudes; `<=` sends a tie down
/// and `<` sends it up, whichever neighbour has the even code (0.25→0, 0.75→1.0, 1.25→1.0,
/// 1.75→2.0, 2.5→2.0, 3.5→4.0, 5.0→4.0).
pub fn e2m1_encode(v: f32) -> u8 {
    let sign = ((v.to_bits() >> 28) & 0x8) as u8;
    let a = v.abs();
    let mag = (a > 0.25) as u8
        + (a >= 0.75) as u8
        + (a > 1.25) as u8
        + (a >= 1.75) as u8
        + (a > 2.5) as u8
        + (a >= 3.5) as u8
        + (a > 5.0) as u8;
    sign | mag
}

/// `e2m1_encode` the way the CUDA kernels compute it (fp4_codecs.cuh: e2m1_grid, e2m1_mag22),
/// mostly on the FMA pipes. The E2M1 step is q = 0.5 below 2, 1 in [2,4), 2 in [4,8); adding
/// C = 1.5·2^22·max(binade(|v|), 1), whose ulp is q, rounds |v| to a multiple of q in one IEEE
/// rounding (ties to even), and subtracting C gives the grid value r, saturated at 6. The bits
/// of r·2^-126 (2^-127 for 0.5, an f32 subnormal, up to 1.5·2^-124 for 6) are the code << 22.
/// Tested equal to `e2m1_encode` on every f32 from 0 to 16 (step 3) and the edges; NaN is
/// never encoded (a NaN block takes the NaN scale and zero codes before this is reached).
pub fn e2m1_encode_bits(v: f32) -> u8 {
    let a = v.abs();
    let binade = f32::from_bits((a.to_bits() & 0x7F80_0000).max(0x3F80_0000));
    let c = binade * 6_291_456.0;
    let r = ((a + c) - c).min(6.0);
    let mag = (r * f32::from_bits(0x0080_0000)).to_bits() >> 22;
    (((v.to_bits() >> 28) & 8) | mag) as u8
}

/// The value of an E2M1 code (low four bits used).
pub fn e2m1_decode(code: u8) -> f32 {
    let m = E2M1_VALUES[(code & 7) as usize];
    if code & 8 != 0 { -m } else { m }
}

/// 2^(byte - 127) as f32 for an E8M0 byte: byte 0 is the f32 subnormal 2^-127, 0xFF is NaN.
pub fn e8m0_to_f32(byte: u8) -> f32 {
    match byte {
        0 => f32::from_bits(0x0040_0000),
        E8M0_NAN => f32::NAN,
        b => f32::from_bits((b as u32) << 23),
    }
}

/// The reciprocal of an E8M0 scale the way torchao forms it: the byte 254 - s, read as E8M0.
/// Exact for every finite scale (2^(127-e)), NaN for the NaN scale.
pub fn e8m0_reciprocal(byte: u8) -> f32 {
    e8m0_to_f32(254u8.wrapping_sub(byte))
}

/// Round a positive f32 in [2^-6, 448] to the nearest E4M3 byte, ties to even. Callers clamp
/// first (NVFP4 clamps block scales to that range), so there are no subnormals, no overflow.
pub fn e4m3_from_clamped(v: f32) -> u8 {
    let bits = v.to_bits();
    // Drop 20 of the 23 mantissa bits, round half to even; a carry moves into the exponent,
    // which is what rounding up to the next binade means.
    let lsb = (bits >> 20) & 1;
    let rounded = bits + 0x7FFFF + lsb;
    let exp = ((rounded >> 23) & 0xFF) as i32 - 127 + 7;
    let mant = (rounded >> 20) & 0x7;
    ((exp as u32) << 3 | mant) as u8
}

/// Clamp to [2^-6, 448] and round to E4M3 (the NVFP4 block-scale rule). NaN gives the NaN byte.
pub fn e4m3_clamp_round(v: f32) -> u8 {
    if v.is_nan() {
        return E4M3_NAN;
    }
    e4m3_from_clamped(v.clamp(E4M3_MIN_NORMAL, E4M3_MAX))
}

/// Round any f32 to the nearest E4M3 byte, ties to even, as `cvt.rn.satfinite.e4m3x2.f32`
/// does (the only f32 → E4M3 conversion PTX has): magnitudes past 448 (±inf included)
/// saturate to ±448, since E4M3 has no infinity; below 2^-6 the grid is the subnormal one,
/// multiples of 2^-9, and magnitudes up to 2^-10 (the tie with zero included) become a
/// signed zero; NaN gives the NaN byte 0x7F.
pub fn e4m3_round(v: f32) -> u8 {
    if v.is_nan() {
        return E4M3_NAN;
    }
    let sign = ((v.to_bits() >> 24) & 0x80) as u8;
    let a = v.abs();
    let mag = if a < E4M3_MIN_NORMAL {
        // a·2^9 is exact in f32; subnormal code m is m·2^-9, and m = 8 is the smallest
        // normal's byte, so rounding up into the normal range needs no special case.
        (a * 512.0).round_ties_even() as u8
    } else {
        e4m3_from_clamped(a.min(E4M3_MAX))
    };
    sign | mag
}

/// The value of an E4M3 byte (OCP fn: no infinities, NaN at 0x7F/0xFF).
pub fn e4m3_to_f32(byte: u8) -> f32 {
    let sign = if byte & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((byte >> 3) & 0xF) as i32;
    let m = (byte & 7) as f32;
    if byte & 0x7F == 0x7F {
        return f32::NAN;
    }
    if e == 0 {
        sign * m * (2.0f32).powi(-9)
    } else {
        sign * (1.0 + m / 8.0) * (2.0f32).powi(e - 7)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e2m1_ties_go_to_even_codes() {
        let cases = [
            (0.25, 0),
            (0.75, 2),
            (1.25, 2),
            (1.75, 4),
            (2.5, 4),
            (3.5, 6),
            (5.0, 6),
            (6.0, 7),
            (1e30, 7),
            (f32::INFINITY, 7),
        ];
        for (v, code) in cases {
            assert_eq!(e2m1_encode(v), code, "{v}");
            assert_eq!(e2m1_encode(-v), code | 8, "-{v}");
        }
        assert_eq!(e2m1_encode(-0.0), 8);
        assert_eq!(e2m1_encode(-0.1), 8);
        assert_eq!(e2m1_encode(0.0), 0);
    }

    #[test]
    fn bit_form_of_the_encoder_equals_the_comparison_form() {
        // Every f32 from 0 to 16 (all thresholds, the saturation region, subnormals), both signs.
        for bits in (0u32..0x4180_0000).step_by(3) {
            let v = f32::from_bits(bits);
            assert_eq!(e2m1_encode_bits(v), e2m1_encode(v), "{bits:#x}");
            assert_eq!(e2m1_encode_bits(-v), e2m1_encode(-v), "-{bits:#x}");
        }
        let edges = [0.0, 1e-45, 1e-30, 0.1, 1e10, f32::MAX, f32::INFINITY];
        for v in edges {
            assert_eq!(e2m1_encode_bits(v), e2m1_encode(v), "{v}");
            assert_eq!(e2m1_encode_bits(-v), e2m1_encode(-v), "-{v}");
        }
    }

    #[test]
    fn e2m1_encode_inverts_decode() {
        for code in 0..16u8 {
            let v = e2m1_decode(code);
            assert_eq!(e2m1_encode(v), code);
        }
    }

    #[test]
    fn e4m3_round_trips_every_normal_code_and_rounds_half_even() {
        for byte in 0x08u8..=0x7E {
            let v = e4m3_to_f32(byte);
            assert_eq!(e4m3_from_clamped(v), byte, "{byte:#x}");
            if byte < 0x7E {
                let next = e4m3_to_f32(byte + 1);
                let mid = (v + next) / 2.0;
                let even = if byte % 2 == 0 { byte } else { byte + 1 };
                assert_eq!(e4m3_from_clamped(mid), even, "tie above {byte:#x}");
            }
        }
        assert_eq!(e4m3_clamp_round(1e9), 0x7E);
        assert_eq!(e4m3_clamp_round(0.0), 0x08);
        assert_eq!(e4m3_clamp_round(f32::NAN), E4M3_NAN);
    }

    /// The nearest finite E4M3 value by search (ties to the even byte), saturating at 448.
    fn nearest_e4m3(v: f32) -> u8 {
        let sign = if v.is_sign_negative() { 0x80 } else { 0 };
        let a = v.abs().min(E4M3_MAX) as f64;
        let mut best = 0u8;
        for byte in 0u8..=0x7E {
            let (d, b) = (
                (e4m3_to_f32(byte) as f64 - a).abs(),
                (e4m3_to_f32(best) as f64 - a).abs(),
            );
            if d < b || (d == b && byte % 2 == 0) {
                best = byte;
            }
        }
        sign | best
    }

    #[test]
    fn e4m3_round_is_the_nearest_value_ties_to_even() {
        // Every f32 from 0 to past the saturation point (steps of 4099 ulps), both signs.
        for bits in (0u32..0x43F0_0000).step_by(4099) {
            let v = f32::from_bits(bits);
            assert_eq!(e4m3_round(v), nearest_e4m3(v), "{v:e}");
            assert_eq!(e4m3_round(-v), nearest_e4m3(-v), "-{v:e}");
        }
        // Every midpoint between neighbouring values, subnormal and normal: to the even byte.
        for byte in 0u8..0x7E {
            let mid = (e4m3_to_f32(byte) + e4m3_to_f32(byte + 1)) / 2.0;
            let even = byte + byte % 2;
            assert_eq!(e4m3_round(mid), even, "tie above {byte:#x}");
            assert_eq!(e4m3_round(-mid), 0x80 | even, "tie below -{byte:#x}");
        }
    }

    #[test]
    fn e4m3_round_subnormals_underflow_and_saturation() {
        let tiny = 2f32.powi(-9); // the smallest subnormal, byte 1
        assert_eq!(e4m3_round(tiny), 0x01);
        assert_eq!(e4m3_round(3.0 * tiny), 0x03);
        assert_eq!(e4m3_round(2.5 * tiny), 0x02); // tie between 2 and 3: even
        assert_eq!(e4m3_round(3.5 * tiny), 0x04); // tie between 3 and 4: even
        assert_eq!(e4m3_round(tiny / 2.0), 0x00); // the tie with zero goes to zero
        assert_eq!(e4m3_round(tiny / 2.0 * 1.0001), 0x01);
        assert_eq!(e4m3_round(-tiny / 4.0), 0x80); // a signed zero
        assert_eq!(e4m3_round(7.5 * tiny), 0x08); // rounds up into the smallest normal, 2^-6
        assert_eq!(e4m3_round(448.0), 0x7E);
        assert_eq!(e4m3_round(463.99), 0x7E);
        assert_eq!(e4m3_round(464.0), 0x7E); // satfinite: never the NaN byte
        assert_eq!(e4m3_round(1e30), 0x7E);
        assert_eq!(e4m3_round(f32::INFINITY), 0x7E);
        assert_eq!(e4m3_round(f32::NEG_INFINITY), 0xFE);
        assert_eq!(e4m3_round(f32::NAN), E4M3_NAN);
        assert_eq!(e4m3_round(0.0), 0x00);
        assert_eq!(e4m3_round(-0.0), 0x80);
    }

    #[test]
    fn e8m0_edges() {
        assert_eq!(e8m0_to_f32(127), 1.0);
        assert_eq!(e8m0_to_f32(0), 2f32.powi(-127));
        assert!(e8m0_to_f32(255).is_nan());
        assert_eq!(e8m0_reciprocal(130), 0.125);
        assert_eq!(e8m0_reciprocal(0), 2f32.powi(127));
        assert!(e8m0_reciprocal(255).is_nan());
    }
}
