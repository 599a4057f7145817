//! The container probe: put every container code of an input type into the A operand (B = 1),
//! read what the unit computed, and derive the bit roles from that decode table alone.
//!
//! Experiments (each one warp; B = the B type's 1 in every slot):
//! - **Sweep** (one launch). Code `c` sits alone in its row of A: A(i, k₀) = c, every other A
//!   element is the all-zero container (the zero filler), C = +0. Then D(i, j) = value(c) · 1
//!   for every column j, so one experiment decodes m codes. Codes go in blocks of m; experiment
//!   (k₀, r, b) puts code `b·m + (i + r + k₀) mod m` at A(i, k₀). With [`Coverage::Full`], r runs
//!   over all m rotations and k₀ over all k, so every code visits every A slot (row, k); with
//!   [`Coverage::EveryK`] (the default for 16-bit containers, 65536 codes) r = 0, so every code
//!   visits every k and k of the m rows. The value table is read from the placement
//!   (k₀ = 0, r = 0); every other placement must give the same D bits
//!   (`consistent_across_slots`), and all n columns of a row must agree (`columns_agree`).
//! - **Negative zero** (one small launch, float types). +0 + -0 = +0 and -0 + -0 = -0 (IEEE),
//!   so with C = -0 and every other A element set to the negative-zero candidate (the inferred
//!   sign bit alone, which the sweep must have decoded as zero), a row comes out -0 exactly
//!   when its probed code is a negative zero. Two controls decide whether the sign of zero is
//!   observable at all: the row holding the candidate itself must give -0, and the row holding
//!   code 0 must give +0.
//!
//! Analysis ([`analyse`]) works on the decode table only, so it is the same for hardware and the
//! emulator, and testable on synthetic tables. Its rules are documented where they are applied.

use crate::device::{Backend, Batch};
use crate::formats::ElemType;
use crate::isa::{BitOp, Fragment, Operand, ScaleSelectors, Variant};
use crate::layout::{Layout, Slot, SlotSpace};
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::time::Instant;

pub const SCHEMA: &str = "fp4probe.container/1";
pub const CSV_HEADER: &str = "code,bits,value,d_bits";

/// Widest A container the sweep enumerates (65536 codes).
pub const MAX_CONTAINER_BITS: u32 = 16;

/// Which A slots every code visits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Coverage {
    /// Every code in every A slot (row, k): codes · k experiments.
    Full,
    /// Every code at every k, in k of the m rows (the row rotates with k): codes · k / m
    /// experiments.
    EveryK,
}

impl Coverage {
    /// Full coverage up to 8-bit containers; every k for 16-bit ones (full would be
    /// 65536 · k experiments: ask for it with `--coverage full`).
    pub fn auto(v: &Variant) -> Self {
        if v.fragment(Operand::A).container_bits <= 8 {
            Coverage::Full
        } else {
            Coverage::EveryK
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Coverage::Full => "every code in every A slot (row, k)",
            Coverage::EveryK => "every code at every k (its row rotates with k)",
        }
    }
}

/// Ok if the container of A can be swept by this probe.
pub fn check_sweepable(v: &Variant) -> Result<()> {
    let fa = v.fragment(Operand::A);
    if fa.container_bits > MAX_CONTAINER_BITS {
        bail!(
            "{}: A elements ({}) sit in {}-bit containers; the sweep enumerates containers of at most {MAX_CONTAINER_BITS} bits",
            v.id(),
            fa.elem,
            fa.container_bits
        );
    }
    if v.bitop == Some(BitOp::Xor) {
        bail!(
            "{}: with .xor.popc every zero filler would count against B = 1; sweep the .and.popc variant",
            v.id()
        );
    }
    Ok(())
}

/// One representative per distinct (kind, A type, A container width): among the variants with
/// f32 or s32 D (all of them when none has), the smallest k, then B of the same type as A, then
/// no `.satfinite`, then `.and.popc`, then catalog order. Returned in order of first appearance.
pub fn representatives(variants: &[Variant]) -> Vec<Variant> {
    let wide_d = |v: &Variant| matches!(v.d, ElemType::F32 | ElemType::S32);
    let pool: Vec<&Variant> = if variants.iter().any(wide_d) {
        variants.iter().filter(|v| wide_d(v)).collect()
    } else {
        variants.iter().collect()
    };
    let key = |v: &Variant| (v.kind, v.a, v.fragment(Operand::A).container_bits);
    let rank = |v: &Variant| {
        (
            v.shape.k,
            v.b != v.a,
            v.satfinite,
            v.bitop.is_some_and(|o| o != BitOp::And),
        )
    };
    let mut out: Vec<Variant> = Vec::new();
    for v in pool {
        match out.iter_mut().find(|r| key(r) == key(v)) {
            Some(r) if rank(v) < rank(r) => *r = v.clone(),
            Some(_) => {}
            None => out.push(v.clone()),
        }
    }
    out
}

/// A measured number: finite values are JSON numbers; NaN and ±Inf are the strings "NaN",
/// "inf", "-inf".
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Num(pub f64);

impl Serialize for Num {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        if self.0.is_finite() {
            s.serialize_f64(self.0)
        } else {
            s.serialize_str(&fmt_value(self.0))
        }
    }
}

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(f64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(x) => Ok(Num(x)),
            Raw::S(s) => match s.as_str() {
                "NaN" => Ok(Num(f64::NAN)),
                "inf" => Ok(Num(f64::INFINITY)),
                "-inf" => Ok(Num(f64::NEG_INFINITY)),
                _ => Err(serde::de::Error::custom(format!("not a value: {s:?}"))),
            },
        }
    }
}

/// A value as the CSV and the summary print it: `NaN`, `inf`, `-inf`, `-0`, `448`, `6.1e-5`.
pub fn fmt_value(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "inf" } else { "-inf" }.into()
    } else if x != 0.0 && (x.abs() >= 1e16 || x.abs() < 1e-6) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// `0x7f` for an 8-bit container, `0x7c00` for a 16-bit one, `0xf` for a nibble.
