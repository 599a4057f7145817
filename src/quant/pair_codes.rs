//! The E2M1 encoders of the bf16-input kernels, which work on two elements at once in bf16 and
//! f16 arithmetic (`kernels/quant/fp4_codecs.cuh`: `e2m1_mag6_bf16x2`, `e2m1_mag9_f16x2`;
//! `kernels/quant/quant.cu`: `e2m1x2_bf16_scaled`, `e2m1x2_bf16_nv1`) or on one element with a
//! shorter grid rounding (two-level NVFP4: `e2m1_mag22_nv2`), mirrored here one operation per
//! line on one half or element, and checked equal to `e2m1_encode` of the reference's f32
//! value for every bf16 input under every scale the kernels can pair it with (two-level: every
//! block scale byte under sampled tensor scales, and divisors built to put an E2M1 midpoint next
//! to a bf16 value).
//!
//! Each bf16/f16 operation is computed exactly in f32 (products and the sums here fit) and
//! rounded once to bf16/f16 by `half` (nearest even, subnormals kept): what `fma.rn.bf16x2` and
//! `fma.rn.f16x2` do.

use super::codes::{e2m1_encode, e4m3_to_f32, e8m0_reciprocal};
use super::scale::{ScaleMode, mx_scale, nv_scale};
use crate::rng::SplitMix64;
use half::{bf16, f16};

fn bf(bits: u16) -> f32 {
    bf16::from_bits(bits).to_f32()
}

fn to_bf(v: f32) -> u16 {
    bf16::from_f32(v).to_bits()
}

fn hf(bits: u16) -> f32 {
    f16::from_bits(bits).to_f32()
}

fn to_hf(v: f32) -> u16 {
    f16::from_f32(v).to_bits()
}

/// `e2m1x2_bf16_scaled` on one half: the E2M1 code of bf16 `x` times the bf16 power of two
/// `s` (the kernel's `e8m0_reciprocal_bf16x2`), for |x|·s below 8.
fn mx_bf16(x: u16, s: u16) -> u8 {
    let y = to_bf(bf(x & 0x7FFF) * bf(s));
    let t = y & 0x7F80;
    let c = (t + 0x0300).max(0x4280);
    let neg_c = to_bf(bf(c) * bf(0x8080));
    let g = to_bf(bf(y) + bf(c));
    let k = to_bf(bf(g) * bf(0x0080) + bf(neg_c)).min(0x01C0);
    ((k >> 6) as u8) | ((x >> 12) & 8) as u8
}

/// `e2m1x2_bf16_nv1` on one half: the E2M1 code of bf16 `x` divided by a one-level NVFP4 block
/// scale whose correctly rounded reciprocal is `rs`.
fn nv1_bf16(x: u16, rs: f32) -> u8 {
    let y = to_hf(bf(x & 0x7FFF) * rs).min(0x4600);
    let c = ((y & 0x7C00) + 0x2400).max(0x6000);
    let neg_c = to_hf(hf(c) * hf(0x8400));
    let g = to_hf(hf(y) + hf(c));
    let k = to_hf(hf(g) * hf(0x0400) + hf(neg_c));
    ((k >> 9) as u8) | ((x >> 12) & 8) as u8
}

/// `e2m1_mag22_nv2` and the sign: the E2M1 code of bf16 `x` over a two-level divisor `d`
/// (rd = RN(1/d)): Markstein's quotient clamped at 6, then the grid rounding by the binade's
/// constant.
fn nv2_bf16(x: u16, d: f32, rd: f32) -> u8 {
    let a = bf(x & 0x7FFF);
    let y = a * rd;
    nv2_grid((-y).mul_add(d, a).mul_add(rd, y).min(6.0)) | ((x >> 12) & 8) as u8
}

/// `e2m1_mag22_nv2<false>`: the same without the clamp at 6, for warps whose quotients are all
/// below 7 (every block scale byte below 0x7E: `unclamped_quotients_stay_below_7`).
fn nv2_bf16_unclamped(x: u16, d: f32, rd: f32) -> u8 {
    let a = bf(x & 0x7FFF);
    let y = a * rd;
    nv2_grid((-y).mul_add(d, a).mul_add(rd, y)) | ((x >> 12) & 8) as u8
}

