//! Numeric behaviour of an MMA, measured with designed inputs in D(0, 0): whether products are
//! exact, how many fraction bits survive alignment to the largest addend, how the sum is
//! rounded, how many k terms are summed exactly before a rounding, subnormals, NaN and Inf.
//!
//! Every finding records the experiment that shows it (inputs as values, the observed D) so a
//! reader can check the reasoning. All inputs are powers of two or short mantissas that are
//! exact in their types; expected results are computed exactly in f64.

use super::dense::{Dense, run};
use crate::device::Backend;
use crate::formats::ElemType;
use crate::gemm::round_to;
use crate::isa::{Operand, Variant};
use crate::layout::Layout;
use anyhow::Result;
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "fp4probe.numerics/1";

/// One term of a dot product in D(0, 0): (k, a code, b code).
pub type Term = (usize, u64, u64);
/// A dot product: its terms and the code of C(0, 0).
pub type DotCase = (Vec<Term>, u64);
/// Tells from D(0, 0) whether k = j shared a group with k = 0 (None: unexplained value).
type GroupTest = Box<dyn Fn(f64) -> Option<bool>>;

/// One finding and its evidence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub name: String,
    pub result: String,
    /// What was run: the terms of the dot product in D(0, 0) and C.
    pub experiment: String,
    /// What came back.
    pub observed: String,
}

/// Per-variant results; field names as the issue asks, `None` where a question does not apply
/// (integer variants) or could not be asked (the input range is too narrow).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Numerics {
    pub products_exact: Option<bool>,
    /// Fraction bits kept below the largest addend's leading bit, counted like fp32's 23.
    pub fraction_bits_after_alignment: Option<u32>,
    /// True when no loss was seen up to the largest shift the input types allow.
    pub fraction_bits_is_lower_bound: bool,
    /// `rne`, `rtz`, `rd` or `ru`.
    pub accumulation_rounding: Option<String>,
    /// k terms summed before a rounding (the size of the group holding k = 0 and 1).
    pub terms_per_rounding: Option<u32>,
    /// The k labels of that group (fragment-map convention).
    pub rounding_group: Option<Vec<u32>>,
    pub subnormal_inputs: Option<String>,
    pub subnormal_outputs: Option<String>,
    /// Bits of D when a NaN enters (hex).
    pub nan_output_bits: Option<String>,
    /// Integer variants: `wraps` or `saturates` when C + Σ overflows s32.
    pub integer_overflow: Option<String>,
    pub findings: Vec<Finding>,
}

/// What runs the experiments: one instruction per dot product, the product in D(0, 0), every
/// other element zero. The mma.sync runner places elements by a lane map; the wgmma one
/// (`wgmma::numerics`) through shared memory or registers of a warpgroup.
pub trait DotRunner {
    /// A, B, C and D element types.
    fn types(&self) -> [ElemType; 4];
    /// K of one instruction.
    fn k(&self) -> usize;
    /// b1 with XOR (a 1 against a 0 counts); false for AND and for every other type.
    fn xor(&self) -> bool;
    /// D(0, 0)'s bits for each case, in one launch.
    fn dots(&self, cases: &[DotCase]) -> Result<Vec<u64>>;
}

/// mma.sync: [`Dense`] experiments placed by `layout`.
struct MmaDots<'a> {
    backend: &'a dyn Backend,
    v: &'a Variant,
    layout: &'a Layout,
}

impl DotRunner for MmaDots<'_> {
    fn types(&self) -> [ElemType; 4] {
        [Operand::A, Operand::B, Operand::C, Operand::D].map(|op| self.v.fragment(op).elem)
    }
    fn k(&self) -> usize {
        self.v.shape.k as usize
    }
    fn xor(&self) -> bool {
        self.v.bitop == Some(crate::isa::BitOp::Xor)
    }
    fn dots(&self, cases: &[DotCase]) -> Result<Vec<u64>> {
        let dense: Vec<Dense> = cases
            .iter()
            .map(|(t, c)| Dense::dot(self.v, t, *c))
            .collect();
        Ok(run(self.backend, self.v, self.layout, &dense)?
            .into_iter()
            .map(|d| d[0])
            .collect())
    }
}

