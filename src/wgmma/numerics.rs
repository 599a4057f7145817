//! Numeric behaviour of wgmma: the experiments of `probe::numerics` (products, alignment,
//! rounding, grouping, subnormals, NaN/Inf, integer overflow) run through one warpgroup's wgmma,
//! plus what an accumulator that lives across instructions raises: how many bits of a product
//! survive next to a larger C, of C next to a larger product, and of C alone; how an addend is
//! cut at the alignment; and integer overflow downwards.
//!
//! Every dot product sits in D(0, 0): A's row 0 and B's column 0 in shared memory (K-major, no
//! swizzle, the probe kernel's packed tiles) or A's row 0 in registers (`rs`), C(0, 0) preloaded
//! with `scale-d` on, every other element zero. Elements are placed by the documented layouts
//! (`model`), which the committed H200 lane maps match slot for slot.

use super::backend::{Batch, Launch, WgBackend};
use super::desc::{Major, Swizzle};
use super::model::{a_reg_coord, d_coord, element_bit_addr};
use super::probe::Setting;
use super::{ASource, THREADS, WgVariant};
use crate::formats::ElemType;
use crate::probe::numerics::{
    Ctx, DotCase, DotRunner, Finding, Numerics, exponents, fmt_value, group_observed, hex,
    mantissa_bits, measure_with, pow2,
};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "fp4probe.wgmma-numerics/1";

/// What the emulator assumes (the label of its results).
pub const EMULATOR_MODEL: &str = "emulator: products exact, summed with C in f64, rounded once \
to D's type to nearest even (s32 wraps, saturates with .satfinite)";

/// Dot products in D(0, 0) of one wgmma per experiment.
pub struct WgDots<'a> {
    backend: &'a dyn WgBackend,
    v: &'a WgVariant,
    launch: Launch,
    /// The A register slot of (row 0, k), for each k (`rs`).
    a_slots: Vec<usize>,
    /// The D (and C) slot of (0, 0).
    d_slot: usize,
}

impl<'a> WgDots<'a> {
    pub fn new(backend: &'a dyn WgBackend, v: &'a WgVariant) -> Result<Self> {
        backend.check_supported(v)?;
        let setting = Setting::packed(v, Swizzle::None, Major::K, Major::K);
        setting.check(v)?;
        let mut launch = setting.launch(v);
        launch.scale_d = true;
        let fa = v.a_frag();
        let mut a_slots = vec![usize::MAX; v.k as usize];
        if v.a_src == ASource::Rs {
            for i in 0..fa.slots() {
                let (r, k) = a_reg_coord(&fa, i);
                if r == 0 {
                    a_slots[k as usize] = i;
                }
            }
        }
        let fd = v.d_frag();
        let d_slot = (0..fd.slots())
            .find(|&i| d_coord(&fd, i) == (0, 0))
            .context("the documented D layout has no (0, 0)")?;
        Ok(WgDots {
            backend,
            v,
            launch,
            a_slots,
            d_slot,
        })
    }
}

/// Write the `bits`-bit `code` at bit address `addr` of `buf` (little-endian bytes).
fn put(buf: &mut [u8], addr: u64, bits: u32, code: u64) {
    let byte = (addr / 8) as usize;
    if bits >= 8 {
        for i in 0..(bits / 8) as usize {
            buf[byte + i] = (code >> (8 * i)) as u8;
        }
    } else {
        let shift = addr % 8;
        let mask = (((1u64 << bits) - 1) << shift) as u8;
        buf[byte] = (buf[byte] & !mask) | (((code << shift) as u8) & mask);
    }
}

