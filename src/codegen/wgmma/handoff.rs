//! The accumulator of one wgmma as the register A operand of the next, as attention's
//! P = softmax(Q·Kᵀ) feeds P·V: which D element of the same thread fills each A element, and
//! the order of k under which no element has to leave its thread.
//!
//! P·V = Σ_k P(:, k)·V(k, :) holds under any relabelling of k applied to P's columns and V's
//! rows alike. So A's k of the second wgmma need not be D's column: step j (A's `k` columns
//! j·k .. (j+1)·k of D) reads D column `perm[j·k + k_a]` where A holds k_a, and B (V, in
//! shared memory) holds V's row `perm[j·k + k_a]` at k_a. A `perm` exists where, within each
//! step, every thread holds in D exactly the (row, column) pairs its A slots need, with the
//! source of each A slot the same D register and element in every thread (one table for the
//! kernel). It is searched for over the measured tables (`crate::generated::wgmma`), not
//! assumed: for f32 D and e4m3 A it exists and is not the identity (A takes four consecutive
//! k where D holds pairs), for bf16 A it is the identity.

use super::super::OperandData;
use super::super::tables::OperandTable;

/// A register operand's slots: (row, col) of each (lane, reg, elem). The generated tables and
/// the tables `codegen` is writing both are one.
pub trait Grid {
    fn rows(&self) -> u32;
    fn cols(&self) -> u32;
    fn regs(&self) -> u32;
    fn elems_per_reg(&self) -> u32;
    fn coord(&self, lane: u32, reg: u32, elem: u32) -> (u32, u32);
}

impl Grid for OperandTable {
    fn rows(&self) -> u32 {
        self.rows
    }
    fn cols(&self) -> u32 {
        self.cols
    }
    fn regs(&self) -> u32 {
        self.regs
    }
    fn elems_per_reg(&self) -> u32 {
        self.elems_per_reg
    }
    fn coord(&self, lane: u32, reg: u32, elem: u32) -> (u32, u32) {
        OperandTable::coord(self, lane, reg, elem)
    }
}

impl Grid for OperandData {
    fn rows(&self) -> u32 {
        self.frag.rows
    }
    fn cols(&self) -> u32 {
        self.frag.cols
    }
    fn regs(&self) -> u32 {
        self.frag.regs
    }
    fn elems_per_reg(&self) -> u32 {
        self.elems_per_reg
    }
    fn coord(&self, lane: u32, reg: u32, elem: u32) -> (u32, u32) {
        let i = ((lane * self.frag.regs + reg) * self.elems_per_reg + elem) as usize;
        (self.row[i], self.col[i])
    }
}

/// How D of a `d.cols`-wide accumulator becomes A of `a.cols`-deep steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handoff {
    /// D columns per A step (A's k).
    pub k: u32,
    /// Steps: D's columns over A's k.
    pub steps: u32,
    /// `src[j][r·elems + e]`: the D slot `reg·elems + elem` (of the same thread) that A's
    /// register `r`, element `e` takes at step j.
    pub src: Vec<Vec<u32>>,
    /// `perm[j·k + k_a]`: the D column (P's column, V's row) at A's k_a of step j.
    pub perm: Vec<u32>,
}

/// The choices of one step's search: which D slot each A slot takes, and the k relabelling
/// (both ways) those choices imply.
struct Search<'t, D: Grid, A: Grid> {
    d: &'t D,
    a: &'t A,
    lanes: u32,
    /// D columns of this step: j·k .. (j+1)·k.
    first_col: u32,
    /// Per A slot (r·elems + e): the D slots (reg·elems + elem) whose row matches in every
    /// thread and whose column lies in this step.
    candidates: Vec<Vec<u32>>,
    taken: Vec<bool>,
    src: Vec<u32>,
    /// k_a → D column, and D column (from first_col) → k_a.
    perm: Vec<Option<u32>>,
    inverse: Vec<Option<u32>>,
}