/// The grid rounding of `e2m1_mag22_nv2` of a quotient q: the magnitude code. The binade's
/// constant times 2^-126 (a signed add-and-max on the exponent bits), one fused multiply-add of
/// q·2^-126 onto it, and the constant subtracted again.
fn nv2_grid(q: f32) -> u8 {
    let c = f32::from_bits(
        ((q.to_bits() & 0x7F80_0000) as i32 + (0x0B40_0000 - 0x3F00_0000)).max(0x0BC0_0000) as u32,
    );
    let k = q.mul_add(f32::from_bits(0x0080_0000), c) - c;
    (k.to_bits() >> 22) as u8
}

/// The kernel's `e8m0_reciprocal_bf16x2` on one half.
fn e8m0_reciprocal_bf16(b: u8) -> u16 {
    if b == 254 {
        0x40
    } else {
        (254 - b as u16) << 7
    }
}

/// Every bf16 bit pattern that is not NaN or infinite (those blocks take the NaN scale and
/// zero codes before any element is encoded).
fn finite_bf16() -> impl Iterator<Item = u16> {
    (0..=u16::MAX).filter(|&x| x & 0x7F80 != 0x7F80)
}

#[test]
fn the_bf16_reciprocal_is_the_e8m0_reciprocal() {
    for b in 0u8..=254 {
        assert_eq!(bf(e8m0_reciprocal_bf16(b)), e8m0_reciprocal(b), "{b}");
    }
}

#[test]
fn mx_scales_leave_every_scaled_element_below_8() {
    // What mx_bf16 assumes: an element times the reciprocal of its block's scale is below 8,
    // for every mode and every finite bf16 block maximum (elements are at most the maximum).
    for mode in [
        ScaleMode::Floor,
        ScaleMode::Ceil,
        ScaleMode::Even,
        ScaleMode::Rceil,
    ] {
        for amax in finite_bf16().filter(|x| x & 0x8000 == 0) {
            let b = mx_scale(mode, (amax as u32) << 16);
            if b == 0xFF {
                continue;
            }
            let y = bf(amax) * e8m0_reciprocal(b);
            assert!(y < 8.0, "{mode:?} amax {amax:#x} scale {b}: {y}");
        }
    }
}

#[test]
fn bf16_pair_encoder_equals_the_reference_for_every_input_and_e8m0_scale() {
    for b in 0u8..=254 {
        let (s, rcp) = (e8m0_reciprocal_bf16(b), e8m0_reciprocal(b));
        for x in finite_bf16() {
            let v = bf(x) * rcp;
            if v.abs() >= 8.0 {
                continue;
            }
            assert_eq!(mx_bf16(x, s), e2m1_encode(v), "x {x:#06x} scale {b}");
        }
    }
}

#[test]
fn f16_pair_encoder_equals_the_divided_reference_for_every_input_and_e4m3_scale() {
    // One-level block scales: the E4M3 values clamped to [2^-6, 448] (bytes 0x08..=0x7E).
    for byte in 0x08u8..=0x7E {
        let s = e4m3_to_f32(byte);
        let rs = 1.0 / s;
        for x in finite_bf16() {
            let want = e2m1_encode(bf(x) / s);
            assert_eq!(nv1_bf16(x, rs), want, "x {x:#06x} scale {s}");
        }
    }
}

/// The bf16 values x with x/d in [lo, hi], both signs: the elements whose codes a divisor d
/// decides (below 0.2·d every code is zero).
fn bf16_between(d: f32, lo: f32, hi: f32) -> impl Iterator<Item = u16> {
    let (from, to) = (
        bf16::from_f32(lo * d).to_bits(),
        bf16::from_f32(hi * d).to_bits(),
    );
    (from.saturating_sub(1)..=to.saturating_add(1).min(0x7F7F)).flat_map(|x| [x, x | 0x8000])
}

/// Every element of a two-level block under divisor d encodes as the division does.
fn check_nv2(d: f32, elements: impl Iterator<Item = u16>) {
    let rd = 1.0 / d;
    for x in elements {
        let want = e2m1_encode(bf(x) / d);
        assert_eq!(nv2_bf16(x, d, rd), want, "x {x:#06x} divisor {d:e}");
    }
}