impl DotRunner for WgDots<'_> {
    fn types(&self) -> [ElemType; 4] {
        [self.v.a, self.v.b, self.v.d, self.v.d]
    }
    fn k(&self) -> usize {
        self.v.k as usize
    }
    fn xor(&self) -> bool {
        false
    }
    fn dots(&self, cases: &[DotCase]) -> Result<Vec<u64>> {
        let (v, l) = (self.v, &self.launch);
        let t = THREADS as usize;
        let (fa, fd) = (v.a_frag(), v.d_frag());
        let (aw, dw) = (fa.regs as usize, fd.regs as usize);
        let (ab, bb) = (l.a_bytes as usize, l.b_bytes as usize);
        let bits = v.elem_bits();
        let mut batch = Batch::zeroed(v, l, cases.len());
        let (dt, dreg, del) = fd.slot(self.d_slot);
        for (e, (terms, c)) in cases.iter().enumerate() {
            for &(k, a, b) in terms {
                let k = k as u32;
                match v.a_src {
                    ASource::Ss => {
                        let addr =
                            element_bit_addr(l.a_major, &l.a_desc, Swizzle::None, bits, 0, k);
                        put(&mut batch.a[e * ab..(e + 1) * ab], addr, bits, a);
                    }
                    ASource::Rs => {
                        let (th, reg, el) = fa.slot(self.a_slots[k as usize]);
                        let at = (e * t + th as usize) * aw;
                        fa.insert(&mut batch.a_regs[at..at + aw], reg, el, a);
                    }
                }
                let addr = element_bit_addr(l.b_major, &l.b_desc, Swizzle::None, bits, 0, k)
                    - l.b_off as u64 * 8;
                put(&mut batch.b[e * bb..(e + 1) * bb], addr, bits, b);
            }
            let at = (e * t + dt as usize) * dw;
            fd.insert(&mut batch.c[at..at + dw], dreg, del, *c);
        }
        let d = self.backend.run(v, l, &batch)?;
        Ok((0..cases.len())
            .map(|e| {
                let at = (e * t + dt as usize) * dw;
                fd.extract(&d[at..at + dw], dreg, del)
            })
            .collect())
    }
}

/// Bits kept, and whether that is only a lower bound (no loss up to the largest shift the
/// types let the experiment make).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kept {
    pub bits: u32,
    pub is_lower_bound: bool,
}

impl std::fmt::Display for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_lower_bound {
            write!(f, "≥ {}", self.bits)
        } else {
            write!(f, "{}", self.bits)
        }
    }
}

/// The wgmma findings: those of every MMA, then the accumulator's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WgNumerics {
    #[serde(flatten)]
    pub common: Numerics,
    /// Fraction bits of a product that survive next to a larger C (C = 2^E, one product
    /// 2^(E−j)): j up to D's fraction bits can be seen.
    pub product_bits_below_c: Option<Kept>,
    /// The same for C below a larger product (one product 2^E, C = 2^(E−j)).
    pub c_bits_below_product: Option<Kept>,
    /// Fraction bits of C that survive with every product zero (C = 2^E·(1 + 2^−j)).
    pub c_alone_bits: Option<Kept>,
    /// How an addend below the alignment's last kept bit is cut: `rne`, `rtz`, `rd`, `ru`.
    pub alignment_rounding: Option<String>,
    /// Whether addends are cut one by one before they are summed (`each addend`) or small
    /// addends are summed before the cut (`summed first`), from four addends of 0.75 of the
    /// last kept bit's weight.
    pub cut_before_sum: Option<String>,
    /// Integer variants with a signed operand: `wraps` or `saturates` when C + Σ falls below
    /// −2^31.
    pub integer_underflow: Option<String>,
}

/// Run `cases` and find the largest j (from the first case on) up to which D equals `want`;
/// the first miss ends the run. Returns the kept bits (a lower bound when nothing missed and
/// the last j is `ceiling`), the finding's result and observation.
fn sweep(
    ctx: &Ctx,
    js: &[u32],
    cases: &[DotCase],
    want: &[f64],
    ceiling: u32,
) -> Result<(Kept, String, String)> {
    let d = ctx.dots(cases)?;
    let mut kept = 0;
    let mut miss = None;
    for ((&j, &bits), &w) in js.iter().zip(&d).zip(want) {
        let got = ctx.d_value(bits);
        if got == w {
            kept = j;
        } else {
            miss = Some((j, got, bits));
            break;
        }
    }
    let last = *js.last().expect("non-empty");
    let k = Kept {
        bits: kept,
        is_lower_bound: miss.is_none() && last >= ceiling,
    };
    let observed = match miss {
        Some((j, got, bits)) => format!(
            "exact for j ≤ {kept}; at j = {j} D = {} ({})",
            fmt_value(got),
            hex(bits, ctx.td)
        ),
        None => format!("exact for every j ≤ {last}"),
    };
    let result = if k.is_lower_bound {
        format!("{k} (every j D can show)")
    } else {
        k.to_string()
    };
    Ok((k, result, observed))
}

