//! Closed forms of a slot → (row, col) map, found by fitting rather than assumed.
//!
//! The slot index `(lane * regs + reg) * elems_per_reg + elem` is, bit by bit, the element bits
//! `e0..` (low), then the register bits `reg0..`, then the lane bits `lane0..` (`lane4` for the
//! 32 lanes of a warp, `lane6` for the 128 threads of a wgmma warpgroup). A coordinate
//! is *bit-linear* when it is the coordinate of slot 0 plus, for every set bit of the slot index,
//! that bit's integer weight (the coordinate of the slot with only that bit set, minus that of
//! slot 0). Every layout the PTX ISA documents is bit-linear; `fit` checks that claim for a
//! measured map slot by slot and, where it holds, writes the weights two ways:
//!
//! - as formulas in `lane`, `g = lane/4`, `t = lane%4`, `reg` and `e` (element within the
//!   register), runs of bits whose weights double grouped into one term:
//!   `row = g + 8·(reg%2)`, `col = 2·t + e + 8·(reg/2)`;
//! - as a CuTe thread–value layout `((T),(V)):((Ts),(Vs))`: (lane, value) → column-major index
//!   of the operand matrix, value = `reg·elems_per_reg + e`. A is indexed over (m,k) as
//!   `m + M·k`, C and D over (m,n) as `m + M·n`, and B, following CuTe (and CUTLASS's
//!   `SM80_*_TN` atoms), over (n,k) as `n + N·k`, although our B coordinates are (row k, col n).
//!
//! Nothing is printed for a coordinate that is not bit-linear (`None`), and `notes` says where
//! the check failed.

use super::{Coord, SlotSpace};
use crate::isa::{Operand, Variant};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The weight of one slot-index bit on (row, col).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BitWeight {
    /// `e0`, `e1`, ..., `reg0`, ..., `lane0` ... `lane4`, low bit first.
    pub bit: String,
    pub row: i64,
    pub col: i64,
}

/// A bit-linear map: `coord(slot) = origin + Σ weight(bit) over the set bits of the slot index`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BitWeights {
    /// The coordinate of slot 0.
    pub origin: Coord,
    /// One entry per slot-index bit, low bit first.
    pub bits: Vec<BitWeight>,
}

impl BitWeights {
    /// (row, col) the weights give slot `index`.
    pub fn eval(&self, index: usize) -> (i64, i64) {
        let mut rc = (self.origin.row as i64, self.origin.col as i64);
        for (i, b) in self.bits.iter().enumerate() {
            if index >> i & 1 == 1 {
                rc.0 += b.row;
                rc.1 += b.col;
            }
        }
        rc
    }
}

/// The closed form of one operand's map.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClosedForm {
    pub operand: Operand,
    /// Right-hand side of `row = ...` in `lane`, `g`, `t`, `reg`, `e`; `None`: not bit-linear.
    pub row: Option<String>,
    /// Right-hand side of `col = ...`; `None`: not bit-linear.
    pub col: Option<String>,
    /// CuTe TV layout, e.g. `((4,8),(2,2,2)):((32,1),(16,8,128))`; `None`: the matrix index is
    /// not bit-linear, or slot 0 is not at index 0.
    pub cute: Option<String>,
    /// The coordinates and index `cute` maps to, e.g. `(n,k) ↦ n + 8·k` for B.
    pub cute_index: String,
    /// Present when both row and col are bit-linear.
    pub bit_weights: Option<BitWeights>,
    /// Why something is missing: the first slot that breaks linearity, a bad slot count, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Names of (row, col) of an operand's matrix and of the CuTe index's (fast, slow) coordinates.
fn coord_names(op: Operand) -> (&'static str, &'static str) {
    match op {
        Operand::A => ("m", "k"),
        Operand::B => ("k", "n"),
        Operand::C | Operand::D => ("m", "n"),
    }
}

/// Bits of a power of two, `None` otherwise.
fn log2_exact(x: u32) -> Option<usize> {
    x.is_power_of_two().then(|| x.trailing_zeros() as usize)
}

