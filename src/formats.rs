//! Number formats that `mma.sync` reads and writes: their PTX names, their widths, and exact
//! encode/decode between a value and the bits of its container.
//!
//! Probes only ever place exactly representable values, so `encode` refuses anything that would
//! need rounding; rounding conversions live with the accumulator model in `device::emulator`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// An element type as PTX spells it (`.f16`, `.e2m1`, `.ue8m0`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElemType {
    F16,
    Bf16,
    Tf32,
    F32,
    F64,
    S32,
    S8,
    U8,
    S4,
    U4,
    B1,
    E4m3,
    E5m2,
    E3m2,
    E2m3,
    E2m1,
    Ue8m0,
    Ue4m3,
}

pub const ALL_TYPES: [ElemType; 18] = [
    ElemType::F16,
    ElemType::Bf16,
    ElemType::Tf32,
    ElemType::F32,
    ElemType::F64,
    ElemType::S32,
    ElemType::S8,
    ElemType::U8,
    ElemType::S4,
    ElemType::U4,
    ElemType::B1,
    ElemType::E4m3,
    ElemType::E5m2,
    ElemType::E3m2,
    ElemType::E2m3,
    ElemType::E2m1,
    ElemType::Ue8m0,
    ElemType::Ue4m3,
];

/// Sign/exponent/mantissa description of a small float (no infinities unless `has_inf`).
#[derive(Clone, Copy, Debug)]
struct MiniFloat {
    exp_bits: u32,
    man_bits: u32,
    bias: i32,
    signed: bool,
}

impl ElemType {
    pub fn ptx(self) -> &'static str {
        match self {
            ElemType::F16 => "f16",
            ElemType::Bf16 => "bf16",
            ElemType::Tf32 => "tf32",
            ElemType::F32 => "f32",
            ElemType::F64 => "f64",
            ElemType::S32 => "s32",
            ElemType::S8 => "s8",
            ElemType::U8 => "u8",
            ElemType::S4 => "s4",
            ElemType::U4 => "u4",
            ElemType::B1 => "b1",
            ElemType::E4m3 => "e4m3",
            ElemType::E5m2 => "e5m2",
            ElemType::E3m2 => "e3m2",
            ElemType::E2m3 => "e2m3",
            ElemType::E2m1 => "e2m1",
            ElemType::Ue8m0 => "ue8m0",
            ElemType::Ue4m3 => "ue4m3",
        }
    }

    /// Bits of the value itself (an e2m1 is 4 bits even when it sits in an 8-bit container).
    pub fn value_bits(self) -> u32 {
        match self {
            ElemType::F64 => 64,
            ElemType::F32 | ElemType::Tf32 | ElemType::S32 => 32,
            ElemType::F16 | ElemType::Bf16 => 16,
            ElemType::S8 | ElemType::U8 | ElemType::E4m3 | ElemType::E5m2 => 8,
            ElemType::Ue8m0 | ElemType::Ue4m3 => 8,
            ElemType::E3m2 | ElemType::E2m3 => 6,
            ElemType::E2m1 | ElemType::S4 | ElemType::U4 => 4,
            ElemType::B1 => 1,
        }
    }

    pub fn is_float(self) -> bool {
        !matches!(
            self,
            ElemType::S32
                | ElemType::S8
                | ElemType::U8
                | ElemType::S4
                | ElemType::U4
                | ElemType::B1
        )
    }

    fn minifloat(self) -> Option<MiniFloat> {
        let (exp_bits, man_bits, bias, signed) = match self {
            ElemType::E4m3 => (4, 3, 7, true),
            ElemType::E5m2 => (5, 2, 15, true),
            ElemType::E3m2 => (3, 2, 3, true),
            ElemType::E2m3 => (2, 3, 1, true),
            ElemType::E2m1 => (2, 1, 1, true),
            ElemType::Ue4m3 => (4, 3, 7, false),
            ElemType::F16 => (5, 10, 15, true),
            ElemType::Bf16 => (8, 7, 127, true),
            _ => return None,
        };
        Some(MiniFloat {
            exp_bits,
            man_bits,
            bias,
            signed,
        })
    }

    /// Decode the value bits (right-aligned, container padding already removed).
    pub fn decode(self, bits: u64) -> f64 {
        match self {
            ElemType::F64 => f64::from_bits(bits),
            ElemType::F32 | ElemType::Tf32 => f32::from_bits(bits as u32) as f64,
            ElemType::S32 => bits as u32 as i32 as f64,
            ElemType::S8 => bits as u8 as i8 as f64,
            ElemType::U8 => (bits & 0xff) as f64,
            ElemType::S4 => (((bits as u8) << 4) as i8 >> 4) as f64,
            ElemType::U4 => (bits & 0xf) as f64,
            ElemType::B1 => (bits & 1) as f64,
            ElemType::Ue8m0 => {
                let e = (bits & 0xff) as i32;
                if e == 0xff {
                    f64::NAN
                } else {
                    2f64.powi(e - 127)
                }
            }
            _ => {
                let mf = self.minifloat().expect("minifloat type");
                decode_minifloat(self, mf, bits)
            }
        }
    }

    /// Exact encoding of `v`, or `None` where `v` is not representable.
    pub fn encode_exact(self, v: f64) -> Option<u64> {
        match self {
            ElemType::F64 => Some(v.to_bits()),
            ElemType::F32 => {
                let f = v as f32;
                (f as f64 == v).then_some(f.to_bits() as u64)
            }
            ElemType::Tf32 => {
                let f = v as f32;
                ((f as f64 == v) && f.to_bits() & 0x1fff == 0).then_some(f.to_bits() as u64)
            }
            ElemType::S32 => int_code(v, i32::MIN as i64, i32::MAX as i64, 32),
            ElemType::S8 => int_code(v, -128, 127, 8),
            ElemType::U8 => int_code(v, 0, 255, 8),
            ElemType::S4 => int_code(v, -8, 7, 4),
            ElemType::U4 => int_code(v, 0, 15, 4),
            ElemType::B1 => int_code(v, 0, 1, 1),
            ElemType::F16 => {
                let c = f64_to_f16_bits(v) as u64;
                (ElemType::F16.decode(c) == v).then_some(c)
            }
            ElemType::Bf16 => {
                let f = v as f32;
                let ok = f as f64 == v && f.to_bits() & 0xffff == 0;
                ok.then_some((f.to_bits() >> 16) as u64)
            }
            _ => {
                let width = self.value_bits();
                (0..(1u64 << width)).find(|&c| {
                    let d = self.decode(c);
                    d == v && (d != 0.0 || d.is_sign_negative() == v.is_sign_negative())
                })
            }
        }
    }

    /// The code of 1.0 (every type the probes use as "one").
    pub fn one(self) -> u64 {
        self.encode_exact(1.0)
            .expect("1.0 is representable in every input type")
    }

    /// Small integers that are exact in this type, for random validation inputs.
    pub fn exact_palette(self) -> &'static [f64] {
        match self {
            ElemType::U8 | ElemType::U4 => &[0.0, 1.0, 2.0, 3.0],
            ElemType::B1 => &[0.0, 1.0],
            ElemType::S8 | ElemType::S4 | ElemType::S32 => &[-2.0, -1.0, 0.0, 1.0, 2.0],
            _ => &[-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0],
        }
    }
}