/// An experiment's context: the runner and the operand types.
pub struct Ctx<'a> {
    runner: &'a dyn DotRunner,
    pub ta: ElemType,
    pub tb: ElemType,
    pub tc: ElemType,
    pub td: ElemType,
}

/// Exponent ranges of normal and subnormal powers of two in a type (min subnormal, min normal,
/// max) — the values designed inputs are built from.
pub fn exponents(t: ElemType) -> (i32, i32, i32) {
    match t {
        ElemType::F16 => (-24, -14, 15),
        ElemType::Bf16 => (-133, -126, 127),
        ElemType::Tf32 => (-136, -126, 127),
        ElemType::F32 => (-149, -126, 127),
        ElemType::F64 => (-1074, -1022, 1023),
        ElemType::E4m3 => (-9, -6, 8),
        ElemType::E5m2 => (-16, -14, 15),
        ElemType::E3m2 => (-4, -2, 4),
        ElemType::E2m3 => (-3, 0, 2),
        ElemType::E2m1 => (-1, 0, 2),
        _ => (0, 0, 0),
    }
}

/// Fraction bits of a float type (mantissa width).
pub fn mantissa_bits(t: ElemType) -> i32 {
    match t {
        ElemType::F16 | ElemType::Tf32 => 10,
        ElemType::Bf16 => 7,
        ElemType::F32 => 23,
        ElemType::F64 => 52,
        ElemType::E4m3 | ElemType::E2m3 => 3,
        ElemType::E5m2 | ElemType::E3m2 => 2,
        ElemType::E2m1 => 1,
        _ => 0,
    }
}

/// 2^e exactly, subnormals included (`powi` underflows to 0 below about 2^-1023).
pub fn pow2(e: i32) -> f64 {
    match e {
        -1022..=1023 => f64::from_bits(((e + 1023) as u64) << 52),
        -1074..=-1023 => f64::from_bits(1u64 << (e + 1074)),
        _ if e < 0 => 0.0,
        _ => f64::INFINITY,
    }
}

impl<'a> Ctx<'a> {
    pub fn new(runner: &'a dyn DotRunner) -> Self {
        let [ta, tb, tc, td] = runner.types();
        Ctx {
            runner,
            ta,
            tb,
            tc,
            td,
        }
    }
    pub fn code(&self, t: ElemType, x: f64) -> Option<u64> {
        t.encode_exact(x)
    }
    pub fn d_value(&self, bits: u64) -> f64 {
        self.td.decode(bits)
    }
    /// K of one instruction.
    pub fn k(&self) -> usize {
        self.runner.k()
    }
    /// Run dot products in D(0,0) and return D(0,0)'s bits for each.
    pub fn dots(&self, cases: &[DotCase]) -> Result<Vec<u64>> {
        self.runner.dots(cases)
    }
    /// A product 2^e as (a, b) codes, both normal: the pair with the largest a.
    pub fn product_pow2(&self, e: i32) -> Option<(u64, u64)> {
        let (_, an, ax) = exponents(self.ta);
        let (_, bn, bx) = exponents(self.tb);
        (an..=ax).rev().find_map(|x| {
            let y = e - x;
            (bn..=bx)
                .contains(&y)
                .then(|| Some((self.code(self.ta, pow2(x))?, self.code(self.tb, pow2(y))?)))
                .flatten()
        })
    }
    /// A product 1.5·2^e as (a, b) codes: 1.5·2^x in A (one mantissa bit), the largest such
    /// x, times 2^(e − x) in B.
    pub fn product_1p5_pow2(&self, e: i32) -> Option<(u64, u64)> {
        let (_, an, ax) = exponents(self.ta);
        let (_, bn, bx) = exponents(self.tb);
        (an..ax).rev().find_map(|x| {
            let y = e - x;
            if !(bn..=bx).contains(&y) {
                return None;
            }
            Some((
                self.code(self.ta, 1.5 * pow2(x))?,
                self.code(self.tb, pow2(y))?,
            ))
        })
    }
    pub fn neg(&self, t: ElemType, code: u64) -> Option<u64> {
        self.code(t, -t.decode(code))
    }
    pub fn zero_c(&self) -> u64 {
        self.code(self.tc, 0.0).expect("zero")
    }
}

pub fn hex(bits: u64, t: ElemType) -> String {
    let digits = (t.value_bits() as usize).div_ceil(4);
    format!("0x{bits:0digits$x}")
}