pub fn hex(bits: u64, width: u32) -> String {
    format!("0x{:0w$x}", bits, w = width.div_ceil(4).max(1) as usize)
}

/// The decode table of one sweep: everything the analysis reads.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    pub container_bits: u32,
    /// D is an integer type (the unit computed integer products).
    pub integer: bool,
    /// Per code (index = container bits): the value the unit computed for code · 1, with -0
    /// where the negative-zero check found a negative zero.
    pub values: Vec<f64>,
    /// Per code: the raw D bits of the reference placement.
    pub d_bits: Vec<u64>,
    /// Width of D's bits (for printing).
    pub d_width: u32,
    /// Whether the sign of zero could be observed (the check's controls passed).
    pub negative_zero_observable: bool,
    /// Container bits the PTX ISA says hold the value (the rest is padding).
    pub documented_value_bits: Vec<u32>,
}

impl Table {
    fn is_neg_zero(&self, c: usize) -> bool {
        self.values[c] == 0.0 && self.values[c].is_sign_negative()
    }
}

/// A set of container codes: how many, a compact range list, and the codes when few.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeSet {
    pub count: usize,
    /// `0x7c01-0x7fff, 0xfc01-0xffff`; empty when there are none.
    pub ranges: String,
    /// The codes themselves when there are at most 64.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub codes: Option<Vec<String>>,
}

impl CodeSet {
    pub fn new(codes: &[usize], width: u32) -> Self {
        let mut parts = Vec::new();
        let mut i = 0;
        while i < codes.len() {
            let mut j = i;
            while j + 1 < codes.len() && codes[j + 1] == codes[j] + 1 {
                j += 1;
            }
            parts.push(if j == i {
                hex(codes[i] as u64, width)
            } else {
                format!(
                    "{}-{}",
                    hex(codes[i] as u64, width),
                    hex(codes[j] as u64, width)
                )
            });
            i = j + 1;
        }
        CodeSet {
            count: codes.len(),
            ranges: parts.join(", "),
            codes: (codes.len() <= 64)
                .then(|| codes.iter().map(|&c| hex(c as u64, width)).collect()),
        }
    }

    /// The codes as numbers (parsed back from `ranges`).
    pub fn expand(&self) -> Vec<u64> {
        let parse = |s: &str| u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).unwrap();
        let mut out = Vec::new();
        for part in self.ranges.split(',').filter(|p| !p.trim().is_empty()) {
            match part.split_once('-') {
                Some((a, b)) => out.extend(parse(a)..=parse(b)),
                None => out.push(parse(part)),
            }
        }
        out
    }
}

/// A value and the codes that decode to it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Extreme {
    pub value: Num,
    pub codes: CodeSet,
}

/// Sign, exponent field width, mantissa width, bias and special-value convention of a small
/// float, with the sign in the top bit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FloatFormat {
    pub name: String,
    pub exp_bits: u32,
    pub man_bits: u32,
    pub bias: i32,
    pub specials: Specials,
}

/// How a float format spends its top codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Specials {
    /// IEEE 754: the all-ones exponent is ±Inf (mantissa 0) or NaN.
    Ieee,
    /// "Finite" (OCP e4m3): no Inf; only S.1…1.1…1 is NaN.
    Fn,
    /// "Finite, unsigned zero": no Inf, no -0; the -0 code is the only NaN.
    Fnuz,
    /// Every code is a finite number (OCP e3m2, e2m3, e2m1).
    None,
}

impl FloatFormat {
    fn new(name: &str, e: u32, m: u32, bias: i32, specials: Specials) -> Self {
        FloatFormat {
            name: name.into(),
            exp_bits: e,
            man_bits: m,
            bias,
            specials,
        }
    }

    pub fn width(&self) -> u32 {
        1 + self.exp_bits + self.man_bits
    }

    /// The value of a code (independent of `formats.rs`, so the emulator's decoder is checked
    /// and not merely restated).
    pub fn decode(&self, x: u64) -> f64 {
        let (e, m) = (self.exp_bits, self.man_bits);
        let man = x & ((1 << m) - 1);
        let exp = (x >> m) & ((1 << e) - 1);
        let neg = (x >> (m + e)) & 1 == 1;
        let (emax, mmax) = ((1u64 << e) - 1, (1u64 << m) - 1);
        match self.specials {
            Specials::Ieee if exp == emax => {
                return if man != 0 {
                    f64::NAN
                } else if neg {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                };
            }
            Specials::Fn if exp == emax && man == mmax => return f64::NAN,
            Specials::Fnuz if neg && exp == 0 && man == 0 => return f64::NAN,
            _ => {}
        }
        let frac = man as f64 / (1u64 << m) as f64;
        let mag = if exp == 0 {
            frac * 2f64.powi(1 - self.bias)
        } else {
            (1.0 + frac) * 2f64.powi(exp as i32 - self.bias)
        };
        if neg { -mag } else { mag }
    }
}

/// The formats a table is compared against: the OCP MX / IEEE types `mma.sync` reads, and the
/// usual alternatives they could be confused with.
pub fn standard_formats() -> Vec<FloatFormat> {
    use Specials::*;
    vec![
        FloatFormat::new("e4m3fn", 4, 3, 7, Fn),
        FloatFormat::new("e5m2", 5, 2, 15, Ieee),
        FloatFormat::new("e3m2", 3, 2, 3, None),
        FloatFormat::new("e2m3", 2, 3, 1, None),
        FloatFormat::new("e2m1", 2, 1, 1, None),
        FloatFormat::new("f16", 5, 10, 15, Ieee),
        FloatFormat::new("bf16", 8, 7, 127, Ieee),
        FloatFormat::new("e4m3 (IEEE-style Inf/NaN)", 4, 3, 7, Ieee),
        FloatFormat::new("e4m3fnuz", 4, 3, 8, Fnuz),
        FloatFormat::new("e5m2fnuz", 5, 2, 16, Fnuz),
        FloatFormat::new("e5m2 (no Inf/NaN)", 5, 2, 15, None),
    ]
}