impl<D: Grid, A: Grid> Search<'_, D, A> {
    /// Assign A slots `next..`: each a D slot that, in every thread, holds the column the
    /// relabelling gives its k (extending the relabelling where it says nothing yet).
    fn assign(&mut self, next: usize) -> bool {
        if next == self.src.len() {
            return true;
        }
        let (d, a) = (self.d, self.a);
        let epr_a = a.elems_per_reg();
        let (r, e) = (next as u32 / epr_a, next as u32 % epr_a);
        for ci in 0..self.candidates[next].len() {
            let sd = self.candidates[next][ci];
            if self.taken[sd as usize] {
                continue;
            }
            let (dr, de) = (sd / d.elems_per_reg(), sd % d.elems_per_reg());
            let mut added = Vec::new();
            let mut ok = true;
            for lane in 0..self.lanes {
                let (_, ka) = a.coord(lane, r, e);
                let col = d.coord(lane, dr, de).1 - self.first_col;
                match (self.perm[ka as usize], self.inverse[col as usize]) {
                    (Some(c), _) if c == col => {}
                    (None, None) => {
                        self.perm[ka as usize] = Some(col);
                        self.inverse[col as usize] = Some(ka);
                        added.push((ka, col));
                    }
                    _ => {
                        ok = false;
                        break;
                    }
                }
            }
            if ok {
                self.taken[sd as usize] = true;
                self.src[next] = sd;
                if self.assign(next + 1) {
                    return true;
                }
                self.taken[sd as usize] = false;
            }
            for (ka, col) in added {
                self.perm[ka as usize] = None;
                self.inverse[col as usize] = None;
            }
        }
        false
    }
}