pub fn fmt_value(x: f64) -> String {
    if x != 0.0 && x.is_finite() && x.abs() == pow2(x.abs().log2().round() as i32) {
        format!(
            "{}2^{}",
            if x < 0.0 { "-" } else { "" },
            x.abs().log2().round() as i32
        )
    } else {
        format!("{x:e}")
    }
}

/// Measure everything for one mma.sync variant.
pub fn measure(backend: &dyn Backend, v: &Variant, layout: &Layout) -> Result<Numerics> {
    measure_with(&MmaDots { backend, v, layout })
}

/// Measure everything through any runner: every finding of [`Numerics`].
pub fn measure_with(runner: &dyn DotRunner) -> Result<Numerics> {
    let ctx = Ctx::new(runner);
    if !ctx.ta.is_float() {
        return integer(&ctx);
    }
    let mut out = Numerics::default();
    products(&ctx, &mut out)?;
    alignment(&ctx, &mut out)?;
    rounding(&ctx, &mut out)?;
    group(&ctx, &mut out)?;
    subnormals(&ctx, &mut out)?;
    nan_inf(&ctx, &mut out)?;
    Ok(out)
}

/// Products exact: the largest mantissas (just below 2) squared. If the exact product fits the
/// D type, D must equal it; otherwise C = −RN_D(a·b) and D must be the residual a·b − RN_D(a·b),
/// which is zero if the product was rounded to D's precision before the addition.
fn products(ctx: &Ctx, out: &mut Numerics) -> Result<()> {
    let a = 2.0 - pow2(-mantissa_bits(ctx.ta));
    let b = 2.0 - pow2(-mantissa_bits(ctx.tb));
    let (Some(ac), Some(bc)) = (ctx.code(ctx.ta, a), ctx.code(ctx.tb, b)) else {
        return Ok(());
    };
    let p = a * b;
    let p_lo = a.mul_add(b, -p); // exact residual of the f64 product (for f64 inputs)
    let rounded = ctx.td.decode(round_to(ctx.td, p, false));
    let (c, expect, how) = if rounded == p && p_lo == 0.0 {
        (
            ctx.zero_c(),
            p,
            "D = a·b alone; the exact product fits D".to_string(),
        )
    } else {
        let c = -rounded;
        let residual = (p - rounded) + p_lo;
        match ctx.code(ctx.tc, c) {
            Some(cc) => (
                cc,
                ctx.td.decode(round_to(ctx.td, residual, false)),
                format!("C = −RN(a·b) = {c:e}; exact product leaves {residual:e}"),
            ),
            None => return Ok(()),
        }
    };
    let d = ctx.dots(&[(vec![(0, ac, bc)], c)])?[0];
    let got = ctx.d_value(d);
    out.products_exact = Some(got == expect);
    out.findings.push(Finding {
        name: "products_exact".into(),
        result: (got == expect).to_string(),
        experiment: format!("a = {a} ({}), b = {b} ({}); {how}", ctx.ta, ctx.tb),
        observed: format!("D = {got:e} (expected {expect:e} if exact)"),
    });
    Ok(())
}

