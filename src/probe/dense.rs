//! Running whole matrices (given as element codes) through one MMA per experiment, placed by a
//! layout: the building block of probes that care about values rather than positions.

use super::fragment::{d_bits, set_slot};
use crate::device::{Backend, Batch};
use crate::isa::{Operand, ScaleSelectors, Variant};
use crate::layout::Layout;
use anyhow::{Context, Result};

/// One experiment: A (m×k), B (k×n) and C (m×n) as row-major element codes.
#[derive(Clone, Debug)]
pub struct Dense {
    pub a: Vec<u64>,
    pub b: Vec<u64>,
    pub c: Vec<u64>,
}

impl Dense {
    /// All-zero operands (the code of +0 in each type).
    pub fn zeros(v: &Variant) -> Self {
        let (m, n, k) = (v.shape.m as usize, v.shape.n as usize, v.shape.k as usize);
        let z = |op: Operand| v.fragment(op).elem.encode_exact(0.0).expect("0 is exact");
        Dense {
            a: vec![z(Operand::A); m * k],
            b: vec![z(Operand::B); k * n],
            c: vec![z(Operand::C); m * n],
        }
    }

    /// A dot product in D(0, 0): `terms` are (k, a code, b code); C(0, 0) = `c`.
    pub fn dot(v: &Variant, terms: &[(usize, u64, u64)], c: u64) -> Self {
        let n = v.shape.n as usize;
        let mut x = Dense::zeros(v);
        for &(kk, a, b) in terms {
            x.a[kk] = a;
            x.b[kk * n] = b;
        }
        x.c[0] = c;
        x
    }
}

/// Run `cases` in one launch; returns D of each case as row-major codes.
pub fn run(
    backend: &dyn Backend,
    v: &Variant,
    layout: &Layout,
    cases: &[Dense],
) -> Result<Vec<Vec<u64>>> {
    let (m, n, k) = (v.shape.m as usize, v.shape.n as usize, v.shape.k as usize);
    let mut batch = Batch::zeroed(v, cases.len());
    for (e, case) in cases.iter().enumerate() {
        for (op, mat, cols) in [
            (Operand::A, &case.a, k),
            (Operand::B, &case.b, n),
            (Operand::C, &case.c, n),
        ] {
            for (i, coord) in layout.operand(op).iter().enumerate() {
                set_slot(
                    v,
                    &mut batch,
                    op,
                    e,
                    i,
                    mat[coord.row as usize * cols + coord.col as usize],
                );
            }
        }
    }
    let words = backend
        .run(v, ScaleSelectors::default(), &batch)
        .context("dense launch")?;
    let d = d_bits(v, &words, cases.len());
    Ok(d.into_iter()
        .map(|slots| {
            let mut out = vec![0u64; m * n];
            for (i, coord) in layout.d.iter().enumerate() {
                out[coord.row as usize * n + coord.col as usize] = slots[i];
            }
            out
        })
        .collect())
}