/// Fit `values[s] = values[0] + Σ w[i]·bit_i(s)`; `Err(s)` is the first slot that breaks it.
fn fit_linear(values: &[i64], nbits: usize) -> Result<Vec<i64>, usize> {
    let w: Vec<i64> = (0..nbits).map(|i| values[1 << i] - values[0]).collect();
    let mut pred = vec![0i64; values.len()];
    pred[0] = values[0];
    for s in 1..values.len() {
        let low = s.trailing_zeros() as usize;
        pred[s] = pred[s & (s - 1)] + w[low];
        if pred[s] != values[s] {
            return Err(s);
        }
    }
    Ok(w)
}

/// Maximal runs of non-zero weights that double bit by bit: (first bit, end bit, base weight).
fn runs(w: &[i64]) -> Vec<(usize, usize, i64)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < w.len() {
        if w[i] == 0 {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        while i < w.len() && w[i] != 0 && Some(w[i]) == w[i - 1].checked_mul(2) {
            i += 1;
        }
        out.push((start, i, w[start]));
    }
    out
}

/// Bits `a..b` of a `width`-bit quantity `name`, as `name`, `name%4`, `name/2`, `(name/2)%4`.
fn sub(name: &str, width: usize, a: usize, b: usize) -> String {
    match (a == 0, b == width) {
        (true, true) => name.to_string(),
        (true, false) => format!("{name}%{}", 1u64 << b),
        (false, true) => format!("{name}/{}", 1u64 << a),
        (false, false) => format!("({name}/{})%{}", 1u64 << a, 1u64 << (b - a)),
    }
}

/// Lane bits `a..b` of `lane_bits`: in terms of t (bits 0..2) or g (bits 2..) where the run
/// stays inside one.
fn lane_sub(a: usize, b: usize, lane_bits: usize) -> String {
    if b <= 2 {
        sub("t", 2, a, b)
    } else if a >= 2 {
        sub("g", lane_bits - 2, a - 2, b - 2)
    } else {
        sub("lane", lane_bits, a, b)
    }
}

/// `w·x` as a signed term, parenthesising `x` unless it is a bare name.
fn term(coef: i64, x: &str) -> (bool, String) {
    let mag = coef.unsigned_abs();
    let s = if mag == 1 {
        x.to_string()
    } else if x.chars().all(|c| c.is_ascii_alphanumeric()) {
        format!("{mag}·{x}")
    } else {
        format!("{mag}·({x})")
    };
    (coef < 0, s)
}

/// The formula of one coordinate from its per-bit weights (slot-index order) and origin.
fn render(w: &[i64], origin: i64, e_bits: usize, r_bits: usize) -> String {
    let (ew, rest) = w.split_at(e_bits);
    let (rw, lw) = rest.split_at(r_bits);
    let mut terms = Vec::new();
    for (a, b, c) in runs(lw) {
        terms.push(term(c, &lane_sub(a, b, lw.len())));
    }
    for (a, b, c) in runs(ew) {
        terms.push(term(c, &sub("e", e_bits, a, b)));
    }
    for (a, b, c) in runs(rw) {
        terms.push(term(c, &sub("reg", r_bits, a, b)));
    }
    if origin != 0 {
        terms.push((origin < 0, origin.unsigned_abs().to_string()));
    }
    if terms.is_empty() {
        return "0".to_string();
    }
    let mut out = String::new();
    for (i, (neg, s)) in terms.iter().enumerate() {
        match (i, neg) {
            (0, false) => {}
            (0, true) => {
                // A leading minus binds tighter than `/` and `%`: keep `-(reg/2)` unambiguous.
                let bare = s.starts_with(|c: char| c.is_ascii_digit())
                    || s.chars().all(|c| c.is_ascii_alphanumeric());
                out.push_str(&if bare {
                    format!("-{s}")
                } else {
                    format!("-({s})")
                });
                continue;
            }
            (_, false) => out.push_str(" + "),
            (_, true) => out.push_str(" - "),
        }
        out.push_str(s);
    }
    out
}