/// Largest addend 2^E at k=0, 2^(E−j) at k=1, −2^E at k=2: exact summation gives 2^(E−j); a
/// unit that aligns to the largest addend and keeps F fraction bits loses it once j > F.
fn alignment(ctx: &Ctx, out: &mut Numerics) -> Result<()> {
    let (_, dmin_norm, dmax) = exponents(ctx.td);
    let (_, an, ax) = exponents(ctx.ta);
    let (_, bn, bx) = exponents(ctx.tb);
    let e_big = (ax + bx).min(dmax - 1);
    let mut cases = Vec::new();
    let mut js = Vec::new();
    let Some((ba, bb)) = ctx.product_pow2(e_big) else {
        return Ok(());
    };
    let Some(nba) = ctx.neg(ctx.ta, ba) else {
        return Ok(());
    };
    for j in 1..=80 {
        let e_small = e_big - j;
        if e_small < an + bn || e_small < dmin_norm {
            break;
        }
        let Some((sa, sb)) = ctx.product_pow2(e_small) else {
            continue;
        };
        cases.push((vec![(0, ba, bb), (1, sa, sb), (2, nba, bb)], ctx.zero_c()));
        js.push(j);
    }
    if cases.is_empty() {
        return Ok(());
    }
    let d = ctx.dots(&cases)?;
    let mut kept = 0;
    let mut first_loss = None;
    for (&j, &bits) in js.iter().zip(&d) {
        let got = ctx.d_value(bits);
        if got == pow2(e_big - j) && first_loss.is_none() {
            kept = j;
        } else if first_loss.is_none() {
            first_loss = Some((j, got));
        }
    }
    let last = *js.last().expect("non-empty");
    out.fraction_bits_after_alignment = Some(kept as u32);
    out.fraction_bits_is_lower_bound = first_loss.is_none();
    out.findings.push(Finding {
        name: "fraction_bits_after_alignment".into(),
        result: if first_loss.is_none() {
            format!("≥ {kept} (no loss up to the largest shift the inputs allow)")
        } else {
            kept.to_string()
        },
        experiment: format!(
            "k0: 2^{e_big}, k1: 2^({e_big}−j), k2: −2^{e_big}, C = 0, for j = 1..{last}"
        ),
        observed: match first_loss {
            Some((j, got)) => format!(
                "2^({e_big}−j) survives exactly for j ≤ {kept}; at j = {j} D = {}",
                fmt_value(got)
            ),
            None => format!("2^({e_big}−j) survives for every j ≤ {last}"),
        },
    });
    Ok(())
}

/// Rounding: ±(2^E + 0.75 ulp) as two terms, 2^E and one product 1.5·2^(E−b−1), where b is
/// the precision that decides the result (D's fraction bits when the unit keeps more, else the
/// alignment's F). One rounding of the exact sum gives: RNE up / away(neg), RTZ down / toward,
/// RD down / away, RU up / toward.
fn rounding(ctx: &Ctx, out: &mut Numerics) -> Result<()> {
    let p_d = mantissa_bits(ctx.td);
    let bits = match out.fraction_bits_after_alignment.map(|f| f as i32) {
        Some(f) if out.fraction_bits_is_lower_bound || f >= p_d + 2 => p_d,
        Some(f) => f,
        None => p_d,
    };
    let (_, _, dmax) = exponents(ctx.td);
    let (_, _, ax) = exponents(ctx.ta);
    let (_, _, bx) = exponents(ctx.tb);
    let e = (ax + bx).min(dmax - 1);
    let es = e - bits - 1;
    let Some((ba, bb)) = ctx.product_pow2(e) else {
        return Ok(());
    };
    let Some((sa, sb)) = ctx.product_1p5_pow2(es) else {
        return Ok(());
    };
    let neg = |c: u64| ctx.neg(ctx.ta, c);
    let (Some(nba), Some(nsa)) = (neg(ba), neg(sa)) else {
        return Ok(());
    };
    let z = ctx.zero_c();
    let d = ctx.dots(&[
        (vec![(0, ba, bb), (1, sa, sb)], z),
        (vec![(0, nba, bb), (1, nsa, sb)], z),
    ])?;
    let (pos, negv) = (ctx.d_value(d[0]), ctx.d_value(d[1]));
    let big = pow2(e);
    let ulp = pow2(e - bits);
    let up = pos == big + ulp;
    let down = pos == big;
    let neg_away = negv == -(big + ulp);
    let neg_toward = negv == -big;
    let mode = match (up, down, neg_away, neg_toward) {
        (true, _, true, _) => Some("rne"),
        (_, true, _, true) => Some("rtz"),
        (_, true, true, _) => Some("rd"),
        (true, _, _, true) => Some("ru"),
        _ => None,
    };
    out.accumulation_rounding = mode.map(str::to_string);
    out.findings.push(Finding {
        name: "accumulation_rounding".into(),
        result: mode.unwrap_or("unclassified").into(),
        experiment: format!(
            "k0: ±2^{e}, k1: ±1.5·2^{es} (exact sum ±2^{e}·(1 + 0.75·2^-{bits}), between two values {bits} fraction bits apart)"
        ),
        observed: format!(
            "D = {} and {} (2^{e} + ulp = {}, ulp = 2^{})",
            fmt_value_full(pos),
            fmt_value_full(negv),
            fmt_value_full(big + ulp),
            e - bits
        ),
    });
    Ok(())
}

