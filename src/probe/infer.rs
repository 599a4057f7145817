//! Inference: from which D slots light up in one-hot experiments to the observed `Structure`.
//!
//! Every check here is a consistency condition the hardware must satisfy; when one fails the
//! inference says which slot broke it instead of guessing.

use crate::layout::convention::Structure;
use anyhow::{Result, bail};

/// Group slots by the set of D slots each lights. Returns (class of each slot, the D-slot set of
/// each class). Classes are numbered by first appearance.
pub fn classes_by_lit_set(lit: &[Vec<usize>]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut sets: Vec<Vec<usize>> = Vec::new();
    let mut index = std::collections::HashMap::new();
    let class_of = lit
        .iter()
        .map(|set| {
            *index.entry(set.clone()).or_insert_with(|| {
                sets.push(set.clone());
                sets.len() - 1
            })
        })
        .collect();
    (class_of, sets)
}

/// Check that `sets` partition the D slots into `count` classes of `size` each and return the
/// class of every D slot.
pub fn partition(
    sets: &[Vec<usize>],
    count: usize,
    size: usize,
    d_slots: usize,
    what: &str,
) -> Result<Vec<usize>> {
    if sets.len() != count {
        bail!(
            "{what}: observed {} distinct D-slot sets, expected {count}",
            sets.len()
        );
    }
    let mut class = vec![usize::MAX; d_slots];
    for (c, set) in sets.iter().enumerate() {
        if set.len() != size {
            bail!("{what} {c}: lights {} D slots, expected {size}", set.len());
        }
        for &d in set {
            if class[d] != usize::MAX {
                bail!("{what}: D slot {d} lies in two classes");
            }
            class[d] = c;
        }
    }
    if let Some(d) = class.iter().position(|&c| c == usize::MAX) {
        bail!("{what}: D slot {d} is in no class");
    }
    Ok(class)
}

/// Phase-1 observations: for each A, B and C slot, the D slots that changed when it was set.
pub struct OneHot {
    pub a: Vec<Vec<usize>>,
    pub b: Vec<Vec<usize>>,
    pub c: Vec<Vec<usize>>,
}

/// What phase 1 establishes: rows, columns and C → D.
#[derive(Clone)]
pub struct RowsCols {
    pub d_row: Vec<usize>,
    pub d_col: Vec<usize>,
    pub a_row: Vec<usize>,
    pub b_col: Vec<usize>,
    pub c_to_d: Vec<usize>,
}

pub fn rows_and_cols(
    obs: &OneHot,
    m: usize,
    n: usize,
    k: usize,
    d_slots: usize,
) -> Result<RowsCols> {
    rows_and_cols_of(obs, m, n, [k, k], d_slots)
}

/// [`rows_and_cols`] when a row of A holds `k[0]` slots and a column of B `k[1]`: the
/// compressed A of `mma.sp` holds half the k of B.
pub fn rows_and_cols_of(
    obs: &OneHot,
    m: usize,
    n: usize,
    k: [usize; 2],
    d_slots: usize,
) -> Result<RowsCols> {
    let (a_row, row_sets) = classes_by_lit_set(&obs.a);
    let d_row = partition(&row_sets, m, n, d_slots, "row")?;
    let (b_col, col_sets) = classes_by_lit_set(&obs.b);
    let d_col = partition(&col_sets, n, m, d_slots, "column")?;
    for (what, classes, count, k) in [("row", &a_row, m, k[0]), ("column", &b_col, n, k[1])] {
        let mut per = vec![0usize; count];
        classes.iter().for_each(|&c| per[c] += 1);
        if let Some(c) = per.iter().position(|&x| x != k) {
            bail!("{what} {c} is held by {} slots, expected k = {k}", per[c]);
        }
    }
    let mut seen = vec![false; m * n];
    for d in 0..d_slots {
        let cell = d_row[d] * n + d_col[d];
        if std::mem::replace(&mut seen[cell], true) {
            bail!("two D slots share one (row, column) class pair; D slot {d}");
        }
    }
    let mut c_to_d = Vec::with_capacity(obs.c.len());
    for (u, lit) in obs.c.iter().enumerate() {
        match lit.as_slice() {
            [d] => c_to_d.push(*d),
            _ => bail!(
                "C slot {u} changed {} D slots, expected exactly one",
                lit.len()
            ),
        }
    }
    let mut hit = vec![false; d_slots];
    for &d in &c_to_d {
        if std::mem::replace(&mut hit[d], true) {
            bail!("two C slots feed D slot {d}");
        }
    }
    Ok(RowsCols {
        d_row,
        d_col,
        a_row,
        b_col,
        c_to_d,
    })
}