#[test]
fn two_level_bf16_codes_equal_the_divided_reference() {
    let mut rng = SplitMix64::new(7);
    // Every block scale byte under tensor scales across the nice range, and
    // under those of bf16 tensor amaxes (amax / 2688 = amax / (2^7·3·7): midpoints times the
    // divisor are then often bf16 values, the quotients exact ties).
    for byte in 0x08u8..=0x7E {
        for i in 0..60 {
            let t = if i % 2 == 0 {
                (2.0f64.powf(rng.uniform() * 80.0 - 40.0)) as f32
            } else {
                bf16::from_bits(0x3F80 | rng.below(128) as u16).to_f32() * 2f32.powi(i - 30)
                    / 2688.0
            };
            // Quotients up to 64: saturating ones too (the largest byte, a given tensor amax).
            check_nv2(
                t * e4m3_to_f32(byte),
                bf16_between(t * e4m3_to_f32(byte), 0.2, 64.0),
            );
        }
    }
    // Divisors that put a midpoint (m·2^j, m = 1, 3, 5, 7) within 40 f32 steps of a bf16 value.
    for _ in 0..300 {
        let a = bf16::from_bits(0x3F80 | rng.below(128) as u16).to_f32();
        for m in [1.0f32, 3.0, 5.0, 7.0] {
            let base = (a / m).to_bits() as i64;
            for step in -40..=40 {
                let d = f32::from_bits((base + step) as u32);
                check_nv2(d, bf16_between(d, 0.2, 6.4));
            }
        }
    }
}

#[test]
fn unclamped_grid_rounding_equals_the_encoder_below_7() {
    // Every non-negative f32 quotient below 7, subnormals included: up to 6 the clamped
    // quotients, and in [6, 7) the grid rounding without the clamp gives 6's code, as the
    // reference does.
    for bits in 0..7.0f32.to_bits() {
        let q = f32::from_bits(bits);
        assert_eq!(nv2_grid(q), e2m1_encode(q), "{q:e} ({bits:#010x})");
    }
    assert_ne!(
        nv2_grid(7.0),
        e2m1_encode(7.0),
        "7 is the first quotient that needs the clamp"
    );
}

#[test]
fn unclamped_quotients_stay_below_7() {
    // The kernel skips the clamp at 6 in warps where no block scale byte is 0x7E (448) or NaN:
    // then every quotient RN(|x| / d) of the block is at most RN(amax / d) < 7. Every finite
    // bf16 block maximum under tensor scales across the nice range and those of bf16 tensor
    // amaxes; nv_scale is the reference's byte.
    let mut rng = SplitMix64::new(11);
    for i in 0..160 {
        let t = if i % 2 == 0 {
            (2.0f64.powf(rng.uniform() * 80.0 - 40.0)) as f32
        } else {
            bf16::from_bits(0x3F80 | rng.below(128) as u16).to_f32() * 2f32.powi(i / 4 - 20)
                / 2688.0
        };
        for amax in finite_bf16().filter(|x| x & 0x8000 == 0) {
            let byte = nv_scale((amax as u32) << 16, Some(t));
            if byte >= 0x7E {
                continue;
            }
            let d = t * e4m3_to_f32(byte);
            let q = bf(amax) / d;
            assert!(q < 7.0, "amax {amax:#06x} t {t:e} byte {byte:#x}: {q}");
            // and the codes the kernel then gives are the reference's
            let rd = 1.0 / d;
            assert_eq!(nv2_bf16_unclamped(amax, d, rd), e2m1_encode(q));
        }
    }
}

/// PTX `prmt.b32` in its default mode: byte i of the result is byte (sel >> 4i) & 7 of the
/// pair (b:a), replicated from its sign bit when bit 3 of the selector nibble is set.
fn prmt(a: u32, b: u32, sel: u32) -> u32 {
    let pair = (b as u64) << 32 | a as u64;
    (0..4).fold(0, |acc, i| {
        let s = (sel >> (4 * i)) & 15;
        let byte = (pair >> (8 * (s & 7))) as u8;
        let byte = if s & 8 != 0 {
            ((byte as i8) >> 7) as u8
        } else {
            byte
        };
        acc | (byte as u32) << (8 * i)
    })
}

#[test]
fn sign_gather_puts_each_sign_at_bit_4i_plus_3() {
    // quant.cu bf16_signs8: element 2j is the low half of word j, 2j + 1 the high half.
    let mut rng = SplitMix64::new(3);
    for _ in 0..20000 {
        let w: [u32; 4] = std::array::from_fn(|_| rng.next_u64() as u32);
        let lo = prmt(w[0], w[1], 0x5173);
        let hi = prmt(w[2], w[3], 0x5173);
        let got = (prmt(lo, hi, 0xDC98) & 0x8080_8080) | (prmt(lo, hi, 0xFEBA) & 0x0808_0808);
        let want = (0..8).fold(0u32, |acc, i| {
            let half = w[i / 2] >> (16 * (i % 2));
            acc | ((half >> 15) & 1) << (4 * i + 3)
        });
        assert_eq!(got, want, "{w:08x?}");
    }
}