/// Coalesced CuTe modes of consecutive bits: a bit joins the previous mode when its stride is
/// the mode's shape times its stride.
fn modes(w: &[i64]) -> Vec<(u64, i64)> {
    let mut out: Vec<(u64, i64)> = Vec::new();
    for &d in w {
        match out.last_mut() {
            Some((s, st)) if (*s as i64).checked_mul(*st) == Some(d) => *s *= 2,
            _ => out.push((2, d)),
        }
    }
    out
}

/// (shape, stride) text of one group of modes: `4`/`32`, `(4,8)`/`(32,1)`, or `1`/`0` if empty.
fn group(m: &[(u64, i64)]) -> (String, String) {
    match m {
        [] => ("1".into(), "0".into()),
        [(s, d)] => (s.to_string(), d.to_string()),
        _ => {
            let sh: Vec<String> = m.iter().map(|(s, _)| s.to_string()).collect();
            let st: Vec<String> = m.iter().map(|(_, d)| d.to_string()).collect();
            (format!("({})", sh.join(",")), format!("({})", st.join(",")))
        }
    }
}

/// The CuTe TV layout string from per-bit index weights (slot-index order: value bits, then lane).
fn cute_string(w: &[i64], value_bits: usize) -> String {
    let (vw, tw) = w.split_at(value_bits);
    let (ts, td) = group(&modes(tw));
    let (vs, vd) = group(&modes(vw));
    format!("({ts},{vs}):({td},{vd})")
}

/// Fit a closed form to operand `op` of variant `v`, whose slot `i` holds `map[i]`.
pub fn fit(v: &Variant, op: Operand, map: &[Coord]) -> ClosedForm {
    let f = v.fragment(op);
    fit_slots(op, SlotSpace::of(&f), 32, (f.rows, f.cols), map)
}

/// Fit a closed form to a map over `lanes` lanes (32 for a warp, 128 for a warpgroup) of
/// `space` slots each, of operand `op` of a `dims.0 × dims.1` matrix.
pub fn fit_slots(
    op: Operand,
    space: SlotSpace,
    lanes: u32,
    dims: (u32, u32),
    map: &[Coord],
) -> ClosedForm {
    let (rn, cn) = coord_names(op);
    // CuTe index: (fast, slow) coordinates and the fast extent.
    let (fast, slow, extent) = match op {
        Operand::B => (cn, rn, dims.1),
        _ => (rn, cn, dims.0),
    };
    let mut cf = ClosedForm {
        operand: op,
        row: None,
        col: None,
        cute: None,
        cute_index: format!("({fast},{slow}) ↦ {fast} + {extent}·{slow}"),
        bit_weights: None,
        notes: Vec::new(),
    };
    let (Some(e_bits), Some(r_bits), Some(l_bits)) = (
        log2_exact(space.elems_per_reg),
        log2_exact(space.regs),
        log2_exact(lanes),
    ) else {
        cf.notes.push(format!(
            "no closed form: {} registers of {} elements is not a power-of-two slot space",
            space.regs, space.elems_per_reg
        ));
        return cf;
    };
    let slots = space.len() / 32 * lanes as usize;
    if map.len() != slots {
        cf.notes.push(format!(
            "no closed form: the map has {} slots, the operand {slots}",
            map.len(),
        ));
        return cf;
    }
    let nbits = e_bits + r_bits + l_bits;
    let mut names: Vec<String> = (0..e_bits).map(|i| format!("e{i}")).collect();
    names.extend((0..r_bits).map(|i| format!("reg{i}")));
    names.extend((0..l_bits).map(|i| format!("lane{i}")));

    let describe = |s: usize| {
        let sl = space.slot(s);
        format!("slot {s} (lane {}, reg {}, e {})", sl.lane, sl.reg, sl.elem)
    };
    let rows: Vec<i64> = map.iter().map(|c| c.row as i64).collect();
    let cols: Vec<i64> = map.iter().map(|c| c.col as i64).collect();
    let mut fit_coord = |vals: &[i64], what: String| match fit_linear(vals, nbits) {
        Ok(w) => Some(w),
        Err(s) => {
            let bits_sum = vals[0]
                + (0..nbits)
                    .filter(|i| s >> i & 1 == 1)
                    .map(|i| vals[1 << i] - vals[0])
                    .sum::<i64>();
            cf.notes.push(format!(
                "{what} not bit-linear: {} holds {}, its bits' weights sum to {bits_sum}",
                describe(s),
                vals[s]
            ));
            None
        }
    };
    let row_w = fit_coord(&rows, format!("row ({rn})"));
    let col_w = fit_coord(&cols, format!("col ({cn})"));
    let index: Vec<i64> = map
        .iter()
        .map(|c| match op {
            Operand::B => c.col as i64 + extent as i64 * c.row as i64,
            _ => c.row as i64 + extent as i64 * c.col as i64,
        })
        .collect();
    // The index is linear whenever row and col are; test it on its own all the same.
    let idx_w = fit_linear(&index, nbits);

    cf.row = row_w.as_ref().map(|w| render(w, rows[0], e_bits, r_bits));
    cf.col = col_w.as_ref().map(|w| render(w, cols[0], e_bits, r_bits));
    if let (Some(rw), Some(cw)) = (&row_w, &col_w) {
        cf.bit_weights = Some(BitWeights {
            origin: map[0],
            bits: names
                .iter()
                .zip(rw.iter().zip(cw))
                .map(|(n, (&row, &col))| BitWeight {
                    bit: n.clone(),
                    row,
                    col,
                })
                .collect(),
        });
    }
    match idx_w {
        Ok(_) if index[0] != 0 => cf.notes.push(format!(
            "CuTe: slot 0 sits at index {}, not 0; no offset-free layout",
            index[0]
        )),
        Ok(w) => cf.cute = Some(cute_string(&w, e_bits + r_bits)),
        Err(s) => cf
            .notes
            .push(format!("CuTe: index not bit-linear at {}", describe(s))),
    }
    cf
}