/// The pairing plan of phase 2. Each row class's A slots get an order (`a_by_row[row][i]`) and
/// each column class's B slots an index (`b_index`). Experiment (i, bit) sets A slot i of every
/// row and the B slots whose index has that bit set; the D slot at (row, col) then tells one
/// bit of the index of the B slot in `col` that meets A slot i of `row` on a common k.
pub struct PairingPlan {
    pub a_by_row: Vec<Vec<usize>>,
    pub b_by_col: Vec<Vec<usize>>,
    pub b_index: Vec<usize>,
    pub bits: usize,
}

impl PairingPlan {
    pub fn new(rc: &RowsCols, m: usize, n: usize, k: usize) -> Self {
        let mut a_by_row = vec![Vec::new(); m];
        for (s, &r) in rc.a_row.iter().enumerate() {
            a_by_row[r].push(s);
        }
        let mut b_by_col = vec![Vec::new(); n];
        let mut b_index = vec![0; rc.b_col.len()];
        for (t, &c) in rc.b_col.iter().enumerate() {
            b_index[t] = b_by_col[c].len();
            b_by_col[c].push(t);
        }
        let bits = (usize::BITS - (k - 1).leading_zeros()) as usize;
        PairingPlan {
            a_by_row,
            b_by_col,
            b_index,
            bits: bits.max(1),
        }
    }

    /// B slots set in the experiments of bit `bit`.
    pub fn b_mask(&self, bit: usize) -> Vec<bool> {
        self.b_index.iter().map(|&i| (i >> bit) & 1 == 1).collect()
    }
}

/// Phase 2: `met[i][bit][d]` says whether D slot `d` saw a match in experiment (i, bit).
pub fn k_classes(
    rc: &RowsCols,
    plan: &PairingPlan,
    met: &[Vec<Vec<bool>>],
    k: usize,
) -> Result<(Vec<usize>, Vec<usize>)> {
    let (m, n) = (plan.a_by_row.len(), plan.b_by_col.len());
    // D slot of each (row, col) class pair.
    let mut d_at = vec![usize::MAX; m * n];
    for d in 0..rc.d_row.len() {
        d_at[rc.d_row[d] * n + rc.d_col[d]] = d;
    }
    // partner[s] = for each column, the B slot meeting A slot s.
    let mut partner: Vec<Vec<usize>> = vec![Vec::new(); rc.a_row.len()];
    for (row, slots) in plan.a_by_row.iter().enumerate() {
        for (i, &s) in slots.iter().enumerate() {
            for col in 0..n {
                let d = d_at[row * n + col];
                let index = (0..plan.bits).fold(0usize, |acc, bit| {
                    acc | (usize::from(met[i][bit][d]) << bit)
                });
                let Some(&t) = plan.b_by_col[col].get(index) else {
                    bail!(
                        "A slot {s} meets no B slot of column {col} (decoded index {index} of {k})"
                    );
                };
                partner[s].push(t);
            }
        }
    }
    let (a_k, key_sets) = classes_by_lit_set(&partner);
    if key_sets.len() != k {
        bail!(
            "observed {} distinct k classes, expected k = {k}",
            key_sets.len()
        );
    }
    let mut b_k = vec![usize::MAX; rc.b_col.len()];
    for (kc, partners) in key_sets.iter().enumerate() {
        for &t in partners {
            if b_k[t] != usize::MAX && b_k[t] != kc {
                bail!("B slot {t} meets A slots of two different k classes");
            }
            b_k[t] = kc;
        }
    }
    if let Some(t) = b_k.iter().position(|&x| x == usize::MAX) {
        bail!("B slot {t} meets no A slot");
    }
    // Each k class holds exactly one A slot per row.
    let mut per = vec![vec![0u8; m]; k];
    for (s, &kc) in a_k.iter().enumerate() {
        per[kc][rc.a_row[s]] += 1;
    }
    if per.iter().any(|rows| rows.iter().any(|&c| c != 1)) {
        bail!("a k class does not hold exactly one A slot of every row");
    }
    Ok((a_k, b_k))
}

/// Assemble the observed structure.
pub fn structure(
    rc: RowsCols,
    a_k: Vec<usize>,
    b_k: Vec<usize>,
    m: usize,
    n: usize,
    k: usize,
) -> Structure {
    Structure {
        m,
        n,
        k,
        d_row: rc.d_row,
        d_col: rc.d_col,
        a_row: rc.a_row,
        a_k,
        b_col: rc.b_col,
        b_k,
        c_to_d: rc.c_to_d,
    }
}