fn fmt_value_full(x: f64) -> String {
    format!("{x:.17e}")
}

/// Terms per rounding: which k are summed in one exact group with k = 0. Two designs, chosen
/// by the measured F (fraction bits kept after alignment) against D's fraction bits p:
/// - F ≥ p + 1: k0 = +2^E, k1 = 2^(E−p−1), kj = −2^E. In one group the small term survives
///   alignment and the big ones cancel exactly: D = 2^(E−p−1). If kj is in a later group, the
///   partial sum 2^E + 2^(E−p−1) is rounded to p bits first and the small term is lost: D = 0.
/// - F ≤ p − 1: k0 = 2^(E−F−1) alone, kj = 2^E. In one group the small term is aligned to
///   2^E and dropped: D = 2^E. In different groups both partial sums are exact and their sum
///   2^E + 2^(E−F−1) fits D: that is what D shows.
fn group(ctx: &Ctx, out: &mut Numerics) -> Result<()> {
    let k = ctx.k();
    let Some(f) = out.fraction_bits_after_alignment.map(|f| f as i32) else {
        return Ok(());
    };
    if out.fraction_bits_is_lower_bound {
        out.terms_per_rounding = Some(k as u32);
        out.rounding_group = Some((0..k as u32).collect());
        out.findings.push(Finding {
            name: "terms_per_rounding".into(),
            result: format!("{k} (no alignment loss was observable, so no group boundary either)"),
            experiment: "follows from fraction_bits_after_alignment".into(),
            observed: "-".into(),
        });
        return Ok(());
    }
    let p = mantissa_bits(ctx.td);
    let (_, dmin_norm, dmax) = exponents(ctx.td);
    let (_, _, ax) = exponents(ctx.ta);
    let (_, _, bx) = exponents(ctx.tb);
    let e = (ax + bx).min(dmax - 1);
    let z = ctx.zero_c();
    let (cases, same_group, experiment): (Vec<DotCase>, GroupTest, String) = if f > p {
        let es = e - p - 1;
        let (Some((ba, bb)), Some((sa, sb))) = (ctx.product_pow2(e), ctx.product_pow2(es)) else {
            return Ok(());
        };
        let Some(nba) = ctx.neg(ctx.ta, ba) else {
            return Ok(());
        };
        let cases = (1..k)
            .map(|j| {
                if j == 1 {
                    (vec![(0, ba, bb), (1, sa, sb)], z)
                } else {
                    (vec![(0, ba, bb), (1, sa, sb), (j, nba, bb)], z)
                }
            })
            .collect();
        let small = pow2(es);
        (
            cases,
            Box::new(move |d: f64| {
                if d == small {
                    Some(true)
                } else if d == 0.0 {
                    Some(false)
                } else {
                    None
                }
            }),
            format!("k0: 2^{e}, k1: 2^{es}, kj: −2^{e} (F = {f} > {p} = D's fraction bits)"),
        )
    } else if f < p {
        let es = e - f - 1;
        if es < dmin_norm {
            return Ok(());
        }
        let (Some((ba, bb)), Some((sa, sb))) = (ctx.product_pow2(e), ctx.product_pow2(es)) else {
            return Ok(());
        };
        let cases = (1..k)
            .map(|j| (vec![(0, sa, sb), (j, ba, bb)], z))
            .collect();
        let (big, small) = (pow2(e), pow2(es));
        (
            cases,
            Box::new(move |d: f64| {
                if d == big {
                    Some(true)
                } else if d == big + small {
                    Some(false)
                } else {
                    None
                }
            }),
            format!("k0: 2^{es}, kj: 2^{e} (F = {f} < {p} = D's fraction bits)"),
        )
    } else {
        out.findings.push(Finding {
            name: "terms_per_rounding".into(),
            result: "not measurable".into(),
            experiment: format!("F = {f} equals D's fraction bits: neither design separates in-group from cross-group sums"),
            observed: "-".into(),
        });
        return Ok(());
    };
    let d = ctx.dots(&cases)?;
    let mut members: Vec<u32> = vec![0];
    let mut odd = Vec::new();
    for (j, &bits) in (1..k).zip(&d) {
        if j == 1 && f > p {
            // k1 carries the small term itself: check it survives alignment next to 2^E.
            members.push(1);
            continue;
        }
        match same_group(ctx.d_value(bits)) {
            Some(true) => members.push(j as u32),
            Some(false) => {}
            None => odd.push((j, ctx.d_value(bits))),
        }
    }
    out.terms_per_rounding = Some(members.len() as u32);
    out.findings.push(Finding {
        name: "terms_per_rounding".into(),
        result: members.len().to_string(),
        experiment: format!("{experiment}, for j = 1..{}", k - 1),
        observed: group_observed(&members, &odd),
    });
    out.rounding_group = Some(members);
    Ok(())
}