/// The three C experiments, each for j = 1 up to D's fraction bits (beyond them D cannot show
/// the sum): a product below C, C below a product, C alone.
fn c_bits(ctx: &Ctx, out: &mut WgNumerics) -> Result<()> {
    let p = mantissa_bits(ctx.td) as u32;
    let (_, dmin, dmax) = exponents(ctx.td);
    let (_, an, ax) = exponents(ctx.ta);
    let (_, bn, bx) = exponents(ctx.tb);
    let e = (ax + bx).min(dmax - 1);
    let big_c = ctx.code(ctx.tc, pow2(e));
    let big_p = ctx.product_pow2(e);
    let (mut below_c, mut below_p, mut alone) = (Vec::new(), Vec::new(), Vec::new());
    for j in 1..=p {
        let es = e - j as i32;
        if let (Some(c), true, Some((sa, sb))) = (big_c, es >= an + bn, ctx.product_pow2(es)) {
            below_c.push((j, (vec![(0, sa, sb)], c), pow2(e) + pow2(es)));
        }
        if let (Some((ba, bb)), true, Some(c)) = (big_p, es >= dmin, ctx.code(ctx.tc, pow2(es))) {
            below_p.push((j, (vec![(0, ba, bb)], c), pow2(e) + pow2(es)));
        }
        let x = pow2(e) + pow2(es);
        if let Some(c) = ctx.code(ctx.tc, x) {
            alone.push((j, (vec![], c), x));
        }
    }
    type Plan = Vec<(u32, DotCase, f64)>;
    let experiments: [(&str, String, Plan); 3] = [
        (
            "product_bits_below_c",
            format!("C = 2^{e}, k0: 2^({e}−j), other products 0"),
            below_c,
        ),
        (
            "c_bits_below_product",
            format!("k0: 2^{e}, C = 2^({e}−j), other products 0"),
            below_p,
        ),
        (
            "c_alone_bits",
            format!("C = 2^{e}·(1 + 2^−j), every product 0 (A = B = 0, scale-d on)"),
            alone,
        ),
    ];
    for (name, what, plan) in experiments {
        if plan.is_empty() {
            continue;
        }
        let js: Vec<u32> = plan.iter().map(|x| x.0).collect();
        let cases: Vec<DotCase> = plan.iter().map(|x| x.1.clone()).collect();
        let want: Vec<f64> = plan.iter().map(|x| x.2).collect();
        let (kept, result, observed) = sweep(ctx, &js, &cases, &want, p)?;
        match name {
            "product_bits_below_c" => out.product_bits_below_c = Some(kept),
            "c_bits_below_product" => out.c_bits_below_product = Some(kept),
            _ => out.c_alone_bits = Some(kept),
        }
        out.common.findings.push(Finding {
            name: name.into(),
            result,
            experiment: format!("{what}, for j = 1..{}", js.last().expect("non-empty")),
            observed,
        });
    }
    Ok(())
}

/// F (fraction bits after alignment) where it was measured (not only bounded), with the
/// largest product exponent E the types allow within D's range and D's least normal exponent.
fn measured_width(ctx: &Ctx, n: &Numerics) -> Option<(i32, i32, i32)> {
    let f = n
        .fraction_bits_after_alignment
        .filter(|_| !n.fraction_bits_is_lower_bound)?;
    let (_, dmin, dmax) = exponents(ctx.td);
    let (_, _, ax) = exponents(ctx.ta);
    let (_, _, bx) = exponents(ctx.tb);
    Some((f as i32, (ax + bx).min(dmax - 1), dmin))
}