/// Every sign/exponent/mantissa format of `width` bits with a bias near 2^(e-1) - 1 and any
/// special convention: tried when no standard format matches.
fn generic_formats(width: u32) -> Vec<FloatFormat> {
    let mut out = Vec::new();
    for e in 1..width {
        let m = width - 1 - e;
        let base = (1i32 << (e - 1).min(30)) - 1;
        for bias in base - 2..=base + 2 {
            for sp in [Specials::Ieee, Specials::Fn, Specials::Fnuz, Specials::None] {
                let name = format!("e{e}m{m} bias {bias} ({sp:?} specials)").to_lowercase();
                out.push(FloatFormat::new(&name, e, m, bias, sp));
            }
        }
    }
    out
}

/// Integer encodings of `width` value bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IntEncoding {
    Unsigned,
    TwosComplement,
    SignMagnitude,
}

impl IntEncoding {
    fn decode(self, x: u64, width: u32) -> f64 {
        let top = 1u64 << (width - 1);
        match self {
            IntEncoding::Unsigned => x as f64,
            IntEncoding::TwosComplement => {
                x as f64 - if x & top != 0 { (2 * top) as f64 } else { 0.0 }
            }
            IntEncoding::SignMagnitude => {
                let mag = (x & (top - 1)) as f64;
                if x & top != 0 { -mag } else { mag }
            }
        }
    }
}

/// How well one format explains the table (restricted to the value bits).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FormatFit {
    pub name: String,
    pub mismatches: usize,
    pub compared: usize,
    /// Up to 8 mismatching codes: [code, measured, format's value].
    pub examples: Vec<[String; 3]>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FormatMatch {
    /// The matching format's name, or null.
    pub exact: Option<String>,
    /// The matching format's parameters (floats).
    pub format: Option<FloatFormat>,
    /// The integer encoding that matches (integers).
    pub integer: Option<IntEncoding>,
    /// "e4m3fn (exact, 256 of 256 codes)" or "no standard format matches; closest ...".
    pub description: String,
    /// When nothing matches: the standard format with the fewest mismatching codes.
    pub closest: Option<FormatFit>,
}

/// What the largest codes decode to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Saturation {
    pub has_inf: bool,
    /// The largest positive codes (value bits only, padding zero), largest first:
    /// [code, value].
    pub top_codes: Vec<(String, Num)>,
    pub note: String,
}

/// The bit-role summary derived from a decode table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub container_bits: u32,
    /// One letter per container bit, most significant first: `s` sign, `e` exponent, `m`
    /// mantissa, `v` integer value bit, `?` value bit of unknown role, `x` ignored.
    pub roles: String,
    /// Bits whose flip never changes the result, for any code.
    pub ignored_bits: Vec<u32>,
    /// The other bits, most significant first.
    pub value_bits: Vec<u32>,
    /// Container bits outside the PTX ISA's documented value field.
    pub documented_padding_bits: Vec<u32>,
    /// Every documented padding bit is ignored.
    pub padding_ignored: bool,
    /// Documented value bits that turned out ignored (a finding when not empty).
    pub documented_value_bits_ignored: Vec<u32>,
    /// Float: the bit whose flip negates every result (NaN stays NaN). Integer: the top value
    /// bit of a two's-complement or sign-magnitude match.
    pub sign_bit: Option<u32>,
    pub exponent_bits: Vec<u32>,
    pub mantissa_bits: Vec<u32>,
    pub format: FormatMatch,
    pub nan_codes: CodeSet,
    pub inf_codes: CodeSet,
    pub negative_zero_codes: CodeSet,
    pub negative_zero_observable: bool,
    pub max_finite: Option<Extreme>,
    pub min_finite: Option<Extreme>,
    pub min_positive: Option<Extreme>,
    /// Smallest positive value with a zero exponent field (needs the exponent bits).
    pub min_positive_subnormal: Option<Extreme>,
    /// Smallest positive value with a non-zero exponent field.
    pub min_positive_normal: Option<Extreme>,
    pub saturation: Saturation,
}

/// Same value for the purpose of matching: NaN matches NaN; zeros match regardless of sign
/// unless the sign of zero was observed.
fn same(a: f64, b: f64, zero_sign: bool) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    a == b && (!zero_sign || a != 0.0 || a.is_sign_negative() == b.is_sign_negative())
}

fn fit(name: &str, measured: &[f64], f: impl Fn(u64) -> f64, zero_sign: bool) -> FormatFit {
    let width = measured.len().trailing_zeros();
    let mut examples = Vec::new();
    let mut mismatches = 0;
    for (x, &m) in measured.iter().enumerate() {
        let want = f(x as u64);
        if !same(m, want, zero_sign) {
            mismatches += 1;
            if examples.len() < 8 {
                examples.push([hex(x as u64, width), fmt_value(m), fmt_value(want)]);
            }
        }
    }
    FormatFit {
        name: name.into(),
        mismatches,
        compared: measured.len(),
        examples,
    }
}

/// Rule 2 (floats): the sign bit is the highest bit whose flip negates every non-NaN result
/// (zeros to zeros, ±Inf to ∓Inf) and keeps NaN as NaN, for every code, with at least one
/// non-zero result. (An ignored bit never qualifies: its flip keeps a non-zero value.)
pub fn float_sign_bit(values: &[f64], container_bits: u32) -> Option<u32> {
    (0..container_bits).rev().find(|&b| {
        let mut nonzero = false;
        let ok = (0..values.len()).all(|c| {
            let (a, f) = (values[c], values[c ^ (1 << b)]);
            if a.is_nan() {
                return f.is_nan();
            }
            nonzero |= a != 0.0;
            f == -a
        });
        ok && nonzero
    })
}