fn int_code(v: f64, lo: i64, hi: i64, width: u32) -> Option<u64> {
    if v.fract() != 0.0 || v < lo as f64 || v > hi as f64 {
        return None;
    }
    let mask = if width == 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };
    Some((v as i64 as u64) & mask)
}

fn decode_minifloat(t: ElemType, mf: MiniFloat, bits: u64) -> f64 {
    let width = t.value_bits();
    let bits = bits & ((1u64 << width) - 1);
    let man_mask = (1u64 << mf.man_bits) - 1;
    let exp_mask = (1u64 << mf.exp_bits) - 1;
    let man = bits & man_mask;
    let exp = (bits >> mf.man_bits) & exp_mask;
    let sign = if mf.signed && (bits >> (mf.man_bits + mf.exp_bits)) & 1 == 1 {
        -1.0
    } else {
        1.0
    };
    // Special codes per OCP / IEEE: f16 and bf16 and e5m2 are IEEE-like; e4m3 (fn) has only
    // S.1111.111 as NaN; the 6- and 4-bit types have no specials; ue4m3 as e4m3 without sign.
    let ieee_like = matches!(t, ElemType::F16 | ElemType::Bf16 | ElemType::E5m2);
    if ieee_like && exp == exp_mask {
        return if man == 0 {
            sign * f64::INFINITY
        } else {
            f64::NAN
        };
    }
    if matches!(t, ElemType::E4m3 | ElemType::Ue4m3) && exp == exp_mask && man == man_mask {
        return f64::NAN;
    }
    let frac = man as f64 / (1u64 << mf.man_bits) as f64;
    if exp == 0 {
        sign * frac * 2f64.powi(1 - mf.bias)
    } else {
        sign * (1.0 + frac) * 2f64.powi(exp as i32 - mf.bias)
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.ptx())
    }
}