/// How an addend is cut at the alignment: k0: ±2^E, k1: ±1.5·2^(E−F−1), k2: ∓2^E, where F is
/// the measured fraction bits after alignment. The big terms cancel exactly, so D shows what
/// became of 0.75 of the last kept bit's weight 2^(E−F): 0 (cut toward zero), 2^(E−F) (to
/// nearest), or one of each by sign (toward −∞ or +∞).
fn alignment_rounding(ctx: &Ctx, out: &mut WgNumerics) -> Result<()> {
    let Some((f, e, dmin)) = measured_width(ctx, &out.common) else {
        return Ok(());
    };
    let es = e - f - 1;
    if e - f < dmin {
        return Ok(());
    }
    let Some((ba, bb)) = ctx.product_pow2(e) else {
        return Ok(());
    };
    let Some((sa, sb)) = ctx.product_1p5_pow2(es) else {
        return Ok(());
    };
    let (Some(nba), Some(nsa)) = (ctx.neg(ctx.ta, ba), ctx.neg(ctx.ta, sa)) else {
        return Ok(());
    };
    let z = ctx.zero_c();
    let d = ctx.dots(&[
        (vec![(0, ba, bb), (1, sa, sb), (2, nba, bb)], z),
        (vec![(0, nba, bb), (1, nsa, sb), (2, ba, bb)], z),
    ])?;
    let (pos, neg) = (ctx.d_value(d[0]), ctx.d_value(d[1]));
    let unit = pow2(e - f);
    let mode = match (pos == unit, pos == 0.0, neg == -unit, neg == 0.0) {
        (true, _, true, _) => Some("rne"),
        (_, true, _, true) => Some("rtz"),
        (_, true, true, _) => Some("rd"),
        (true, _, _, true) => Some("ru"),
        _ => None,
    };
    out.alignment_rounding = mode.map(str::to_string);
    out.common.findings.push(Finding {
        name: "alignment_rounding".into(),
        result: mode.unwrap_or("unclassified").into(),
        experiment: format!(
            "k0: ±2^{e}, k1: ±1.5·2^{es}, k2: ∓2^{e} (F = {f}: the exact sum ±0.75·2^{} lies \
             between 0 and the last kept bit's weight)",
            e - f
        ),
        observed: format!("D = {} and {}", fmt_value(pos), fmt_value(neg)),
    });
    // Four such addends: cut one by one they give 0 (toward zero) or 4 units (to nearest);
    // summed before the cut, 3 units.
    if ctx.k() >= 6 {
        let mut terms = vec![(0, ba, bb)];
        terms.extend((1..=4).map(|k| (k, sa, sb)));
        terms.push((5, nba, bb));
        let got = ctx.d_value(ctx.dots(&[(terms, z)])?[0]);
        let verdict = if got == 0.0 {
            "each addend cut toward zero"
        } else if got == 4.0 * unit {
            "each addend rounded to nearest"
        } else if got == 3.0 * unit {
            "summed first"
        } else {
            "other"
        };
        out.cut_before_sum = Some(verdict.into());
        out.common.findings.push(Finding {
            name: "cut_before_sum".into(),
            result: verdict.into(),
            experiment: format!(
                "k0: 2^{e}, k1..k4: 1.5·2^{es} each, k5: −2^{e}, C = 0 (exact sum 3·2^{}; \
                 each addend cut toward zero: 0, to nearest: 4·2^{})",
                e - f,
                e - f
            ),
            observed: format!("D = {}", fmt_value(got)),
        });
    }
    Ok(())
}

/// Which k share a rounding group with k = 0, where F (fraction bits after alignment) was
/// measured: k0: 2^E, k1: −2^E, kj: 2^(E−F−1). In k0's group the small term is aligned to 2^E
/// and cut (D = 0, or 2^(E−F) rounded up); in a later group it meets the zero running sum and
/// stays (D = 2^(E−F−1)). This sees a boundary even when the running sum is cut to F bits like
/// an addend, which the mma.sync designs (`probe::numerics`) cannot; its finding replaces
/// theirs. k1 is taken to share k0's group.
fn groups(ctx: &Ctx, out: &mut WgNumerics) -> Result<()> {
    let Some((f, e, dmin)) = measured_width(ctx, &out.common) else {
        return Ok(());
    };
    let es = e - f - 1;
    let k = ctx.k();
    let (Some((ba, bb)), Some((sa, sb))) = (ctx.product_pow2(e), ctx.product_pow2(es)) else {
        return Ok(());
    };
    let Some(nba) = ctx.neg(ctx.ta, ba) else {
        return Ok(());
    };
    if es < dmin || k < 3 {
        return Ok(());
    }
    let z = ctx.zero_c();
    let cases: Vec<DotCase> = (2..k)
        .map(|j| (vec![(0, ba, bb), (1, nba, bb), (j, sa, sb)], z))
        .collect();
    let d = ctx.dots(&cases)?;
    let mut members: Vec<u32> = vec![0, 1];
    let mut odd = Vec::new();
    for (j, &bits) in (2..k).zip(&d) {
        let got = ctx.d_value(bits);
        if got == 0.0 || got == pow2(e - f) {
            members.push(j as u32);
        } else if got != pow2(es) {
            odd.push((j, got));
        }
    }
    let c = &mut out.common;
    c.findings.retain(|x| x.name != "terms_per_rounding");
    c.terms_per_rounding = Some(members.len() as u32);
    c.findings.push(Finding {
        name: "terms_per_rounding".into(),
        result: members.len().to_string(),
        experiment: format!(
            "k0: 2^{e}, k1: −2^{e}, kj: 2^{es} (F = {f}), C = 0, for j = 2..{}: 0 when kj is \
             aligned with k0, 2^{es} when it comes in a later group",
            k - 1
        ),
        observed: group_observed(&members, &odd),
    });
    c.rounding_group = Some(members);
    Ok(())
}