/// Derive the bit roles from a decode table.
pub fn analyse(t: &Table) -> Summary {
    let w = t.container_bits;
    let n = 1usize << w;
    assert_eq!(t.values.len(), n, "one value per code");
    // What a code produced: its D bits and, where observed, the sign of its zero.
    let key = |c: usize| (t.d_bits[c], t.is_neg_zero(c));

    // Rule 1: a bit is ignored when flipping it never changes the result, for every code.
    let ignored: Vec<u32> = (0..w)
        .filter(|&b| (0..n).all(|c| key(c) == key(c ^ (1 << b))))
        .collect();
    let value_pos: Vec<u32> = (0..w).filter(|b| !ignored.contains(b)).collect(); // ascending
    let vw = value_pos.len() as u32;
    // The table restricted to the value bits: compressed code x → the container code with x's
    // bits at the value positions and every ignored bit zero.
    let expand = |x: u64| -> usize {
        value_pos
            .iter()
            .enumerate()
            .map(|(i, &p)| (((x >> i) & 1) << p) as usize)
            .sum()
    };
    let measured: Vec<f64> = (0..1u64 << vw).map(|x| t.values[expand(x)]).collect();
    let zsign = t.negative_zero_observable;

    let mut roles = vec!['x'; w as usize]; // indexed by bit position
    for &p in &value_pos {
        roles[p as usize] = '?';
    }
    let (mut sign_bit, mut exponent_bits, mut mantissa_bits) = (None, Vec::new(), Vec::new());
    let format = if vw == 0 {
        FormatMatch {
            exact: None,
            format: None,
            integer: None,
            description: "every bit is ignored: the result does not depend on the code".into(),
            closest: None,
        }
    } else if t.integer {
        // Integers: compare the value bits with each encoding of their width.
        let encs = [
            IntEncoding::TwosComplement,
            IntEncoding::Unsigned,
            IntEncoding::SignMagnitude,
        ];
        let fits: Vec<(IntEncoding, FormatFit)> = encs
            .iter()
            .map(|&e| {
                let name = format!("{e:?}").to_lowercase();
                (e, fit(&name, &measured, |x| e.decode(x, vw), false))
            })
            .collect();
        let top = *value_pos.last().unwrap();
        match fits.iter().find(|(_, f)| f.mismatches == 0) {
            Some((e, f)) => {
                for &p in &value_pos {
                    roles[p as usize] = 'v';
                }
                if *e != IntEncoding::Unsigned {
                    roles[top as usize] = 's';
                    sign_bit = Some(top);
                }
                let name = match e {
                    IntEncoding::Unsigned => format!("u{vw}"),
                    IntEncoding::TwosComplement => format!("s{vw}"),
                    IntEncoding::SignMagnitude => format!("sign-magnitude {vw}-bit"),
                };
                FormatMatch {
                    exact: Some(name.clone()),
                    format: None,
                    integer: Some(*e),
                    description: format!(
                        "{name}: {} (exact, {} of {} codes)",
                        match e {
                            IntEncoding::Unsigned => "unsigned",
                            IntEncoding::TwosComplement => "two's complement",
                            IntEncoding::SignMagnitude => "sign-magnitude",
                        },
                        f.compared,
                        f.compared
                    ),
                    closest: None,
                }
            }
            None => {
                let best = fits
                    .into_iter()
                    .min_by_key(|(_, f)| f.mismatches)
                    .map(|(_, f)| f)
                    .unwrap();
                FormatMatch {
                    exact: None,
                    format: None,
                    integer: None,
                    description: format!(
                        "no integer encoding matches; closest {} ({} of {} codes differ)",
                        best.name, best.mismatches, best.compared
                    ),
                    closest: Some(best),
                }
            }
        }
    } else {
        sign_bit = float_sign_bit(&t.values, w);
        // Rule 3: compare the value bits, in order, with every standard format of that width
        // (sign in the top bit). An exact match names the exponent and mantissa bits.
        let standard: Vec<FloatFormat> = standard_formats()
            .into_iter()
            .filter(|f| f.width() == vw)
            .collect();
        let exact_in = |list: &[FloatFormat]| {
            list.iter()
                .find(|f| {
                    measured
                        .iter()
                        .enumerate()
                        .all(|(x, &m)| same(m, f.decode(x as u64), zsign))
                })
                .cloned()
        };
        let found = exact_in(&standard).map(|f| (f, true)).or_else(|| {
            (vw >= 2)
                .then(|| exact_in(&generic_formats(vw)))
                .flatten()
                .map(|f| (f, false))
        });
        match found {
            Some((f, is_standard)) => {
                let m = f.man_bits as usize;
                mantissa_bits = value_pos[..m].iter().rev().copied().collect();
                exponent_bits = value_pos[m..m + f.exp_bits as usize]
                    .iter()
                    .rev()
                    .copied()
                    .collect();
                let s = *value_pos.last().unwrap();
                for &p in &mantissa_bits {
                    roles[p as usize] = 'm';
                }
                for &p in &exponent_bits {
                    roles[p as usize] = 'e';
                }
                roles[s as usize] = 's';
                sign_bit = Some(s);
                let count = measured.len();
                FormatMatch {
                    exact: Some(f.name.clone()),
                    description: format!(
                        "{} (exact{}, {count} of {count} value codes{})",
                        f.name,
                        if is_standard {
                            ""
                        } else {
                            "; not a standard format"
                        },
                        if zsign {
                            ""
                        } else {
                            "; sign of zero not observed"
                        }
                    ),
                    format: Some(f),
                    integer: None,
                    closest: None,
                }
            }
            None => {
                if let Some(s) = sign_bit {
                    roles[s as usize] = 's';
                }
                let best = standard
                    .iter()
                    .map(|f| fit(&f.name, &measured, |x| f.decode(x), zsign))
                    .min_by_key(|f| f.mismatches);
                FormatMatch {
                    exact: None,
                    format: None,
                    integer: None,
                    description: match &best {
                        Some(b) => format!(
                            "no standard format matches; closest {} ({} of {} value codes differ)",
                            b.name, b.mismatches, b.compared
                        ),
                        None => format!("no standard format has {vw} value bits"),
                    },
                    closest: best,
                }
            }
        }
    };

    // Rule 4: classes of codes, over every container code (padding included).
    let codes_where =
        |f: &dyn Fn(usize) -> bool| -> Vec<usize> { (0..n).filter(|&c| f(c)).collect() };
    let set = |codes: Vec<usize>| CodeSet::new(&codes, w);
    let nan_codes = set(codes_where(&|c| t.values[c].is_nan()));
    let inf_codes = set(codes_where(&|c| t.values[c].is_infinite()));
    let negative_zero_codes = set(codes_where(&|c| t.is_neg_zero(c)));
    let extreme = |pick: &dyn Fn(f64) -> bool, better: &dyn Fn(f64, f64) -> bool| {
        let best = (0..n).map(|c| t.values[c]).filter(|&x| pick(x)).fold(
            None,
            |acc: Option<f64>, x| match acc {
                Some(a) if !better(x, a) => Some(a),
                _ => Some(x),
            },
        )?;
        Some(Extreme {
            value: Num(best),
            codes: set(codes_where(&|c| {
                t.values[c] == best && t.values[c].is_sign_negative() == best.is_sign_negative()
            })),
        })
    };
    let max_finite = extreme(&|x| x.is_finite(), &|x, a| x > a);
    let min_finite = extreme(&|x| x.is_finite(), &|x, a| x < a);
    let min_positive = extreme(&|x| x.is_finite() && x > 0.0, &|x, a| x < a);
    // Rule 5: subnormal / normal by the exponent field (only when the exponent bits are known).
    let exp_field = |c: usize| exponent_bits.iter().any(|&p| (c >> p) & 1 == 1);
    let (min_positive_subnormal, min_positive_normal) = if exponent_bits.is_empty() {
        (None, None)
    } else {
        let pos_with = |normal: bool| {
            let best = (0..n)
                .filter(|&c| exp_field(c) == normal)
                .map(|c| t.values[c])
                .filter(|&x| x.is_finite() && x > 0.0)
                .fold(f64::INFINITY, f64::min);
            best.is_finite().then(|| Extreme {
                value: Num(best),
                codes: set(codes_where(&|c| {
                    exp_field(c) == normal && t.values[c] == best
                })),
            })
        };
        (pos_with(false), pos_with(true))
    };
    // Rule 6: saturation: what the largest positive codes (value bits only, sign clear) decode
    // to, largest first.
    let mut top_codes = Vec::new();
    for x in (0..1u64 << vw).rev() {
        let c = expand(x);
        if sign_bit.is_some_and(|s| (c >> s) & 1 == 1) {
            continue;
        }
        top_codes.push((hex(c as u64, w), Num(t.values[c])));
        if top_codes.len() == 3 {
            break;
        }
    }
    let has_inf = inf_codes.count > 0;
    let note = match (&max_finite, t.integer) {
        (_, true) => format!(
            "integers: every code is a number, from {} to {}; nothing to saturate at the input",
            min_finite
                .as_ref()
                .map_or("-".into(), |e| fmt_value(e.value.0)),
            max_finite
                .as_ref()
                .map_or("-".into(), |e| fmt_value(e.value.0))
        ),
        (Some(mf), false) => {
            let top = top_codes.first();
            let top_txt = top
                .map(|(c, v)| format!("the top code {c} is {}", fmt_value(v.0)))
                .unwrap_or_default();
            if has_inf {
                format!(
                    "Inf codes exist ({}); the largest finite value is {} ({}); {top_txt}",
                    inf_codes.ranges,
                    fmt_value(mf.value.0),
                    mf.codes.ranges
                )
            } else {
                format!(
                    "no Inf codes: the largest finite value is {} ({}); {top_txt}{}",
                    fmt_value(mf.value.0),
                    mf.codes.ranges,
                    if nan_codes.count == 0 {
                        " (every code is finite)"
                    } else {
                        ""
                    }
                )
            }
        }
        (None, false) => "no finite codes".into(),
    };
    let documented_padding_bits: Vec<u32> = (0..w)
        .rev()
        .filter(|b| !t.documented_value_bits.contains(b))
        .collect();
    Summary {
        container_bits: w,
        roles: roles.iter().rev().collect(),
        padding_ignored: documented_padding_bits.iter().all(|b| ignored.contains(b)),
        documented_value_bits_ignored: ignored
            .iter()
            .rev()
            .copied()
            .filter(|b| t.documented_value_bits.contains(b))
            .collect(),
        ignored_bits: ignored.iter().rev().copied().collect(),
        value_bits: value_pos.iter().rev().copied().collect(),
        documented_padding_bits,
        sign_bit,
        exponent_bits,
        mantissa_bits,
        format,
        nan_codes,
        inf_codes,
        negative_zero_codes,
        negative_zero_observable: zsign,
        max_finite,
        min_finite,
        min_positive,
        min_positive_subnormal,
        min_positive_normal,
        saturation: Saturation {
            has_inf,
            top_codes,
            note,
        },
    }
}