/// What a group experiment saw: the k summed with k = 0, and any D no design explains.
pub fn group_observed(members: &[u32], odd: &[(usize, f64)]) -> String {
    if odd.is_empty() {
        format!("k summed in one group with k = 0: {members:?}")
    } else {
        format!("k summed with k = 0: {members:?}; unexplained D at (j, D) = {odd:?}")
    }
}

/// Subnormal inputs: the smallest subnormal of A times a power of two of B that lands the
/// product in D's normal range. Subnormal outputs: a product of normal inputs in D's subnormal
/// range, or (when no product can reach it) a subnormal C passed through with zero products.
fn subnormals(ctx: &Ctx, out: &mut Numerics) -> Result<()> {
    let (asub, _, _) = exponents(ctx.ta);
    let (_, bn, bx) = exponents(ctx.tb);
    let (dsub, dnorm, dmax) = exponents(ctx.td);
    let z = ctx.zero_c();
    let mut cases = Vec::new();
    let mut labels = Vec::new();
    let y = (bn..=bx).find(|y| asub + y >= dnorm && asub + y < dmax);
    if let (Some(y), Some(ac)) = (y, ctx.code(ctx.ta, pow2(asub))) {
        let bc = ctx.code(ctx.tb, pow2(y)).expect("normal power");
        cases.push((vec![(0, ac, bc)], z));
        labels.push((
            "subnormal_inputs",
            format!(
                "a = 2^{asub} (smallest {} subnormal), b = 2^{y}; exact D = 2^{}",
                ctx.ta,
                asub + y
            ),
            pow2(asub + y),
        ));
    }
    let want = dsub + 1;
    let (_, an, ax) = exponents(ctx.ta);
    let normal_pair = (an..=ax).find_map(|x| {
        let y = want - x;
        ((bn..=bx).contains(&y)).then_some((x, y))
    });
    match normal_pair {
        Some((x, y)) => {
            let (ac, bc) = (
                ctx.code(ctx.ta, pow2(x)).expect("a"),
                ctx.code(ctx.tb, pow2(y)).expect("b"),
            );
            cases.push((vec![(0, ac, bc)], z));
            labels.push((
                "subnormal_outputs",
                format!(
                    "a = 2^{x}, b = 2^{y} (normal); exact D = 2^{want}, subnormal in {}",
                    ctx.td
                ),
                pow2(want),
            ));
        }
        None => {
            if let Some(cc) = ctx.code(ctx.tc, 3.0 * pow2(dsub)) {
                cases.push((vec![], cc));
                labels.push(("subnormal_outputs", format!("no product of normal inputs reaches {}'s subnormals: C = 3·2^{dsub} (subnormal), A = B = 0", ctx.td), 3.0 * pow2(dsub)));
            }
        }
    }
    if cases.is_empty() {
        return Ok(());
    }
    let d = ctx.dots(&cases)?;
    for ((name, experiment, expect), bits) in labels.into_iter().zip(d) {
        let got = ctx.d_value(bits);
        let verdict = if got == expect {
            "kept"
        } else if got == 0.0 {
            "flushed"
        } else {
            "other"
        };
        match name {
            "subnormal_inputs" => out.subnormal_inputs = Some(verdict.into()),
            _ => out.subnormal_outputs = Some(verdict.into()),
        }
        out.findings.push(Finding {
            name: name.into(),
            result: verdict.into(),
            experiment,
            observed: format!("D = {got:e} ({})", hex(bits, ctx.td)),
        });
    }
    Ok(())
}