/// Integer variants with a signed operand: C = −2^31 and one product −1.
fn integer_underflow(ctx: &Ctx, out: &mut WgNumerics) -> Result<()> {
    let signed = |t: ElemType| t == ElemType::S8;
    let (a, b) = if signed(ctx.ta) {
        (-1.0, 1.0)
    } else if signed(ctx.tb) {
        (1.0, -1.0)
    } else {
        return Ok(());
    };
    let (Some(ac), Some(bc), Some(c)) = (
        ctx.code(ctx.ta, a),
        ctx.code(ctx.tb, b),
        ctx.code(ctx.tc, i32::MIN as f64),
    ) else {
        return Ok(());
    };
    let got = ctx.dots(&[(vec![(0, ac, bc)], c)])?[0] as u32 as i32;
    let verdict = match got {
        i32::MAX => "wraps",
        i32::MIN => "saturates",
        _ => "other",
    };
    out.integer_underflow = Some(verdict.into());
    out.common.findings.push(Finding {
        name: "integer_underflow".into(),
        result: verdict.into(),
        experiment: format!("C = −2^31, one term a = {a}, b = {b}"),
        observed: format!("D = {got}"),
    });
    Ok(())
}

/// Measure everything for one dense wgmma variant.
pub fn measure(backend: &dyn WgBackend, v: &WgVariant) -> Result<WgNumerics> {
    let runner = WgDots::new(backend, v)?;
    let mut out = WgNumerics {
        common: measure_with(&runner)?,
        ..Default::default()
    };
    let ctx = Ctx::new(&runner);
    if ctx.ta.is_float() {
        groups(&ctx, &mut out)?;
        c_bits(&ctx, &mut out)?;
        alignment_rounding(&ctx, &mut out)?;
    } else {
        integer_underflow(&ctx, &mut out)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wgmma::arith::{Accumulation, Rounding};
    use crate::wgmma::emulator::WgEmulator;
    use crate::wgmma::find;

    #[test]
    fn the_documented_model_is_exact_with_one_rounding() {
        let emu = WgEmulator::new();
        let v = find("m64n8k32.f32.e4m3.e4m3.ss").unwrap();
        let n = measure(&emu, &v).unwrap();
        assert_eq!(n.common.products_exact, Some(true));
        assert!(n.common.fraction_bits_is_lower_bound, "{n:#?}");
        assert_eq!(n.common.accumulation_rounding.as_deref(), Some("rne"));
        let full = Some(Kept {
            bits: 23,
            is_lower_bound: true,
        });
        assert_eq!(n.product_bits_below_c, full);
        assert_eq!(n.c_bits_below_product, full);
        assert_eq!(n.c_alone_bits, full);
        assert_eq!(n.common.subnormal_inputs.as_deref(), Some("kept"));
    }

    /// A model that keeps 13 fraction bits and truncates, C included in the alignment: the
    /// experiments name the width and the rounding from D alone, A from shared memory or from
    /// registers.
    #[test]
    fn a_configured_accumulation_is_recovered() {
        let emu = WgEmulator::with_accumulation(Accumulation::new(
            13,
            Rounding::TowardZero,
            Rounding::TowardZero,
            32,
        ));
        for id in ["m64n8k32.f32.e4m3.e4m3.ss", "m64n16k32.f32.e5m2.e4m3.rs"] {
            let v = find(id).unwrap();
            let n = measure(&emu, &v).unwrap();
            let c = &n.common;
            assert_eq!(c.fraction_bits_after_alignment, Some(13), "{id}: {n:#?}");
            assert!(!c.fraction_bits_is_lower_bound);
            assert_eq!(c.accumulation_rounding.as_deref(), Some("rtz"), "{id}");
            assert_eq!(n.alignment_rounding.as_deref(), Some("rtz"), "{id}");
            assert_eq!(
                n.cut_before_sum.as_deref(),
                Some("each addend cut toward zero"),
                "{id}"
            );
            let kept = Some(Kept {
                bits: 13,
                is_lower_bound: false,
            });
            assert_eq!(n.product_bits_below_c, kept, "{id}");
            assert_eq!(n.c_bits_below_product, kept, "{id}");
            assert_eq!(n.c_alone_bits, kept, "{id}");
            assert_eq!(c.terms_per_rounding, Some(32), "{id}");
        }
        // Groups of 8 k: the running sum is cut like an addend, and the boundary still shows.
        let emu = WgEmulator::with_accumulation(Accumulation::new(
            13,
            Rounding::TowardZero,
            Rounding::TowardZero,
            8,
        ));
        let n = measure(&emu, &find("m64n8k32.f32.e4m3.e4m3.rs").unwrap()).unwrap();
        assert_eq!(n.common.terms_per_rounding, Some(8), "{n:#?}");
        assert_eq!(n.common.rounding_group, Some((0..8).collect()));
        // Rounding to nearest at the alignment, 11 bits, an f16 accumulator rounded toward
        // zero: F < D's 10 + 2, so the rounding experiment reads the alignment's rounding.
        let emu = WgEmulator::with_accumulation(Accumulation::new(
            11,
            Rounding::Nearest,
            Rounding::TowardZero,
            16,
        ));
        let v = find("m64n8k16.f16.f16.f16.ss").unwrap();
        let n = measure(&emu, &v).unwrap();
        assert_eq!(n.common.fraction_bits_after_alignment, Some(11), "{n:#?}");
        assert_eq!(n.alignment_rounding.as_deref(), Some("rne"));
        // 14 bits: the rounding experiment reads the f16 output's rounding.
        let emu = WgEmulator::with_accumulation(Accumulation::new(
            14,
            Rounding::Nearest,
            Rounding::TowardZero,
            16,
        ));
        let n = measure(&emu, &v).unwrap();
        assert_eq!(n.common.fraction_bits_after_alignment, Some(14), "{n:#?}");
        assert_eq!(n.common.accumulation_rounding.as_deref(), Some("rtz"));
        assert_eq!(n.alignment_rounding.as_deref(), Some("rne"));
    }

    /// The FP8 model that random dot products on the H200 pin down (`Accumulation::FP8_F32`)
    /// gives every finding `reports/sm_90/wgmma/numerics.md` lists for FP8 into f32: the two
    /// measurements agree.
    #[test]
    fn the_fp8_model_gives_the_measured_findings() {
        let emu = WgEmulator::with_accumulation(Accumulation::FP8_F32);
        let v = find("m64n8k32.f32.e4m3.e4m3.ss").unwrap();
        let n = measure(&emu, &v).unwrap();
        let c = &n.common;
        assert_eq!(c.fraction_bits_after_alignment, Some(13), "{n:#?}");
        assert_eq!(c.accumulation_rounding.as_deref(), Some("rtz"));
        assert_eq!(n.alignment_rounding.as_deref(), Some("rtz"));
        assert_eq!(
            n.cut_before_sum.as_deref(),
            Some("each addend cut toward zero")
        );
        assert_eq!(c.terms_per_rounding, Some(32));
        let kept = Some(Kept {
            bits: 13,
            is_lower_bound: false,
        });
        assert_eq!(n.product_bits_below_c, kept);
        assert_eq!(n.c_bits_below_product, kept);
        assert_eq!(n.c_alone_bits, kept);
    }

    #[test]
    fn integer_overflow_both_ways() {
        let emu = WgEmulator::new();
        let n = measure(&emu, &find("m64n8k32.s32.s8.u8.ss").unwrap()).unwrap();
        assert_eq!(n.common.integer_overflow.as_deref(), Some("wraps"));
        assert_eq!(n.integer_underflow.as_deref(), Some("wraps"));
        let n = measure(&emu, &find("m64n8k32.satfinite.s32.u8.s8.rs").unwrap()).unwrap();
        assert_eq!(n.common.integer_overflow.as_deref(), Some("saturates"));
        assert_eq!(n.integer_underflow.as_deref(), Some("saturates"));
        let n = measure(&emu, &find("m64n8k256.s32.b1.b1.and.popc.ss").unwrap()).unwrap();
        assert_eq!(n.common.integer_overflow.as_deref(), Some("wraps"));
        assert_eq!(n.integer_underflow, None);
    }
}