/// Two columns of one row disagreed (the row's result should be the same in every column).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnDisagreement {
    pub code: String,
    pub row: u32,
    pub k: u32,
    /// D bits of every column.
    pub d_bits: Vec<String>,
}

/// A placement whose D differs from the code's reference placement (row code mod m, k 0).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotMismatch {
    pub code: String,
    pub row: u32,
    pub k: u32,
    pub d_bits: String,
    pub reference: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NegativeZeroCheck {
    pub tested: bool,
    /// The candidate negative zero used as filler (the sign bit alone).
    pub filler: Option<String>,
    /// Controls passed: the all-candidate row gave -0 and the code-0 row gave +0.
    pub observable: bool,
    /// Zero codes whose row came out -0.
    pub negative_zero_codes: Vec<String>,
    /// Zero codes whose row came out neither ±0 (should not happen).
    pub anomalies: Vec<String>,
    pub note: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checks {
    pub coverage: Coverage,
    /// Code placements read (each checked in all n columns).
    pub placements: usize,
    pub columns_agree: bool,
    pub column_disagreement_count: usize,
    pub column_disagreements: Vec<ColumnDisagreement>,
    pub consistent_across_slots: bool,
    pub slot_mismatch_count: usize,
    pub slot_mismatches: Vec<SlotMismatch>,
    /// The zero filler (container 0) decoded as +0, as the method needs.
    pub zero_filler_ok: bool,
    pub negative_zero: NegativeZeroCheck,
}

/// The outcome of the experiments for one variant.
pub struct Sweep {
    pub table: Table,
    pub checks: Checks,
    pub experiments: usize,
    pub launches: usize,
    pub wall_s: f64,
}

/// Write raw container bits (padding included) into element `elem` of a lane's register.
fn put_container(f: &Fragment, words: &mut [u32], reg: u32, elem: u32, code: u64) {
    let shift = elem * f.container_bits;
    let mask = ((1u64 << f.container_bits) - 1) << shift;
    let w = &mut words[reg as usize];
    *w = ((*w as u64 & !mask) | ((code << shift) & mask)) as u32;
}

/// Words of one experiment (all 32 lanes) of `op` with every slot set to value bits `bits`.
fn filled(v: &Variant, op: Operand, bits: u64) -> Vec<u32> {
    let f = v.fragment(op);
    let wpl = f.words_per_lane() as usize;
    let space = SlotSpace::of(&f);
    let mut words = vec![0u32; 32 * wpl];
    for i in 0..space.len() {
        let s = space.slot(i);
        let lane = s.lane as usize * wpl;
        f.insert(&mut words[lane..lane + wpl], s.reg, s.elem, bits);
    }
    words
}

/// Reads D of one experiment into an m×n matrix of raw bits through the layout's D map.
struct DReader {
    fd: Fragment,
    wpl: usize,
    slots: Vec<(Slot, usize)>,
}

impl DReader {
    fn new(v: &Variant, layout: &Layout) -> Self {
        let fd = v.fragment(Operand::D);
        let space = SlotSpace::of(&fd);
        let n = v.shape.n as usize;
        DReader {
            fd,
            wpl: fd.words_per_lane() as usize,
            slots: layout
                .d
                .iter()
                .enumerate()
                .map(|(i, c)| (space.slot(i), c.row as usize * n + c.col as usize))
                .collect(),
        }
    }

    fn read(&self, words: &[u32], exp: usize, out: &mut [u64]) {
        let base = exp * 32 * self.wpl;
        for &(s, cell) in &self.slots {
            let at = base + s.lane as usize * self.wpl;
            out[cell] = self.fd.extract(&words[at..at + self.wpl], s.reg, s.elem);
        }
    }
}

/// Run the sweep (and, for floats, the negative-zero check) of `v` on `backend`, placing
/// elements through `layout` (the documented one, or a measured lane map).
pub fn sweep(
    backend: &dyn Backend,
    v: &Variant,
    layout: &Layout,
    coverage: Coverage,
) -> Result<Sweep> {
    check_sweepable(v)?;
    layout
        .check_bijective(v)
        .map_err(anyhow::Error::msg)
        .context("layout")?;
    let start = Instant::now();
    let sel = ScaleSelectors::default();
    let fa = v.fragment(Operand::A);
    let fd = v.fragment(Operand::D);
    let w = fa.container_bits;
    let ncodes = 1usize << w;
    let (m, n, k) = (v.shape.m as usize, v.shape.n as usize, v.shape.k as usize);
    let a_space = SlotSpace::of(&fa);
    let a_wpl = fa.words_per_lane() as usize;
    let mut a_at = vec![
        Slot {
            lane: 0,
            reg: 0,
            elem: 0,
        };
        m * k
    ];
    for (i, c) in layout.a.iter().enumerate() {
        a_at[c.row as usize * k + c.col as usize] = a_space.slot(i);
    }
    let place = |batch: &mut Batch, e: usize, row: usize, kk: usize, code: u64| {
        let s = a_at[row * k + kk];
        let words = batch.lane_words_mut(v, Operand::A, e, s.lane);
        put_container(&fa, words, s.reg, s.elem, code);
    };
    let b_one = filled(v, Operand::B, v.b.one());
    let reader = DReader::new(v, layout);
    let d_width = fd.elem.value_bits();

    // Sweep: experiment (kk, r, b) = (kk * rots + r) * blocks + b.
    let rots = match coverage {
        Coverage::Full => m,
        Coverage::EveryK => 1,
    };
    let blocks = ncodes.div_ceil(m);
    let count = k * rots * blocks;
    let code_at = |kk: usize, r: usize, b: usize, i: usize| {
        let c = b * m + (i + r + kk) % m;
        (c < ncodes).then_some(c)
    };
    let mut batch = Batch::zeroed(v, count);
    for e in 0..count {
        batch.b[e * b_one.len()..(e + 1) * b_one.len()].copy_from_slice(&b_one);
    }
    debug_assert_eq!(batch.a.len(), count * 32 * a_wpl);
    for kk in 0..k {
        for r in 0..rots {
            for b in 0..blocks {
                let e = (kk * rots + r) * blocks + b;
                for i in 0..m {
                    if let Some(c) = code_at(kk, r, b, i) {
                        place(&mut batch, e, i, kk, c as u64);
                    }
                }
            }
        }
    }
    let words = backend.run(v, sel, &batch).context("sweep launch")?;
    drop(batch);
    let mut reference: Vec<Option<u64>> = vec![None; ncodes];
    let mut checks = Checks {
        coverage,
        placements: 0,
        columns_agree: true,
        column_disagreement_count: 0,
        column_disagreements: Vec::new(),
        consistent_across_slots: true,
        slot_mismatch_count: 0,
        slot_mismatches: Vec::new(),
        zero_filler_ok: true,
        negative_zero: NegativeZeroCheck {
            tested: false,
            filler: None,
            observable: false,
            negative_zero_codes: Vec::new(),
            anomalies: Vec::new(),
            note: String::new(),
        },
    };
    let mut dm = vec![0u64; m * n];
    // Experiments in index order: (kk 0, r 0) comes first and sets the reference of every code.
    for kk in 0..k {
        for r in 0..rots {
            for b in 0..blocks {
                let e = (kk * rots + r) * blocks + b;
                reader.read(&words, e, &mut dm);
                for i in 0..m {
                    let Some(c) = code_at(kk, r, b, i) else {
                        continue;
                    };
                    checks.placements += 1;
                    let row = &dm[i * n..(i + 1) * n];
                    if row.iter().any(|&x| x != row[0]) {
                        checks.columns_agree = false;
                        checks.column_disagreement_count += 1;
                        if checks.column_disagreements.len() < 16 {
                            checks.column_disagreements.push(ColumnDisagreement {
                                code: hex(c as u64, w),
                                row: i as u32,
                                k: kk as u32,
                                d_bits: row.iter().map(|&x| hex(x, d_width)).collect(),
                            });
                        }
                    }
                    match reference[c] {
                        None => reference[c] = Some(row[0]),
                        Some(want) => {
                            if row.iter().any(|&x| x != want) {
                                checks.consistent_across_slots = false;
                                checks.slot_mismatch_count += 1;
                                if checks.slot_mismatches.len() < 16 {
                                    let odd = row.iter().copied().find(|&x| x != want).unwrap();
                                    checks.slot_mismatches.push(SlotMismatch {
                                        code: hex(c as u64, w),
                                        row: i as u32,
                                        k: kk as u32,
                                        d_bits: hex(odd, d_width),
                                        reference: hex(want, d_width),
                                    });
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    drop(words);
    let d_bits: Vec<u64> = reference
        .iter()
        .map(|r| r.expect("every code has a reference placement"))
        .collect();
    let mut values: Vec<f64> = d_bits.iter().map(|&x| fd.elem.decode(x)).collect();
    checks.zero_filler_ok = values[0] == 0.0 && !values[0].is_sign_negative();
    let integer = !fd.elem.is_float();
    let mut experiments = count;
    let mut launches = 1;

    // Negative zero: C = -0, fillers = the sign bit alone, probed zero codes at k = 0.
    let zero_ok = checks.zero_filler_ok;
    let nz = &mut checks.negative_zero;
    if integer {
        nz.note = "integer type: no negative zero".into();
    } else {
        let sign = float_sign_bit(&values, w);
        let zeros: Vec<usize> = (0..ncodes).filter(|&c| values[c] == 0.0).collect();
        let c_neg_zero = v.fragment(Operand::C).elem.encode_exact(-0.0);
        match (sign, c_neg_zero) {
            (None, _) => nz.note = "no sign bit: negative zero not tested".into(),
            (_, None) => nz.note = format!("C type {} has no -0", v.c),
            (Some(s), _) if values[1 << s] != 0.0 => {
                nz.filler = Some(hex(1 << s, w));
                nz.note = format!(
                    "the sign bit alone ({}) decodes to {}, not zero: no negative zero code",
                    hex(1 << s, w),
                    fmt_value(values[1 << s])
                );
            }
            (Some(_), Some(_)) if !zero_ok => {
                nz.note = "code 0 is not +0: negative zero not tested".into();
            }
            (Some(s), Some(cz)) => {
                let filler = 1u64 << s;
                nz.tested = true;
                nz.filler = Some(hex(filler, w));
                let nexp = zeros.len().div_ceil(m);
                let mut batch = Batch::zeroed(v, nexp);
                let mut a_fill = vec![0u32; 32 * a_wpl];
                for i in 0..a_space.len() {
                    let sl = a_space.slot(i);
                    let lane = sl.lane as usize * a_wpl;
                    put_container(
                        &fa,
                        &mut a_fill[lane..lane + a_wpl],
                        sl.reg,
                        sl.elem,
                        filler,
                    );
                }
                let c_fill = filled(v, Operand::C, cz);
                for e in 0..nexp {
                    batch.a[e * a_fill.len()..(e + 1) * a_fill.len()].copy_from_slice(&a_fill);
                    batch.b[e * b_one.len()..(e + 1) * b_one.len()].copy_from_slice(&b_one);
                    batch.c[e * c_fill.len()..(e + 1) * c_fill.len()].copy_from_slice(&c_fill);
                    for i in 0..m {
                        if let Some(&c) = zeros.get(e * m + i) {
                            place(&mut batch, e, i, 0, c as u64);
                        }
                    }
                }
                let words = backend
                    .run(v, sel, &batch)
                    .context("negative-zero launch")?;
                experiments += nexp;
                launches += 1;
                let mut neg = vec![false; ncodes];
                for (j, &c) in zeros.iter().enumerate() {
                    reader.read(&words, j / m, &mut dm);
                    let i = j % m;
                    let x = fd.elem.decode(dm[i * n]);
                    let row_same = dm[i * n..(i + 1) * n].iter().all(|&y| y == dm[i * n]);
                    if x != 0.0 || !row_same {
                        nz.anomalies.push(format!(
                            "{}: {}",
                            hex(c as u64, w),
                            dm[i * n..(i + 1) * n]
                                .iter()
                                .map(|&y| hex(y, d_width))
                                .collect::<Vec<_>>()
                                .join(" ")
                        ));
                    } else {
                        neg[c] = x.is_sign_negative();
                    }
                }
                nz.observable = neg[filler as usize] && !neg[0];
                if nz.observable {
                    for c in 0..ncodes {
                        if neg[c] {
                            values[c] = -0.0;
                            nz.negative_zero_codes.push(hex(c as u64, w));
                        }
                    }
                    nz.note = format!(
                        "{} of {} zero codes come out -0 with C = -0 and {} fillers",
                        nz.negative_zero_codes.len(),
                        zeros.len(),
                        hex(filler, w)
                    );
                } else {
                    nz.note = format!(
                        "sign of zero not observable: with C = -0 and {} fillers, the filler's own row gave {} and code 0's row gave {}",
                        hex(filler, w),
                        if neg[filler as usize] {
                            "-0"
                        } else {
                            "+0 (or not zero)"
                        },
                        if neg[0] { "-0" } else { "+0" }
                    );
                }
            }
        }
    }

    let shift = fa.value_shift();
    let documented_value_bits = (shift..(shift + fa.elem.value_bits()).min(w)).collect();
    Ok(Sweep {
        table: Table {
            container_bits: w,
            integer,
            values,
            d_bits,
            d_width,
            negative_zero_observable: checks.negative_zero.observable,
            documented_value_bits,
        },
        checks,
        experiments,
        launches,
        wall_s: start.elapsed().as_secs_f64(),
    })
}

/// One row of the decode table: [code, bits, value, d_bits].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableRow(pub u64, pub String, pub Num, pub String);

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub wall_s: f64,
    pub experiments: usize,
    pub launches: usize,
}

/// The `fp4probe.container/1` record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContainerReport {
    pub schema: String,
    pub variant: String,
    pub instruction: String,
    pub backend: crate::device::BackendKind,
    pub a_type: ElemType,
    pub b_type: ElemType,
    pub d_type: ElemType,
    pub container_bits: u32,
    /// "documented (PTX ISA)" or "measured: <path>".
    pub layout: String,
    pub method: String,
    pub provenance: crate::provenance::Provenance,
    pub checks: Checks,
    pub summary: Summary,
    pub timing: Timing,
    /// The columns of each `table` row.
    pub table_columns: [String; 4],
    /// How to read the table.
    pub table_note: String,
    /// The table lives in the CSV beside the JSON (`<stem>.container.csv`), one row per code:
    /// 65536 rows for a 16-bit type would otherwise be stored twice.
    pub table_file: String,
    #[serde(skip)]
    pub table: Vec<TableRow>,
}

impl ContainerReport {
    pub fn new(
        v: &Variant,
        sweep: &Sweep,
        summary: Summary,
        provenance: crate::provenance::Provenance,
        layout: String,
    ) -> Self {
        let t = &sweep.table;
        let w = t.container_bits;
        ContainerReport {
            schema: SCHEMA.into(),
            variant: v.id(),
            instruction: v.opcode(),
            backend: provenance.backend,
            a_type: v.a,
            b_type: v.b,
            d_type: v.d,
            container_bits: w,
            layout,
            method: format!(
                "each A container code alone in its row of A (other A elements: code 0), B = 1 ({}), C = +0; D(i, j) = value(code) for every column j. Coverage: {}. Negative zero: C = -0 with sign-bit-only fillers.",
                hex(v.b.one(), v.fragment(Operand::B).elem.value_bits()),
                sweep.checks.coverage.describe()
            ),
            provenance,
            checks: sweep.checks.clone(),
            summary,
            timing: Timing {
                wall_s: sweep.wall_s,
                experiments: sweep.experiments,
                launches: sweep.launches,
            },
            table_columns: ["code", "bits", "value", "d_bits"].map(String::from),
            table_file: format!("{}.container.csv", v.file_stem()),
            table_note: "d_bits: D of the code's reference placement (row code mod m, k 0; C = +0); value: d_bits decoded, except -0 where the negative-zero check (C = -0) saw a negative zero (its d_bits are +0)".into(),
            table: (0..t.values.len())
                .map(|c| {
                    TableRow(
                        c as u64,
                        hex(c as u64, w),
                        Num(t.values[c]),
                        hex(t.d_bits[c], t.d_width),
                    )
                })
                .collect(),
        }
    }

    /// Pretty JSON with every array of scalars on one line (a table row is one line).
    pub fn to_json(&self) -> String {
        crate::jsonfmt::to_compact_json(self)
    }

    pub fn to_csv(&self) -> Result<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(CSV_HEADER.split(','))?;
        for TableRow(code, bits, value, d) in &self.table {
            w.write_record([&code.to_string(), bits, &fmt_value(value.0), d])?;
        }
        Ok(String::from_utf8(w.into_inner()?)?)
    }

    pub fn load(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let r: ContainerReport = serde_json::from_str(&text)
            .with_context(|| format!("{}: malformed container report", path.display()))?;
        if r.schema != SCHEMA {
            bail!(
                "{}: schema '{}' is not '{SCHEMA}'",
                path.display(),
                r.schema
            );
        }
        let mut r = r;
        let csv_path = path.with_file_name(&r.table_file);
        let mut rdr = csv::Reader::from_path(&csv_path)
            .with_context(|| format!("cannot read the table {}", csv_path.display()))?;
        for (i, rec) in rdr.records().enumerate() {
            let rec = rec.with_context(|| format!("{}: row {}", csv_path.display(), i + 2))?;
            let field = |j: usize| rec.get(j).unwrap_or_default().to_string();
            let bad = |what: &str| anyhow::anyhow!("{}:{}: bad {what}", csv_path.display(), i + 2);
            let code: u64 = field(0).parse().map_err(|_| bad("code"))?;
            let value: Num = serde_json::from_str(&field(2))
                .or_else(|_| serde_json::from_value(serde_json::Value::String(field(2))))
                .map_err(|_| bad("value"))?;
            r.table.push(TableRow(code, field(1), value, field(3)));
        }
        Ok(r)
    }

    /// Write `<dir>/<stem>.container.json` and `.container.csv` as `out` allows; returns the
    /// JSON path.
    pub fn write(
        &self,
        dir: &std::path::Path,
        out: &crate::outfile::Outputs,
    ) -> Result<std::path::PathBuf> {
        out.write_result(
            dir,
            &format!("{}.container", self.variant.replace("::", "_")),
            &(self.to_json() + "\n"),
            Some((CSV_HEADER, &self.to_csv()?)),
            self.backend == crate::device::BackendKind::Emulator,
        )
    }
}