/// The type's NaN code, if it has one.
fn nan_code(t: ElemType) -> Option<u64> {
    match t {
        ElemType::F16 => Some(0x7e00),
        ElemType::Bf16 => Some(0x7fc0),
        ElemType::Tf32 | ElemType::F32 => Some(0x7fc0_0000),
        ElemType::F64 => Some(0x7ff8_0000_0000_0000),
        ElemType::E4m3 => Some(0x7f),
        ElemType::E5m2 => Some(0x7e),
        _ => None,
    }
}

fn inf_code(t: ElemType) -> Option<u64> {
    match t {
        ElemType::F16 => Some(0x7c00),
        ElemType::Bf16 => Some(0x7f80),
        ElemType::Tf32 | ElemType::F32 => Some(0x7f80_0000),
        ElemType::F64 => Some(0x7ff0_0000_0000_0000),
        ElemType::E5m2 => Some(0x7c),
        _ => None,
    }
}

/// NaN and Inf: NaN in A (or in C where A has no NaN), NaN with a payload in C, Inf·1, Inf·0,
/// and Inf + (−Inf) from two products.
fn nan_inf(ctx: &Ctx, out: &mut Numerics) -> Result<()> {
    let one_b = ctx.code(ctx.tb, 1.0).expect("1");
    let zero_b = ctx.code(ctx.tb, 0.0).expect("0");
    let z = ctx.zero_c();
    let mut cases: Vec<DotCase> = Vec::new();
    let mut what: Vec<String> = Vec::new();
    match nan_code(ctx.ta) {
        Some(nan) => {
            cases.push((vec![(0, nan, one_b)], z));
            what.push(format!("a = NaN ({}), b = 1", hex(nan, ctx.ta)));
        }
        None => {
            let c = nan_code(ctx.tc).expect("C has NaN");
            cases.push((vec![], c));
            what.push(format!(
                "C = NaN ({}), A = B = 0 ({} has no NaN)",
                hex(c, ctx.tc),
                ctx.ta
            ));
        }
    }
    if ctx.tc == ElemType::F32 {
        cases.push((vec![], 0x7fc1_2345));
        what.push("C = NaN with payload 0x7fc12345, A = B = 0".into());
    }
    if let Some(inf) = inf_code(ctx.ta) {
        let ninf = inf | (1 << (ctx.ta.value_bits() - 1));
        cases.push((vec![(0, inf, one_b)], z));
        what.push("a = +Inf, b = 1".into());
        cases.push((vec![(0, inf, zero_b)], z));
        what.push("a = +Inf, b = 0".into());
        cases.push((vec![(0, inf, one_b), (1, ninf, one_b)], z));
        what.push("k0: +Inf·1, k1: −Inf·1".into());
    }
    let d = ctx.dots(&cases)?;
    out.nan_output_bits = Some(hex(d[0], ctx.td));
    for (w, bits) in what.into_iter().zip(d) {
        out.findings.push(Finding {
            name: "nan_inf".into(),
            result: format!("{} ({})", hex(bits, ctx.td), ctx.d_value(bits)),
            experiment: w,
            observed: format!("D bits {}", hex(bits, ctx.td)),
        });
    }
    Ok(())
}

/// Integer (and b1) variants: exact products and sums; what happens on s32 overflow.
fn integer(ctx: &Ctx) -> Result<Numerics> {
    let mut out = Numerics {
        products_exact: Some(true),
        ..Default::default()
    };
    let one_a = ctx.code(ctx.ta, 1.0).expect("1");
    // XOR counts differing bits: a 1 against a 0 adds one.
    let b_bit = if ctx.runner.xor() { 0.0 } else { 1.0 };
    let one_b = ctx.code(ctx.tb, b_bit).expect("0 and 1 are exact");
    let max_c = ctx.code(ctx.tc, i32::MAX as f64).expect("max");
    let d = ctx.dots(&[(vec![(0, one_a, one_b)], max_c)])?[0];
    let got = d as u32 as i32;
    let verdict = match got {
        i32::MIN => "wraps",
        i32::MAX => "saturates",
        _ => "other",
    };
    out.integer_overflow = Some(verdict.into());
    out.findings.push(Finding {
        name: "integer_overflow".into(),
        result: verdict.into(),
        experiment: format!("C = 2^31 − 1, one term a = 1, b = {b_bit}"),
        observed: format!("D = {got}"),
    });
    Ok(out)
}