impl FromStr for ElemType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim_start_matches('.').to_ascii_lowercase();
        ALL_TYPES
            .iter()
            .copied()
            .find(|t| t.ptx() == s)
            .ok_or_else(|| {
                let names: Vec<_> = ALL_TYPES.iter().map(|t| t.ptx()).collect();
                format!("unknown element type '{s}' (known: {})", names.join(", "))
            })
    }
}

/// Round an f64 to the nearest f16 (ties to even), returning the bits. Used by the emulator's
/// accumulator model for f16 outputs.
/// f32 → bf16 bits, round to nearest even (finite inputs; NaN payloads are not preserved).
pub fn f32_to_bf16_bits(v: f32) -> u16 {
    let b = v.to_bits();
    ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) as u16
}

pub fn f64_to_f16_bits(v: f64) -> u16 {
    if v.is_nan() {
        return 0x7fff;
    }
    let sign: u16 = if v.is_sign_negative() { 0x8000 } else { 0 };
    let a = v.abs();
    if a >= 65520.0 {
        return sign | 0x7c00;
    }
    // Quantum at this magnitude: subnormal quantum 2^-24, else 2^(e-10).
    let e = if a == 0.0 {
        -25
    } else {
        a.log2().floor() as i32
    };
    let q = if e < -14 {
        2f64.powi(-24)
    } else {
        2f64.powi(e - 10)
    };
    let r = round_half_even(a / q) * q;
    if r >= 65520.0 {
        return sign | 0x7c00;
    }
    // r is now exactly representable: build the code from exponent and mantissa.
    let code = if r < 2f64.powi(-14) {
        (r / 2f64.powi(-24)) as u16
    } else {
        let e = r.log2().floor() as i32;
        let man = ((r / 2f64.powi(e) - 1.0) * 1024.0) as u16;
        (((e + 15) as u16) << 10) | man
    };
    sign | code
}

pub fn round_half_even(x: f64) -> f64 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 && r % 2.0 != 0.0 {
        r - x.signum()
    } else {
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e2m1_table_matches_ocp() {
        let want = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
        for (c, w) in want.iter().enumerate() {
            assert_eq!(ElemType::E2m1.decode(c as u64), *w);
            assert_eq!(ElemType::E2m1.decode(c as u64 | 8), -*w);
        }
    }

    #[test]
    fn ones() {
        assert_eq!(ElemType::F16.one(), 0x3c00);
        assert_eq!(ElemType::Bf16.one(), 0x3f80);
        assert_eq!(ElemType::E4m3.one(), 0x38);
        assert_eq!(ElemType::E5m2.one(), 0x3c);
        assert_eq!(ElemType::E3m2.one(), 0x0c);
        assert_eq!(ElemType::E2m3.one(), 0x08);
        assert_eq!(ElemType::E2m1.one(), 0x2);
        assert_eq!(ElemType::Ue4m3.one(), 0x38);
        assert_eq!(ElemType::Ue8m0.one(), 127);
        assert_eq!(ElemType::S4.one(), 1);
    }

    #[test]
    fn specials_and_extremes() {
        assert!(ElemType::E4m3.decode(0x7f).is_nan());
        assert_eq!(ElemType::E4m3.decode(0x7e), 448.0);
        assert_eq!(ElemType::E5m2.decode(0x7b), 57344.0);
        assert_eq!(ElemType::E5m2.decode(0x7c), f64::INFINITY);
        assert_eq!(ElemType::E3m2.decode(0x1f), 28.0);
        assert_eq!(ElemType::E2m3.decode(0x1f), 7.5);
        assert_eq!(ElemType::S4.decode(0xf), -1.0);
        assert_eq!(ElemType::E4m3.decode(0x01), 2f64.powi(-9));
    }

    #[test]
    fn palette_is_exact() {
        for t in ALL_TYPES {
            if matches!(t, ElemType::Ue8m0 | ElemType::Ue4m3) {
                continue;
            }
            for &v in t.exact_palette() {
                let c = t
                    .encode_exact(v)
                    .unwrap_or_else(|| panic!("{t} cannot hold {v}"));
                assert_eq!(t.decode(c), v, "{t} {v}");
            }
        }
    }

    #[test]
    fn f16_rounding() {
        assert_eq!(f64_to_f16_bits(1.0), 0x3c00);
        assert_eq!(f64_to_f16_bits(1.0 + 2f64.powi(-11)), 0x3c00); // tie to even
        assert_eq!(f64_to_f16_bits(1.0 + 3.0 * 2f64.powi(-11)), 0x3c02);
        assert_eq!(f64_to_f16_bits(-2.0), 0xc000);
        assert_eq!(f64_to_f16_bits(1e6), 0x7c00);
    }
}