impl fmt::Display for ClosedForm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (rn, cn) = coord_names(self.operand);
        let show = |x: &Option<String>| match x {
            Some(s) => format!(" = {s}"),
            None => ": not bit-linear".to_string(),
        };
        writeln!(f, "{}  row ({rn}){}", self.operand.name(), show(&self.row))?;
        writeln!(f, "   col ({cn}){}", show(&self.col))?;
        match &self.cute {
            Some(c) => writeln!(f, "   CuTe (lane, value) → {}: {c}", self.cute_index)?,
            None => writeln!(f, "   CuTe: none")?,
        }
        for n in &self.notes {
            writeln!(f, "   note: {n}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::{Shape, find, probed};
    use crate::layout::documented::documented;

    /// Evaluate a rendered formula (integers, `lane g t reg e`, `+ - · / % ( )`; `·`, `/`, `%`
    /// bind tighter than `+ -` and associate left), so the tests check the printed text itself.
    fn eval(src: &str, lane: i64, reg: i64, e: i64) -> i64 {
        #[derive(Debug, PartialEq, Clone)]
        enum Tok {
            Num(i64),
            Id(String),
            Op(char),
        }
        let mut toks = Vec::new();
        let cs: Vec<char> = src.chars().collect();
        let mut i = 0;
        while i < cs.len() {
            let c = cs[i];
            if c.is_whitespace() {
                i += 1;
            } else if c.is_ascii_digit() {
                let st = i;
                while i < cs.len() && cs[i].is_ascii_digit() {
                    i += 1;
                }
                toks.push(Tok::Num(
                    cs[st..i].iter().collect::<String>().parse().unwrap(),
                ));
            } else if c.is_ascii_alphabetic() {
                let st = i;
                while i < cs.len() && cs[i].is_ascii_alphanumeric() {
                    i += 1;
                }
                toks.push(Tok::Id(cs[st..i].iter().collect()));
            } else {
                assert!("+-·/%()".contains(c), "unexpected {c:?} in {src:?}");
                toks.push(Tok::Op(c));
                i += 1;
            }
        }
        struct P<'a> {
            t: &'a [Tok],
            i: usize,
            vars: [(&'static str, i64); 5],
        }
        impl P<'_> {
            fn peek(&self) -> Option<&Tok> {
                self.t.get(self.i)
            }
            fn sum(&mut self) -> i64 {
                let mut v = if self.peek() == Some(&Tok::Op('-')) {
                    self.i += 1;
                    -self.product()
                } else {
                    self.product()
                };
                while let Some(Tok::Op(c @ ('+' | '-'))) = self.peek().cloned() {
                    self.i += 1;
                    let r = self.product();
                    v = if c == '+' { v + r } else { v - r };
                }
                v
            }
            fn product(&mut self) -> i64 {
                let mut v = self.atom();
                while let Some(Tok::Op(c @ ('·' | '/' | '%'))) = self.peek().cloned() {
                    self.i += 1;
                    let r = self.atom();
                    v = match c {
                        '·' => v * r,
                        '/' => v / r,
                        _ => v % r,
                    };
                }
                v
            }
            fn atom(&mut self) -> i64 {
                let t = self.peek().cloned();
                self.i += 1;
                match t {
                    Some(Tok::Num(n)) => n,
                    Some(Tok::Id(id)) => self.vars.iter().find(|(n, _)| *n == id).unwrap().1,
                    Some(Tok::Op('(')) => {
                        let v = self.sum();
                        assert_eq!(self.peek(), Some(&Tok::Op(')')));
                        self.i += 1;
                        v
                    }
                    t => panic!("unexpected {t:?}"),
                }
            }
        }
        let vars = [
            ("lane", lane),
            ("g", lane / 4),
            ("t", lane % 4),
            ("reg", reg),
            ("e", e),
        ];
        let mut p = P {
            t: &toks,
            i: 0,
            vars,
        };
        let v = p.sum();
        assert_eq!(p.i, toks.len(), "trailing tokens in {src:?}");
        v
    }

    fn check_formulas(v: &Variant, op: Operand, map: &[Coord], cf: &ClosedForm) {
        let space = SlotSpace::of(&v.fragment(op));
        for (i, c) in map.iter().enumerate() {
            let s = space.slot(i);
            let (l, r, e) = (s.lane as i64, s.reg as i64, s.elem as i64);
            if let Some(f) = &cf.row {
                assert_eq!(eval(f, l, r, e), c.row as i64, "{} {op:?} row {f}", v.id());
            }
            if let Some(f) = &cf.col {
                assert_eq!(eval(f, l, r, e), c.col as i64, "{} {op:?} col {f}", v.id());
            }
            if let Some(w) = &cf.bit_weights {
                assert_eq!(w.eval(i), (c.row as i64, c.col as i64), "{} {op:?}", v.id());
            }
        }
    }

    #[test]
    fn every_documented_layout_fits_exactly() {
        for v in probed() {
            let l = documented(&v);
            for op in Operand::ALL {
                let map = l.operand(op);
                let cf = fit(&v, op, map);
                assert!(
                    cf.row.is_some() && cf.col.is_some(),
                    "{} {op:?}: {cf}",
                    v.id()
                );
                assert!(
                    cf.bit_weights.is_some() && cf.cute.is_some(),
                    "{} {op:?}: {cf}",
                    v.id()
                );
                assert!(cf.notes.is_empty(), "{} {op:?}: {cf}", v.id());
                check_formulas(&v, op, map, &cf);
            }
        }
    }

    fn forms(id: &str) -> Vec<ClosedForm> {
        let v = find(id).unwrap();
        let l = documented(&v);
        Operand::ALL
            .iter()
            .map(|&op| fit(&v, op, l.operand(op)))
            .collect()
    }

    #[test]
    fn f16_m16n8k16_matches_the_isa_and_cutlass() {
        let f = forms("m16n8k16.f32.f16.f16.f32");
        assert_eq!(f[0].row.as_deref(), Some("g + 8·(reg%2)"));
        assert_eq!(f[0].col.as_deref(), Some("2·t + e + 8·(reg/2)"));
        assert_eq!(f[1].row.as_deref(), Some("2·t + e + 8·reg"));
        assert_eq!(f[1].col.as_deref(), Some("g"));
        assert_eq!(f[2].row.as_deref(), Some("g + 8·(reg/2)"));
        assert_eq!(f[2].col.as_deref(), Some("2·t + reg%2"));
        // CUTLASS SM80_16x8x16_F32F16F16F32_TN.
        assert_eq!(
            f[0].cute.as_deref(),
            Some("((4,8),(2,2,2)):((32,1),(16,8,128))")
        );
        assert_eq!(f[1].cute.as_deref(), Some("((4,8),(2,2)):((16,1),(8,64))"));
        assert_eq!(f[2].cute.as_deref(), Some("((4,8),(2,2)):((32,1),(16,8))"));
        assert_eq!(f[3].cute, f[2].cute);
        assert_eq!(f[1].cute_index, "(n,k) ↦ n + 8·k");
        assert_eq!(f[0].cute_index, "(m,k) ↦ m + 16·k");
    }

    #[test]
    fn tf32_m16n8k8_matches_cutlass() {
        // CUTLASS SM80_16x8x8_F32TF32TF32F32_TN.
        let f = forms("m16n8k8.f32.tf32.tf32.f32");
        assert_eq!(f[0].cute.as_deref(), Some("((4,8),(2,2)):((16,1),(8,64))"));
        assert_eq!(f[1].cute.as_deref(), Some("((4,8),2):((8,1),32)"));
        assert_eq!(f[2].cute.as_deref(), Some("((4,8),(2,2)):((32,1),(16,8))"));
        // SM80_16x8x32_S32S8S8S32_TN and SM80_8x8x4_F64F64F64F64_TN (SM80_8x4, SM80_8x8_Row).
        let f = forms("m16n8k32.s32.s8.s8.s32");
        assert_eq!(
            f[0].cute.as_deref(),
            Some("((4,8),(4,2,2)):((64,1),(16,8,256))")
        );
        assert_eq!(f[1].cute.as_deref(), Some("((4,8),(4,2)):((32,1),(8,128))"));
        let f = forms("m8n8k4.f64.f64.f64.f64");
        assert_eq!(f[0].cute.as_deref(), Some("((4,8),1):((8,1),0)"));
        assert_eq!(f[1].cute.as_deref(), Some("((4,8),1):((8,1),0)"));
        assert_eq!(f[2].cute.as_deref(), Some("((4,8),2):((16,1),8)"));
    }

    #[test]
    fn fp4_block_scaled_forms() {
        let f = forms("m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0");
        assert_eq!(f[0].row.as_deref(), Some("g + 8·(reg%2)"));
        assert_eq!(f[0].col.as_deref(), Some("4·t + e + 16·(reg/2)"));
        assert_eq!(
            f[0].cute.as_deref(),
            Some("((4,8),(4,2,2)):((64,1),(16,8,256))")
        );
        assert_eq!(f[1].row.as_deref(), Some("4·t + e + 16·reg"));
        assert_eq!(f[1].col.as_deref(), Some("g"));
        assert_eq!(f[1].cute.as_deref(), Some("((4,8),(4,2)):((32,1),(8,128))"));
        // m8n8k4 f64: one register, one element per register: an empty value mode.
        let f = forms("m8n8k4.f64.f64.f64.f64");
        assert_eq!(
            (f[0].row.as_deref(), f[0].col.as_deref()),
            (Some("g"), Some("t"))
        );
        assert_eq!(f[0].cute.as_deref(), Some("((4,8),1):((8,1),0)"));
    }

    #[test]
    fn rendering_of_odd_runs() {
        // Runs crossing the t/g boundary, negative and offset terms; bits e0 e1 reg0 reg1 lane0..4.
        let w = [3, 0, -2, -4, 0, 1, 2, 4, 0];
        assert_eq!(render(&w, 5, 2, 2), "(lane/2)%8 + 3·(e%2) - 2·reg + 5");
        assert_eq!(render(&[0, 0, 0, -1, 0, 0, 0, 0, 0], 0, 2, 2), "-(reg/2)");
        assert_eq!(render(&[0; 9], 0, 2, 2), "0");
        assert_eq!(render(&[0, 0, 0, 0, 1, 2, 4, 8, 16], 0, 2, 2), "lane");
        assert_eq!(
            render(&[0, 0, 0, 0, 0, 0, 1, 0, 2], 0, 2, 2),
            "g%2 + 2·(g/4)"
        );
        assert_eq!(modes(&[0, 0, 1, 2]), vec![(4, 0), (4, 1)]);
        let more = [
            [1, 0, 7, -3, 0, 2, 4, 8, 16],
            [0, 0, 0, 0, -1, -2, -1, 0, 0],
            [0, 1, 0, 0, 0, -1, 0, 0, 0],
        ];
        for (w, o) in std::iter::once((w, 5i64)).chain(more.map(|w| (w, 0))) {
            for s in 0..512usize {
                let (l, r, e) = ((s >> 4) as i64, (s >> 2 & 3) as i64, (s & 3) as i64);
                let want = o
                    + (0..9)
                        .filter(|i| s >> i & 1 == 1)
                        .map(|i| w[i])
                        .sum::<i64>();
                assert_eq!(eval(&render(&w, o, 2, 2), l, r, e), want);
            }
        }
    }

    #[test]
    fn a_shuffled_map_is_not_bit_linear() {
        let v = find("m16n8k16.f32.f16.f16.f32").unwrap();
        let mut map = documented(&v).a;
        // Fisher–Yates with a fixed LCG.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for i in (1..map.len()).rev() {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            map.swap(i, (x >> 33) as usize % (i + 1));
        }
        let cf = fit(&v, Operand::A, &map);
        assert!(cf.row.is_none() || cf.col.is_none(), "{cf}");
        assert!(cf.bit_weights.is_none() && cf.cute.is_none(), "{cf}");
        assert!(cf.to_string().contains("not bit-linear"));
        check_formulas(&v, Operand::A, &map, &cf);
        // Only the row broken: the column formula survives, and is true.
        let mut map = documented(&v).a;
        let (i, j) = (0, SlotSpace::of(&v.fragment(Operand::A)).len() - 1);
        let (ri, rj) = (map[i].row, map[j].row);
        map[i].row = rj;
        map[j].row = ri;
        let cf = fit(&v, Operand::A, &map);
        assert!(cf.row.is_none(), "{cf}");
        assert_eq!(cf.col.as_deref(), Some("2·t + e + 8·(reg/2)"));
        check_formulas(&v, Operand::A, &map, &cf);
    }

    #[test]
    fn a_warpgroup_fits_over_128_lanes() {
        // The documented wgmma accumulator of m64n16 f32 (128 threads, 8 registers each).
        let v = crate::wgmma::find("m64n16k16.f32.bf16.bf16.rs").unwrap();
        let f = v.d_frag();
        let map: Vec<Coord> = (0..f.slots())
            .map(|i| {
                let (row, col) = crate::wgmma::model::d_coord(&f, i);
                Coord { row, col }
            })
            .collect();
        let space = SlotSpace {
            regs: f.regs,
            elems_per_reg: f.elems_per_reg,
        };
        let cf = fit_slots(Operand::D, space, 128, (f.rows, f.cols), &map);
        assert_eq!(cf.row.as_deref(), Some("g%8 + 16·(g/8) + 8·((reg/2)%2)"));
        assert_eq!(cf.col.as_deref(), Some("2·t + reg%2 + 8·(reg/4)"));
        assert_eq!(cf.bit_weights.unwrap().bits.len(), 3 + 7);
    }

    #[test]
    fn non_power_of_two_slot_spaces_have_no_closed_form() {
        let mut v = find("m16n8k16.f32.f16.f16.f32").unwrap();
        v.shape = Shape { m: 16, n: 8, k: 12 };
        let cf = fit(&v, Operand::A, &[]);
        assert!(cf.row.is_none() && cf.col.is_none() && cf.cute.is_none());
        assert!(cf.notes[0].starts_with("no closed form"), "{cf}");
    }
}
