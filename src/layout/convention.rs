//! What experiments can observe, and the labelling convention that turns it into numbers.
//!
//! An MMA's result does not change when rows of A and D, columns of B and D, or k of A and B are
//! relabelled consistently. So the experiments observe a `Structure` — which slots share a row,
//! a column, a k, and which C slot feeds which D slot — and a convention pins the labels:
//!
//! 1. D rows and columns take the labels of the documented accumulator layout of the shape
//!    where the observed partition agrees with it; otherwise (an undocumented or different
//!    partition) they are numbered in order of first appearance in slot order (lane, reg, elem).
//! 2. A rows and B columns follow from D (a slot's row is the row of the D slots it lights).
//! 3. k is numbered in the order in which the A slots of row 0, sorted by (reg, lane, elem),
//!    hold it: consecutive elements of a register are consecutive k.

use super::{Coord, Layout};

pub const CONVENTION: &str = "D rows/columns pinned to the documented accumulator layout of the \
shape (first appearance in (lane, reg, elem) order where the observed partition differs); A rows \
and B columns follow from D; k numbered in the order the A slots of row 0, sorted by (reg, lane, \
elem), hold it. Observable up to relabelling rows of A/D, columns of B/D and k of A/B together.";

/// Class ids per slot: what the experiments observe, with arbitrary ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Structure {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// Row class of each D slot (0..m).
    pub d_row: Vec<usize>,
    /// Column class of each D slot (0..n).
    pub d_col: Vec<usize>,
    /// Row class of each A slot, and its k class (0..k).
    pub a_row: Vec<usize>,
    pub a_k: Vec<usize>,
    /// Column class and k class of each B slot.
    pub b_col: Vec<usize>,
    pub b_k: Vec<usize>,
    /// The D slot that each C slot feeds.
    pub c_to_d: Vec<usize>,
}

impl Structure {
    /// The structure of a known layout (class ids are its labels).
    pub fn of(l: &Layout, m: usize, n: usize, k: usize) -> Self {
        let d_index: std::collections::HashMap<Coord, usize> =
            l.d.iter().enumerate().map(|(i, c)| (*c, i)).collect();
        Structure {
            m,
            n,
            k,
            d_row: l.d.iter().map(|c| c.row as usize).collect(),
            d_col: l.d.iter().map(|c| c.col as usize).collect(),
            a_row: l.a.iter().map(|c| c.row as usize).collect(),
            a_k: l.a.iter().map(|c| c.col as usize).collect(),
            b_col: l.b.iter().map(|c| c.col as usize).collect(),
            b_k: l.b.iter().map(|c| c.row as usize).collect(),
            c_to_d: l.c.iter().map(|c| d_index[c]).collect(),
        }
    }

    /// True if `other` is this structure with classes renamed (the permutation symmetry).
    pub fn same_up_to_relabelling(&self, other: &Structure) -> bool {
        fn bijective(x: &[usize], y: &[usize], classes: usize) -> Option<Vec<usize>> {
            if x.len() != y.len() {
                return None;
            }
            let mut fwd = vec![usize::MAX; classes];
            let mut back = vec![usize::MAX; classes];
            for (&a, &b) in x.iter().zip(y) {
                if a >= classes || b >= classes {
                    return None;
                }
                if (fwd[a] != usize::MAX && fwd[a] != b) || (back[b] != usize::MAX && back[b] != a)
                {
                    return None;
                }
                fwd[a] = b;
                back[b] = a;
            }
            Some(fwd)
        }
        let same_map =
            |x: &[usize], y: &[usize], p: &[usize]| x.iter().zip(y).all(|(&a, &b)| p[a] == b);
        let (Some(rows), Some(cols)) = (
            bijective(&self.d_row, &other.d_row, self.m),
            bijective(&self.d_col, &other.d_col, self.n),
        ) else {
            return false;
        };
        let Some(ks) = bijective(&self.a_k, &other.a_k, self.k) else {
            return false;
        };
        (self.m, self.n, self.k) == (other.m, other.n, other.k)
            && same_map(&self.a_row, &other.a_row, &rows)
            && same_map(&self.b_col, &other.b_col, &cols)
            && same_map(&self.b_k, &other.b_k, &ks)
            && self.c_to_d == other.c_to_d
    }

    /// Apply the convention: pin labels and return the labelled layout. `reference` is the
    /// documented layout whose D labels are used where the observed partition agrees.
    /// `a_order` gives each A slot's (lane, reg, elem) so k can be ordered by (reg, lane, elem).
    pub fn label(
        &self,
        reference: Option<&Layout>,
        a_slot_key: impl Fn(usize) -> (u32, u32, u32),
    ) -> Layout {
        let rows = pin(
            &self.d_row,
            self.m,
            reference.map(|r| r.d.iter().map(|c| c.row as usize).collect::<Vec<_>>()),
        );
        let cols = pin(
            &self.d_col,
            self.n,
            reference.map(|r| r.d.iter().map(|c| c.col as usize).collect::<Vec<_>>()),
        );
        // k: the A slots of row 0 in (reg, lane, elem) order.
        let row0_class = rows.iter().position(|&l| l == 0).expect("row 0 exists");
        let mut row0: Vec<usize> = (0..self.a_row.len())
            .filter(|&s| self.a_row[s] == row0_class)
            .collect();
        row0.sort_by_key(|&s| {
            let (lane, reg, elem) = a_slot_key(s);
            (reg, lane, elem)
        });
        let mut ks = vec![usize::MAX; self.k];
        for (label, &s) in row0.iter().enumerate() {
            ks[self.a_k[s]] = label;
        }
        let coord = |r: usize, c: usize| Coord {
            row: r as u32,
            col: c as u32,
        };
        let d: Vec<Coord> = (0..self.d_row.len())
            .map(|i| coord(rows[self.d_row[i]], cols[self.d_col[i]]))
            .collect();
        Layout {
            a: (0..self.a_row.len())
                .map(|s| coord(rows[self.a_row[s]], ks[self.a_k[s]]))
                .collect(),
            b: (0..self.b_col.len())
                .map(|s| coord(ks[self.b_k[s]], cols[self.b_col[s]]))
                .collect(),
            c: self.c_to_d.iter().map(|&i| d[i]).collect(),
            d,
        }
    }
}

/// Labels for `classes` classes given each slot's class: the reference's labels where every
/// class is uniform in the reference and the labels are distinct; else first appearance.
fn pin(class_of: &[usize], classes: usize, reference: Option<Vec<usize>>) -> Vec<usize> {
    if let Some(r) = reference.filter(|r| r.len() == class_of.len()) {
        let mut label = vec![usize::MAX; classes];
        let mut uniform = true;
        for (&c, &l) in class_of.iter().zip(&r) {
            if label[c] == usize::MAX {
                label[c] = l;
            } else if label[c] != l {
                uniform = false;
            }
        }
        let mut sorted = label.clone();
        sorted.sort_unstable();
        if uniform && sorted == (0..classes).collect::<Vec<_>>() {
            return label;
        }
    }
    let mut label = vec![usize::MAX; classes];
    let mut next = 0;
    for &c in class_of {
        if label[c] == usize::MAX {
            label[c] = next;
            next += 1;
        }
    }
    label
}