/// The handoff from D table `d` to A table `a` (both of one warpgroup, `lanes` threads), or
/// why there is none without moving data between threads.
pub fn derive<D: Grid, A: Grid>(d: &D, a: &A, lanes: u32) -> Result<Handoff, String> {
    if a.rows() != d.rows() {
        return Err(format!("A has {} rows and D {}", a.rows(), d.rows()));
    }
    if !d.cols().is_multiple_of(a.cols()) {
        return Err(format!(
            "D's {} columns are no whole number of A's k = {}",
            d.cols(),
            a.cols()
        ));
    }
    let (k, steps) = (a.cols(), d.cols() / a.cols());
    let (a_slots, d_slots) = (a.regs() * a.elems_per_reg(), d.regs() * d.elems_per_reg());
    let mut src = Vec::new();
    let mut perm = Vec::new();
    for j in 0..steps {
        let first_col = j * k;
        let candidates: Vec<Vec<u32>> = (0..a_slots)
            .map(|sa| {
                let (r, e) = (sa / a.elems_per_reg(), sa % a.elems_per_reg());
                let mut cs: Vec<u32> = (0..d_slots)
                    .filter(|&sd| {
                        let (dr, de) = (sd / d.elems_per_reg(), sd % d.elems_per_reg());
                        (0..lanes).all(|lane| {
                            let (row_d, col) = d.coord(lane, dr, de);
                            row_d == a.coord(lane, r, e).0
                                && (first_col..first_col + k).contains(&col)
                        })
                    })
                    .collect();
                // D's own column first, so that its order is kept wherever it works.
                cs.sort_by_key(|&sd| {
                    let c = d.coord(0, sd / d.elems_per_reg(), sd % d.elems_per_reg()).1;
                    c != first_col + a.coord(0, r, e).1
                });
                cs
            })
            .collect();
        let mut s = Search {
            d,
            a,
            lanes,
            first_col,
            candidates,
            taken: vec![false; d_slots as usize],
            src: vec![0; a_slots as usize],
            perm: vec![None; k as usize],
            inverse: vec![None; k as usize],
        };
        if !s.assign(0) {
            return Err(format!(
                "step {j}: no choice of D slots gives every thread the elements its A \
                 registers hold under one order of k"
            ));
        }
        perm.extend(
            s.perm
                .iter()
                .map(|c| first_col + c.expect("every k is assigned")),
        );
        src.push(s.src);
    }
    Ok(Handoff {
        k,
        steps,
        src,
        perm,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::wgmma::tables::table;

    /// P·V through the handoff, from the measured tables: D holds P as the first wgmma leaves
    /// it; each thread builds its A registers from its own D slots; B's row k_a of step j is V's
    /// row perm[j·k + k_a]. The sum over steps must be P·V exactly.
    fn product_through(d: &OperandTable, a: &OperandTable, h: &Handoff) {
        let (m, n_d, nv) = (d.rows as usize, d.cols as usize, 8usize);
        let p: Vec<i64> = (0..m * n_d).map(|i| (i as i64 * 7919 % 13) - 6).collect();
        let v: Vec<i64> = (0..n_d * nv)
            .map(|i| (i as i64 * 104_729 % 11) - 5)
            .collect();
        // D registers of every thread.
        let mut dregs = vec![0i64; (128 * d.regs * d.elems_per_reg) as usize];
        for lane in 0..128 {
            for r in 0..d.regs {
                for e in 0..d.elems_per_reg {
                    let (row, col) = d.coord(lane, r, e);
                    dregs[d.index(lane, r, e)] = p[row as usize * n_d + col as usize];
                }
            }
        }
        let mut out = vec![0i64; m * nv];
        for j in 0..h.steps {
            // A tile of step j, read back through A's table from the registers built per thread.
            let mut at = vec![i64::MIN; m * h.k as usize];
            for lane in 0..128 {
                let base = (lane * d.regs * d.elems_per_reg) as usize;
                for r in 0..a.regs {
                    for e in 0..a.elems_per_reg {
                        let s = h.src[j as usize][(r * a.elems_per_reg + e) as usize] as usize;
                        let (row, ka) = a.coord(lane, r, e);
                        at[row as usize * h.k as usize + ka as usize] = dregs[base + s];
                    }
                }
            }
            assert!(at.iter().all(|&x| x != i64::MIN), "every A element is set");
            for row in 0..m {
                for ka in 0..h.k as usize {
                    let vrow = h.perm[(j * h.k) as usize + ka] as usize;
                    for c in 0..nv {
                        out[row * nv + c] += at[row * h.k as usize + ka] * v[vrow * nv + c];
                    }
                }
            }
        }
        for row in 0..m {
            for c in 0..nv {
                let want: i64 = (0..n_d).map(|k| p[row * n_d + k] * v[k * nv + c]).sum();
                assert_eq!(out[row * nv + c], want, "({row}, {c})");
            }
        }
    }

    #[test]
    fn fp8_p_stays_in_its_thread_with_v_rows_permuted_within_each_32() {
        let d = &table("d.f32.n64").unwrap().table;
        let a = &table("a.e4m3.k32").unwrap().table;
        let h = derive(d, a, 128).unwrap();
        assert_eq!((h.k, h.steps), (32, 2));
        // Not D's own order: e4m3's A takes four consecutive k where f32's D holds pairs.
        assert_ne!(h.perm, (0..64).collect::<Vec<u32>>());
        for j in 0..2 {
            let mut s: Vec<u32> = h.perm[j * 32..(j + 1) * 32].to_vec();
            s.sort();
            assert_eq!(s, (j as u32 * 32..(j as u32 + 1) * 32).collect::<Vec<_>>());
        }
        product_through(d, a, &h);
    }

    #[test]
    fn bf16_p_needs_no_permutation() {
        let d = &table("d.f32.n64").unwrap().table;
        let a = &table("a.bf16.k16").unwrap().table;
        let h = derive(d, a, 128).unwrap();
        assert_eq!((h.k, h.steps), (16, 4));
        assert_eq!(h.perm, (0..64).collect::<Vec<u32>>());
        product_through(d, a, &h);
    }

    #[test]
    fn a_layout_that_would_need_shuffles_is_refused() {
        // A's lanes rotated by one: every element sits in a neighbour's D.
        let d = &table("d.f32.n64").unwrap().table;
        let a = &table("a.bf16.k16").unwrap().table;
        let per = (a.regs * a.elems_per_reg) as usize;
        let rot = |xs: &[u16]| -> &'static [u16] {
            let mut v = xs[per..].to_vec();
            v.extend_from_slice(&xs[..per]);
            Box::leak(v.into_boxed_slice())
        };
        let moved = OperandTable {
            row: rot(a.row),
            col: rot(a.col),
            ..*a
        };
        let e = derive(d, &moved, 128).unwrap_err();
        assert!(e.contains("no choice of D slots"), "{e}");
    }
}
